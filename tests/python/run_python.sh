#!/bin/bash
# run_python.sh <build-dir> SCRIPT [ARGS...]: runs a Python script the way a
# user runs Numba on Wormhole (wormhole-run python3 ...), in the pinned
# environment of tests/python/requirements.txt (scripts/python-env.sh builds
# it once, from PyPI), against a private sim-device server
# (tests/blas/forwarded.sh). Exits 77 (skipped) when the environment cannot
# be built (no PyPI). WH_PY_REQUIREMENTS names another requirements file.
set -u
build=$(cd "$1" && pwd); shift
src=$(cd "$(dirname "$0")/../.." && pwd)
venv=$("$src/scripts/python-env.sh" ${WH_PY_REQUIREMENTS:-}) || exit $?  # 77: no package index (skip); else an error
exec "$src/tests/blas/forwarded.sh" "$build" --backend sim -- "$build/bin/wormhole-run" "$venv/bin/python" "$@"
