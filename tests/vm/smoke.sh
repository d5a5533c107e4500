#!/usr/bin/env bash
# Two guests at once, each with its own ivshmem region: the VM harness smoke
# test (before the CUDA forwarding path runs inside VMs).
#   tests/vm/smoke.sh IMAGE_DIR WH_IVSHMEM_TOOL [WORKDIR]
# The host fills a pattern into each region before boot; each guest checks
# it, writes its own pattern, and ping-pongs with a host echo process; the
# host then checks each guest's pattern landed in that VM's file only.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

if [[ ${1:-} == --host-* ]]; then   # host-side steps, called back by run-vms.sh
  T=$WH_IVSHMEM_TOOL
  seed() { echo $(( $(printf '%s' "$1" | cksum | cut -d' ' -f1) % 100000 + $2 )); }
  case $1 in
    --host-setup)
      for v in $WH_VMS; do f=WH_SHM_$v
        "$T" --device "${!f}" fill --seed "$(seed "$v" 1)" --offset 1048576 --len 1048576; done ;;
    --host-echo)
      for v in $WH_VMS; do f=WH_SHM_$v
        "$T" --device "${!f}" echo --offset 2097152 --poll-us 200 --idle-timeout 200 & done
      wait ;;
    --host-check)
      for v in $WH_VMS; do f=WH_SHM_$v
        "$T" --device "${!f}" check --seed "$(seed "$v" 2)" --offset 0 --len 1048576
        for w in $WH_VMS; do
          [[ $w == "$v" ]] && continue
          if "$T" --device "${!f}" check --seed "$(seed "$w" 2)" --offset 0 --len 64 >/dev/null; then
            echo "VM $w's pattern found in VM $v's region"; exit 1
          fi
        done
      done
      echo "each guest's pattern is in its own region only" ;;
  esac
  exit 0
fi

IMAGE=${1:?usage: smoke.sh IMAGE_DIR WH_IVSHMEM_TOOL [WORKDIR]}
export WH_IVSHMEM_TOOL=${2:?}
WORKDIR=${3:-}
seed() { echo $(( $(printf '%s' "$1" | cksum | cut -d' ' -f1) % 100000 + $2 )); }
args=()
for v in vma vmb; do
  args+=(--vm "$v" --job "$HERE/jobs/smoke.sh" --env "SEED_HOST=$(seed $v 1)"
         --env "SEED_GUEST=$(seed $v 2)" --expect device,host-to-guest,guest-to-host,pingpong)
done
exec "$ROOT/vm/run-vms.sh" --image "$IMAGE" ${WORKDIR:+--workdir "$WORKDIR"} --timeout 150 \
  --host-setup "$HERE/smoke.sh --host-setup" --host "$HERE/smoke.sh --host-echo" \
  --host-grace 5 --host-check "$HERE/smoke.sh --host-check" "${args[@]}"
