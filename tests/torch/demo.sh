#!/bin/bash
# make demo-torch: trains tests/torch/demo.py (PyTorch, an MLP on
# Fashion-MNIST, torch.compile) through Wormhole with the pinned PyTorch
# from PyPI (torch-env.sh builds its environment once, about 3 GB). Starts
# wormhole-server (--backend auto: the GPU if there is one, else the sim
# device), runs the script under wormhole-run, and stops the server.
# Usage: demo.sh <build-dir> [demo.py args]   (default: --epochs 2;
#        the loss plot goes to <build-dir>/torch-loss.png)
set -u
build="$(cd "$1" && pwd)"; shift
here=$(cd "$(dirname "$0")" && pwd)
env=$("$here/torch-env.sh") || exit $?
dir=$(mktemp -d /tmp/wh-torch-demo.XXXXXX)
"$build/bin/wormhole-server" --backend "${DEMO_BACKEND:-auto}" --socket "$dir/s.sock" --admin-socket off \
  >"$dir/server.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null; wait $spid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 200); do
  [ -S "$dir/s.sock" ] && break
  kill -0 $spid 2>/dev/null || { echo "demo-torch: wormhole-server did not start:" >&2; cat "$dir/server.log" >&2; exit 1; }
  sleep 0.05
done
[ $# -eq 0 ] && set -- --epochs 2
echo "== wormhole-run python tests/torch/demo.py $* --plot $build/torch-loss.png"
"$build/bin/wormhole-run" --socket "$dir/s.sock" "$env/bin/python" "$here/demo.py" "$@" --plot "$build/torch-loss.png" \
  2> >(grep -v -e Warning -e warn_once -e "will be ignored" -e cuLogsRegisterCallback -e _conversion_method_template >&2)
rc=$?
[ $rc -eq 0 ] && [ -s "$build/torch-loss.png" ] && echo "== loss plot: $build/torch-loss.png"
exit $rc
