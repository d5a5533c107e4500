#!/bin/sh
# /init of the exitless bed initramfs (busybox).  Runs inside Bochs.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
echo "WH-BED: init reached, uptime $(cut -d' ' -f1 /proc/uptime) s"
grep -o -m1 'vmx' /proc/cpuinfo >/dev/null && echo "WH-BED: cpu has vmx"
insmod /lib/irqbypass.ko
insmod /lib/kvm.ko && insmod /lib/kvm-intel.ko
echo "WH-BED: kvm modules: $(cut -d' ' -f1 /proc/modules | tr '\n' ' ')"
echo "WH-BED: ept=$(cat /sys/module/kvm_intel/parameters/ept 2>/dev/null) nested=$(cat /sys/module/kvm_intel/parameters/nested 2>/dev/null)"
ls -l /dev/kvm
if insmod /lib/wormhole_gate.ko gate_gpa=0x1000000000 2>/dev/null; then
  echo "WH-BED: FAIL wormhole_gate loaded without a gate"
else
  echo "WH-BED: wormhole_gate.ko refused without a gate descriptor: $(dmesg | grep -o 'wormhole-gate: no gate.*' | tail -1)"
fi
/bin/wh-test-vmm
echo "WH-BED: vmm exit $? at uptime $(cut -d' ' -f1 /proc/uptime) s"
dmesg | grep -iE 'kvm|wormhole|BUG|WARN' | tail -20
poweroff -f
