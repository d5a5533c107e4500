#!/bin/bash
# make bench-forward: starts a wormhole-server (sim backend) pinned to one
# core, runs bench_forward through the drop-in libcudart on another, checks
# that the server executed every launch the client posted (its statistics),
# and ends with the summary line.
# Usage: run_bench.sh BUILD_DIR [LAUNCH_SECONDS]
set -u
BUILD=$(cd "$1" && pwd)
SECS=${2:-10}
SERVER=$BUILD/bin/wormhole-server
BENCH=$BUILD/bench/bench_forward
CCPU=0 SCPU=1
[ "$(nproc)" -ge 2 ] || SCPU=0
SOCK=/tmp/wh-bench-forward-$$.sock
SLOG=$(mktemp /tmp/wh-bench-forward-server.XXXXXX)
trap 'rm -f "$SLOG" "$SOCK"' EXIT
taskset -c $SCPU "$SERVER" --backend sim --sim-threads 1 --socket "$SOCK" --log-level warn >"$SLOG" 2>&1 &
SPID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
if [ ! -S "$SOCK" ]; then echo "wormhole-server did not start:"; cat "$SLOG"; exit 1; fi
OUT=$(WORMHOLE_SOCKET=$SOCK LD_LIBRARY_PATH=$BUILD/guest-lib taskset -c $CCPU "$BENCH" --launch-seconds "$SECS" --cpus $CCPU,$SCPU)
RC=$?
kill -TERM $SPID
wait $SPID
echo "$OUT" | grep -v '^null_call_rtt_p50_ns=' | grep -v '^launches_posted='
if [ $RC -ne 0 ]; then echo "bench_forward failed (exit $RC)"; cat "$SLOG"; exit 1; fi
POSTED=$(echo "$OUT" | sed -n 's/^launches_posted=//p')
EXECUTED=$(awk '$1 == "Launch" { print $2 }' "$SLOG")
echo "server: executed ${EXECUTED:-0} launches of ${POSTED} posted (wormhole-server statistics)"
if [ "${EXECUTED:-0}" != "$POSTED" ]; then
  echo "FAIL: the server's launch count does not match; no figure reported"
  grep -E 'Launch|total|rejected' "$SLOG"
  exit 1
fi
echo "$OUT" | grep '^null_call_rtt_p50_ns='
