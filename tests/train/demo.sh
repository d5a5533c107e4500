#!/bin/bash
# make demo: train an MLP on Fashion-MNIST through Wormhole.
# Starts wormhole-server (--backend auto: the GPU if there is one, else the
# sim device), runs wh-train through the drop-in libcudart/libcublas with its
# progress, and ends with the test accuracy and the server's forwarding
# statistics. Stops the server it started.
# Usage: demo.sh <build-dir> [wh-train args]   (env DEMO_BACKEND=auto|sim|cuda)
set -u
build="$(cd "$1" && pwd)"; shift
backend="${DEMO_BACKEND:-auto}"
prog="$build/tests/train/wh-train"
server="$build/bin/wormhole-server"
for f in "$prog" "$server" "$build/guest-lib/libcudart.so.13" "$build/guest-lib/libcublas.so.13"; do
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

# Default length: 2 epochs on the sim device (about a minute on 2 cores),
# 10 on a GPU.
if [ $# -eq 0 ]; then
  if [ "$used" = sim ]; then set -- --epochs 2 --batch 128; else set -- --epochs 10 --batch 128; fi
fi
bold "== WORMHOLE_SOCKET=$sock LD_LIBRARY_PATH=$build/guest-lib wh-train $*"
out="$(mktemp /tmp/wormhole-demo-out-XXXXXX)"
WORMHOLE_SOCKET="$sock" LD_LIBRARY_PATH="$build/guest-lib" "$prog" "$@" | tee "$out"
rc=${PIPESTATUS[0]}
acc=$(sed -n 's/^final test_acc=\([0-9.]*%\).*/\1/p' "$out")
ips=$(sed -n 's/.*images_per_s=\([0-9]*\).*/\1/p' "$out")
rm -f "$out"
stop_server
echo
if [ "$rc" -eq 0 ]; then
  bold "== wh-train finished through Wormhole ($used backend): test accuracy ${acc:-?}, ${ips:-?} images/s"
else
  bold "== wh-train FAILED (exit $rc)"
fi
bold "== wormhole-server forwarding statistics (calls by kind, mean service time, bytes moved):"
sed -n '/^wormhole-server statistics/,$p' "$slog" | tail -n +2
exit "$rc"
