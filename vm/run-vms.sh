#!/usr/bin/env bash
# Boots several Wormhole guests at once, each with its own ivshmem region
# (a host file), around host-side processes (a wormhole-server, an echo
# peer, ...), and judges every guest's markers. The test harness of the VM
# tests and of `make bench-vm`.
#
# Usage: vm/run-vms.sh --image DIR [run options] --vm NAME [vm options] [--vm NAME ...]
# Run options (before the first --vm):
#   --image DIR         from vm/guest/build-image.sh
#   --workdir DIR       logs go here (default: a new directory under /tmp)
#   --shm-dir DIR       where the region files are made (default: a new
#                       directory under /dev/shm, removed at the end unless --keep)
#   --timeout S         per guest (default 300)
#   --host-setup CMD    run (bash -c) once the region files exist, before
#                       any guest boots; must exit 0
#   --host CMD          started in the background before the guests (e.g. the
#                       server); repeatable. Ended (SIGTERM to its process
#                       group, SIGKILL 5 s later) once all guests are done,
#                       after --host-grace S (default 0) for it to exit itself.
#                       One that exits non-zero by itself fails the run.
#   --host-ready CMD    polled (every 0.2 s, up to 60 s) until it exits 0
#                       before the guests boot
#   --host-check CMD    run after the guests; must exit 0
#   --keep              keep the region files
#   --mailbox MB        one more region, attached to every VM as its last
#                       ivshmem device (the VM's own region stays the first):
#                       guests can hand each other values (wh-ivshmem
#                       poke/peek on $WH_MAILBOX_DEV in the job), e.g. a
#                       handle of VM a that VM b must not be able to use.
#                       The host file is $WH_MAILBOX.
#   --smp N --mem MB --shm-size MB --accel A   defaults for every VM
# VM options (after --vm NAME, apply to that VM):
#   --job FILE | --job-name NAME   what the guest runs (see vm/launch.sh)
#   --expect A,B        WH-RESULT names that must PASS
#   --env K=V  --file SRC:DEST  --smp N  --mem MB  --shm-size MB  --append ARGS
#   --qemu-arg ARG
#   --kill-on REGEX | --kill-after S   destroy this VM mid-run (vm/launch.sh):
#                       for "a VM that dies mid-call; the others go on" tests
# Every CMD sees, besides the caller's environment:
#   WH_VMS="a b"                    the VM names
#   WH_SHM_<name>=/dev/shm/…/<name> each VM's region file
#   WH_SERVER_VM_ARGS="--vm a=<file> --vm b=<file>"   for wormhole-server
#   WH_WORKDIR                      the log directory
# Each guest gets WH_NAME (its name) and WH_SHM_SIZE (bytes) in its job.
# Exit status: 0 when every guest passed and the host commands did too.
set -euo pipefail

die() { echo "run-vms: $*" >&2; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

IMAGE="" WORKDIR="" SHMDIR="" TIMEOUT=300 KEEP=0 GRACE=0 MAILBOX_MB=0
HOST_SETUP="" HOST_READY="" HOST_CHECK=""
HOSTS=() NAMES=()
D_SMP=1 D_MEM=512 D_SHM=16 D_ACCEL=${WORMHOLE_ACCEL:-tcg}
declare -A V_ARGS=() V_SHM=()
cur=""
add_vm_arg() { [[ -n $cur ]] || die "$1 must follow --vm NAME"; V_ARGS[$cur]+=$(printf '%s\x1f' "$@"); }

while (($#)); do
  case $1 in
    --image) IMAGE=$2; shift 2 ;;
    --workdir) WORKDIR=$2; shift 2 ;;
    --shm-dir) SHMDIR=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --host-setup) HOST_SETUP=$2; shift 2 ;;
    --host) HOSTS+=("$2"); shift 2 ;;
    --host-ready) HOST_READY=$2; shift 2 ;;
    --host-check) HOST_CHECK=$2; shift 2 ;;
    --host-grace) GRACE=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --mailbox) MAILBOX_MB=$2; shift 2 ;;
    --accel) D_ACCEL=$2; shift 2 ;;
    --vm)
      [[ $2 =~ ^[A-Za-z][A-Za-z0-9_]*$ ]] || die "VM names: letters, digits, _ ('$2')"
      [[ -z ${V_ARGS[$2]+x} ]] || die "VM $2 given twice"
      cur=$2; NAMES+=("$cur"); V_ARGS[$cur]=""; shift 2 ;;
    --smp|--mem|--shm-size)
      if [[ -z $cur ]]; then
        case $1 in --smp) D_SMP=$2 ;; --mem) D_MEM=$2 ;; --shm-size) D_SHM=$2 ;; esac
      elif [[ $1 == --shm-size ]]; then V_SHM[$cur]=$2
      else add_vm_arg "$1" "$2"; fi
      shift 2 ;;
    --job|--job-name|--expect|--env|--file|--append|--qemu-arg|--kill-on|--kill-after)
      add_vm_arg "$1" "$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ -n $IMAGE ]] || die "--image DIR is required"
((${#NAMES[@]})) || die "no --vm given"
IMAGE=$(cd "$IMAGE" && pwd)
WORKDIR=${WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/wh-run-vms.XXXXXX")}
mkdir -p "$WORKDIR"; WORKDIR=$(cd "$WORKDIR" && pwd)
OWN_SHMDIR=0
if [[ -z $SHMDIR ]]; then SHMDIR=$(mktemp -d /dev/shm/wh-vms.XXXXXX); OWN_SHMDIR=1; fi
mkdir -p "$SHMDIR"

HOST_PIDS=()
declare -A VM_PID=()
cleanup() {
  local p
  for p in "${VM_PID[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${HOST_PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  if ((!KEEP)); then
    for n in "${NAMES[@]}"; do rm -f "$SHMDIR/$n"; done
    rm -f "$SHMDIR/mailbox.shm"
    ((OWN_SHMDIR)) && rmdir "$SHMDIR" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

# ------------------------------------------------------------ regions
export WH_VMS="${NAMES[*]}" WH_WORKDIR=$WORKDIR WH_SERVER_VM_ARGS=""
for n in "${NAMES[@]}"; do
  mb=${V_SHM[$n]:-$D_SHM}
  f=$SHMDIR/$n
  rm -f "$f"; truncate -s "${mb}M" "$f"
  export "WH_SHM_$n=$f"
  WH_SERVER_VM_ARGS+="${WH_SERVER_VM_ARGS:+ }--vm $n=$f"
done

MAILBOX_ARGS=()
if ((MAILBOX_MB > 0)); then
  export WH_MAILBOX=$SHMDIR/mailbox.shm
  rm -f "$WH_MAILBOX"; truncate -s "${MAILBOX_MB}M" "$WH_MAILBOX"
  MAILBOX_ARGS=(--shm "$WH_MAILBOX:$MAILBOX_MB" --env "WH_MAILBOX_SIZE=$((MAILBOX_MB << 20))")
fi

t0=$(date +%s.%N)
elapsed() { awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}"; }
FAIL=0
if [[ -n $HOST_SETUP ]]; then
  bash -c "$HOST_SETUP" >"$WORKDIR/host-setup.log" 2>&1 ||
    { echo "run-vms: --host-setup failed:" >&2; cat "$WORKDIR/host-setup.log" >&2; exit 1; }
fi
i=0
for h in "${HOSTS[@]}"; do
  setsid bash -c "$h" >"$WORKDIR/host-$i.log" 2>&1 </dev/null &
  HOST_PIDS+=($!)
  i=$((i + 1))
done
if [[ -n $HOST_READY ]]; then
  ok=0
  for _ in $(seq 300); do
    if bash -c "$HOST_READY" >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.2
  done
  ((ok)) || { echo "run-vms: --host-ready never succeeded" >&2; exit 1; }
fi

# ------------------------------------------------------------ guests
for n in "${NAMES[@]}"; do
  mb=${V_SHM[$n]:-$D_SHM}
  args=()
  if [[ -n ${V_ARGS[$n]} ]]; then
    IFS=$'\x1f' read -ra args <<<"${V_ARGS[$n]%$'\x1f'}"
  fi
  "$HERE/launch.sh" --image "$IMAGE" --name "$n" --shm "$SHMDIR/$n:$mb" \
    --log "$WORKDIR/$n.serial.log" --timeout "$TIMEOUT" --accel "$D_ACCEL" \
    --smp "$D_SMP" --mem "$D_MEM" --env "WH_SHM_SIZE=$((mb << 20))" "${MAILBOX_ARGS[@]}" "${args[@]}" \
    >"$WORKDIR/$n.launch.log" 2>&1 &
  VM_PID[$n]=$!
done
declare -A VM_RC=()
for n in "${NAMES[@]}"; do
  set +e; wait "${VM_PID[$n]}"; VM_RC[$n]=$?; set -e
done
VM_PID=()
t_guests=$(elapsed)

# ------------------------------------------------------------ host side
if ((GRACE > 0)); then
  for _ in $(seq $((GRACE * 5))); do
    alive=0
    for p in "${HOST_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.2
  done
fi
i=0
for p in "${HOST_PIDS[@]}"; do
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM -- "-$p" 2>/dev/null || true
    for _ in $(seq 25); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    echo "run-vms: host[$i] stopped by the harness"
  else
    set +e; wait "$p"; rc=$?; set -e
    if ((rc != 0)); then
      echo "run-vms: host[$i] '${HOSTS[$i]}' exited $rc:" >&2
      tail -n 20 "$WORKDIR/host-$i.log" >&2
      FAIL=1
    fi
  fi
  i=$((i + 1))
done
HOST_PIDS=()
if [[ -n $HOST_CHECK ]]; then
  if ! bash -c "$HOST_CHECK" >"$WORKDIR/host-check.log" 2>&1; then
    echo "run-vms: --host-check failed:" >&2; cat "$WORKDIR/host-check.log" >&2; FAIL=1
  else
    sed 's/^/[host-check] /' "$WORKDIR/host-check.log"
  fi
fi

for n in "${NAMES[@]}"; do
  cat "$WORKDIR/$n.launch.log"
  ((VM_RC[$n] == 0)) || FAIL=1
done
# Collected markers, for the caller to parse (WH-BENCH lines carry the VM name).
for n in "${NAMES[@]}"; do
  tr -d '\r' <"$WORKDIR/$n.serial.log" | grep -E '^WH-(RESULT|BENCH) ' | sed "s/^/$n: /" || true
done
echo "run-vms: ${#NAMES[@]} guests in ${t_guests}s: $( ((FAIL)) && echo FAIL || echo PASS ) (logs in $WORKDIR)"
exit $FAIL
