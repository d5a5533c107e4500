#!/usr/bin/env bash
# Starts the rendered domain template under a running libvirtd (qemu:///system,
# TCG) as a transient domain, with the region pre-created the way docs/vms.md
# says, and checks bytes both ways. Skips (77) when no libvirtd answers.
#   tests/vm/libvirt-start.sh IMAGE_DIR WH_IVSHMEM_TOOL WORKDIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
IMAGE=${1:?} T=${2:?} W=${3:?}
URI=${WORMHOLE_LIBVIRT_URI:-qemu:///system}
# No systemd here (CI, containers): as root, start virtlogd and libvirtd for
# this test and stop them afterwards, as FACTS.md describes.
OWN_PIDS=()
stop_daemons() { for p in "${OWN_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
if command -v virsh >/dev/null && ! virsh -c "$URI" version >/dev/null 2>&1 &&
   [ "$(id -u)" = 0 ] && [ "$URI" = qemu:///system ] && command -v libvirtd >/dev/null; then
  mkdir -p /run/libvirt
  if ! pgrep -x virtlogd >/dev/null; then
    virtlogd -d --pid-file /run/wh-test-virtlogd.pid && OWN_PIDS+=("$(cat /run/wh-test-virtlogd.pid)")
  fi
  libvirtd -d --pid-file /run/wh-test-libvirtd.pid && OWN_PIDS+=("$(cat /run/wh-test-libvirtd.pid)")
  for _ in $(seq 50); do virsh -c "$URI" version >/dev/null 2>&1 && break; sleep 0.2; done
  echo "started libvirtd for this test (pids ${OWN_PIDS[*]})"
fi
if ! command -v virsh >/dev/null || ! virsh -c "$URI" version >/dev/null 2>&1; then
  stop_daemons
  echo "SKIP: no libvirtd at $URI (start virtlogd and libvirtd, see docs/vms.md)"; exit 77
fi
mkdir -p "$W"; W=$(cd "$W" && pwd)
NAME=wh-test-$$
SHM=/dev/shm/$NAME
QUSER=$(id -u libvirt-qemu >/dev/null 2>&1 && echo libvirt-qemu || echo root)
trap 'virsh -c "$URI" destroy "$NAME" >/dev/null 2>&1 || true; rm -f "$SHM"; stop_daemons' EXIT
# The qemu process runs as libvirt-qemu: it must be able to open the region.
truncate -s 16M "$SHM"
chown "$QUSER:$QUSER" "$SHM" 2>/dev/null || true
chmod 0660 "$SHM"
"$T" --device "$SHM" fill --seed 77 --offset 0 --len 65536
# The image's copy of the kernel/initrd must be readable by the qemu user.
chmod -R a+rX "$IMAGE/vmlinux" "$IMAGE/bzImage" "$IMAGE"/initramfs.cpio* 2>/dev/null || true
"$ROOT/vm/libvirt/render-domain.sh" --image "$IMAGE" --name "$NAME" --shm-name "$NAME" \
  --shm-mb 16 --job-name libvirt --serial-log "$W/serial.log" >"$W/domain.xml"
rm -f "$W/serial.log"
t0=$(date +%s)
virsh -c "$URI" create "$W/domain.xml"
for _ in $(seq 120); do
  virsh -c "$URI" domstate "$NAME" >/dev/null 2>&1 || break   # transient: gone at poweroff
  sleep 1
done
echo "domain ran $(( $(date +%s) - t0 ))s"
tr -d '\r' <"$W/serial.log" | grep -a '^WH-'
for r in device host-to-guest guest-to-host; do
  grep -aq "^WH-RESULT $r PASS" "$W/serial.log" || { echo "FAIL: $r"; exit 1; }
done
grep -aq '^WH-DONE' "$W/serial.log" || { echo "FAIL: no WH-DONE"; exit 1; }
"$T" --device "$SHM" check --seed 78 --offset 65536 --len 65536
echo "libvirt: domain with <shmem> ran, bytes crossed both ways"
