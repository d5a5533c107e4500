# Guests under QEMU (issue 6): image, interactive shell, tests, benchmark.
# Included by the top Makefile. Images go to $(BUILD)/vm/, never the source tree.
TEST_DEPS += vm

VM_IMAGE    ?= $(BUILD)/vm/image
VM_MANIFEST := $(BUILD)/vm/guest.manifest
VM_TOOL     := $(BUILD)/guest-lib/ivshmem/wh-ivshmem
VM_SHM      ?= /dev/shm/wormhole-shell
VM_SHM_MB   ?= 512

.PHONY: vm-deps guest-image vm-shell test-vm bench-vm

vm-deps:
	@scripts/deps.sh vm

# The guest: Debian kernel + busybox initramfs + what tests/vm/CMakeLists.txt
# lists (wh-ivshmem, job scripts; later guest-lib and the CUDA test programs).
guest-image: build vm-deps
	vm/guest/build-image.sh --out $(VM_IMAGE) --manifest $(VM_MANIFEST)

# A shell in a guest whose ivshmem BAR is backed by $(VM_SHM) (Ctrl-A X quits).
vm-shell: guest-image
	vm/launch.sh --image $(VM_IMAGE) --name shell --shm $(VM_SHM):$(VM_SHM_MB) --interactive

# Only the VM tests (make test runs them too).
test-vm: build vm-deps
	cd $(BUILD) && ctest --output-on-failure -L vm $(CTEST_ARGS)

# The forwarded null call (cudaMemGetInfo through the shim, over ivshmem)
# from inside a guest vs from a host process over the same transport (the
# host client maps the region file directly). Last line:
#   vm_null_call_rtt_p50_ns=<n> host_null_call_rtt_p50_ns=<m> accel=<tcg|kvm>
# WORMHOLE_ACCEL=kvm to force KVM.
VM_BENCH_SERVER = $(abspath $(BUILD))/bin/wormhole-server --backend sim --no-stats --vm-channels 1 --pinned-mb 8 \
  --socket $(abspath $(BUILD))/vm/bench.sock $$WH_SERVER_VM_ARGS
bench-vm: guest-image
	@mkdir -p $(BUILD)/vm
	@vm/bench-vm.sh --image $(VM_IMAGE) --tool $(VM_TOOL) --workdir $(BUILD)/vm/bench --shm-size 64 \
	  --host-peer '$(VM_BENCH_SERVER)' --guest-bench 'null_call 20000' \
	  --host-bench 'WORMHOLE_DEVICE=$$WH_SHM_bench LD_LIBRARY_PATH=$(abspath $(BUILD))/guest-lib $(abspath $(BUILD))/tests/forward/programs/null_call 20000' \
	  2>$(BUILD)/vm/bench.log || { cat $(BUILD)/vm/bench.log; exit 1; }
