# L2 of the exitless chain bed (tests/exitless/l1/run-chain.sh): Linux booted
# by the patched QEMU with -accel kvm on the patched KVM, inside L1 Linux,
# inside Bochs. The gate module, then unmodified nvcc programs over vmfunc,
# then the measured phases. "WH-MARK name" asks L1 to snapshot KVM's exit
# counters (L1 reads this console line by line); the 2 s pause lets it.
N1=${WH_N1:-100} N2=${WH_N2:-600}
mark() { echo "WH-MARK $1"; sleep 2; }
if insmod /wh/wormhole_gate.ko gate_gpa=0x1000000000; then
  wh_result gate_module PASS "$(dmesg | grep -o 'wormhole-gate:.*' | tail -1)"
else
  wh_result gate_module FAIL "$(dmesg | grep -o 'wormhole-gate:.*' | tail -1)"
fi
ls -l /dev/wormhole-gate
# wormhole-server starts in L1 while L2 boots (loading it under Bochs takes
# a while): wait until it serves the region.
t=0
until WORMHOLE_TRANSPORT=ivshmem gate_client time 1 >/tmp/.w 2>&1 || [ $t -ge 240 ]; do sleep 3; t=$((t + 3)); done
echo "server answering after ${t} s: $(tail -n1 /tmp/.w)"
export WORMHOLE_VERBOSE=1
# The marks around this run log the server's gate counters: every call the
# client says it sent through the gate must have been served there
# (threat-check.py, gate_calls_counted).
mark gate-run-begin
WORMHOLE_TRANSPORT=vmfunc wh_expect gate_client 'PASS gate_client' gate_client run 5
mark gate-run-end
grep -q 'connected over vmfunc' /tmp/.wh_out && wh_result gate_client_transport PASS vmfunc || wh_result gate_client_transport FAIL
# Threat model (docs/exitless.md), T1: a hostile process beside a
# well-behaved one. The victim (gate_client) runs its checked rounds over
# vmfunc while `hostile` binds/calls on the victim's channel, sends
# malformed slots and reaches for the server's memory. L1 logs the server's
# gate counters at both marks (run-chain.sh checks the deltas against what
# hostile says it caused).
mark threat-process-begin
WORMHOLE_TRANSPORT=vmfunc gate_client run ${WH_GOOD_ROUNDS:-20} >/tmp/good.out 2>&1 &
GP=$!
hostile 300 >/tmp/hostile.out 2>&1; hrc=$?
wait $GP; grc=$?
cat /tmp/hostile.out
sed 's/^/[good] /' /tmp/good.out
[ $hrc = 0 ] && wh_result hostile_process PASS || wh_result hostile_process FAIL "rc=$hrc"
if [ $grc = 0 ] && grep -q 'PASS gate_client' /tmp/good.out && grep -q 'connected over vmfunc' /tmp/good.out; then
  wh_result threat_good_client PASS "$(grep 'rounds .* ok' /tmp/good.out) over vmfunc beside hostile"
else wh_result threat_good_client FAIL "rc=$grc"; fi
# T2: a hostile kernel module (VMFUNC outside the list, VMWRITE, VMX MSRs,
# hypercalls, writes to the read-only gate pages, a scan for the EPTP list).
# This mark ends T1 and begins T2.
mark threat-process-end
insmod /wh/wh_hostile.ko gate_gpa=0x1000000000 && rmmod wh_hostile   # checks at init, once
dmesg | grep -a -o 'wh-hostile: .*' > /tmp/kmod.out
sed 's/^/[kmod] /' /tmp/kmod.out
sed -n 's/^wh-hostile: RESULT //p' /tmp/kmod.out | while read -r n st rest; do echo "WH-RESULT kernel_$n $st $rest"; done
grep -q 'wh-hostile: end, 0 failed' /tmp/kmod.out && wh_result hostile_kernel PASS || wh_result hostile_kernel FAIL
mark threat-kernel-end
# The server keeps serving, the gate keeps working.
WORMHOLE_TRANSPORT=vmfunc wh_expect threat_after 'PASS gate_client' gate_client run 2
grep -q 'connected over vmfunc' /tmp/.wh_out && wh_result threat_after_transport PASS vmfunc || wh_result threat_after_transport FAIL
# (vector_add is not run here: its 5 M-element kernels, interpreted by the
# sim backend inside Bochs, take far longer than the rest of the bed.)
unset WORMHOLE_VERBOSE
# Exits per call: the difference between N2 and N1 calls (connection set-up
# and first touches cancel out). gate_client time N makes 2N calls.
for path in vmfunc ivshmem; do
  for n in $N1 $N2; do
    mark "$path-$n-begin"
    WORMHOLE_TRANSPORT=$path gate_client time $n >/tmp/.t 2>&1; rc=$?
    mark "$path-$n-end"
    sed "s/^/[time-$path-$n] /" /tmp/.t
    [ $rc = 0 ] || wh_result "time_$path_$n" FAIL "rc=$rc"
  done
done
for n in $N1 $N2; do
  mark "doorbell-$n-begin"; exitpath $((2 * n)) >/tmp/.t 2>&1; mark "doorbell-$n-end"
  sed "s/^/[doorbell-$n] /" /tmp/.t
done
# Last, because it ends the VM: the gate's own store redirected onto a page
# that is read-only in the view (hostile view-write, wh_hostile.ko
# redirect_slot). KVM returns the EPT violation to QEMU as KVM_EXIT_WORMHOLE;
# QEMU stops the VM and L1 checks the page and ends QEMU
# (view_write_refused). Returning here means the write was not stopped.
echo "WH-VIEWWRITE begin"
hostile view-write
wh_result view_write FAIL "the VM kept running after the gate stored onto a read-only view page"
wh_exit
