#!/bin/sh
# run.sh BUILD_DIR SCRIPT [ARGS...]: runs a Python SCRIPT with CuPy through
# Wormhole, as a user does (scripts/wormhole-run python3 SCRIPT), against a
# private wormhole-server on the sim device (tests/blas/forwarded.sh), in the
# environment cupy-env.sh builds. CuPy's kernel cache goes to a temporary
# directory. Exits with the script's status, or 77 (skipped) when the Python
# environment cannot be built for lack of network.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$1
shift
env=$("$here/cupy-env.sh") || exit $?
cache=$(mktemp -d /tmp/wh-cupy-cache-XXXXXX)
CUPY_CACHE_DIR=$cache "$src/tests/blas/forwarded.sh" "$build" -- \
  "$src/scripts/wormhole-run" --lib-dir "$build/guest-lib" "$env/bin/python" "$@"
rc=$?
rm -rf "$cache"
exit $rc
