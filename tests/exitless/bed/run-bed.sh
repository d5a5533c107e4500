#!/usr/bin/env bash
# The exitless test bed: Debian's 6.1 kernel in Bochs (VMX/EPT/VMFUNC
# emulated), patched kvm modules, the test VMM and guest.  Pass marker in
# the serial log.  Usage: run-bed.sh [outdir]   (default build-exitless/bed)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
OUT=${1:-$REPO/build-exitless/bed}
WH_CACHE=${WH_CACHE:-/var/cache/wormhole}
BED_TIMEOUT=${BED_TIMEOUT:-900}
T0=$(date +%s)
"$REPO/scripts/deps.sh" exitless
"$REPO/kvm-module/build-kmod.sh"
KMOD=$(readlink -f "$WH_CACHE/kmod-current")
KREL=$(modinfo -F vermagic "$KMOD/kvm.ko" | cut -d' ' -f1)
VMLINUZ=/boot/vmlinuz-$KREL
[[ -r $VMLINUZ ]] || { echo "run-bed: $VMLINUZ missing (linux-image-amd64)" >&2; exit 1; }
mkdir -p "$OUT"; cd "$OUT"

# Test VMM (static) with the gate code and the guest embedded.
"$REPO/kvm-module/gate/mkgate.sh" gate_code.h
gcc -m64 -O2 -ffreestanding -fno-pic -fno-pie -mno-red-zone -mgeneral-regs-only \
    -fno-stack-protector -nostdlib -static -no-pie -I"$REPO/kvm-module/gate" \
    -T "$HERE/guest.ld" -Wl,--build-id=none -Wl,--no-warn-rwx-segments -o guest.elf "$HERE/guest.c"
objcopy -O binary guest.elf guest.bin
gcc -O2 -Wall -Werror -static -I. -I"$REPO/kvm-module/include" -I"$REPO/kvm-module/gate" -I"$HERE" \
    -DGUEST_BIN="\"$OUT/guest.bin\"" -o wh-test-vmm "$HERE/vmm.c"

# Guest gate module (loaded in the bed only to check that it loads into
# Debian's kernel and refuses without a gate descriptor).
"$REPO/kvm-module/guest-gate/build.sh" "$OUT/gate-mod" >/dev/null

# Initramfs and GRUB ISO, rebuilt only when an input changed.
KEY=$( (sha256sum "$KMOD"/*.ko gate-mod/wormhole_gate.ko wh-test-vmm "$HERE/init.sh" "$HERE/bochsrc.in" "$VMLINUZ" /bin/busybox; echo "$KREL") | sha256sum | cut -c1-16)
ISO=$WH_CACHE/bed-iso-$KEY.iso
if [[ ! -f $ISO ]]; then
  rm -rf initrd iso; mkdir -p initrd/{bin,lib,proc,sys,dev} iso/boot/grub
  cp /bin/busybox initrd/bin/; for a in sh mount insmod cat cut grep ls tr dmesg poweroff tail echo; do ln -sf busybox initrd/bin/$a; done
  cp "/lib/modules/$KREL/kernel/virt/lib/irqbypass.ko" "$KMOD/kvm.ko" "$KMOD/kvm-intel.ko" gate-mod/wormhole_gate.ko initrd/lib/
  strip --strip-debug initrd/lib/*.ko
  cp wh-test-vmm initrd/bin/; cp "$HERE/init.sh" initrd/init; chmod +x initrd/init
  (cd initrd && find . | cpio -o -H newc --quiet) > iso/boot/initrd.img
  cp "$VMLINUZ" iso/boot/vmlinuz
  cat > iso/boot/grub/grub.cfg <<CFG
set timeout=0
set default=0
serial --unit=0 --speed=115200
terminal_output serial
menuentry wormhole-bed {
  linux /boot/vmlinuz console=ttyS0,115200 panic=-1 mitigations=off nosmp cryptomgr.notests quiet rdinit=/init
  initrd /boot/initrd.img
}
CFG
  grub-mkrescue -o "$ISO.tmp" iso >/dev/null 2>&1
  mv "$ISO.tmp" "$ISO"
fi
echo "run-bed: artefacts ready in $(( $(date +%s) - T0 )) s; booting Bochs"
rm -f serial.log bochs.log
sed -e "s|@ISO@|$ISO|" -e "s|@SERIAL@|$OUT/serial.log|" -e "s|@LOG@|$OUT/bochs.log|" "$HERE/bochsrc.in" > bed.bochsrc
printf 'c\nquit\n' > cmds
T1=$(date +%s)
set +e
timeout "$BED_TIMEOUT" bochs-bin -q -f bed.bochsrc -rc cmds </dev/null >bochs.out 2>&1
set -e
echo "run-bed: Bochs ran $(( $(date +%s) - T1 )) s"
grep -a -E '^(ok|FAIL|info)|WH-BED|WH-EXITLESS' serial.log || true
if grep -a -q 'WH-EXITLESS: PASS' serial.log && ! grep -a -q 'WH-BED: FAIL' serial.log; then
  echo "run-bed: PASS (total $(( $(date +%s) - T0 )) s)"; exit 0
fi
echo "run-bed: FAIL; last serial lines:"; tail -40 serial.log | tr -d '\r'
exit 1
