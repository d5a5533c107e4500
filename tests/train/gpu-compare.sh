#!/bin/bash
# Called by tests/gpu/run.sh (make test-gpu) on a GPU machine: the cuBLAS
# test program natively and through the running cuda-backend server, then
# the training comparison of the MLP, the CNN and the GPT
# (tests/train/gpu_train.sh: loss curves within each model's tolerance,
# forwarded step time within 5% of native).
# NOT RUN YET: no GPU machine was lent to the task that wrote it.
# Usage: gpu-compare.sh <build-dir> <socket of a running wormhole-server --backend cuda>
set -uo pipefail
build="$1"; sock="$2"
here="$(cd "$(dirname "$0")" && pwd)"
fail=0
blas="$build/tests/blas/wh_blas_test"
echo "== cuBLAS test program, native"
env -u LD_LIBRARY_PATH "$blas" | tail -1 || fail=1
echo "== cuBLAS test program, forwarded (cuda backend: NVIDIA cuBLAS on the server)"
WORMHOLE_SOCKET="$sock" LD_LIBRARY_PATH="$build/guest-lib" "$blas" | tail -1 || fail=1
WORMHOLE_SOCKET="$sock" LD_LIBRARY_PATH="$build/guest-lib" "$build/tests/blas/wh_blas_legacy_test" | tail -1 || fail=1
"$here/gpu_train.sh" "$build" || fail=1
exit $fail
