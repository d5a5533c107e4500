#!/bin/bash
# make bench-forward: bench_forward through the drop-in libcudart against a
# wormhole-server on another core; checks that the server executed every
# launch the client posted (its statistics), and ends with the summary line.
# Usage: run_bench.sh BUILD_DIR [LAUNCH_SECONDS]
. "$(dirname "$0")/bench_server.sh"
bench_run bench_forward --launch-seconds "$SECS" --cpus $CCPU,$SCPU
echo "$OUT" | grep -v '^null_call_rtt_p50_ns=' | grep -v '^launches_posted='
bench_check_count Launch "$(echo "$OUT" | sed -n 's/^launches_posted=//p')" "launches posted"
echo "$OUT" | grep '^null_call_rtt_p50_ns='
