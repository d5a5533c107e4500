# Sim device kernel engine (issue 3): benchmark and fuzzing.
PTX_FUZZ_SECONDS ?= 60

# Fixed kernel mix on one core and on all cores; the last line is the figure.
bench-ptx: build
	cmake --build $(BUILD) --target wh_bench_ptx
	@echo "== interpreted (WORMHOLE_PTX_JIT=off)"
	WORMHOLE_PTX_JIT=off $(BUILD)/bench/wh_bench_ptx $(BUILD)/tests/ptx
	@echo "== compiled (WORMHOLE_PTX_JIT=always)"
	WORMHOLE_PTX_JIT=always $(BUILD)/bench/wh_bench_ptx $(BUILD)/tests/ptx

# libFuzzer on the PTX and fatbin parsers (clang++ -fsanitize=fuzzer,address,undefined).
fuzz-ptx: build
	cmake --build $(BUILD) --target ptx_fuzz
	WH_FUZZ_SEED=$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ') tests/ptx/run_fuzz.sh cmake $(BUILD) $(BUILD)/tests/ptx/ptx_fuzzer $(BUILD)/tests/ptx tests/ptx/fuzz_corpus $(PTX_FUZZ_SECONDS)

.PHONY: fuzz-ptx
fuzz: fuzz-ptx
