# Sourced by run_bench.sh and run_graph_bench.sh: runs one bench program
# through the drop-in libcudart against a wormhole-server (sim backend),
# the two pinned to different cores, and checks the count the server
# executed of one opcode against what the client says it posted.
# bench_run NAME BENCH_ARGS...  -> $OUT (the bench's output), $SLOG (the
#   server's output, with its statistics), exits on failure.
# bench_check_count OPCODE EXPECTED WHAT
set -u
BUILD=$(cd "$1" && pwd)
SECS=${2:-10}
SERVER=$BUILD/bin/wormhole-server
CCPU=0 SCPU=1
[ "$(nproc)" -ge 2 ] || SCPU=0

bench_run() {
  local name=$1
  shift
  SOCK=/tmp/wh-$name-$$.sock
  SLOG=$(mktemp /tmp/wh-$name-server.XXXXXX)
  trap 'rm -f "$SLOG" "$SOCK"' EXIT
  taskset -c $SCPU "$SERVER" --backend sim --sim-threads 1 --socket "$SOCK" --log-level warn >"$SLOG" 2>&1 &
  local spid=$!
  for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
  if [ ! -S "$SOCK" ]; then echo "wormhole-server did not start:"; cat "$SLOG"; exit 1; fi
  OUT=$(WORMHOLE_SOCKET=$SOCK LD_LIBRARY_PATH=$BUILD/guest-lib taskset -c $CCPU "$BUILD/bench/$name" "$@")
  local rc=$?
  kill -TERM $spid
  wait $spid
  if [ $rc -ne 0 ]; then echo "$OUT"; echo "$name failed (exit $rc)"; cat "$SLOG"; exit 1; fi
}

bench_check_count() {
  local op=$1 expected=$2 what=$3
  local executed
  executed=$(awk -v op="$op" '$1 == op { print $2 }' "$SLOG")
  echo "server: executed ${executed:-0} $op requests for $expected $what (wormhole-server statistics)"
  if [ "${executed:-0}" != "$expected" ]; then
    echo "FAIL: the server's $op count does not match; no figure reported"
    grep -E 'Launch|total|rejected' "$SLOG"
    exit 1
  fi
}
