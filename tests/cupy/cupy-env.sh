#!/bin/sh
# cupy-env.sh [REQUIREMENTS]: the Python environment of CuPy's test
# (default: requirements.txt beside this script), built and cached by
# scripts/python-env.sh (its path on stdout; exit 77 when the package index
# is unreachable).
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../scripts/python-env.sh" "${1:-$here/requirements.txt}"
