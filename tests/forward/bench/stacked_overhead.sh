#!/bin/bash
# make bench-stacked: the null call (cudaMemGetInfo round trips, null_call)
# against a sim server alone and through a cuda-backend server stacked over
# one (docs/hardware.md), alternating ROUNDS times in one run; prints each
# round's p50 and the medians.
# Usage: stacked_overhead.sh BUILD_DIR [ROUNDS] [ITERS]
set -eu
build="$1"; rounds="${2:-3}"; iters="${3:-20000}"
fwd="$(cd "$(dirname "$0")/../../blas" && pwd)/forwarded.sh"
prog="$build/tests/forward/programs/null_call"
p50() { "$fwd" "$build" --backend "$1" -- "$prog" "$iters" | sed -n 's/^rtt_p50_ns=//p'; }
alone=(); stacked=()
for r in $(seq 1 "$rounds"); do
  a=$(p50 sim); s=$(p50 stacked)
  echo "round $r: sim alone p50 $a ns, stacked p50 $s ns"
  alone+=("$a"); stacked+=("$s")
done
med() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ma=$(med "${alone[@]}"); ms=$(med "${stacked[@]}")
awk -v a="$ma" -v s="$ms" 'BEGIN { printf "null call p50: sim alone %d ns, stacked %d ns (x%.2f, +%d ns per call)\n", a, s, s / a, s - a }'
