# A guest that reaches the host's wormhole-server over ucx:// through its
# virtual NIC (tests/vm/remote_guest.sh): no ivshmem transport is used.
# Env (from remote_guest.sh): WH_GUEST_ADDR (CIDR), WH_SERVER_IP, WH_REMOTE_URL,
# WH_REMOTE_TRAIN (1: a short wh-train run too).
# IPv4 only: UCX must not advertise an IPv6 link-local address still in
# duplicate address detection right after the link comes up.
echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 2>/dev/null
echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6 2>/dev/null
ip link set lo up
ip addr add "$WH_GUEST_ADDR" dev eth0
ip link set eth0 up
# UCX only takes running devices: wait for the kernel to report the link up
# (it does so lazily, a second or more later under TCG).
i=0
while [ "$(cat /sys/class/net/eth0/operstate)" != up ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
wh_run link ping -c 1 -W 10 "$WH_SERVER_IP"
export WORMHOLE_SERVER="$WH_REMOTE_URL" WORMHOLE_AUTH_KEY_FILE=/root/wh.key UCX_TLS=tcp UCX_NET_DEVICES=eth0
# A TCG guest is slow: give silence a generous bound on both sides.
export WORMHOLE_REMOTE_TIMEOUT_MS=60000
wh_expect transport "connected over ucx to $WH_REMOTE_URL" env WORMHOLE_VERBOSE=1 vector_add
wh_expect vector_add '^PASS' vector_add
wh_expect roundtrip_64mib 'PASS remote roundtrip 64 MiB' roundtrip 64
grep -q 'remote kernel says 42' /tmp/.wh_out && wh_result device_printf PASS ||
  wh_result device_printf FAIL "no device printf in the roundtrip output"
if [ "${WH_REMOTE_TRAIN:-0}" = 1 ]; then
  wh_expect train 'final test_acc=[0-9.]+%' \
    wh-train --epochs 1 --batch 100 --subset 2000 --test-subset 1000 --seed 42 --data /data/fashion-mnist --no-progress
  # It must also learn: 72.2% with these arguments on the host's sim device.
  acc=$(sed -n 's/^final test_acc=\([0-9.]*\)%.*/\1/p' /tmp/.wh_out)
  if [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 65) }'; then wh_result train_accuracy PASS "${acc}% >= 65%"
  else wh_result train_accuracy FAIL "test accuracy ${acc:-?}% < 65%"; fi
fi
wh_exit
