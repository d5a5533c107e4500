# The forwarding path (issue 4): benchmark and fuzzing.
FORWARD_FUZZ_SECONDS ?= 60
FORWARD_LAUNCH_SECONDS ?= 10

# Client (an nvcc -cudart shared program through the drop-in) and server as
# two processes on two cores; the last line is the figure.
bench-forward: build
	cmake --build $(BUILD) --target wormhole-server cudart fwd_bench
	tests/forward/bench/run_bench.sh $(BUILD) $(FORWARD_LAUNCH_SECONDS)

# A 100-kernel CUDA graph against the same kernels launched one by one, in one run.
FORWARD_GRAPH_SECONDS ?= 10
bench-graph: build
	cmake --build $(BUILD) --target wormhole-server cudart fwd_bench_graph
	tests/forward/bench/run_graph_bench.sh $(BUILD) $(FORWARD_GRAPH_SECONDS)

.PHONY: bench-graph

# libFuzzer on the server's request decoder and session bodies (clang++ -fsanitize=fuzzer,address,undefined).
fuzz-server: build
	cmake --build $(BUILD) --target session_fuzz
	WH_FUZZ_SEED=$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ') tests/forward/fuzz/run_fuzz.sh cmake $(BUILD) $(BUILD)/tests/forward/session_fuzzer $(BUILD)/tests/forward \
	  tests/forward/fuzz/corpus $(BUILD)/tests/forward/hostile_kernels.fatbin $(FORWARD_FUZZ_SECONDS)

.PHONY: fuzz-server
fuzz: fuzz-server
