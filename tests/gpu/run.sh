#!/usr/bin/env bash
# make test-gpu: the forwarded test programs natively and through Wormhole
# on a real GPU (cuda backend), then the training comparison if present.
# Needs an NVIDIA driver; refuses clearly without one. Usage: run.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
if ! ldconfig -p | grep -q 'libcuda.so.1 ' && [ ! -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ]; then
  echo "test-gpu: no NVIDIA driver (libcuda.so.1) on this machine; nothing run" >&2
  exit 2
fi
progs=$build/tests/forward/programs
# The same programs built the default way (static runtime): natively on
# NVIDIA's driver, forwarded on Wormhole's libcuda.so.1.
static_progs=$build/tests/forward/programs-static
sock=/tmp/wormhole-gpu-$$.sock
"$build/bin/wormhole-server" --backend cuda --socket "$sock" >"$build/gpu-server.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
pass=0 fail=0
run() {  # name mode args...
  local name=$1 mode=$2; shift 2
  local t0=$(date +%s%N) out rc
  if [ "$mode" = native ]; then
    out=$(env -u LD_LIBRARY_PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64 timeout 300 "$progs/$name" "$@" 2>&1); rc=$?
  else
    out=$(WORMHOLE_SOCKET=$sock LD_LIBRARY_PATH=$build/guest-lib timeout 300 "$progs/$name" "$@" 2>&1); rc=$?
  fi
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [ $rc -eq 0 ] && grep -q PASS <<<"$out"; then pass=$((pass+1)); r=PASS; else fail=$((fail+1)); r=FAIL; fi
  printf '%-16s %-9s %-5s %6d ms\n' "$name $*" "$mode" "$r" "$ms"
  [ $r = PASS ] || echo "$out" | tail -5
}
for p in vector_add matmul streams_events memset_2d symbols mapped_pinned multithread device_info multi_fatbin; do
  run $p native; run $p forwarded
done
for m in config oob assert; do run async_errors native $m; run async_errors forwarded $m; done
if [ -d "$static_progs" ]; then
  saved=$progs; progs=$static_progs
  for p in vector_add matmul streams_events memset_2d symbols mapped_pinned multithread device_info multi_fatbin \
           graph_capture tex_filter managed device_heap thrust_algos; do
    run $p native; run $p forwarded
  done
  progs=$saved
fi
# NVIDIA's real cuBLAS in the "guest", over Wormhole's libcuda.so.1: a
# default-built cuBLAS program with NVIDIA's libraries preloaded (its SASS
# runs on the GPU through the cuda backend).
blas_static=$build/tests/blas/wh_blas_test_static
if [ -x "$blas_static" ]; then
  t0=$(date +%s%N)
  out=$(WORMHOLE_SOCKET=$sock LD_LIBRARY_PATH=$build/guest-lib \
        LD_PRELOAD="/usr/local/cuda/lib64/libcublasLt.so.13 /usr/local/cuda/lib64/libcublas.so.13" \
        timeout 300 "$blas_static" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -q " 0 failed" <<<"$out"; then pass=$((pass+1)); r=PASS; else fail=$((fail+1)); r=FAIL; fi
  printf '%-16s %-9s %-5s %6d ms
' "nvidia-cublas" "forwarded" "$r" $(( ($(date +%s%N) - t0) / 1000000 ))
  [ $r = PASS ] || echo "$out" | tail -5
fi
if [ -x tests/train/gpu-compare.sh ]; then tests/train/gpu-compare.sh "$build" "$sock" || fail=$((fail+1)); fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
