#!/bin/bash
# make bench-train: a fixed number of wh-train steps forwarded through
# Wormhole (server --backend auto), and natively when this machine has a
# GPU. Ends with exactly one line:
#   train_step_ms=<forwarded> native_step_ms=<native or NA> calls_per_step=<n> backend=<sim|cuda>
# Usage: bench.sh <build-dir>   (env BENCH_STEPS, BENCH_WARMUP, BENCH_BATCH)
set -u
build="$(cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
prog="$build/tests/train/wh-train"
batch="${BENCH_BATCH:-128}"
has_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then has_gpu=1; fi
if [ $has_gpu -eq 1 ]; then steps="${BENCH_STEPS:-2000}"; warm="${BENCH_WARMUP:-100}"
else steps="${BENCH_STEPS:-100}"; warm="${BENCH_WARMUP:-10}"; fi
args="--steps $steps --warmup $warm --batch $batch --subset 20000 --test-subset 1000"

echo "bench-train: $steps steps of batch $batch after $warm warm-up steps, forwarded" >&2
fwd=$("$here/../blas/forwarded.sh" "$build" --backend auto -- "$prog" $args 2>/dev/null | grep '^step_ms=')
[ -n "$fwd" ] || { echo "bench-train: the forwarded run failed" >&2; exit 1; }
echo "  forwarded: $fwd" >&2
fms=$(echo "$fwd" | sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p')
calls=$(echo "$fwd" | sed -n 's/.*calls_per_step=\([0-9]*\).*/\1/p')
dev=$(echo "$fwd" | sed -n 's/.*device=\([a-z]*\).*/\1/p')
backend=sim; [ "$dev" = gpu ] && backend=cuda
nms=NA
if [ $has_gpu -eq 1 ]; then
  # Native: the toolkit's libcudart/libcublas (no guest-lib on the path).
  nat=$(env -u LD_LIBRARY_PATH "$prog" $args 2>/dev/null | grep '^step_ms=')
  echo "  native:    ${nat:-failed}" >&2
  nms=$(echo "$nat" | sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p')
  [ -n "$nms" ] || nms=NA
fi
echo "train_step_ms=$fms native_step_ms=$nms calls_per_step=$calls backend=$backend"
