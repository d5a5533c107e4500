# Wormhole exitless switch (issue 7): kvm modules, patched QEMU, Bochs bed.
.PHONY: kmod qemu test-exitless

# kvm.ko + kvm-intel.ko from Debian's linux-source-6.1 + kvm-module/patches
kmod:
	@kvm-module/build-kmod.sh

# qemu-system-x86_64 from Debian's qemu 7.2 source + qemu-patches
qemu:
	@qemu-patches/build-qemu.sh

# Debian 6.1 in Bochs (VMX/EPT/VMFUNC emulation) + patched KVM + test VMM
test-exitless: kmod
	@tests/exitless/bed/run-bed.sh

# The whole chain under Bochs: L1 Linux with the patched KVM, the patched QEMU
# and wormhole-server; L2 Linux with wormhole_gate.ko running unmodified nvcc
# programs over the vmfunc transport, plus exit and instruction counts.
# Long (about 4-8 minutes, docs/exitless.md); `make test` runs it too (exitless.chain_e2e).
EXITLESS_E2E_TARGETS := wormhole-server cudart exitless_gate_client
.PHONY: test-exitless-e2e
test-exitless-e2e: kmod qemu deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target $(EXITLESS_E2E_TARGETS)
	cd $(BUILD) && ctest --output-on-failure -R '^exitless\.chain_e2e$$' $(CTEST_ARGS)
