#!/bin/bash
# make bench-graph: bench_graph through the drop-in libcudart against a
# wormhole-server on another core; checks that the server executed one
# GraphLaunch per graph launch the client posted (its statistics), and ends
# with the summary line.
# Usage: run_graph_bench.sh BUILD_DIR [SECONDS]
. "$(dirname "$0")/bench_server.sh"
bench_run bench_graph --seconds "$SECS"
echo "$OUT" | grep -v '^bench_graph:' | grep -v '^graph_launches='
# One posted GraphLaunch per cudaGraphLaunch (+1: the warm-up launch).
POSTED=$(echo "$OUT" | sed -n 's/^graph_launches=//p')
bench_check_count GraphLaunch "$((POSTED + 1))" "graph launches"
echo "$OUT" | grep '^bench_graph:'
