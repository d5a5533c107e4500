#!/bin/bash
# CI: wh-cnn (LeNet-5-like CNN through cuDNN + cuBLAS) forwarded through
# Wormhole on the sim backend (oneDNN for cuDNN, OpenBLAS for cuBLAS, the
# PTX interpreter for its kernels): it must finish, print its summary line
# and reach the accuracy floor (counted on the host from the logits it copied
# back, equal to its score kernel's count), and its loss plot must be a PNG that decodes
# (wh-png-check; gnuplot-nox is in scripts/deps.sh core).
# Usage: ci_cnn.sh <build-dir> <wh-cnn> [extra wh-cnn args]
# Env: WH_CNN_ARGS (default below), WH_CNN_MIN_ACC (default below).
set -u
build="$1"; prog="$2"; shift 2
here="$(cd "$(dirname "$0")" && pwd)"
args=${WH_CNN_ARGS:-"--epochs 4 --batch 64 --seed 1"}
min=${WH_CNN_MIN_ACC:-89}
dir=$(mktemp -d /tmp/wh-cnn-ci-XXXXXX)
trap 'rm -rf "$dir"' EXIT
echo "=== forwarded: wh-cnn $args $*"
start=$(date +%s)
"$here/../blas/forwarded.sh" "$build" --backend sim --server-log "$dir/server.log" -- \
  "$prog" $args "$@" --plot "$dir/loss.png" --no-progress | tee "$dir/out.txt"
rc=${PIPESTATUS[0]}
echo "exit $rc, $(( $(date +%s) - start )) s"
if [ "$rc" -ne 0 ]; then
  echo "FAIL: wh-cnn exited $rc"; cat "$dir/server.log"; exit 1
fi
fail=0
# The floor applies to the accuracy the program counts on the host from the
# logits it copied back (not only to its score kernel's count), and the two
# counts must agree.
acc=$(sed -n 's/^final test_acc=\([0-9.]*\)%.*/\1/p' "$dir/out.txt")
hacc=$(sed -n 's/^host-counted test_acc=\([0-9.]*\)% (equals the device.s count)$/\1/p' "$dir/out.txt")
if [ -z "$hacc" ]; then
  echo "FAIL: the host's count of correct test images is missing or differs from the device's:"
  grep -E '^host-counted|the device counted' "$dir/out.txt"; fail=1
elif [ "$hacc" != "$acc" ]; then
  echo "FAIL: test accuracy ${acc:-?}% on the device, ${hacc}% on the host"; fail=1
elif ! awk -v a="$hacc" -v m="$min" 'BEGIN { exit !(a >= m) }'; then
  echo "FAIL: test accuracy ${hacc}% < ${min}%"; fail=1
else
  echo "test accuracy ${hacc}% >= ${min}% (counted on the host from the logits; the device's count agrees)"
fi
grep -q '^final test_acc=[0-9.]*% images_per_s=[0-9]* train_s=' "$dir/out.txt" || { echo "FAIL: no summary line"; fail=1; }
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "FAIL: no gnuplot: the loss plot cannot be drawn (apt-get install gnuplot-nox, or scripts/deps.sh core)"; fail=1
elif ! "$build/tests/train/wh-png-check" "$dir/loss.png" 640 400; then
  echo "FAIL: the loss plot is not a valid PNG"; fail=1
fi
grep -q "Dnn" "$dir/server.log" || { echo "FAIL: no cuDNN call reached the server"; fail=1; }
echo "--- server statistics"; sed -n '/statistics/,$p' "$dir/server.log"
[ $fail -eq 0 ] && echo "PASS"
exit $fail
