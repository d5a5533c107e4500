#!/bin/bash
# ring-critpath: instructions on the critical path of one ring round trip
# (64-byte request, 16-byte response), counted by single-stepping a
# single-threaded driver under gdb (critpath.py says what is counted).
# Deterministic, unlike a timing: a change to the ring's fast paths shows
# here exactly, whatever the VM's placement.
#
#   tests/ring/bench/critpath/critpath.sh [--rev REV] [--rounds N] [--max N] [--dump]
#
# --rev     a git revision to measure (default: the working tree), built
#           with the project's flags (-O2 -g -DNDEBUG);
# --rounds  round trips traced after the first 1000 (default 3): each is
#           printed, then the median of each segment and their total;
# --max     fail (exit 1) when that total is above N (the ctest
#           ring.critpath_budget);
# --dump    print every counted instruction (segment, function, disassembly).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
rev=WORKTREE rounds=3 max="" dump=0
while (($#)); do
  case $1 in
    --rev) rev=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    --dump) dump=1; shift ;;
    *) echo "critpath.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
"$root/scripts/deps.sh" core debug
out=$(mktemp -d /tmp/wh-critpath.XXXXXX)
trap 'rm -rf "$out"' EXIT
if [ "$rev" = WORKTREE ]; then
  cp -r "$root/shm-ring" "$out/"
else
  git -C "$root" archive "$rev" shm-ring | tar -x -C "$out"
fi
flags="-std=c++20 -O2 -g -DNDEBUG -I$out/shm-ring/include -I$out/shm-ring/src"
pids=()
for f in region ring wait channel; do
  g++ $flags -c "$out/shm-ring/src/$f.cpp" -o "$out/$f.o" & pids+=($!)
done
step=1  # the call ids the driver expects (see critpath_driver.cpp)
grep -q locked_call_id_ "$out/shm-ring/include/wormhole/ring.hpp" && step=2
g++ $flags -DWH_CRITPATH_ID_STEP=$step -c "$here/critpath_driver.cpp" -o "$out/driver.o"
for p in "${pids[@]}"; do wait "$p"; done
g++ "$out"/*.o -lpthread -o "$out/critpath_driver"
"$out/critpath_driver" 2000  # the driver checks its own round trips first
echo "rev=$rev"
gdb -q -batch -nx -ex "set \$wh_skip = 1000" -ex "set \$wh_rounds = $rounds" \
  -ex "set \$wh_dump = $dump" -x "$here/critpath.py" "$out/critpath_driver" \
  >"$out/gdb.log" 2>&1 || { cat "$out/gdb.log" >&2; exit 1; }
grep -E '^(dump|round|critpath_median)' "$out/gdb.log" || { cat "$out/gdb.log" >&2; exit 1; }
total=$(sed -n 's/^critpath_median .*total=\([0-9]*\)$/\1/p' "$out/gdb.log")
[ -n "$total" ] || { echo "critpath.sh: no total" >&2; exit 1; }
if [ -n "$max" ] && [ "$total" -gt "$max" ]; then
  echo "critpath.sh: $total instructions on the round trip's critical path, over the budget of $max" >&2
  echo "  (--dump shows each; docs/ring.md, 'The critical path in instructions')" >&2
  exit 1
fi
