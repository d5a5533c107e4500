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
WORMHOLE_TRANSPORT=vmfunc wh_expect gate_client 'PASS gate_client' gate_client run 5
grep -q 'connected over vmfunc' /tmp/.wh_out && wh_result gate_client_transport PASS vmfunc || wh_result gate_client_transport FAIL
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
wh_exit
