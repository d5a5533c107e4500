#!/bin/bash
# The training part of `make test-gpu` (to be assembled with the other GPU
# checks): on a machine with an NVIDIA GPU, wh-train natively and forwarded
# through Wormhole's cuda backend must
#   1. give per-epoch mean losses within 1e-4 of each other, and
#   2. take a forwarded step time within 5% of the native one.
# NOT RUN YET: no GPU machine was lent to the task that wrote it (see
# docs/hardware.md). Exits 2 without a GPU.
# Usage: gpu_train.sh <build-dir>   (env GPU_TRAIN_EPOCHS=3, GPU_BENCH_STEPS=2000)
set -u
build="$(cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
prog="$build/tests/train/wh-train"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
  echo "gpu_train: no NVIDIA GPU here: not run" >&2
  exit 2
fi
epochs="${GPU_TRAIN_EPOCHS:-3}"
steps="${GPU_BENCH_STEPS:-2000}"
dir=$(mktemp -d /tmp/wh-gpu-train-XXXXXX)
trap 'rm -rf "$dir"' EXIT
nvidia-smi -L
fail=0

echo "== native: wh-train --epochs $epochs"
env -u LD_LIBRARY_PATH "$prog" --epochs "$epochs" --no-progress --loss-out "$dir/native.txt" || fail=1
echo "== forwarded (cuda backend): wh-train --epochs $epochs"
"$here/../blas/forwarded.sh" "$build" --backend cuda --server-log "$dir/server.log" -- \
  "$prog" --epochs "$epochs" --no-progress --loss-out "$dir/fwd.txt" || { fail=1; cat "$dir/server.log"; }

python3 - "$dir/native.txt" "$dir/fwd.txt" <<'PY' || fail=1
import sys
def epochs(p):
    out = {}
    for line in open(p):
        f = line.split()
        if f and f[0] == "epoch":
            out[int(f[1])] = float.fromhex(f[3])
    return out
a, b = epochs(sys.argv[1]), epochs(sys.argv[2])
ok = bool(a) and a.keys() == b.keys()
for e in sorted(a):
    d = abs(a[e] - b.get(e, float("inf")))
    print(f"epoch {e}: native loss {a[e]:.7f} forwarded {b.get(e, float('nan')):.7f} |diff| {d:.2e}")
    ok &= d <= 1e-4
print("loss curves agree within 1e-4" if ok else "FAIL: loss curves differ by more than 1e-4")
sys.exit(0 if ok else 1)
PY

echo "== step time ($steps steps)"
args="--steps $steps --warmup 100 --batch 128"
nat=$(env -u LD_LIBRARY_PATH "$prog" $args | sed -n 's/^step_ms=\([0-9.]*\).*/\1/p')
fwd=$("$here/../blas/forwarded.sh" "$build" --backend cuda -- "$prog" $args | sed -n 's/^step_ms=\([0-9.]*\).*/\1/p')
echo "native_step_ms=${nat:-?} forwarded_step_ms=${fwd:-?}"
if [ -z "$nat" ] || [ -z "$fwd" ] || ! awk -v n="$nat" -v f="$fwd" 'BEGIN { exit !(f <= 1.05 * n) }'; then
  echo "FAIL: forwarded step time not within 5% of native"; fail=1
else
  echo "forwarded step time within 5% of native"
fi
[ $fail -eq 0 ] && echo PASS
exit $fail
