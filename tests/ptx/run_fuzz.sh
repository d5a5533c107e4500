#!/bin/sh
# Runs the PTX/fatbin fuzzer for a bounded time (ctest label "fuzz", make fuzz-ptx).
# Usage: run_fuzz.sh CMAKE BUILD_DIR FUZZ_BIN KERNEL_DIR SEED_DIR SECONDS
# The random seed is fixed (WH_FUZZ_SEED, default 1) so that a ctest run is
# reproducible; `make fuzz-ptx` explores with a fresh one each time.
CMAKE=$1 BUILD=$2 BIN=$3 KDIR=$4 SEEDS=$5 SECS=${6:-40}
# Always (re)build: cmake does nothing when the target is up to date, and a
# fuzzer left over from older sources reports bugs that are already fixed.
if ! command -v clang++ >/dev/null 2>&1; then
  echo "SKIPPED: clang++ not found, cannot build the libFuzzer target (scripts/deps.sh core installs it)"
  exit 77
fi
"$CMAKE" --build "$BUILD" --target ptx_fuzz || exit 1
WORK="$KDIR/fuzz_work"
mkdir -p "$WORK/corpus" "$WORK/artifacts"
cp "$SEEDS"/* "$WORK/corpus/" 2>/dev/null
for f in "$KDIR"/*.ptx "$KDIR"/*.fatbin; do [ -f "$f" ] && cp "$f" "$WORK/corpus/"; done
exec "$BIN" -seed="${WH_FUZZ_SEED:-1}" -max_total_time="$SECS" -timeout=20 -rss_limit_mb=2048 -max_len=32768 -print_final_stats=1 \
  -artifact_prefix="$WORK/artifacts/" "$WORK/corpus"
