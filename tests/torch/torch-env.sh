#!/bin/sh
# torch-env.sh: the Python environment holding PyTorch as pinned in
# requirements.txt beside this script (every dependency pinned there, so pip
# resolves nothing: PIP_NO_DEPS), built and cached by scripts/python-env.sh
# (several GB from PyPI; its path on stdout; exit 77 when the package index
# is unreachable).
here=$(cd "$(dirname "$0")" && pwd)
PIP_NO_DEPS=1 exec "$here/../../scripts/python-env.sh" "$here/requirements.txt"
