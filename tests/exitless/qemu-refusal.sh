#!/usr/bin/env bash
# Checks of the patched QEMU (make qemu) on a kernel WITHOUT the Wormhole KVM
# capability (any stock kernel, e.g. this machine's):
#  1. -accel kvm + -object wormhole-gate: QEMU refuses to start with a clear
#     message naming KVM_CAP_WORMHOLE_VIEWS. Where /dev/kvm is not usable
#     this main check cannot run: the others still do, and the script then
#     exits 77 (ctest: skipped) with the reason, never 0.
#  2. -accel tcg + -object wormhole-gate: QEMU warns that there are no
#     exitless views and goes on
#  3. a TCG guest (the repository's image, vm/launch.sh via vm/run-vms.sh)
#     whose QEMU has the gate object configured boots, has no
#     /dev/wormhole-gate, and runs the forwarded vector_add through its
#     ivshmem BAR against wormhole-server --vm (the fallback path).
#     Needs a build tree with wormhole-server, libcudart.so.13, wh-ivshmem
#     and tests/forward/programs/vector_add; without one, a minimal busybox
#     guest only reads a marker through the BAR (and says so).
#
# Usage: tests/exitless/qemu-refusal.sh [--build DIR] [--out DIR]
#   --build DIR   CMake build tree (default: $REPO/build)
#   --out DIR     work directory (default: $REPO/build-exitless/qemu-refusal)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WH_CACHE=${WH_CACHE:-/var/cache/wormhole}
BUILD=$REPO/build OUT=$REPO/build-exitless/qemu-refusal
while (($#)); do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--out DIR]" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
BUILD=$(realpath -m "$BUILD") OUT=$(realpath "$OUT")   # the script cds into OUT
T00=$(date +%s)
"$REPO/scripts/deps.sh" vm
"$REPO/qemu-patches/build-qemu.sh" >/dev/null
Q=$WH_CACHE/qemu-current/qemu-system-x86_64
rm -rf "$OUT"; mkdir -p "$OUT"; cd "$OUT"
GATE_SHM=/dev/shm/wh-refusal-gate-$$ SHM=/dev/shm/wh-refusal-$$
trap 'rm -f "$SHM" "$GATE_SHM"' EXIT
truncate -s 1M "$GATE_SHM" "$SHM"
# The gate's own memory object (the one QEMU would build the views from).
GATE=(-object "memory-backend-file,id=whgate,share=on,mem-path=$GATE_SHM,size=1M"
      -object wormhole-gate,id=gate0,memdev=whgate)
fail=0 skipped=""
echo "qemu: $(readlink -f "$Q")"

# 1. KVM without the capability: a clear refusal.
if [[ -c /dev/kvm && -r /dev/kvm && -w /dev/kvm ]]; then
  t0=$(date +%s.%N)
  set +e
  timeout 60 "$Q" -accel kvm -machine pc -m 64 -display none -S -monitor none \
    "${GATE[@]}" >kvm.out 2>&1
  rc=$?; set -e
  dt=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")
  if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q 'KVM_CAP_WORMHOLE_VIEWS' kvm.out; then
    echo "ok   refusal on KVM without the capability (rc $rc, ${dt} s): $(grep -m1 wormhole-gate kvm.out)"
  else
    echo "FAIL expected a clear refusal, rc $rc:"; cat kvm.out; fail=1
  fi
else
  skipped="no usable /dev/kvm (a character device this user can read and write): the refusal on KVM without the capability was not checked"
  echo "skip refusal check: $skipped"
fi

# 2. TCG: a warning, and QEMU goes on (stopped with -S, ended by timeout).
set +e
timeout 10 "$Q" -accel tcg -machine pc -m 64 -display none -S -monitor none \
  "${GATE[@]}" >tcg-warn.out 2>&1
rc=$?; set -e
if [[ $rc -eq 124 ]] && grep -q 'accelerator is not KVM' tcg-warn.out; then
  echo "ok   TCG with -object wormhole-gate starts and warns: $(grep -m1 wormhole-gate tcg-warn.out)"
else
  echo "FAIL TCG with the gate object (rc $rc, expected 124 from timeout):"; cat tcg-warn.out; fail=1
fi

# 3. A TCG guest with the gate configured uses the ivshmem path.
SERVER=$BUILD/bin/wormhole-server CUDART=$BUILD/guest-lib/libcudart.so.13
TOOL=$BUILD/guest-lib/ivshmem/wh-ivshmem VADD=$BUILD/tests/forward/programs/vector_add
if [[ -x $SERVER && -f $CUDART && -x $TOOL && -x $VADD ]]; then
  t0=$(date +%s)
  "$REPO/vm/guest/build-image.sh" --out "$OUT/image" --lib "$CUDART" --bin "$TOOL" --bin "$VADD" \
    --job "$HERE/jobs/tcg-fallback.sh:tcg-fallback" >image.log 2>&1 || { cat image.log; exit 1; }
  echo "     image built in $(( $(date +%s) - t0 )) s"
  t0=$(date +%s)
  set +e
  WORMHOLE_QEMU=$Q "$REPO/vm/run-vms.sh" --image "$OUT/image" --workdir "$OUT/run" --timeout 400 \
    --shm-size 128 \
    --host "$SERVER --backend sim --sim-threads 1 --vm-channels 1 --socket $OUT/srv.sock \$WH_SERVER_VM_ARGS" \
    --vm g --job-name tcg-fallback --expect no_gate_device,vector_add \
      --qemu-arg -object --qemu-arg "memory-backend-file,id=whgate,share=on,mem-path=$GATE_SHM,size=1M" \
      --qemu-arg -object --qemu-arg wormhole-gate,id=gate0,memdev=whgate >run.out 2>&1
  rc=$?; set -e
  log=$(ls "$OUT"/run/*g*.serial.log 2>/dev/null | head -1 || true)
  if [[ $rc -eq 0 ]]; then
    echo "ok   TCG guest with -object wormhole-gate ran vector_add over ivshmem against wormhole-server ($(( $(date +%s) - t0 )) s):"
    [[ -n $log ]] && tr -d '\r' <"$log" | grep -E 'connected over|WH-RESULT|vmfunc' | sed 's/^/       /'
  else
    echo "FAIL TCG guest run (rc $rc):"; tail -30 run.out; [[ -n $log ]] && tail -40 "$log"; fail=1
  fi
else
  echo "note forwarded run skipped: no $SERVER / $CUDART / $TOOL / $VADD; minimal busybox guest instead"
  KREL=$(ls /boot | sed -n 's/^vmlinuz-\(6\.1\..*-amd64\)$/\1/p' | sort -V | tail -1)
  mkdir -p initrd/bin initrd/proc initrd/sys initrd/dev
  cp /bin/busybox initrd/bin/
  cat > initrd/init <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
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
  timeout 120 "$Q" -accel tcg -machine pc -m 256 -display none -serial stdio -no-reboot \
    -kernel "/boot/vmlinuz-$KREL" -initrd initrd.img -append "console=ttyS0 quiet panic=-1" \
    -object "memory-backend-file,id=wh,share=on,mem-path=$SHM,size=1M" -device ivshmem-plain,memdev=wh \
    "${GATE[@]}" >tcg.out 2>&1
  rc=$?; set -e
  if grep -q 'WH-TCG: ivshmem .* word 0x4B4F4857' tcg.out; then
    echo "ok   TCG guest with -object wormhole-gate boots and reads ivshmem: $(grep -m1 WH-TCG tcg.out | tr -d '\r')"
  else
    echo "FAIL TCG boot (rc $rc):"; tail -20 tcg.out; fail=1
  fi
fi
if [[ $fail == 0 && -n $skipped ]]; then
  echo "qemu-refusal: SKIP in $(( $(date +%s) - T00 )) s: $skipped (the other checks passed)"
  exit 77
fi
echo "qemu-refusal: $([[ $fail == 0 ]] && echo PASS || echo FAIL) in $(( $(date +%s) - T00 )) s"
exit $fail
