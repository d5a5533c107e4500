#!/bin/sh
# Builds the RingReader libFuzzer target with clang (the main build may be
# g++) and runs it for a bounded time. Usage: run_fuzz.sh CLANGXX REPO OUTDIR SECONDS
set -eu
CXX=$1 REPO=$2 OUT=$3 SECS=$4
mkdir -p "$OUT/corpus"
"$CXX" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I"$REPO/shm-ring/include" \
  -I"$REPO/shm-ring/src" "$REPO/tests/ring/fuzz/fuzz_reader.cpp" "$REPO/shm-ring/src/ring.cpp" \
  -o "$OUT/fuzz_ring_reader"
# A fixed seed: the same run every time (plus whatever the corpus has learnt).
exec "$OUT/fuzz_ring_reader" -seed=1 -max_total_time="$SECS" -max_len=8192 \
  -print_final_stats=1 "$OUT/corpus"
