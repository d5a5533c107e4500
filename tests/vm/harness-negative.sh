#!/usr/bin/env bash
# The harness must not pass what it should fail: a guest whose job prints a
# FAIL, or lacks an expected result, makes vm/run-vms.sh exit non-zero and
# name it; a guest destroyed mid-run on request (--kill-on) is not a failure.
#   tests/vm/harness-negative.sh IMAGE_DIR WORKDIR
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IMAGE=${1:?} W=${2:?}
out=$("$HERE/../../vm/run-vms.sh" --image "$IMAGE" --workdir "$W" --timeout 120 \
  --vm good --job "$HERE/jobs/negative.sh" --expect passes \
  --vm bad --job "$HERE/jobs/negative.sh" --expect passes,never-printed \
  --vm killed --job "$HERE/jobs/midcall.sh" --expect before --kill-on '^WH-MIDCALL' 2>&1)
rc=$?
echo "$out"
fail() { echo "harness-negative: $*"; exit 1; }
((rc == 1)) || fail "run-vms exit $rc, wanted 1"
# 'good' expects only 'passes' but its job also prints a FAIL: also judged FAIL.
grep -q 'launch: good FAIL: 1 failed' <<<"$out" || fail "good's FAIL line not flagged"
grep -q 'launch: bad FAIL: 1 failed, missing: never-printed' <<<"$out" || fail "missing marker not flagged"
grep -q 'launch: killed PASS (1 results, killed as asked' <<<"$out" || fail "--kill-on did not destroy the VM"
grep -q 'run-vms: 3 guests .*: FAIL' <<<"$out" || fail "no FAIL summary"
echo "harness-negative: failures are detected"
