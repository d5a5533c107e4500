#!/bin/bash
# Runs wh_driver_refused_image on the sim device and counts, in the server's
# statistics, what reached it: the program's own SASS-only fatbin once, the
# bare cubin once (three module loads and two libraries of it), the PTX once:
# 3 ModuleLoad calls, 2 of them refused. A refused image shipped again on a
# later use shows as more.
# Usage: refused_image.sh <build-dir> <program> <kernels.cubin> <kernels.ptx>
set -u
build=$1 prog=$2 cubin=$3 ptx=$4
here="$(cd "$(dirname "$0")" && pwd)"
log=$(mktemp /tmp/wh-refused-XXXXXX.log)
trap 'rm -f "$log"' EXIT
"$here/../blas/forwarded.sh" "$build" --backend sim --server-log "$log" -- "$prog" "$cubin" "$ptx"
rc=$?
loads=$(sed -n 's/^ *ModuleLoad *\([0-9]*\) calls.*/\1/p' "$log")
refused=$(grep -c 'module load failed' "$log")
echo "server: ${loads:-0} ModuleLoad calls, $refused refused"
if [ $rc -ne 0 ] || [ "${loads:-0}" -ne 3 ] || [ "$refused" -ne 2 ]; then
  echo "FAIL: want the program to pass (exit $rc) with 3 ModuleLoad calls, 2 refused"
  cat "$log"
  exit 1
fi
echo "PASS: each refused image reached the server once"
