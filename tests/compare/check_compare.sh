#!/bin/bash
# ctest compare.wormhole_only: make bench-compare's Wormhole-only form,
# bounded (small iteration counts, 16 MiB copies, one round), and its
# output checked: every figure parses as a positive number, the byte check
# and the async check passed, the script said it ran Wormhole alone, and the
# plot exists when gnuplot is installed.
# Usage: check_compare.sh SOURCE_DIR BUILD_DIR
set -u
src="$1"; build="$2"
out=$(mktemp -d /tmp/wh-compare-check-XXXXXX)
trap 'rm -rf "$out"' EXIT
log="$out/run.log"
env -u GVIRTUS_HOME -u OTHER_LIBDIR -u OTHER_SERVER ROUNDS=1 ITERS=3000 COPIES=2 COPY_MIB=16 ASYNC=5000 \
  timeout 75 "$src/tests/compare/run_compare.sh" "$build" "$out" >"$log" 2>&1
rc=$?
cat "$log"
fail=0
[ $rc -eq 0 ] || { echo "FAIL: run_compare.sh exited $rc"; fail=1; }
grep -q 'Wormhole alone' "$log" || { echo "FAIL: no 'Wormhole alone' notice"; fail=1; }
grep -q 'byte_check: Wormhole 1/1 rounds ok' "$log" || { echo "FAIL: byte check"; fail=1; }
grep -q $'^wormhole\t1\tasync_check\tok' "$out/rounds.tsv" || { echo "FAIL: async check"; fail=1; }
for k in null_p50_ns null_p99_ns malloc_free_p50_ns h2d_pageable_gbs d2h_pageable_gbs h2d_pinned_gbs \
         d2h_pinned_gbs async_per_s; do
  v=$(awk -v k="$k" '$1 == k { print $2 }' "$out/compare.txt")
  if ! [[ "$v" =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! awk -v v="$v" 'BEGIN { exit !(v > 0) }'; then
    echo "FAIL: $k='$v' is not a positive number"; fail=1
  fi
done
for k in tcp_rtt_p50_ns tcp_bulk_up_gbs tcp_bulk_down_gbs; do
  v=$(awk -F'\t' -v k="$k" '$1 == "tcp" && $3 == k { print $4 }' "$out/rounds.tsv")
  awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }' || { echo "FAIL: $k='$v'"; fail=1; }
done
# Sanity of the orders of magnitude: a forwarded null call through shared
# memory costs well under a millisecond at the median.
p50=$(awk '$1 == "null_p50_ns" { print $2 }' "$out/compare.txt")
awk -v v="$p50" 'BEGIN { exit !(v < 1000000) }' || { echo "FAIL: null_p50_ns=$p50 >= 1 ms"; fail=1; }
if command -v gnuplot >/dev/null; then
  [ -s "$out/compare.png" ] || { echo "FAIL: no plot"; fail=1; }
fi
[ $fail -eq 0 ] && echo PASS
exit $fail
