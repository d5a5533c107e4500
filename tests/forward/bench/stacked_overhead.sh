#!/bin/bash
# make bench-stacked: the null call (cudaMemGetInfo round trips, null_call)
# against a sim server alone and through a cuda-backend server stacked over
# one (docs/hardware.md), alternating ROUNDS times in one run: the stacked
# pair as the tests run it (both servers WORMHOLE_SPIN=0) and with the
# default spinning. Prints each round's p50 and the medians.
# Usage: stacked_overhead.sh BUILD_DIR [ROUNDS] [ITERS]
set -eu
build="$1"; rounds="${2:-3}"; iters="${3:-20000}"
prog="$build/tests/forward/programs/null_call"
dir=$(mktemp -d /tmp/wh-stk-bench-XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
serve() {  # NAME SPIN BACKEND-ARGS...: a server on $dir/NAME.sock
  local name=$1 spin=$2; shift 2
  WORMHOLE_SPIN=$spin "$build/bin/wormhole-server" --socket "$dir/$name.sock" --log-level warn --no-stats "$@" \
    >"$dir/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do [ -S "$dir/$name.sock" ] && return; sleep 0.05; done
  echo "no server $name"; cat "$dir/$name.log"; exit 1
}
serve sim 0 --backend sim
serve simspin 4000 --backend sim
export LD_LIBRARY_PATH="$build/guest-lib"
WORMHOLE_SOCKET="$dir/sim.sock" serve stk 0 --backend cuda --allow-dropin-driver
WORMHOLE_SOCKET="$dir/simspin.sock" serve stkspin 4000 --backend cuda --allow-dropin-driver
p50() { WORMHOLE_SOCKET="$dir/$1.sock" "$prog" "$iters" | sed -n 's/^rtt_p50_ns=//p'; }
declare -A all
for r in $(seq 1 "$rounds"); do
  line="round $r:"
  for s in sim stk simspin stkspin; do v=$(p50 $s); all[$s]+="$v "; line+=" $s $v ns"; done
  echo "$line"
done
med() { printf '%s\n' $1 | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
a=$(med "${all[sim]}"); s=$(med "${all[stk]}"); as=$(med "${all[simspin]}"); ss=$(med "${all[stkspin]}")
awk -v a="$a" -v s="$s" -v as="$as" -v ss="$ss" 'BEGIN {
  printf "null call p50, servers sleeping at once (WORMHOLE_SPIN=0): sim alone %d ns, stacked %d ns (x%.1f)\n", a, s, s / a
  printf "null call p50, servers spinning (default): sim alone %d ns, stacked %d ns (x%.1f)\n", as, ss, ss / as }'
