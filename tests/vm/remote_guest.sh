#!/bin/bash
# vm.remote_guest: a TCG guest reaches a wormhole-server on the host over
# ucx:// through its virtual NIC. The test makes a network namespace with a
# tap device on a bridge (private addresses, only inside that namespace); the server
# listens on the bridge's address there, QEMU (vm/run-vms.sh) runs in the same
# namespace with the guest's virtio-net NIC on the tap, and the guest job
# (tests/vm/jobs/remote.sh) runs vector_add and the 64 MiB round trip (and,
# with WH_REMOTE_TRAIN=1, the default, a short wh-train run that must reach
# 65% test accuracy) over UCX (UCX_TLS=tcp).
# The server's log must show each program's session came from the guest's
# address over the network (one per program: at least three).
# Usage: remote_guest.sh <server> <image-dir> <workdir>
# Needs root (ip netns, /dev/net/tun); exits 77 (skipped) where it cannot make them.
set -u
server="$1" image="$2" work="$3"
here="$(cd "$(dirname "$0")" && pwd)"
vmsrc="$here/../../vm"
id=$$
ns="whvm$id" tap="whtap$((id % 100000))" br="whbr$((id % 100000))" dum="whve$((id % 100000))"
net="10.$((200 + id % 50)).$((id / 50 % 250))"
ip_s="$net.1" ip_g="$net.2"
port=7711
url="ucx://$ip_s:$port"
cleanup() {
  for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  ip netns del "$ns" 2>/dev/null
}
trap cleanup EXIT
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || [ ! -c /dev/net/tun ] || ! ip netns add "$ns" 2>/dev/null; then
  echo "SKIP: cannot create a network namespace with a tap device (needs root, ip(8), /dev/net/tun)"
  exit 77
fi
# The server's address is on a bridge that holds the tap and one end of a
# veth pair: a tap has no carrier until QEMU opens it, and UCX ignores devices
# that are not running when the server starts; the veth keeps the bridge up.
ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip -n "$ns" link set lo up
ip -n "$ns" tuntap add dev "$tap" mode tap || { echo "SKIP: no tap device"; exit 77; }
ip -n "$ns" link add "$br" type bridge || { echo "SKIP: no bridge devices (kernel module bridge)"; exit 77; }
ip -n "$ns" link add "$dum" type veth peer name "${dum}p" || { echo "SKIP: no veth devices"; exit 77; }
ip -n "$ns" link set "$tap" master "$br"
ip -n "$ns" link set "$dum" master "$br"
ip -n "$ns" addr add "$ip_s/24" dev "$br"
for d in "$tap" "$dum" "${dum}p" "$br"; do ip -n "$ns" link set "$d" up; done
for _ in $(seq 50); do ip -n "$ns" link show "$br" | grep -q LOWER_UP && break; sleep 0.1; done

rm -rf "$work"; mkdir -p "$work"
key="$work/wh.key"
head -c 48 /dev/urandom | base64 > "$key"
chmod 600 "$key"
log="$work/host-0.log"   # run-vms.sh: the first --host command's output

export UCX_TLS=tcp
ip netns exec "$ns" "$vmsrc/run-vms.sh" --image "$image" --workdir "$work" --timeout "${WH_REMOTE_VM_TIMEOUT:-600}" \
  --mem 1024 \
  --host "UCX_NET_DEVICES=$br exec $server --backend sim --socket $work/server.sock --listen $url --auth-key-file $key --remote-timeout-ms 60000" \
  --host-ready "grep -q 'listening for network clients' $log" \
  --host-check "[ \$(grep -cE 'session [0-9]+: network client $ip_g:[0-9]+ .*connected' $log) -ge 3 ]" \
  --vm a --job-name remote \
  --env "WH_GUEST_ADDR=$ip_g/24" --env "WH_SERVER_IP=$ip_s" --env "WH_REMOTE_URL=$url" \
  --env "WH_REMOTE_TRAIN=${WH_REMOTE_TRAIN:-1}" --file "$key:/root/wh.key" \
  --qemu-arg -netdev --qemu-arg "tap,id=n0,ifname=$tap,script=no,downscript=no" \
  --qemu-arg -device --qemu-arg "virtio-net-pci,netdev=n0" \
  --expect link,transport,vector_add,roundtrip_64mib,device_printf$([ "${WH_REMOTE_TRAIN:-1}" = 1 ] && echo ,train,train_accuracy)
rc=$?
echo "--- server log (network sessions):"
grep -E 'network client|ended|listening' "$log" || true
[ $rc = 0 ] && echo "PASS vm.remote_guest"
exit $rc
