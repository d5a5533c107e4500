#!/bin/bash
# The build's spec check (scripts/check-spec.py) passes on the tree and
# fails, naming the fault, on copies of it with one fault each: an
# operation without a handler, a backend method without its cuda body, an
# operation no test names, a guest source including a server header.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
check="$src/scripts/check-spec.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

python3 "$check" "$src" >/dev/null || { echo "FAIL: the tree itself does not pass"; fail=1; }

# expect NAME MESSAGE: the check fails on $tmp/NAME and prints MESSAGE.
copy() {
  mkdir -p "$tmp/$1"
  (cd "$src" && cp -r --parents proto libs host-server/session host-server/backend guest-lib tests "$tmp/$1/")
}
expect() {
  local out
  if out=$(python3 "$check" "$tmp/$1" 2>&1); then
    echo "FAIL: $1: the check passed"; fail=1
  elif ! grep -qF -- "$2" <<<"$out"; then
    echo "FAIL: $1: no '$2' in:"; echo "$out"; fail=1
  else
    echo "ok   $1: $2"
  fi
}

copy handler
sed -i 's|^  X(RandDestroy,\(.*\)\\$|  X(RandDestroy,\1\\\n  X(RandUnwritten, Sync, {}, {}) \\|' "$tmp/handler/libs/curand/curand_api.def"
expect handler "RandUnwritten has no handler"

copy cuda
sed -i -E 's/\bErr generate\(/Err generate_elsewhere(/' "$tmp/cuda/libs/curand/cuda/cuda_rand.cpp"
expect cuda "RandGenerate calls generate, which has no cuda body"

copy untested
grep -rlE "LtTransform|cublasLtMatrixTransform" "$tmp/untested/tests" |
  xargs -r sed -i -E 's/cublasLtMatrixTransform/cublasLtMatrixXform/g; s/LtTransform/LtXform/g'
expect untested "LtTransform has no test"

copy layering
echo '#include "wormhole/server/rand.hpp"' >> "$tmp/layering/libs/curand/guest/src/curand.cpp"
expect layering "the guest includes the server's wormhole/server/rand.hpp"

exit $fail
