#!/bin/bash
# CI: wh-gpt (bf16 mixed precision, cuBLASLt) forwarded through Wormhole on the sim backend,
# against its fp32 CPU reference wh-gpt-ref (same seed, same weights, same batches).
#   1. every one of the first WH_GPT_CMP_STEPS steps' training loss matches the reference
#      within a relative WH_GPT_TOL (default 1e-2; see docs/training.md for the derivation);
#   2. the validation loss falls: final <= WH_GPT_VAL_FRAC (default 0.8) x initial;
#   3. the program printed its summary line and a sample, and its loss plot is a PNG that
#      decodes (wh-png-check; gnuplot-nox is in scripts/deps.sh core).
# Usage: train_gpt.sh <build-dir> <wh-gpt> <wh-gpt-ref>
# Exit 77 (skip) when the corpus (Debian package `fortunes`) is not installed.
set -u
build="$1"; prog="$2"; ref="$3"
here="$(cd "$(dirname "$0")" && pwd)"
steps=${WH_GPT_STEPS:-60}
cmp=${WH_GPT_CMP_STEPS:-$steps}
tol=${WH_GPT_TOL:-1e-2}
frac=${WH_GPT_VAL_FRAC:-0.8}
if [ ! -f /usr/share/games/fortunes/literature ]; then
  echo "SKIP: no corpus (apt-get install fortunes, or scripts/deps.sh core)"; exit 77
fi
dir=$(mktemp -d /tmp/wh-gpt-ci-XXXXXX)
trap 'rm -rf "$dir"' EXIT
args="--steps $steps --eval-every 20 --val-batches 2 --sample 80 --seed 1337"

echo "=== fp32 CPU reference: wh-gpt-ref $args"
"$ref" $args --quiet --loss-log "$dir/ref.log" || { echo "FAIL: reference exited $?"; exit 1; }

echo "=== forwarded (sim): wh-gpt $args"
start=$(date +%s)
"$here/../../blas/forwarded.sh" "$build" --backend sim --server-log "$dir/server.log" -- \
  "$prog" $args --quiet --loss-log "$dir/gpu.log" --plot "$dir/loss.png" | tee "$dir/out.txt"
rc=${PIPESTATUS[0]}
echo "wh-gpt: exit $rc, $(( $(date +%s) - start )) s"
if [ "$rc" -ne 0 ]; then echo "FAIL: wh-gpt exited $rc"; cat "$dir/server.log"; exit 1; fi

fail=0
# 1. per-step losses vs the reference
if ! awk -v n="$cmp" -v tol="$tol" '
  FNR == 1 { f++ }
  $1 == "step" { if (f == 1) r[$2] = $4; else g[$2] = $4 }
  END {
    worst = 0; ws = -1; cnt = 0
    for (s = 0; s < n; s++) {
      if (!(s in r) || !(s in g)) { printf "FAIL: step %d missing from a loss log\n", s; exit 1 }
      d = g[s] - r[s]; if (d < 0) d = -d; d /= r[s]; cnt++
      if (d > worst) { worst = d; ws = s }
    }
    printf "losses: %d steps compared, max relative difference %.3g at step %d (tolerance %s); step 0 %.4f vs %.4f, step %d %.4f vs %.4f\n",
           cnt, worst, ws, tol, g[0], r[0], n - 1, g[n - 1], r[n - 1]
    exit !(worst <= tol)
  }' "$dir/ref.log" "$dir/gpu.log"; then
  echo "FAIL: wh-gpt losses differ from the fp32 reference beyond $tol"; fail=1
fi
# 2. validation loss falls
v0=$(awk '$1 == "val" && $2 == 0 { print $3 }' "$dir/gpu.log")
vn=$(awk '$1 == "val" { v = $3 } END { print v }' "$dir/gpu.log")
rv=$(awk '$1 == "val" { v = $3 } END { print v }' "$dir/ref.log")
if [ -z "$v0" ] || [ -z "$vn" ] || ! awk -v a="$v0" -v b="$vn" -v f="$frac" 'BEGIN { exit !(b <= f * a) }'; then
  echo "FAIL: validation loss ${v0:-?} -> ${vn:-?} did not fall to <= $frac x initial"; fail=1
else
  echo "validation loss: ${v0} -> ${vn} (<= $frac x initial; reference ends at ${rv})"
fi
# 3. output
grep -q '^wh-gpt summary: steps=' "$dir/out.txt" || { echo "FAIL: no summary line"; fail=1; }
grep -q '^sample:' "$dir/out.txt" || { echo "FAIL: no sample"; fail=1; }
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "FAIL: no gnuplot: the loss plot cannot be drawn (apt-get install gnuplot-nox, or scripts/deps.sh core)"; fail=1
elif "$build/tests/train/wh-png-check" "$dir/loss.png" 640 400; then echo "loss plot: a valid PNG"
else echo "FAIL: the loss plot is not a valid PNG"; fail=1; fi
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
