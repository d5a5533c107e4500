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
