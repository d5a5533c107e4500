#!/bin/bash
# make bench-train: a fixed number of training steps of each model, forwarded
# through Wormhole (server --backend auto), and natively when this machine
# has a GPU: the MLP (wh-train, cuBLAS), the CNN (wh-cnn, cuDNN + cuBLAS)
# and the GPT (wh-gpt, bf16 cuBLASLt). Each program times its steps itself
# (after warm-up steps, without a per-step read-back) and counts the calls
# a step makes. Ends with exactly one line per model:
#   mlp_step_ms=<forwarded> native_step_ms=<native or NA> calls_per_step=<n> steps_per_s=<forwarded> [kernel_minstr_per_s=<r>] backend=<sim|cuda>
#   cnn_step_ms=...
#   gpt_step_ms=...
# kernel_minstr_per_s (sim backend only): the rate at which the sim device
# ran the program's own kernels over the whole run, in millions of
# thread-instructions per second (the server's statistics; cuBLAS and cuDNN
# calls run on OpenBLAS / oneDNN and are not in it).
# Usage: bench.sh <build-dir> [mlp] [cnn] [gpt]   (default: all three)
# Env: BENCH_STEPS, BENCH_WARMUP (every model), BENCH_BATCH (the MLP's batch),
#      BENCH_BACKEND (the server's --backend, default auto).
set -u
build="$(cd "$1" && pwd)"; shift
here="$(cd "$(dirname "$0")" && pwd)"
models=("$@"); [ ${#models[@]} -gt 0 ] || models=(mlp cnn gpt)
has_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then has_gpu=1; fi

# Per model: the program, its arguments for N timed steps after W warm-up
# steps, and the default N and W on the sim device / on a GPU.
prog_of() { echo "$build/tests/train/wh-$([ "$1" = mlp ] && echo train || echo "$1")"; }
args_of() {  # MODEL STEPS WARMUP
  case $1 in
    mlp) echo "--steps $2 --warmup $3 --batch ${BENCH_BATCH:-128} --subset 20000 --test-subset 1000" ;;
    cnn) echo "--steps $2 --warmup $3 --batch 64 --subset 20000 --test-subset 1000" ;;
    gpt) echo "--bench $2 --bench-warmup $3" ;;
  esac
}
defaults_of() {  # MODEL -> "STEPS WARMUP"
  if [ $has_gpu -eq 1 ]; then
    case $1 in mlp|cnn) echo "2000 100" ;; gpt) echo "500 20" ;; esac
  else
    case $1 in mlp|cnn) echo "100 10" ;; gpt) echo "20 3" ;; esac
  fi
}
field() { echo "$1" | sed -n "s/.*\b$2=\([0-9.a-z]*\).*/\1/p"; }

lines=()
fail=0
for m in "${models[@]}"; do
  case $m in mlp|cnn|gpt) ;; *) echo "bench-train: unknown model '$m' (mlp, cnn, gpt)" >&2; exit 2 ;; esac
  prog=$(prog_of "$m")
  [ -x "$prog" ] || { echo "bench-train: $prog missing: build it first" >&2; exit 2; }
  read -r dsteps dwarm <<<"$(defaults_of "$m")"
  steps=${BENCH_STEPS:-$dsteps}; warm=${BENCH_WARMUP:-$dwarm}
  args=$(args_of "$m" "$steps" "$warm")
  echo "bench-train: $m: $steps steps after $warm warm-up steps, forwarded ($(basename "$prog") $args)" >&2
  slog=$(mktemp /tmp/wh-bench-train-server-XXXXXX.log)
  fwd=$("$here/../blas/forwarded.sh" "$build" --backend "${BENCH_BACKEND:-auto}" --server-log "$slog" -- "$prog" $args 2>/dev/null | grep '^step_ms=')
  kline=$(grep '^  kernels: .*thread-instructions' "$slog"); rm -f "$slog"
  if [ -z "$fwd" ]; then echo "bench-train: the forwarded $m run failed" >&2; fail=1; continue; fi
  echo "  forwarded: $fwd" >&2
  fms=$(field "$fwd" step_ms)
  calls=$(field "$fwd" calls_per_step)
  backend=sim; [ "$(field "$fwd" device)" = gpu ] && backend=cuda
  nms=NA
  if [ $has_gpu -eq 1 ]; then
    # Native: the toolkit's libraries (no guest-lib on the path).
    nat=$(env -u LD_LIBRARY_PATH "$prog" $args 2>/dev/null | grep '^step_ms=')
    echo "  native:    ${nat:-failed}" >&2
    nms=$(field "$nat" step_ms)
    [ -n "$nms" ] || nms=NA
  fi
  sps=$(awk -v ms="$fms" 'BEGIN { printf "%.1f", (ms > 0 ? 1000 / ms : 0) }')
  krate=""
  if [ -n "$kline" ]; then
    echo "  sim device ${kline#  }" >&2
    krate=" kernel_minstr_per_s=$(sed -n 's/.*thread-instructions, \([0-9.]*\) M\/s.*/\1/p' <<<"$kline")"
  fi
  lines+=("${m}_step_ms=$fms native_step_ms=$nms calls_per_step=$calls steps_per_s=$sps$krate backend=$backend")
done
printf '%s\n' "${lines[@]}"
exit $fail
