# L1 of the exitless chain bed (tests/exitless/l1/run-chain.sh): Debian's 6.1
# kernel in Bochs (emulated VMX/EPT/VMFUNC), the patched kvm modules, the
# patched QEMU starting L2 with -accel kvm + the wormhole-gate object + an
# ivshmem region, and wormhole-server (sim backend) serving both.
# Everything also goes to port 0xE9 (Bochs prints it on its own output).
{
echo "L1: $(grep -m1 'address sizes' /proc/cpuinfo); cpus $(grep -c ^processor /proc/cpuinfo); $(dmesg | grep -o 'tsc: Detected.*' | head -1)"
insmod /wh/kmod/irqbypass.ko
insmod /wh/kmod/kvm.ko && insmod /wh/kmod/kvm-intel.ko || wh_result kvm_modules FAIL
[ -c /dev/kvm ] && wh_result kvm_modules PASS "ept=$(cat /sys/module/kvm_intel/parameters/ept)" || wh_result kvm_modules FAIL "no /dev/kvm"
mount -t debugfs none /sys/kernel/debug 2>/dev/null
K=/sys/kernel/debug/kvm
# Threat-model checks: KVM's own record of refused VMFUNCs (exit reason 59)
# and of the #UDs it injects, through its tracepoints.
T=/sys/kernel/tracing
mount -t tracefs none $T 2>/dev/null || T=/sys/kernel/debug/tracing
if echo 'exit_reason == 59' > $T/events/kvm/kvm_exit/filter && echo 1 > $T/events/kvm/kvm_exit/enable &&
   echo 'exception == 6' > $T/events/kvm/kvm_inj_exception/filter && echo 1 > $T/events/kvm/kvm_inj_exception/enable &&
   echo 1 > $T/tracing_on; then echo "L1: tracing KVM's VMFUNC exits and #UD injections"
else echo "L1: no KVM tracepoints ($T)"; fi
GATE=/dev/shm/wh-gate IVS=/dev/shm/wh-ivshmem
truncate -s 128M $IVS
snap() {  # snap NAME: one line of KVM's exit counters (all VMs)
  case $1 in threat-*|gate-*)
    # The threat-model phases and the counted gate_client run: the server's
    # gate counters (SIGUSR1 logs its statistics) and KVM's traced VMFUNC
    # exits / #UD injections so far.
    kill -USR1 "$(cat /tmp/server.pid 2>/dev/null)" 2>/dev/null; sleep 1
    echo "WH-GATESTATS $1 $(grep -a 'gate: .* violations' /tmp/server.log | tail -n1 | sed 's/^ *//')"
    echo "WH-TRACE $1 vmfunc_exits=$(grep -c 'kvm_exit:' $T/trace) ud_injected=$(grep -c 'kvm_inj_exception:' $T/trace)" ;;
  esac
  echo "WH-EXITS $1 exits=$(cat $K/exits) io=$(cat $K/io_exits) mmio=$(cat $K/mmio_exits) halt=$(cat $K/halt_exits) irq=$(cat $K/irq_exits) irq_window=$(cat $K/irq_window_exits) hypercalls=$(cat $K/hypercalls) insn_emulation=$(cat $K/insn_emulation) signal=$(cat $K/signal_exits) req_irq=$(cat $K/request_irq_exits) pf=$(cat $K/pf_taken 2>/dev/null) tsc=$(/wh/rdtsc 2>/dev/null)"
}
# The server runs on CPU 1, the L2 vCPU (QEMU) on CPU 0.
QEMU_ARGS="-accel kvm -cpu host,host-phys-bits=on -m ${WH_L2_MEM:-192} -smp 1 -machine pc -nodefaults -no-user-config
 -display none -serial stdio -monitor none -no-reboot -L /wh/qemu-fw
 -kernel /wh/l2/vmlinux -initrd /wh/l2/initramfs.cpio
 -object memory-backend-file,id=wh0,share=on,mem-path=$IVS,size=128M -device ivshmem-plain,memdev=wh0
 -object memory-backend-file,id=whgate,share=on,mem-path=$GATE,size=1M
 -object wormhole-gate,id=gate0,memdev=whgate,gate-gpa=0x1000000000"
APPEND="console=ttyS0 quiet panic=-1 mitigations=off cryptomgr.notests tsc=reliable wh.job=chain-l2 wh.name=l2"
echo "L1: starting QEMU: $QEMU_ARGS"
t0=$(cut -d' ' -f1 /proc/uptime)
mkfifo /tmp/l2.fifo
pml4w0() { od -An -tx1 -j 8192 -N8 $GATE | tr -d ' \n'; }
# The reader first (QEMU's open of the fifo waits for it): L2's console line
# by line, with a snapshot of the exit counters at each mark.
(
while IFS= read -r line; do
  line=$(echo "$line" | tr -d '\r')
  echo "[L2] $line"
  case $line in
    "WH-MARK "*) snap "${line#WH-MARK }" ;;
    WH-BOOT*) echo "L1: L2 reached /init $(awk "BEGIN{print $(cut -d' ' -f1 /proc/uptime) - $t0}") s after QEMU started" ;;
    "WH-VIEWWRITE begin")
      # The target: word 0 of the gate's PML4 page (read-only in the view).
      echo "L1: gate PML4 word 0 before the view write: $(pml4w0)"
      ( sleep 120; echo "L1: the VM did not stop within 120 s"; kill "$(cat /tmp/qemu.pid)" ) &
      echo $! > /tmp/wd.pid ;;
    *"unknown exit reason 22344"*)  # KVM_EXIT_WORMHOLE, which QEMU does not handle: it stops the VM
      sleep 1; w=$(pml4w0)
      if [ "$w" = 0000000000000000 ]; then
        wh_result view_write_refused PASS "the gate's store onto a read-only view page: KVM_EXIT_WORMHOLE to QEMU, which stopped the VM; the page is unchanged ($w)"
      else wh_result view_write_refused FAIL "the page changed: $w"; fi
      kill "$(cat /tmp/wd.pid)" 2>/dev/null; kill "$(cat /tmp/qemu.pid)" ;;
  esac
done </tmp/l2.fifo
) &
RPID=$!
taskset 1 qemu-system-x86_64 $QEMU_ARGS -append "$APPEND" >/tmp/l2.fifo 2>&1 &
QPID=$!
echo $QPID > /tmp/qemu.pid
# QEMU creates the gate file and writes the descriptor while it starts
# (tens of seconds under Bochs); the server refuses a missing file.
desc() { od -An -tx1 -N8 $GATE 2>/dev/null | tr -d ' \n'; }
i=0; while { [ ! -s $GATE ] || [ "$(desc)" = 0000000000000000 ]; } && [ $i -lt 600 ]; do sleep 0.5; i=$((i+1)); done
sleep 2
echo "L1: gate file after $(awk "BEGIN{print $(cut -d' ' -f1 /proc/uptime) - $t0}") s; starting wormhole-server"
taskset 2 wormhole-server --backend sim --sim-threads 1 --vm-channels 1 --socket /tmp/srv.sock \
  --vm l2=$IVS:1 --vm-gate l2=$GATE >/tmp/server.log 2>&1 &
SPID=$!
echo $SPID > /tmp/server.pid
snap boot
wait $QPID; qrc=$?
wait $RPID
snap end
kill -INT $SPID; sleep 3
echo "L1: QEMU rc $qrc; server log:"; sed 's/^/[server] /' /tmp/server.log | tail -30

dmesg | grep -iE 'kvm|wormhole|BUG|WARN|Oops' | tail -15
echo "L1: KVM trace (VMFUNC exits, #UD injections):"; grep -a -E 'kvm_exit:|kvm_inj_exception:' $T/trace | tail -20
} 2>&1 | /wh/e9tee
