#!/bin/sh
# run_test.sh SERVER WORMHOLE_RUN GUEST_LIB_DIR SCRIPT: runs SCRIPT with the
# pinned PyTorch venv (torch-env.sh) on a private sim-device server.
# Exit 77 (skip) when the venv cannot be built (no network).
set -u
server=$1 run=$2 lib=$3 script=$4
here=$(cd "$(dirname "$0")" && pwd)
# A sanitizer's runtime must be the first library of the process: drop-ins
# built with one cannot be preloaded into Python.
if readelf -d "$lib/libcudart.so.13" 2>/dev/null | grep -qE 'lib[at]san'; then
  echo "SKIP: the guest libraries are built with a sanitizer; they cannot be preloaded into Python"
  exit 77
fi
env=$("$here/torch-env.sh") || exit $?  # 77: no package index (skip); else an error
dir=$(mktemp -d /tmp/wh-torch.XXXXXX)
trap 'kill $spid 2>/dev/null; wait $spid 2>/dev/null; rm -rf "$dir"' EXIT
"$server" --backend sim --socket "$dir/s.sock" --admin-socket off --no-stats >"$dir/server.log" 2>&1 &
spid=$!
i=0
while [ ! -S "$dir/s.sock" ]; do
  i=$((i + 1))
  [ $i -lt 100 ] && kill -0 $spid 2>/dev/null || { echo "FAIL: server did not start"; cat "$dir/server.log"; exit 1; }
  sleep 0.1
done
# wormhole-run alone: it preloads Wormhole's drop-ins, which PyTorch's
# DT_RPATH would otherwise pass over for NVIDIA's copies (docs/pytorch.md),
# and Wormhole's NVRTC finds the wheel's to compile. Jiterated kernels are
# compiled afresh each run (no disk cache), and so are torch.compile's
# (Triton's and Inductor's caches in this run's directory): a cached kernel
# would pass by wormhole-ptxas.
export TRITON_CACHE_DIR="$dir/triton" TORCHINDUCTOR_CACHE_DIR="$dir/inductor"
USE_PYTORCH_KERNEL_CACHE=0 "$run" --lib-dir "$lib" --socket "$dir/s.sock" "$env/bin/python" "$script"
rc=$?
[ $rc -eq 0 ] || { echo "--- server log"; cat "$dir/server.log"; }
exit $rc
