# make test-gpu: only meaningful on a machine with an NVIDIA GPU and driver
# (CI has none). Results go into docs/hardware.md by hand, with the date.
.PHONY: test-gpu
test-gpu: build
	tests/gpu/run.sh $(BUILD)
