#!/bin/bash
# make bench-graph: starts a wormhole-server (sim backend) pinned to one
# core, runs bench_graph through the drop-in libcudart on another, checks
# that the server executed one GraphLaunch per graph launch the client
# posted (its statistics), and ends with the summary line.
# Usage: run_graph_bench.sh BUILD_DIR [SECONDS]
set -u
BUILD=$(cd "$1" && pwd)
SECS=${2:-10}
SERVER=$BUILD/bin/wormhole-server
BENCH=$BUILD/bench/bench_graph
CCPU=0 SCPU=1
[ "$(nproc)" -ge 2 ] || SCPU=0
SOCK=/tmp/wh-bench-graph-$$.sock
SLOG=$(mktemp /tmp/wh-bench-graph-server.XXXXXX)
trap 'rm -f "$SLOG" "$SOCK"' EXIT
taskset -c $SCPU "$SERVER" --backend sim --sim-threads 1 --socket "$SOCK" --log-level warn >"$SLOG" 2>&1 &
SPID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
if [ ! -S "$SOCK" ]; then echo "wormhole-server did not start:"; cat "$SLOG"; exit 1; fi
OUT=$(WORMHOLE_SOCKET=$SOCK LD_LIBRARY_PATH=$BUILD/guest-lib taskset -c $CCPU "$BENCH" --seconds "$SECS")
RC=$?
kill -TERM $SPID
wait $SPID
echo "$OUT" | grep -v '^bench_graph:' | grep -v '^graph_launches='
if [ $RC -ne 0 ]; then echo "bench_graph failed (exit $RC)"; cat "$SLOG"; exit 1; fi
POSTED=$(echo "$OUT" | sed -n 's/^graph_launches=//p')
EXECUTED=$(awk '$1 == "GraphLaunch" { print $2 }' "$SLOG")
# One posted GraphLaunch per cudaGraphLaunch (+1: the warm-up launch).
echo "server: executed ${EXECUTED:-0} GraphLaunch requests for $((POSTED + 1)) graph launches (wormhole-server statistics)"
if [ "${EXECUTED:-0}" != "$((POSTED + 1))" ]; then
  echo "FAIL: the server's GraphLaunch count does not match; no figure reported"
  grep -E 'Launch|total|rejected' "$SLOG"
  exit 1
fi
echo "$OUT" | grep '^bench_graph:'
