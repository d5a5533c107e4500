#!/usr/bin/env bash
# Boots one Wormhole guest under QEMU with an ivshmem-plain device backed by
# a host file, runs its job, and judges the serial console's markers.
#
# Usage: vm/launch.sh --image DIR [options]
#   --image DIR        output of vm/guest/build-image.sh (reads DIR/image.env)
#   --name NAME        VM name (wh.name=, default guest)
#   --shm FILE[:MB]    host file behind the ivshmem BAR (default size 16 MiB,
#                      a power of two); repeat for more devices. Created if
#                      missing; existing contents are kept.
#   --job FILE         a job script to run (put into the guest as /wh/job.sh)
#   --job-name NAME    run /wh/jobs/NAME.sh from the image instead
#   --env K=V          exported to the job (through /wh/env); repeatable
#   --file SRC:DEST    an extra file for this run only; repeatable
#   --expect NAME      a WH-RESULT NAME PASS line is required; repeatable or
#                      comma-separated
#   --log FILE         serial console log (default: <name>.serial.log in cwd)
#   --timeout S        wall-clock limit for the whole VM run (default 300)
#   --smp N --mem MB   vCPUs (default 2) and memory (default 512)
#   --accel A          tcg | kvm | auto (default: $WORMHOLE_ACCEL, else tcg;
#                      auto = kvm only where /dev/kvm is usable, the CPU shows
#                      vmx/svm and the KVM is not PVM)
#   --append ARGS      extra kernel command line
#   --qemu-arg ARG     extra QEMU argument; repeatable
#   --kill-on REGEX    SIGKILL QEMU once a console line matches REGEX (grep -E):
#                      the VM is destroyed mid-run, as a crash or `virsh
#                      destroy` would; then only WH-DONE is not required
#   --kill-after S     SIGKILL QEMU S seconds after the guest printed WH-BOOT
#   --interactive      console on stdin/stdout (Ctrl-A X quits); no judging
#   --quiet            no summary line
#   --boot-retries N   boot again (N times, default 1) when the kernel dies
#                      before /init runs (never once the job has started)
# Exit status: 0 all expected PASS, no FAIL, WH-DONE seen; 1 a FAIL or a
# missing expected result; 3 the guest never printed WH-DONE; 124 timeout;
# 2 usage.
set -euo pipefail

die() { echo "launch: $*" >&2; exit 2; }

IMAGE="" NAME=guest JOB="" JOBNAME="" LOG="" TIMEOUT=300 SMP=2 MEM=512
ACCEL=${WORMHOLE_ACCEL:-tcg} APPEND="" INTERACTIVE=0 QUIET=0 KILL_ON="" KILL_AFTER="" BOOT_RETRIES=1
SHMS=() ENVS=() XFILES=() EXPECT=() QARGS=()
while (($#)); do
  case $1 in
    --image) IMAGE=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --shm) SHMS+=("$2"); shift 2 ;;
    --job) JOB=$2; shift 2 ;;
    --job-name) JOBNAME=$2; shift 2 ;;
    --env) ENVS+=("$2"); shift 2 ;;
    --file) XFILES+=("$2"); shift 2 ;;
    --expect) IFS=, read -ra _e <<<"$2"; EXPECT+=("${_e[@]}"); shift 2 ;;
    --log) LOG=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --smp) SMP=$2; shift 2 ;;
    --mem) MEM=$2; shift 2 ;;
    --accel) ACCEL=$2; shift 2 ;;
    --append) APPEND+=" $2"; shift 2 ;;
    --qemu-arg) QARGS+=("$2"); shift 2 ;;
    --kill-on) KILL_ON=$2; shift 2 ;;
    --kill-after) KILL_AFTER=$2; shift 2 ;;
    --interactive) INTERACTIVE=1; shift ;;
    --quiet) QUIET=1; shift ;;
    --boot-retries) BOOT_RETRIES=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ -n $IMAGE && -f $IMAGE/image.env ]] || die "--image DIR (from vm/guest/build-image.sh) is required"
[[ $NAME =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad --name '$NAME'"
# shellcheck disable=SC1091
. "$IMAGE/image.env"
QEMU=${WORMHOLE_QEMU:-qemu-system-x86_64}
command -v "$QEMU" >/dev/null || die "no $QEMU (scripts/deps.sh vm)"
LOG=${LOG:-$PWD/$NAME.serial.log}

# ------------------------------------------------------------ accelerator
kvm_usable() {
  [[ -r /dev/kvm && -w /dev/kvm ]] || return 1
  grep -qwE 'vmx|svm' /proc/cpuinfo || return 1         # no hardware virtualisation
  [[ -d /sys/module/kvm_pvm ]] && return 1               # PVM: stock kernels hang
  grep -qw kvm_pvm /proc/modules 2>/dev/null && return 1
  return 0
}
case $ACCEL in
  tcg) ;;
  kvm) [[ -r /dev/kvm && -w /dev/kvm ]] || die "--accel kvm but /dev/kvm is not usable" ;;
  auto) if kvm_usable; then ACCEL=kvm; else ACCEL=tcg; fi ;;
  *) die "--accel tcg|kvm|auto" ;;
esac
if [[ $ACCEL == kvm ]]; then
  ACCEL_ARGS=(-accel kvm -cpu host)
else
  ACCEL_ARGS=(-accel tcg -cpu max)
fi

# ------------------------------------------------------------ run directory
RUN=$(mktemp -d "${TMPDIR:-/tmp}/wh-vm-$NAME.XXXXXX")
tpid=""
cleanup() { if [[ -n $tpid ]]; then kill -TERM "$tpid" 2>/dev/null || true; fi; rm -rf "$RUN"; }
trap cleanup EXIT
trap 'exit 143' TERM INT HUP   # so that cleanup stops QEMU (timeout passes TERM on)

# The per-run part of the initramfs (job, env, files) is a second cpio
# archive appended to the image's: the kernel unpacks both, in order.
INITRD=$WH_INITRD
if [[ -n $JOB || ${#ENVS[@]} -gt 0 || ${#XFILES[@]} -gt 0 ]]; then
  X=$RUN/extra
  mkdir -p "$X/wh"
  if [[ -n $JOB ]]; then
    [[ -f $JOB ]] || die "--job $JOB: no such file"
    install -m 0755 "$JOB" "$X/wh/job.sh"
  fi
  : >"$X/wh/env"
  for kv in "${ENVS[@]}"; do
    k=${kv%%=*} v=${kv#*=}
    [[ $k =~ ^[A-Za-z_][A-Za-z0-9_]*$ && $kv == *=* ]] || die "--env K=V, got '$kv'"
    printf "export %s='%s'\n" "$k" "${v//\'/\'\\\'\'}" >>"$X/wh/env"
  done
  for spec in "${XFILES[@]}"; do
    src=${spec%%:*} dst=${spec#*:}
    [[ -e $src && $spec == *:* ]] || die "--file SRC:DEST, got '$spec'"
    mkdir -p "$X$(dirname "$dst")"
    cp -rL "$src" "$X$dst"
  done
  INITRD=$RUN/initrd
  cp "$WH_INITRD" "$INITRD"
  # Same compression as the base: the kernel cannot go on from the end of a
  # gzip member into a plain cpio, but reads gzip members one after another.
  (cd "$X" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) |
    { if [[ $WH_INITRD == *.gz ]]; then gzip -1 -n; else cat; fi; } >>"$INITRD"
fi

# ------------------------------------------------------------ devices
DEV_ARGS=()
i=0
for spec in "${SHMS[@]}"; do
  file=${spec%%:*} mb=16
  [[ $spec == *:* ]] && mb=${spec#*:}
  [[ $mb =~ ^[0-9]+$ ]] && (( mb > 0 && (mb & (mb - 1)) == 0 )) ||
    die "--shm $spec: size must be a power of two in MiB (ivshmem needs it)"
  if [[ ! -e $file ]]; then
    mkdir -p "$(dirname "$file")"
    truncate -s "${mb}M" "$file"
  elif (( $(stat -c %s "$file") > 0 && $(stat -c %s "$file") < (mb << 20) )); then
    die "--shm $spec: $file is smaller than ${mb} MiB (QEMU refuses that)"
  fi
  DEV_ARGS+=(-object "memory-backend-file,id=wh$i,share=on,mem-path=$file,size=${mb}M"
             -device "ivshmem-plain,memdev=wh$i")
  i=$((i + 1))
done

CMDLINE="console=ttyS0,115200 panic=-1 quiet loglevel=3 mitigations=off"
# no_timer_check: under a loaded host the TCG guest can miss the IO-APIC
# timer check and panic ("IO-APIC + timer doesn't work!").
CMDLINE+=" i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd tsc=reliable no_timer_check"
CMDLINE+=" wh.name=$NAME${JOBNAME:+ wh.job=$JOBNAME}$APPEND"
((INTERACTIVE)) && CMDLINE+=" wh.shell=1"

QEMU_ARGS=(-name "$NAME" -machine pc "${ACCEL_ARGS[@]}" -smp "$SMP" -m "$MEM"
           -nodefaults -no-user-config -nographic -no-reboot
           -kernel "$WH_KERNEL" -initrd "$INITRD" -append "$CMDLINE"
           "${DEV_ARGS[@]}" "${QARGS[@]}")

if ((INTERACTIVE)); then
  set +e
  "$QEMU" "${QEMU_ARGS[@]}" -serial mon:stdio
  exit $?
fi

mkdir -p "$(dirname "$LOG")"
t0=$(date +%s.%N)
attempt=0
while :; do
: >"$LOG"
set +e
timeout -k 5 "$TIMEOUT" "$QEMU" "${QEMU_ARGS[@]}" -serial "file:$LOG" -monitor none \
  -pidfile "$RUN/qemu.pid" </dev/null >"$RUN/qemu.out" 2>&1 &
tpid=$!
KILLED=0
if [[ -n $KILL_ON || -n $KILL_AFTER ]]; then
  # Watch the console; destroy the VM when told to.
  booted=""
  while kill -0 "$tpid" 2>/dev/null; do
    if [[ -n $KILL_ON ]] && tr -d '\r' <"$LOG" | grep -aEq -- "$KILL_ON"; then break; fi
    if [[ -n $KILL_AFTER ]]; then
      if [[ -z $booted ]] && grep -aq 'WH-BOOT' "$LOG"; then booted=$(date +%s.%N); fi
      if [[ -n $booted ]] && awk "BEGIN{exit !($(date +%s.%N) - $booted >= $KILL_AFTER)}"; then break; fi
    fi
    sleep 0.1
  done
  if kill -0 "$tpid" 2>/dev/null && [[ -s $RUN/qemu.pid ]]; then
    kill -KILL "$(cat "$RUN/qemu.pid")" 2>/dev/null && KILLED=1
    echo "WH-KILLED by the launcher" >>"$LOG"
  fi
fi
{ wait "$tpid"; } 2>/dev/null
qrc=$?
set -e
# A kernel that dies before /init (seen under heavy host load: "IO-APIC +
# timer doesn't work") is the machine's trouble, not the job's: boot again.
if ((!KILLED && qrc != 124 && qrc != 137 && attempt < BOOT_RETRIES)) && ! grep -aq 'WH-BOOT' "$LOG"; then
  attempt=$((attempt + 1))
  cp "$LOG" "$LOG.boot-failure.$attempt"
  panic=$(grep -aom1 'Kernel panic.*' "$LOG" | tr -d '\r' || true)
  echo "launch: $NAME: the guest kernel did not reach /init (${panic:-qemu exit $qrc}); retrying (log kept as $LOG.boot-failure.$attempt)" >&2
  continue
fi
break
done
t1=$(date +%s.%N)
secs=$(awk "BEGIN{printf \"%.1f\", $t1 - $t0}")
[[ -s $RUN/qemu.out ]] && sed "s/^/[qemu $NAME] /" "$RUN/qemu.out" >&2

# ------------------------------------------------------------ judge
tr -d '\r' <"$LOG" >"$RUN/log"
status=0 why=""
fails=$(grep -c '^WH-RESULT [^ ]* FAIL' "$RUN/log" || true)
passes=$(grep -c '^WH-RESULT [^ ]* PASS' "$RUN/log" || true)
missing=()
for e in "${EXPECT[@]}"; do
  grep -q "^WH-RESULT $e PASS" "$RUN/log" || missing+=("$e")
done
if ((KILLED)); then
  if ((fails > 0 || ${#missing[@]} > 0)); then
    status=1 why="killed as asked, but $fails failed${missing[*]:+, missing: ${missing[*]}}"
  fi
elif ((qrc == 124 || qrc == 137)); then
  status=124 why="timed out after ${TIMEOUT}s"
elif ! grep -q '^WH-DONE' "$RUN/log"; then
  status=3 why="no WH-DONE (qemu exit $qrc; $(grep -aom1 'Kernel panic.*' "$RUN/log" || echo 'guest crashed or hung?'))"
elif ((fails > 0 || ${#missing[@]} > 0)); then
  status=1 why="$fails failed${missing[*]:+, missing: ${missing[*]}}"
fi
if ((!QUIET)); then
  if ((status == 0)); then
    echo "launch: $NAME PASS ($passes results$( ((KILLED)) && echo ", killed as asked"), ${secs}s, $ACCEL) log $LOG"
  else
    echo "launch: $NAME FAIL: $why (${secs}s, $ACCEL) log $LOG" >&2
    grep -E '^WH-RESULT [^ ]* FAIL' "$RUN/log" | sed 's/^/  /' >&2 || true
    echo "--- last lines of $LOG ---" >&2
    tail -n 25 "$RUN/log" >&2
  fi
fi
exit $status
