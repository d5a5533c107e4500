# make bench-compare: Wormhole side by side with another forwarder (GVirtuS,
# or any OTHER_LIBDIR + OTHER_SERVER pair), docs/compare.md.
#   make bench-compare                         Wormhole alone (says so)
#   make bench-compare GVIRTUS_HOME=/path      Wormhole and GVirtuS, alternating
#   make bench-compare OTHER_LIBDIR=.. OTHER_SERVER="cmd" [OTHER_NAME=..]
# Knobs (environment or make variables): ROUNDS ITERS COPIES COPY_MIB ASYNC
# CLIENT_CPU SERVER_CPU COMPARE_TRAIN=1. Output: table on stdout,
# $(BUILD)/compare/{compare.txt,compare.tsv,rounds.tsv,compare.png}.
TEST_DEPS += compare
COMPARE_OUT ?= $(BUILD)/compare

.PHONY: bench-compare
bench-compare: build
	@scripts/deps.sh compare
	cmake --build $(BUILD) --target wormhole-server cudart cublas compare_bench_prog tcp_bench wh-train-legacy_prog
	tests/compare/run_compare.sh $(BUILD) $(COMPARE_OUT)
