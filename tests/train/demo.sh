#!/bin/bash
# make demo (the CNN) and make demo-mlp: train a model on Fashion-MNIST
# through Wormhole. Starts wormhole-server (--backend auto: the GPU if there
# is one, else the sim device), runs the training program through the
# drop-in libraries with its progress bar, and ends with the test accuracy,
# the loss plot and the server's forwarding statistics. Stops the server it
# started.
#   cnn: wh-cnn, a LeNet-5-like CNN (cuDNN + cuBLAS), 4 epochs by default;
#        loss plot build/wh-cnn-loss.png
#   mlp: wh-train, an MLP (cuBLAS), 2 epochs on the sim device, 10 on a GPU
# Usage: demo.sh <build-dir> cnn|mlp [program args]   (env DEMO_BACKEND=auto|sim|cuda)
set -u
build="$(cd "$1" && pwd)"; model="${2:-cnn}"; shift 2 2>/dev/null || shift $#
backend="${DEMO_BACKEND:-auto}"
server="$build/bin/wormhole-server"
case $model in
  cnn) prog="$build/tests/train/wh-cnn"; name=wh-cnn; libs="libcudart.so.13 libcublas.so.13 libcudnn.so.9"
       what="a LeNet-5-like CNN (cuDNN + cuBLAS)"; plot="$build/wh-cnn-loss.png" ;;
  mlp) prog="$build/tests/train/wh-train"; name=wh-train; libs="libcudart.so.13 libcublas.so.13"
       what="an MLP (cuBLAS)"; plot="" ;;
  *) echo "usage: demo.sh <build-dir> cnn|mlp [args]" >&2; exit 2 ;;
esac
for f in "$prog" "$server" $(printf "$build/guest-lib/%s " $libs); do
  [ -e "$f" ] || { echo "demo: $f missing: run 'make build' first" >&2; exit 2; }
done
sock="/tmp/wormhole-demo-$$.sock"
slog="$(mktemp /tmp/wormhole-demo-server-XXXXXX.log)"
bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }

bold "== starting wormhole-server --backend $backend"
"$server" --backend "$backend" --socket "$sock" --log-level info >"$slog" 2>&1 &
spid=$!
stop_server() {
  if [ -n "${spid:-}" ] && kill -0 "$spid" 2>/dev/null; then
    kill -TERM "$spid"
    for _ in $(seq 1 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
  fi
  spid=""
  rm -f "$sock"
}
trap 'stop_server; rm -f "$slog"' EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 200); do
  [ -S "$sock" ] && break
  kill -0 "$spid" 2>/dev/null || { echo "demo: wormhole-server did not start:" >&2; cat "$slog" >&2; exit 1; }
  sleep 0.05
done
if grep -q "using the sim backend" "$slog" || [ "$backend" = sim ]; then used=sim; else used=cuda; fi
grep -v "^wormhole-server statistics" "$slog" | sed 's/^/   server: /'
bold "== backend: $used   (socket $sock, server pid $spid)"

# Default length: the CNN 4 epochs (89.5% on the sim device, about a minute
# on 2 cores); the MLP 2 epochs on the sim device, 10 on a GPU.
if [ $# -eq 0 ]; then
  case $model/$used in
    cnn/*) set -- --epochs 4 ;;
    mlp/sim) set -- --epochs 2 --batch 128 ;;
    mlp/*) set -- --epochs 10 --batch 128 ;;
  esac
fi
[ -n "$plot" ] && { rm -f "$plot"; set -- "$@" --plot "$plot"; }
bold "== training $what on Fashion-MNIST through Wormhole"
bold "== WORMHOLE_SOCKET=$sock LD_LIBRARY_PATH=$build/guest-lib $name $*"
out="$(mktemp /tmp/wormhole-demo-out-XXXXXX)"
# (WH_PRELOAD: a sanitizer runtime that instrumented drop-ins need first)
WORMHOLE_SOCKET="$sock" LD_LIBRARY_PATH="$build/guest-lib" env ${WH_PRELOAD:+LD_PRELOAD="$WH_PRELOAD"} "$prog" "$@" | tee "$out"
rc=${PIPESTATUS[0]}
acc=$(sed -n 's/^final test_acc=\([0-9.]*%\).*/\1/p' "$out")
ips=$(sed -n 's/.*images_per_s=\([0-9]*\).*/\1/p' "$out")
rm -f "$out"
stop_server
echo
if [ "$rc" -eq 0 ]; then
  bold "== $name finished through Wormhole ($used backend): test accuracy ${acc:-?}, ${ips:-?} images/s"
  [ -n "$plot" ] && [ -s "$plot" ] && bold "== loss plot: $plot"
else
  bold "== $name FAILED (exit $rc)"
fi
bold "== wormhole-server forwarding statistics (calls by kind, mean service time, bytes moved, kernels):"
sed -n '/^wormhole-server statistics/,$p' "$slog" | tail -n +2
exit "$rc"
