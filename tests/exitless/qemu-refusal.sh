#!/usr/bin/env bash
# Checks of the patched QEMU (make qemu) on a kernel WITHOUT the Wormhole KVM
# capability (any stock kernel, e.g. this machine's):
#  1. -accel kvm + -object wormhole-gate: QEMU refuses to start with a clear
#     message naming KVM_CAP_WORMHOLE_VIEWS (skipped when /dev/kvm is absent)
#  2. -accel tcg + -object wormhole-gate + ivshmem-plain on the same memdev:
#     QEMU warns, the Debian 6.1 guest boots and reads the host's marker
#     through the ivshmem BAR (the fallback path).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WH_CACHE=${WH_CACHE:-/var/cache/wormhole}
"$REPO/scripts/deps.sh" vm
"$REPO/qemu-patches/build-qemu.sh" >/dev/null
Q=$WH_CACHE/qemu-current/qemu-system-x86_64
OUT=$REPO/build-exitless/qemu-refusal; rm -rf "$OUT"; mkdir -p "$OUT"; cd "$OUT"
SHM=/dev/shm/wh-refusal-$$; trap 'rm -f "$SHM"' EXIT
truncate -s 1M "$SHM"
MEM=(-object memory-backend-file,id=wh,share=on,mem-path=$SHM,size=1M)
fail=0

if [[ -r /dev/kvm && -w /dev/kvm ]]; then
  set +e
  timeout 60 "$Q" -accel kvm -machine pc -m 64 -display none -S -L /usr/share/qemu \
    "${MEM[@]}" -object wormhole-gate,id=gate0,memdev=wh >kvm.out 2>&1
  rc=$?; set -e
  if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q 'KVM_CAP_WORMHOLE_VIEWS' kvm.out; then
    echo "ok   refusal on KVM without the capability (rc $rc): $(grep -m1 wormhole-gate kvm.out)"
  else
    echo "FAIL expected a clear refusal, rc $rc:"; cat kvm.out; fail=1
  fi
else
  echo "skip refusal check: no usable /dev/kvm"
fi

# TCG boot with the option configured: ivshmem path.
KREL=$(ls /boot | sed -n 's/^vmlinuz-\(6\.1\..*-amd64\)$/\1/p' | sort -V | tail -1)
mkdir -p initrd/bin initrd/proc initrd/sys initrd/dev
cp /bin/busybox initrd/bin/
cat > initrd/init <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys
for d in /sys/bus/pci/devices/*; do
  if [ "$(cat $d/vendor)" = 0x1af4 ] && [ "$(cat $d/device)" = 0x1110 ]; then
    bar=$(sed -n 3p $d/resource | cut -d' ' -f1)
    echo "WH-TCG: ivshmem at $d bar2 $bar word $(devmem $bar 32)"
  fi
done
poweroff -f
INIT
chmod +x initrd/init
(cd initrd && find . | cpio -o -H newc --quiet) > initrd.img
printf '\x57\x48\x4f\x4b' | dd of="$SHM" conv=notrunc status=none   # "WHOK" = 0x4B4F4857
set +e
timeout 120 "$Q" -accel tcg -machine pc -m 256 -display none -serial stdio -no-reboot -L /usr/share/qemu \
  -kernel "/boot/vmlinuz-$KREL" -initrd initrd.img -append "console=ttyS0 quiet panic=-1" \
  "${MEM[@]}" -device ivshmem-plain,memdev=wh -object wormhole-gate,id=gate0,memdev=wh >tcg.out 2>&1
rc=$?; set -e
if grep -q 'accelerator is not KVM' tcg.out && grep -q 'WH-TCG: ivshmem .* word 0x4B4F4857' tcg.out; then
  echo "ok   TCG guest with -object wormhole-gate boots and uses ivshmem: $(grep -m1 WH-TCG tcg.out | tr -d '\r')"
else
  echo "FAIL TCG boot (rc $rc):"; tail -20 tcg.out; fail=1
fi
exit $fail
