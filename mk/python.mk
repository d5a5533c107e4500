# Numba on Wormhole (docs/python.md): Numba's whole CUDA test suite (not in
# CI: about 20 minutes on two cores; CI runs the ctest label `python`), and
# the launch-cost benchmark.
PYTHON_FULL_JOBS ?= 1
PYTHON_BENCH_SECONDS ?= 5

# Every module of numba.cuda.tests.cudapy and .cudadrv, the exclusions run
# too (an excluded test that passes fails the target); counts at the end,
# per-module logs and a JSON summary in $(BUILD)/python-full/.
test-python-full: build
	tests/python/run_python.sh $(BUILD) tests/python/numba_suite.py --all --check-excluded \
	  --exclude tests/python/numba_excluded.txt --jobs $(PYTHON_FULL_JOBS) \
	  --logs $(BUILD)/python-full --json $(BUILD)/python-full/summary.json

# kernel[4, 32](a, b, c) launches/s against the forwarded null call.
bench-numba: build
	cmake --build $(BUILD) --target wormhole-server cudart cuda_dropin nvjitlink fwd_bench
	tests/python/bench_numba.sh $(BUILD) $(PYTHON_BENCH_SECONDS)

.PHONY: test-python-full bench-numba
