#!/usr/bin/env bash
# The libvirt side of the VM setup is valid libvirt XML:
#  1. vm/libvirt/wormhole-domain.xml.in, filled by render-domain.sh;
#  2. vm/libvirt/shmem-device.xml.in spliced into a plain existing domain
#     (what docs/vms.md tells a user to do).
#   tests/vm/libvirt-validate.sh IMAGE_DIR WORKDIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
IMAGE=${1:?IMAGE_DIR} W=${2:?WORKDIR}
command -v virt-xml-validate >/dev/null || { echo "no virt-xml-validate (scripts/deps.sh vm)"; exit 1; }
mkdir -p "$W"
"$ROOT/vm/libvirt/render-domain.sh" --image "$IMAGE" --name wh-validate --shm-mb 64 \
  --job-name smoke >"$W/domain.xml"
virt-xml-validate "$W/domain.xml" domain
grep -q "<model type='ivshmem-plain'/>" "$W/domain.xml"
grep -q "<acpi/>" "$W/domain.xml"

sed -e 's/@SHM_NAME@/wh-existing/' -e 's/@SHM_MB@/32/' "$ROOT/vm/libvirt/shmem-device.xml.in" \
  | sed '/^<!--/,/-->$/d' >"$W/shmem.xml"
cat >"$W/existing.xml" <<XML
<domain type='kvm'>
  <name>existing-vm</name>
  <memory unit='GiB'>4</memory>
  <vcpu>2</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type><boot dev='hd'/></os>
  <features><acpi/><apic/></features>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/var/lib/libvirt/images/existing.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
$(sed 's/^/    /' "$W/shmem.xml")
  </devices>
</domain>
XML
virt-xml-validate "$W/existing.xml" domain
echo "libvirt XML: domain template and shmem snippet validate"
