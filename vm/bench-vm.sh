#!/usr/bin/env bash
# Round trip from inside a guest vs on the host. Ends with exactly one line:
#   vm_null_call_rtt_p50_ns=<n> host_null_call_rtt_p50_ns=<m> accel=<tcg|kvm>
#
# For now it measures the raw ivshmem ping-pong (one cache line: the client
# writes a sequence number, the peer echoes it; wh-ivshmem ping/echo), not a
# forwarded call. To measure the forwarded null call (cudaMemGetInfo), give
# the commands of the forwarded path:
#   --host-peer CMD   what serves the guest's and the host client's requests,
#                     started once per measurement with WH_SHM_<vm> /
#                     WH_SERVER_VM_ARGS set (default: wh-ivshmem echo on the region)
#   --guest-bench CMD run in the guest; its last output line has rtt_p50_ns=<n>
#                     (default: wh-ivshmem ping)
#   --host-bench CMD  run on the host against the same kind of peer; its last
#                     line has rtt_p50_ns=<n> (default: wh-ivshmem ping on the file)
#   --host-peer-host CMD  the peer for the host measurement (default: --host-peer)
# Other options: --image DIR (required), --tool PATH (wh-ivshmem), --iters N,
#   --workdir DIR, --smp N (default 1: one vCPU thread + the peer = 2 cores),
#   --shm-size MB (the region of the guest and of the host measurement, default 16)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "bench-vm: $*" >&2; exit 2; }

IMAGE="" TOOL="" ITERS=20000 WORKDIR="" SMP=1 SHM_MB=16
PEER="" GUEST_BENCH="" HOST_BENCH="" PEER_HOST=""
while (($#)); do
  case $1 in
    --image) IMAGE=$2 ;; --tool) TOOL=$2 ;; --iters) ITERS=$2 ;; --workdir) WORKDIR=$2 ;;
    --smp) SMP=$2 ;; --host-peer) PEER=$2 ;; --guest-bench) GUEST_BENCH=$2 ;;
    --host-bench) HOST_BENCH=$2 ;; --host-peer-host) PEER_HOST=$2 ;; --shm-size) SHM_MB=$2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
  shift 2
done
[[ -n $IMAGE ]] || die "--image DIR is required"
WORKDIR=${WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/wh-bench-vm.XXXXXX")}
mkdir -p "$WORKDIR"
TOOL_Q=$(printf '%q' "$TOOL")
if [[ -z $PEER ]]; then
  [[ -x $TOOL ]] || die "--tool PATH to wh-ivshmem is required for the default ping-pong"
  PEER="$TOOL_Q --device \"\$WH_SHM_bench\" echo --idle-timeout 120"
fi
PEER_HOST=${PEER_HOST:-$PEER}
GUEST_BENCH=${GUEST_BENCH:-"wh-ivshmem ping --iters $ITERS --warmup 2000"}
HOST_BENCH=${HOST_BENCH:-"$TOOL_Q --device \"\$WH_SHM_bench\" ping --iters $ITERS --warmup 2000"}

p50_of() { grep -o 'rtt_p50_ns=[0-9]*' <<<"$1" | tail -1 | cut -d= -f2; }

# ---- in the guest
printf 'wh_bench rtt %s\nwh_exit\n' "$GUEST_BENCH" >"$WORKDIR/job.sh"
set +e
out=$("$HERE/run-vms.sh" --image "$IMAGE" --workdir "$WORKDIR/vm" --timeout 180 --smp "$SMP" --shm-size "$SHM_MB" \
      --host "$PEER" --host-grace 5 --vm bench --job "$WORKDIR/job.sh" --expect rtt 2>&1)
rc=$?
set -e
echo "$out" >&2
((rc == 0)) || die "guest run failed (logs in $WORKDIR/vm)"
vm_p50=$(p50_of "$(grep '^bench: WH-BENCH rtt' <<<"$out")")
accel=$(sed -n 's/^launch: bench PASS (.*, \([a-z]*\)) log .*/\1/p' <<<"$out")
[[ -n $vm_p50 ]] || die "no rtt_p50_ns in the guest's output"

# ---- on the host, the same exchange between two host processes
shm=$(mktemp /dev/shm/wh-bench-host.XXXXXX)
trap 'rm -f "$shm"' EXIT
truncate -s "${SHM_MB}M" "$shm"
export WH_SHM_bench=$shm WH_VMS=bench WH_SERVER_VM_ARGS="--vm bench=$shm"
setsid bash -c "$PEER_HOST" >"$WORKDIR/host-peer.log" 2>&1 </dev/null &
peer=$!
sleep 0.3
set +e
hout=$(bash -c "$HOST_BENCH" 2>&1)
hrc=$?
set -e
kill -TERM -- "-$peer" 2>/dev/null || true
wait "$peer" 2>/dev/null || true
echo "[host] $hout" >&2
((hrc == 0)) || die "host measurement failed"
host_p50=$(p50_of "$hout")
[[ -n $host_p50 ]] || die "no rtt_p50_ns in the host's output"

echo "vm_null_call_rtt_p50_ns=$vm_p50 host_null_call_rtt_p50_ns=$host_p50 accel=${accel:-tcg}"
