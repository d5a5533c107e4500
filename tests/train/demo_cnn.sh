#!/bin/bash
# make demo-cnn: builds wh-cnn, starts a private wormhole-server
# (--backend auto: the GPU when there is one, else the sim device), trains
# the LeNet-5-like CNN through Wormhole's libcudnn/libcublas drop-ins with a
# live progress bar, writes the loss plot (build/wh-cnn-loss.png, with
# gnuplot), then shows the server's statistics.
# Usage: demo_cnn.sh <build-dir> [wh-cnn args]   Env: DEMO_BACKEND (auto|sim|cuda)
set -eu
build="$1"; shift
here="$(cd "$(dirname "$0")" && pwd)"
cmake --build "$build" --target wh-cnn_prog wormhole-server >/dev/null
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--epochs 4)
log="$build/wh-cnn-server.log"
"$here/../blas/forwarded.sh" "$build" --backend "${DEMO_BACKEND:-auto}" --server-log "$log" -- \
  "$build/tests/train/wh-cnn" "${args[@]}" --plot "$build/wh-cnn-loss.png"
echo "--- wormhole-server statistics"
sed -n '/statistics/,$p' "$log"
