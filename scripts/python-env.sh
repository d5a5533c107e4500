#!/bin/sh
# python-env.sh [REQUIREMENTS]: prints the path of a Python virtual
# environment holding REQUIREMENTS (default: tests/python/requirements.txt,
# every version pinned), building it first if needed. Environments live
# outside the repository, one per requirements file content and Python
# version: ${XDG_CACHE_HOME:-~/.cache}/wormhole/pyenv-<hash>, so CI and
# repeated runs reuse one and a fresh machine builds it (pip, from PyPI).
# Exit 77 (with a SKIPPED line) when it must be built and the package index
# cannot be reached; any other failure (a broken requirement) is an error.
# Pip's own settings apply (PIP_NO_DEPS=1 for a list that pins every
# dependency). Progress goes to stderr; only the path goes to stdout.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
req=${1:-$here/../tests/python/requirements.txt}
[ -r "$req" ] || { echo "python-env.sh: no $req" >&2; exit 2; }
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "python-env.sh: no $py" >&2; exit 2; }
pyver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
hash=$( { cat "$req"; echo "python $pyver"; } | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/wormhole
env=$cache/pyenv-$hash
mkdir -p "$cache"
# One builder at a time; the others wait and reuse its result.
exec 9>"$env.lock"
flock 9
if [ ! -e "$env/.complete" ]; then
  rm -rf "$env"
  echo "python-env.sh: building $env (Python $pyver, $(basename "$req"))" >&2
  start=$(date +%s)
  "$py" -m venv "$env" >&2
  if ! "$env/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >&2; then
    # No index reachable (pip's own configuration says where it is): skip;
    # reachable, the install itself failed: an error.
    if ! "$env/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
         --dest "$env/.probe" "pip" >/dev/null 2>&1; then
      rm -rf "$env"
      echo "SKIPPED: cannot build the Python environment: the package index is unreachable" >&2
      exit 77
    fi
    rm -rf "$env"
    echo "python-env.sh: pip install -r $req failed" >&2
    exit 1
  fi
  echo "python-env.sh: built in $(( $(date +%s) - start )) s" >&2
  cp "$req" "$env/requirements.txt"
  touch "$env/.complete"
fi
echo "$env"
