#!/bin/bash
# CI: wh-train forwarded through Wormhole on the sim backend (PTX interpreter
# for the kernels, OpenBLAS for cuBLAS). Two identical runs: each must reach
# the accuracy floor, and their per-step loss curves must be bit-identical.
# Usage: ci_train.sh <build-dir> <wh-train> [extra wh-train args]
# Env: WH_TRAIN_ARGS (default: 1 epoch over all 60000 images, batch 128),
#      WH_TRAIN_MIN_ACC (default 82).
set -u
build="$1"; prog="$2"; shift 2
here="$(cd "$(dirname "$0")" && pwd)"
args=${WH_TRAIN_ARGS:-"--epochs 1 --batch 128 --seed 42"}
min=${WH_TRAIN_MIN_ACC:-82}
dir=$(mktemp -d /tmp/wh-train-ci-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
for run in a b; do
  echo "=== forwarded run $run: wh-train $args $*"
  start=$(date +%s)
  "$here/../blas/forwarded.sh" "$build" --backend sim --server-log "$dir/server-$run.log" -- \
    "$prog" $args "$@" --loss-out "$dir/loss-$run.txt" --no-progress | tee "$dir/out-$run.txt"
  rc=${PIPESTATUS[0]}
  echo "run $run: exit $rc, $(( $(date +%s) - start )) s"
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: run $run exited $rc"; cat "$dir/server-$run.log"; exit 1
  fi
  acc=$(sed -n 's/^final test_acc=\([0-9.]*\)%.*/\1/p' "$dir/out-$run.txt")
  if [ -z "$acc" ] || ! awk -v a="$acc" -v m="$min" 'BEGIN { exit !(a >= m) }'; then
    echo "FAIL: run $run test accuracy ${acc:-?}% < ${min}%"; fail=1
  else
    echo "run $run: test accuracy ${acc}% >= ${min}%"
  fi
done
steps=$(grep -vc '^epoch' "$dir/loss-a.txt")
if cmp -s "$dir/loss-a.txt" "$dir/loss-b.txt" && [ "$steps" -gt 0 ]; then
  echo "loss curves bit-identical over $steps steps"
else
  echo "FAIL: loss curves differ"; diff "$dir/loss-a.txt" "$dir/loss-b.txt" | head; fail=1
fi
echo "--- server statistics (run b)"; sed -n '/statistics/,$p' "$dir/server-b.log"
[ $fail -eq 0 ] && echo "PASS"
exit $fail
