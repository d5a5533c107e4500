#!/bin/sh
# Runs the session fuzzer for a bounded time (ctest label "fuzz", make fuzz-server).
# Usage: run_fuzz.sh CMAKE BUILD_DIR FUZZ_BIN WORK_DIR SEED_DIR FATBIN SECONDS
CMAKE=$1 BUILD=$2 BIN=$3 WDIR=$4 SEEDS=$5 FATBIN=$6 SECS=${7:-40}
# Always (re)build: cmake does nothing when the target is up to date, and a
# fuzzer left over from older sources reports bugs that are already fixed.
if ! command -v clang++ >/dev/null 2>&1; then
  echo "SKIPPED: clang++ not found, cannot build the libFuzzer target (scripts/deps.sh core installs it)"
  exit 77
fi
"$CMAKE" --build "$BUILD" --target session_fuzz || exit 1
WORK="$WDIR/session_fuzz_work"
mkdir -p "$WORK/corpus" "$WORK/artifacts"
cp "$SEEDS"/* "$WORK/corpus/" 2>/dev/null
export WH_FUZZ_FATBIN="$FATBIN"
# A fixed seed (WH_FUZZ_SEED, default 1): a ctest run is reproducible;
# `make fuzz-server` explores with a fresh one each time.
exec "$BIN" -seed="${WH_FUZZ_SEED:-1}" -max_total_time="$SECS" -timeout=20 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
  -artifact_prefix="$WORK/artifacts/" "$WORK/corpus"
