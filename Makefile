# Wormhole: the two commands a newcomer needs are `make demo` and `make test`.
# Every target installs the Debian packages it needs (scripts/deps.sh) first.
BUILD   ?= build
JOBS    ?= $(shell nproc)
GEN     := -G Ninja
CMAKE_ARGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
CTEST_ARGS ?=

.PHONY: all deps build test test-stacked bench-stacked test-unit test-asan test-tsan test-gpu demo clean compat \
        soak bench-report bench-ring bench-migrate ring-placement ring-critpath bench-ptx bench-forward bench-remote bench-train bench-torch bench-vm kmod qemu test-exitless fuzz

all: build

deps:
	@scripts/deps.sh core

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) $(GEN) $(CMAKE_ARGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The whole suite: unit tests, forwarded programs, fuzzers (bounded), VMs, exitless bed.
# (gdb: ring.critpath_budget single-steps the ring's round trip.)
# Then the skipped tests with their reasons; a skip of a test named in
# tests/must-not-skip.txt fails (scripts/skipped-tests.py).
TEST_DEPS += debug server-test
test: build
	@scripts/deps.sh $(TEST_DEPS)
	@rm -f $(BUILD)/junit.xml
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --output-junit junit.xml $(CTEST_ARGS); rc=$$?; \
	  cd $(CURDIR) && scripts/skipped-tests.py $(BUILD)/junit.xml tests/must-not-skip.txt || rc=1; exit $$rc

# Every forwarded suite through the cuda backend, stacked over Wormhole's own
# driver onto the sim device (docs/hardware.md); part of `make test` too.
test-stacked: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L stacked $(CTEST_ARGS)

# The stacked pair's cost per call: the null call through it vs the sim server alone.
bench-stacked: build
	tests/forward/bench/stacked_overhead.sh $(BUILD) 5

test-unit: build
	@scripts/deps.sh server-test
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE 'vm|exitless|slow' $(CTEST_ARGS)

# The same suites under sanitizers (VM and emulator beds are not instrumented;
# the stacked pair would load the instrumented drop-ins into the server).
test-asan:
	$(MAKE) build BUILD=build-asan CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Debug -DWH_SANITIZE=address,undefined"
	cd build-asan && ctest --output-on-failure -j $(JOBS) -LE 'vm|exitless|bench|stacked' $(CTEST_ARGS)

test-tsan:
	$(MAKE) build BUILD=build-tsan CMAKE_ARGS="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DWH_SANITIZE=thread"
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j $(JOBS) -LE 'vm|exitless|bench|stacked' $(CTEST_ARGS)

# Clients killed at random under a verifying client, then the server killed
# under blocked clients (tests/server/soak.sh; 20 s of it runs in make test).
SOAK_SECONDS ?= 600
soak: build
	tests/server/soak.sh $(BUILD) $(SOAK_SECONDS)

# Every benchmark in one go: summary lines in build/bench/report.txt, plots
# build/bench/latency.png and bandwidth.png (docs/benchmarks.md).
BENCH_SUITES ?= ring forward graph ptx train
bench-report: build
	@scripts/deps.sh bench
	@scripts/bench_report.sh $(BUILD) $(BENCH_SUITES)

# ucx:// between two network namespaces (root): null call, 64 MiB copies and
# posted launches against a raw TCP ping-pong and bulk transfer measured in
# the same run; the summary line in build/bench/remote.txt (docs/remote.md).
bench-remote: build
	WH_BENCH_OUT=$(BUILD)/bench/remote.txt tests/remote/remote_netns.sh $(BUILD) bench

bench-ring: build
	$(BUILD)/bench/wh_bench_ring --json $(BUILD)/bench/ring.json

# Live migration between two local sim servers: pause, checkpoint size and
# step time for sessions of 64 MiB .. 2 GiB (docs/migration.md).
MIGRATE_MIB ?= 64 256 1024 2048
bench-migrate: build
	tests/server/bench_migrate.sh $(BUILD) $(MIGRATE_MIB)

# Which placement the two vCPUs are in: SMT siblings or two cores (60 s).
ring-placement: build
	$(BUILD)/bench/wh_ring_placement --seconds 60

# Instructions on the ring round trip's critical path (deterministic).
ring-critpath:
	tests/ring/bench/critpath/critpath.sh

clean:
	rm -rf build build-asan build-tsan

-include mk/*.mk

# Rewrites docs/compatibility.md from the built drop-ins (scripts/gen_compat.sh).
compat: build
	cp $(BUILD)/docs/compatibility.md docs/compatibility.md
