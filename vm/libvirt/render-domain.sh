#!/usr/bin/env bash
# Fills vm/libvirt/wormhole-domain.xml.in (or --template FILE) and prints it.
# Usage: vm/libvirt/render-domain.sh --image DIR [--name N] [--shm-name S]
#          [--shm-mb MB] [--mem MB] [--vcpus N] [--type qemu|kvm]
#          [--serial-log FILE] [--job-name JOB] [--cmdline EXTRA] [--template F]
# --type qemu is TCG (the default here: no usable KVM on the dev machines).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "render-domain: $*" >&2; exit 2; }
IMAGE="" NAME=wormhole-guest SHM_NAME="" SHM_MB=512 MEM=512 VCPUS=1 TYPE=qemu
LOG="" JOB="" EXTRA="" TEMPLATE=$HERE/wormhole-domain.xml.in
while (($#)); do
  case $1 in
    --image) IMAGE=$2 ;; --name) NAME=$2 ;; --shm-name) SHM_NAME=$2 ;;
    --shm-mb) SHM_MB=$2 ;; --mem) MEM=$2 ;; --vcpus) VCPUS=$2 ;; --type) TYPE=$2 ;;
    --serial-log) LOG=$2 ;; --job-name) JOB=$2 ;; --cmdline) EXTRA=$2 ;;
    --template) TEMPLATE=$2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
  shift 2
done
[[ -n $IMAGE && -f $IMAGE/image.env ]] || die "--image DIR (from vm/guest/build-image.sh)"
. "$IMAGE/image.env"
[[ $NAME =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad --name"
SHM_NAME=${SHM_NAME:-$NAME}
[[ $SHM_NAME =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad --shm-name"
(( SHM_MB > 0 && (SHM_MB & (SHM_MB - 1)) == 0 )) || die "--shm-mb must be a power of two"
[[ $TYPE == qemu || $TYPE == kvm ]] || die "--type qemu|kvm"
CPU_MODE=maximum; [[ $TYPE == kvm ]] && CPU_MODE=host-passthrough
LOG=${LOG:-/var/log/libvirt/qemu/$NAME.serial.log}
EMU=$(command -v qemu-system-x86_64 || echo /usr/bin/qemu-system-x86_64)
CMDLINE="console=ttyS0,115200 panic=-1 quiet loglevel=3 mitigations=off no_timer_check tsc=reliable wh.name=$NAME${JOB:+ wh.job=$JOB}${EXTRA:+ $EXTRA}"
esc() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e "s/'/\&apos;/g" <<<"$1"; }
sub() { local v; v=$(esc "$2" | sed 's/[\\|&]/\\&/g'); SEDS+=(-e "s|@$1@|$v|g"); }
SEDS=()
sub DOMAIN_TYPE "$TYPE"; sub NAME "$NAME"; sub MEM_MB "$MEM"; sub VCPUS "$VCPUS"
sub KERNEL "$WH_KERNEL"; sub INITRD "$WH_INITRD"; sub CMDLINE "$CMDLINE"
sub CPU_MODE "$CPU_MODE"; sub EMULATOR "$EMU"; sub SERIAL_LOG "$LOG"
sub SHM_NAME "$SHM_NAME"; sub SHM_MB "$SHM_MB"
out=$(sed "${SEDS[@]}" "$TEMPLATE")
if grep -q '@[A-Z_]*@' <<<"$out"; then die "unfilled placeholders: $(grep -o '@[A-Z_]*@' <<<"$out" | sort -u | tr '\n' ' ')"; fi
printf '%s\n' "$out"
