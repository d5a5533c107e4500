#!/bin/sh
# torch-env.sh: prints the path of a Python virtual environment holding
# PyTorch as pinned in requirements.txt beside this script, building it
# first if needed (pip, from PyPI; several GB). It lives outside the
# repository, one per requirements content and Python version:
# ${XDG_CACHE_HOME:-~/.cache}/wormhole/torch-venv-<hash>.
# Exit status 3: the environment could not be built (no network, no pip);
# callers that are tests turn that into a skip.
# Progress goes to stderr; only the path goes to stdout.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
req=$here/requirements.txt
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "torch-env.sh: no $py" >&2; exit 3; }
pyver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
hash=$( { cat "$req"; echo "python $pyver"; } | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/wormhole
env=$cache/torch-venv-$hash
mkdir -p "$cache"
# One builder at a time; the others wait and reuse its result.
exec 9>"$env.lock"
flock 9
if [ ! -e "$env/.complete" ]; then
  rm -rf "$env"
  echo "torch-env.sh: building $env (Python $pyver)" >&2
  start=$(date +%s)
  if ! "$py" -m venv "$env" >&2 ||
     ! "$env/bin/python" -m pip install --quiet --disable-pip-version-check \
         --no-deps -r "$req" >&2; then
    echo "torch-env.sh: could not build $env (network? pip?)" >&2
    rm -rf "$env"
    exit 3
  fi
  echo "torch-env.sh: built in $(( $(date +%s) - start )) s" >&2
  cp "$req" "$env/requirements.txt"
  touch "$env/.complete"
fi
echo "$env"
