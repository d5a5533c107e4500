#!/usr/bin/env bash
# The exitless chain bed, end to end under Bochs's emulation of VMX/EPT/VMFUNC:
#   Bochs 2.7 (2 CPUs) -> L1 = Debian 6.1 vmlinux (started through its PVH
#   entry by pvhboot, a multiboot loader on a GRUB ISO) with the patched
#   kvm-intel, the patched QEMU and wormhole-server (sim backend)
#   -> L2 = Debian 6.1 vmlinux started by that QEMU with -accel kvm, the
#   wormhole-gate object and an ivshmem region; wormhole_gate.ko, then
#   unmodified nvcc programs over the vmfunc transport, then the threat-model
#   checks (a hostile process beside gate_client, a hostile kernel module:
#   hostile.c, hostile_kmod.c, threat-check.py), then measurements, and last
#   the gate's store redirected onto a read-only view page (ends the VM).
# Usage: run-chain.sh [--build DIR] [--out DIR]
# Needs a build tree with wormhole-server, libcudart.so.13 and gate_client
# (cmake --build DIR --target wormhole-server cudart exitless_gate_client). Pass marker: "chain: PASS".
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
EX=$(cd "$HERE/.." && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
BUILD=$REPO/build OUT=$REPO/build-exitless/chain
while (($#)); do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--out DIR]" >&2; exit 2 ;;
  esac
done
WH_CACHE=${WH_CACHE:-/var/cache/wormhole}
CHAIN_TIMEOUT=${CHAIN_TIMEOUT:-1500}
MEGS=${CHAIN_MEGS:-1024}
T0=$(date +%s)
BUILD=$(realpath "$BUILD"); mkdir -p "$OUT"; OUT=$(realpath "$OUT")
SERVER=$BUILD/bin/wormhole-server CUDART=$BUILD/guest-lib/libcudart.so.13
GC=$BUILD/tests/exitless/programs/gate_client
for f in "$SERVER" "$CUDART" "$GC"; do [[ -f $f ]] || { echo "chain: missing $f (build it first)" >&2; exit 1; }; done
"$REPO/scripts/deps.sh" exitless >/dev/null
"$REPO/scripts/deps.sh" vm >/dev/null
"$REPO/kvm-module/build-kmod.sh" >/dev/null
"$REPO/qemu-patches/build-qemu.sh" >/dev/null
KMOD=$(readlink -f "$WH_CACHE/kmod-current")
KREL=$(modinfo -F vermagic "$KMOD/kvm.ko" | cut -d' ' -f1)
Q=$(readlink -f "$WH_CACHE/qemu-current/qemu-system-x86_64")
cd "$OUT"
rm -rf bin fw; mkdir -p bin fw
gcc -m32 -O2 -ffreestanding -fno-pic -fno-pie -fno-stack-protector -nostdlib -static -no-pie -Wall -Werror \
    -T "$HERE/pvhboot.ld" -Wl,--build-id=none -Wl,--no-warn-rwx-segments -Wa,--noexecstack \
    -o bin/pvhboot.elf "$HERE/pvhboot_start.S" "$HERE/pvhboot.c"
gcc -O2 -Wall -Werror -static -o bin/exitpath "$HERE/exitpath.c"
gcc -O2 -Wall -Werror -static -o bin/rdtsc "$HERE/rdtsc.c"
gcc -O2 -Wall -Werror -static -o bin/e9tee "$HERE/e9tee.c"
# The threat-model checks: a hostile L2 process and a hostile L2 kernel module.
gcc -O2 -Wall -Werror -static -I "$REPO/kvm-module/gate" -I "$REPO/kvm-module/guest-gate" \
    -I "$REPO/shm-ring/include" -o bin/hostile "$HERE/hostile.c"
rm -rf hostile-kmod; mkdir -p hostile-kmod
cp "$HERE/hostile_kmod.c" hostile-kmod/wh_hostile.c; cp "$REPO/kvm-module/gate/wh_gate.h" hostile-kmod/
echo 'obj-m += wh_hostile.o' > hostile-kmod/Makefile
make -s -C "/usr/src/linux-headers-$KREL" M="$OUT/hostile-kmod" modules >/dev/null
strip -o bin/qemu-system-x86_64 "$Q"
strip -o bin/wormhole-server "$SERVER"
"$REPO/kvm-module/guest-gate/build.sh" "$OUT/gate-mod" >/dev/null
for f in pvh.bin linuxboot_dma.bin kvmvapic.bin; do cp /usr/share/qemu/$f fw/; done
cp /usr/share/seabios/bios-256k.bin fw/
export WH_QUIET=1
"$REPO/vm/guest/build-image.sh" --out "$OUT/l2" --compress none --kernel-version "$KREL" \
  --lib "$CUDART" --bin "$GC" --bin bin/exitpath --bin bin/hostile \
  --file "$OUT/gate-mod/wormhole_gate.ko:/wh/wormhole_gate.ko" \
  --file "$OUT/hostile-kmod/wh_hostile.ko:/wh/wh_hostile.ko" --job "$EX/jobs/chain-l2.sh"
"$REPO/vm/guest/build-image.sh" --out "$OUT/l1" --compress none --kernel-version "$KREL" \
  --bin bin/qemu-system-x86_64 --bin bin/wormhole-server --bin bin/rdtsc:/wh/rdtsc --bin bin/e9tee:/wh/e9tee \
  --file "/lib/modules/$KREL/kernel/virt/lib/irqbypass.ko:/wh/kmod/irqbypass.ko" \
  --file "$KMOD/kvm.ko:/wh/kmod/kvm.ko" --file "$KMOD/kvm-intel.ko:/wh/kmod/kvm-intel.ko" \
  --file "$OUT/fw:/wh/qemu-fw" --file "$OUT/l2/vmlinux:/wh/l2/vmlinux" \
  --file "$OUT/l2/initramfs.cpio:/wh/l2/initramfs.cpio" --job "$EX/jobs/chain-l1.sh"
[[ -f $OUT/l1/vmlinux ]] || { echo "chain: no PVH vmlinux for $KREL" >&2; exit 1; }
strip --strip-debug "$OUT"/l1/root/wh/kmod/*.ko 2>/dev/null || true
# ISO keyed by its inputs (cached: GRUB's mkrescue is not free).
KEY=$( (sha256sum bin/pvhboot.elf l1/vmlinux l1/initramfs.cpio; echo "$MEGS") | sha256sum | cut -c1-16)
ISO=$WH_CACHE/chain-iso-$KEY.iso
if [[ ! -f $ISO ]]; then
  rm -rf iso; mkdir -p iso/boot/grub
  cp bin/pvhboot.elf iso/boot/; ln l1/vmlinux iso/boot/vmlinux 2>/dev/null || cp l1/vmlinux iso/boot/
  ln l1/initramfs.cpio iso/boot/initrd.img 2>/dev/null || cp l1/initramfs.cpio iso/boot/initrd.img
  cat > iso/boot/grub/grub.cfg <<CFG
set timeout=0
set default=0
serial --unit=0 --speed=115200
terminal_output serial
menuentry wormhole-chain {
  multiboot /boot/pvhboot.elf console=ttyS0,115200 panic=-1 mitigations=off cryptomgr.notests tsc=reliable rdinit=/init wh.job=chain-l1 wh.name=l1
  module /boot/vmlinux
  module /boot/initrd.img
}
CFG
  grub-mkrescue -o "$ISO.tmp" iso >/dev/null 2>&1
  rm -rf iso
  mv "$ISO.tmp" "$ISO"
fi
echo "chain: artefacts ready in $(( $(date +%s) - T0 )) s (L1 initramfs $(du -m l1/initramfs.cpio | cut -f1) MiB, L2 initramfs $(du -m l2/initramfs.cpio | cut -f1) MiB); booting Bochs"
rm -f serial.log bochs.log
sed -e "s|@ISO@|$ISO|" -e "s|@SERIAL@|$OUT/serial.log|" -e "s|@LOG@|$OUT/bochs.log|" -e "s|@MEGS@|$MEGS|" \
  "$HERE/bochsrc.in" > chain.bochsrc
printf 'c\nquit\n' > cmds
T1=$(date +%s)
set +e
timeout "$CHAIN_TIMEOUT" bochs-bin -q -f chain.bochsrc -rc cmds </dev/null >bochs.out 2>&1
set -e
echo "chain: Bochs ran $(( $(date +%s) - T1 )) s"
cat serial.log bochs.out | tr -d '\r' > console.log
grep -a -E 'WH-RESULT|WH-EXITS|WH-BOOT|WH-DONE|^L1:|p50|gate:|\[server\].*(gate|calls)' console.log || true
echo "chain: KVM exits per call in L1 (debugfs, the difference of two run lengths):"
python3 "$HERE/exits-table.py" console.log | tee exits-table.md
fail=0
for r in kvm_modules gate_module gate_client gate_client_transport; do
  grep -a -q "WH-RESULT $r PASS" console.log || { echo "chain: missing PASS for $r"; fail=1; }
done
grep -a 'WH-RESULT' console.log | grep -a -q FAIL && fail=1
echo "chain: threat model (docs/exitless.md):"
grep -a -E 'WH-GATESTATS|WH-TRACE|hostile: expect' console.log || true
python3 "$HERE/threat-check.py" console.log | tee threat.txt; ((PIPESTATUS[0] == 0)) || fail=1
if ((fail == 0)); then echo "chain: PASS (total $(( $(date +%s) - T0 )) s)"; exit 0; fi
echo "chain: FAIL; last serial lines:"; tail -60 console.log
exit 1
