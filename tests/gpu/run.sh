#!/usr/bin/env bash
# make test-gpu: every forwarded suite on a real GPU, natively (NVIDIA's
# libraries) and through a wormhole-server on the cuda backend, then the
# training comparison. One line per suite ("suite NAME: N passed, M failed"),
# then the total. Meant to finish in under 10 minutes on one H100.
# Usage: run.sh [--stacked] BUILD_DIR
#   --stacked: a dry run without a GPU: the server is a cuda-backend server
#   over Wormhole's own driver onto a sim server (docs/hardware.md), native
#   runs and what needs NVIDIA's kernels are left out, and the stacked
#   exclusions are named. ctest's stacked.gpu_script checks its summary.
set -uo pipefail
stacked=0
[ "${1:-}" = --stacked ] && { stacked=1; shift; }
build=${1:-build}
here="$(cd "$(dirname "$0")" && pwd)"
if [ $stacked = 0 ] && ! ldconfig -p | grep -q 'libcuda.so.1 ' && [ ! -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ]; then
  echo "test-gpu: no NVIDIA driver (libcuda.so.1) on this machine; nothing run (--stacked: a dry run)" >&2
  exit 2
fi
progs=$build/tests/forward/programs
static_progs=$build/tests/forward/programs-static
sock=/tmp/wormhole-gpu-$$.sock
log=$build/gpu-server.log
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null; wait $p 2>/dev/null; done; rm -f $sock ${sock%.sock}-sim.sock' EXIT
wait_sock() { for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done; echo "test-gpu: no server at $1" >&2; cat "$log" >&2; exit 3; }
if [ $stacked = 1 ]; then
  WORMHOLE_SPIN=0 "$build/bin/wormhole-server" --backend sim --socket "${sock%.sock}-sim.sock" >"$log.sim" 2>&1 &
  pids+=($!)
  wait_sock "${sock%.sock}-sim.sock"
  WORMHOLE_SPIN=0 WORMHOLE_SOCKET="${sock%.sock}-sim.sock" LD_LIBRARY_PATH="$build/guest-lib" \
    "$build/bin/wormhole-server" --backend cuda --allow-dropin-driver --socket "$sock" >"$log" 2>&1 &
else
  "$build/bin/wormhole-server" --backend cuda --socket "$sock" >"$log" 2>&1 &
fi
pids=($! "${pids[@]}")
wait_sock "$sock"
grep -m1 "cuda backend: driver" "$log" || true

total_pass=0 total_fail=0 spass=0 sfail=0 suite=""
begin() { suite=$1; spass=0; sfail=0; }
end() {
  echo "suite $suite: $spass passed, $sfail failed"
  total_pass=$((total_pass + spass)); total_fail=$((total_fail + sfail))
}
# run MODE LABEL PROGRAM ARGS...: native (NVIDIA's libraries) or forwarded;
# passes when the program exits 0 and printed no FAIL line.
run() {
  local mode=$1 label=$2; shift 2
  [ $stacked = 1 ] && [ $mode = native ] && return
  local t0=$(date +%s%N) out rc
  if [ $mode = native ]; then
    out=$(env -u LD_LIBRARY_PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64 timeout 300 "$@" 2>&1); rc=$?
  else
    out=$(WORMHOLE_SOCKET=$sock LD_LIBRARY_PATH=$build/guest-lib WH_TEST_STACKED=$stacked timeout 300 "$@" 2>&1); rc=$?
  fi
  local ms=$(( ($(date +%s%N) - t0) / 1000000 )) r
  if [ $rc -eq 0 ] && ! grep -q '^FAIL' <<<"$out"; then spass=$((spass+1)); r=PASS; else sfail=$((sfail+1)); r=FAIL; fi
  printf '  %-34s %-9s %-5s %6d ms\n' "$label" "$mode" "$r" "$ms"
  [ $r = PASS ] || echo "$out" | tail -5 | sed 's/^/    /'
}
both() { run native "$@"; run forwarded "$@"; }
# Left out of a dry run: what the stacked pair cannot be (docs/hardware.md).
excluded() { [ $stacked = 1 ] && { printf '  %-34s excluded when stacked: %s\n' "$1" "$2"; return 0; }; return 1; }
host_mem="host memory of the server is not device memory of the sim server under it"
sass="SASS-only image: only a GPU runs it"

forward_suite() {  # NAME DIR
  begin "$1"
  local dir=$2
  for p in vector_add matmul streams_events memset_2d symbols multithread device_info device_query cooperative \
           big_params thrust_algos multi_fatbin mempool graph_capture graph_explicit graph_update graph_mem \
           tex_filter surface_rw tex3d tex_pitch2d fork_child; do
    [ -x "$dir/$p" ] && both "$p" "$dir/$p"
  done
  excluded device_heap "limits set by one session stay for the next in the stacked server's one session" ||
    both device_heap "$dir/device_heap"
  # Its `new` makes the device heap, whose size is then fixed for the programs after it.
  excluded virtual_functions "the device heap it makes stays for the next programs in the stacked server's one session" ||
    both virtual_functions "$dir/virtual_functions"
  for p in mapped_pinned managed; do excluded "$p" "$host_mem" || both "$p" "$dir/$p"; done
  excluded malloc_free "$host_mem" || both "malloc_free" "$dir/malloc_free" 2000
  excluded rdc "$sass" || both rdc "$dir/rdc"
  excluded dynamic_parallelism "$sass" || both dynamic_parallelism "$dir/dynamic_parallelism"
  for m in config oob assert; do
    [ $m != config ] && excluded "async_errors $m" "a fault stays with the stacked server's one session" && continue
    both "async_errors $m" "$dir/async_errors" $m
  done
  end
}
forward_suite forward "$progs"
[ -d "$static_progs" ] && forward_suite forward-static "$static_progs"

begin libraries
for t in blas/wh_blas_test blas/wh_blas_legacy_test blas/wh_blas_breadth_test blas/wh_blas_async_error \
         blas/wh_blas_xt_test blas/wh_blas_capture_test blas/wh_blas_test_static blaslt/wh_blaslt_test fft/wh_fft_test \
         rand/wh_rand_test dnn/wh_dnn_test; do
  [ -x "$build/tests/$t" ] && both "${t#*/}" "$build/tests/$t"
done
end

begin driver
d=$build/tests/driver
both driver_api "$d/wh_driver_test" "$d/kernels.fatbin" "$d/kernels.ptx" "$d/kernels.cubin"
both driver_mixed "$d/wh_driver_mixed" "$d/kernels.ptx"
both nvrtc_saxpy "$d/wh_driver_nvrtc"
both proc_address "$d/wh_driver_procaddr"
end

# NVIDIA's real cuBLAS in the "guest", over Wormhole's libcuda.so.1: a
# default-built cuBLAS program with NVIDIA's libraries preloaded (its SASS
# runs on the GPU through the cuda backend).
begin nvidia-cublas
if ! excluded nvidia-cublas "$sass (NVIDIA's cuBLAS kernels)"; then
  run forwarded nvidia-cublas env LD_PRELOAD="/usr/local/cuda/lib64/libcublasLt.so.13 /usr/local/cuda/lib64/libcublas.so.13" \
    "$build/tests/blas/wh_blas_test_static"
fi
end

begin train
if ! excluded "training comparison" "native runs need a GPU"; then
  t0=$(date +%s)
  if "$here/../train/gpu-compare.sh" "$build" "$sock"; then spass=1; else sfail=1; fi
  echo "  training comparison: $(( $(date +%s) - t0 )) s"
fi
end

echo "$total_pass passed, $total_fail failed"
[ $total_fail -eq 0 ]
