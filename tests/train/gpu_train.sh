#!/bin/bash
# The training part of `make test-gpu`: on a machine with an NVIDIA GPU, each
# model (wh-train the MLP, wh-cnn the cuDNN CNN, wh-gpt the bf16 cuBLASLt GPT),
# run natively and forwarded through Wormhole's cuda backend, must
#   1. give loss curves that agree: MLP per-epoch mean within 1e-4; CNN
#      per-epoch mean within 1e-3 relative (cuDNN may pick non-deterministic
#      algorithms); GPT every step within 1e-2 relative (bf16), and
#   2. take a forwarded step time within 5% of the native one.
# NOT RUN YET: no GPU machine was lent to the task that wrote it (see
# docs/hardware.md). Exits 2 without a GPU.
# Usage: gpu_train.sh <build-dir> [mlp] [cnn] [gpt]   (default all; env GPU_TRAIN_EPOCHS=3,
#        GPU_BENCH_STEPS=2000, GPU_GPT_STEPS=200)
set -u
build="$(cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
  echo "gpu_train: no NVIDIA GPU here: not run" >&2
  exit 2
fi
epochs="${GPU_TRAIN_EPOCHS:-3}"
steps="${GPU_BENCH_STEPS:-2000}"
gpt_steps="${GPU_GPT_STEPS:-200}"
models="${*:2}"; models="${models:-mlp cnn gpt}"
dir=$(mktemp -d /tmp/wh-gpu-train-XXXXXX)
trap 'rm -rf "$dir"' EXIT
nvidia-smi -L
fail=0
native() { env -u LD_LIBRARY_PATH "$@"; }
forwarded() { "$here/../blas/forwarded.sh" "$build" --backend cuda --server-log "$dir/server.log" -- "$@"; }

# compare KIND NATIVE FORWARDED: the loss curves, per model.
compare() {
  python3 - "$@" <<'PY'
import sys
kind, pa, pb = sys.argv[1:4]
def read(p):
    out = {}
    for line in open(p):
        f = line.split()
        if kind == "mlp" and f and f[0] == "epoch":
            out[int(f[1])] = float.fromhex(f[3])
        elif kind == "cnn" and len(f) == 2:
            out[int(f[0])] = float(f[1])
        elif kind == "gpt" and len(f) == 4 and f[0] == "step":
            out[int(f[1])] = float(f[3])
    return out
a, b = read(pa), read(pb)
ok = bool(a) and a.keys() == b.keys()
if kind == "cnn":  # per-step losses -> per-epoch means (steps numbered from 0 across epochs)
    n = int(sys.argv[4])
    def means(d):
        m = {}
        for s, l in d.items():
            m.setdefault(s // n, []).append(l)
        return {e: sum(v) / len(v) for e, v in m.items()}
    a, b = means(a), means(b)
tol, rel = {"mlp": (1e-4, False), "cnn": (1e-3, True), "gpt": (1e-2, True)}[kind]
worst = 0.0
for k in sorted(a):
    d = abs(a[k] - b.get(k, float("inf")))
    if rel:
        d /= max(abs(a[k]), 1e-12)
    worst = max(worst, d)
    if kind != "gpt" or k % 20 == 0:
        print(f"{kind} {'epoch' if kind != 'gpt' else 'step'} {k}: native {a[k]:.7f} forwarded {b.get(k, float('nan')):.7f} diff {d:.2e}")
ok &= worst <= tol
print(f"{kind}: loss curves agree (worst {worst:.2e} <= {tol:g})" if ok else f"FAIL: {kind} loss curves differ ({worst:.2e} > {tol:g})")
sys.exit(0 if ok else 1)
PY
}

# step_time MODEL ARGS...: native and forwarded step_ms in the same run.
step_time() {
  local m=$1; shift
  local nat fwd
  nat=$(native "$@" | sed -n 's/^step_ms=\([0-9.]*\).*/\1/p')
  fwd=$(forwarded "$@" | sed -n 's/^step_ms=\([0-9.]*\).*/\1/p')
  echo "$m native_step_ms=${nat:-?} forwarded_step_ms=${fwd:-?}"
  if [ -z "$nat" ] || [ -z "$fwd" ] || ! awk -v n="$nat" -v f="$fwd" 'BEGIN { exit !(f <= 1.05 * n) }'; then
    echo "FAIL: $m forwarded step time not within 5% of native"; fail=1
  else
    echo "$m: forwarded step time within 5% of native"
  fi
}

for m in $models; do
  case $m in
  mlp)
    prog="$build/tests/train/wh-train"
    echo "== mlp: wh-train --epochs $epochs, native then forwarded (cuda backend)"
    native "$prog" --epochs "$epochs" --no-progress --loss-out "$dir/mlp-native.txt" || fail=1
    forwarded "$prog" --epochs "$epochs" --no-progress --loss-out "$dir/mlp-fwd.txt" || { fail=1; cat "$dir/server.log"; }
    compare mlp "$dir/mlp-native.txt" "$dir/mlp-fwd.txt" || fail=1
    step_time mlp "$prog" --steps "$steps" --warmup 100 --batch 128 ;;
  cnn)
    prog="$build/tests/train/wh-cnn"
    echo "== cnn: wh-cnn --epochs $epochs, native then forwarded (cuda backend)"
    native "$prog" --epochs "$epochs" --no-progress --loss-out "$dir/cnn-native.txt" || fail=1
    forwarded "$prog" --epochs "$epochs" --no-progress --loss-out "$dir/cnn-fwd.txt" || { fail=1; cat "$dir/server.log"; }
    compare cnn "$dir/cnn-native.txt" "$dir/cnn-fwd.txt" $((60000 / 64)) || fail=1
    step_time cnn "$prog" --steps "$steps" --warmup 100 ;;
  gpt)
    prog="$build/tests/train/wh-gpt"
    args="--steps $gpt_steps --eval-every 50 --val-batches 2 --sample 80 --seed 1337 --quiet"
    echo "== gpt: wh-gpt $args, native then forwarded (cuda backend)"
    native "$prog" $args --loss-log "$dir/gpt-native.txt" || fail=1
    forwarded "$prog" $args --loss-log "$dir/gpt-fwd.txt" || { fail=1; cat "$dir/server.log"; }
    compare gpt "$dir/gpt-native.txt" "$dir/gpt-fwd.txt" || fail=1
    step_time gpt "$prog" --bench "$((steps / 10))" --bench-warmup 20 ;;
  *) echo "gpu_train: unknown model '$m' (mlp, cnn, gpt)"; exit 2 ;;
  esac
done
[ $fail -eq 0 ] && echo PASS
exit $fail
