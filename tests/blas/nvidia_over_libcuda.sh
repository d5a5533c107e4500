#!/bin/bash
# NVIDIA's own libcublas (preloaded in place of Wormhole's) over Wormhole's
# libcuda.so.1, on the sim device: its static runtime initialises through
# the export tables and registers its fatbins, which reach the server as
# module loads. Those that carry PTX load; the first SASS-only one is
# refused with a message that says so, cublasCreate fails, the program
# hears why, and nothing crashes. Loading is eager (CUDA_MODULE_LOADING):
# lazily, the SASS-only images would fail only when their kernels run.
# The order in which the runtime loads its fatbins follows addresses (8 to
# 71 loaded before the refusal, measured with CUDA 13.0's libcublas), so the
# program runs RUNS times: in every run exactly one module load fails on the
# server and the refusal the program printed names a SASS-only fatbin, and
# PTX modules loaded in at least one run (a run whose first fatbin is
# SASS-only loads none: 1 run in 5 was seen so). A PTX module that fails to
# load, or no PTX loading at all, fails the test.
# Usage: nvidia_over_libcuda.sh <build-dir> <program> <cuda-lib-dir>
set -u
build="$1" prog="$2" cudalib="$3"
here="$(cd "$(dirname "$0")" && pwd)"
runs=${WH_NVIDIA_CUBLAS_RUNS:-5}
dir=$(mktemp -d /tmp/wh-nvblas-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0 total=0 with_ptx=0
for i in $(seq "$runs"); do
  CUDA_MODULE_LOADING=EAGER LD_PRELOAD="$cudalib/libcublasLt.so.13 $cudalib/libcublas.so.13" \
    "$here/forwarded.sh" "$build" --backend sim --server-log "$dir/server.log" -- "$prog" >"$dir/out.txt" 2>&1
  rc=$?
  bad=0
  if grep -qE 'double free|Segmentation|Aborted|core dumped|PASS|passed' "$dir/out.txt" || [ $rc -ge 128 ]; then
    echo "FAIL: run $i: the program crashed or claimed success (exit $rc)"; bad=1
  fi
  grep -q 'FATAL cublasCreate failed' "$dir/out.txt" || { echo "FAIL: run $i: cublasCreate did not fail as expected"; bad=1; }
  loads=$(sed -n 's/^ *ModuleLoad *\([0-9]*\) calls.*/\1/p' "$dir/server.log")
  failed=$(grep -c 'module load failed' "$dir/server.log")
  loaded=$(( ${loads:-0} - failed ))
  total=$((total + loaded))
  echo "run $i: ${loads:-0} module loads on the server, $loaded loaded (PTX), $failed refused"
  [ "$loaded" -ge 1 ] && with_ptx=$((with_ptx + 1))
  [ "$failed" -eq 1 ] || { echo "FAIL: run $i: $failed module loads refused, want exactly 1 (the first SASS-only one)"; bad=1; }
  if ! grep -q 'wormhole: module load failed: fatbin carries no PTX (SASS only: ' "$dir/out.txt"; then
    echo "FAIL: run $i: the refusal the program heard does not name a SASS-only module:"
    grep 'module load failed' "$dir/out.txt" | cut -c1-300; bad=1
  fi
  if [ $bad -ne 0 ]; then
    fail=1
    cat "$dir/out.txt"; echo "--- wormhole-server log:"; cat "$dir/server.log"
  fi
done
[ $with_ptx -ge 1 ] || { echo "FAIL: no fatbin of NVIDIA's cuBLAS loaded in $runs runs"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: NVIDIA's cuBLAS initialised over Wormhole's libcuda $runs times ($total PTX modules loaded in all, in $with_ptx runs), each refused at a SASS-only module"
exit $fail
