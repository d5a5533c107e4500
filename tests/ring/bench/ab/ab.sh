#!/bin/bash
# ring-ab: compare the ring round trip of two revisions of shm-ring in one
# process pair (see ab_main.cpp).
#   [DITHER=1] tests/ring/bench/ab/ab.sh REV_A [REV_B] [ROUNDS]
# REV_B defaults to the working tree. Each round runs A-vs-B and B-vs-A
# (swapped, to cancel code-layout effects). DITHER=1 randomises each call's
# phase against the peer's pause loop (see ab_main.cpp): compare the means.
# SOAK=SECONDS instead runs short rounds (10 blocks) in both orders, both
# undithered and dithered, for that long, so that every placement of the
# two vCPUs comes by, and prints B - A per placement (soak_summary.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
a=$1 b=${2:-WORKTREE} rounds=${3:-3}
out=$(mktemp -d /tmp/wh-ring-ab.XXXXXX)
trap 'rm -rf "$out"' EXIT
tree() {  # tree REV DIR: shm-ring of REV (or the working tree) in DIR
  mkdir -p "$2"
  if [ "$1" = WORKTREE ]; then cp -r "$root/shm-ring" "$2/"; else git -C "$root" archive "$1" shm-ring | tar -x -C "$2"; fi
}
objs() {  # objs TAG SRC: the library with its names renamed, and its shim
  # as both va_ and vb_ (so one library build serves either order)
  local d="-Dwh=wh_$1 -Dwh_chan_hdr=wh_chan_hdr_$1 -Dwh_region_hdr=wh_region_hdr_$1 -Dwh_msg_hdr=wh_msg_hdr_$1"
  for f in region ring wait channel; do
    g++ -std=c++20 -O2 $d -I"$2/shm-ring/include" -I"$2/shm-ring/src" -c "$2/shm-ring/src/$f.cpp" -o "$out/$1_$f.o"
  done
  for p in va vb; do
    g++ -std=c++20 -O2 $d -DWH_AB=$p -I"$2/shm-ring/include" -c "$here/ab_variant.cpp" -o "$out/$1_shim_$p.o"
  done
}
lib() { echo "$out/$1_region.o $out/$1_ring.o $out/$1_wait.o $out/$1_channel.o"; }
tree "$a" "$out/a"
tree "$b" "$out/b"
g++ -std=c++20 -O2 -c "$here/ab_main.cpp" -o "$out/main.o"
objs a "$out/a"
objs b "$out/b"
g++ "$out/main.o" $(lib a) "$out/a_shim_va.o" $(lib b) "$out/b_shim_vb.o" -lpthread -o "$out/ab"
g++ "$out/main.o" $(lib b) "$out/b_shim_va.o" $(lib a) "$out/a_shim_vb.o" -lpthread -o "$out/ba"
echo "A=$a B=$b"
if [ -n "${SOAK:-}" ]; then
  end=$((SECONDS + SOAK))
  while [ $SECONDS -lt $end ]; do
    for d in 0 1; do
      echo "ab d=$d $("$out/ab" 10 $d)"
      echo "ba d=$d $("$out/ba" 10 $d)"
    done
  done >"$out/soak.txt"
  python3 "$here/soak_summary.py" "$out/soak.txt"
  exit 0
fi
for i in $(seq "$rounds"); do
  echo "A,B: $("$out/ab" 30 "${DITHER:-0}")"
  echo "B,A: $("$out/ba" 30 "${DITHER:-0}" | sed 's/ A=/ B\x27=/; s/ B=/ A\x27=/')"
done
