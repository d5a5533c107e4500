#!/usr/bin/env bash
# `make qemu`: qemu-system-x86_64 (x86_64-softmmu only) from Debian's qemu 7.2
# source package + qemu-patches/*.patch.  Cached by the hash of the inputs:
#   $WH_CACHE/qemu-<hash>/qemu-system-x86_64, symlink $WH_CACHE/qemu-current
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
WH_CACHE=${WH_CACHE:-/var/cache/wormhole}
JOBS=${JOBS:-2}
"$REPO/scripts/deps.sh" qemu-build
# Tools the build needs that the qemu-build group does not list.
need=(); for p in python3-venv bzip2 libslirp-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p"); done
if ((${#need[@]})); then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; fi

SRCDIR=$WH_CACHE/qemu-src
DSC=$(ls "$SRCDIR"/qemu_7.2*.dsc 2>/dev/null | sort -V | tail -1 || true)
if [[ -z $DSC ]]; then "$HERE/get-source.sh" "$SRCDIR"; DSC=$(ls "$SRCDIR"/qemu_7.2*.dsc | sort -V | tail -1); fi
# What decides the binary: the source package, our patches, the gate sources
# and the configure flags (RECIPE: bump it when the build steps below change
# what gets built).  Comments and the resume logic of this script are not in it.
RECIPE=1
CONFIGURE=(--target-list=x86_64-softmmu --enable-kvm --disable-docs --disable-user
  --disable-gtk --disable-sdl --disable-opengl --disable-spice --disable-vnc --disable-curses
  --disable-xen --disable-install-blobs --enable-slirp
  # Debian's firmware locations (seabios, ipxe), as its own QEMU has them, so
  # that the binary finds bios-256k.bin without -L (libvirt passes none).
  --firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu)
HASH=$( (basename "$DSC"; echo "recipe=$RECIPE ${CONFIGURE[*]}"
         cat "$HERE"/*.patch "$REPO"/kvm-module/gate/{wh_gate.h,gate.S,mkgate.sh}) | sha256sum | cut -c1-16)
OUT=$WH_CACHE/qemu-$HASH
if [[ -x $OUT/qemu-system-x86_64 ]]; then
  ln -sfn "$OUT" "$WH_CACHE/qemu-current"; echo "build-qemu: cached $OUT"; exit 0
fi
T0=$(date +%s)
TREE=$WH_CACHE/qemu-build-$HASH
# A tree of the same hash that was configured (marker written after configure)
# but whose build was interrupted is resumed: ninja rebuilds only what is
# missing.  Anything else is unpacked and configured from scratch.
if [[ -f $TREE/.wh-configured && -f $TREE/build/build.ninja ]]; then
  echo "build-qemu: resuming the configured tree $TREE"
  cd "$TREE/build"
else
  rm -rf "$TREE"
  dpkg-source -x --no-check "$DSC" "$TREE" >/dev/null
  cd "$TREE"
  for p in "$HERE"/*.patch; do echo "build-qemu: applying $(basename "$p")"; patch -s -p1 < "$p"; done
  cp "$REPO/kvm-module/gate/wh_gate.h" accel/kvm/
  "$REPO/kvm-module/gate/mkgate.sh" accel/kvm/wormhole-gate-code.h
  # The +dfsg tarball has no edk2 blobs; do not try to unpack them.
  sed -i 's/^    unpack_edk2_blobs = bzip2.found()$/    unpack_edk2_blobs = false/' meson.build
  mkdir build && cd build
  ../configure "${CONFIGURE[@]}" >/dev/null
  touch "$TREE/.wh-configured"
  echo "build-qemu: configured in $(( $(date +%s) - T0 )) s"
fi
echo "build-qemu: building (-j$JOBS, log $TREE/build/ninja.log.txt)"
if ! nice -n 10 ninja -j"$JOBS" qemu-system-x86_64 >"$TREE/build/ninja.log.txt" 2>&1; then
  tail -40 "$TREE/build/ninja.log.txt"; echo "build-qemu: ninja failed (tree kept: $TREE)"; exit 1
fi
mkdir -p "$OUT.tmp"; cp qemu-system-x86_64 "$OUT.tmp/"
rm -rf "$OUT"; mv "$OUT.tmp" "$OUT"; ln -sfn "$OUT" "$WH_CACHE/qemu-current"
cd /; rm -rf "$TREE"
echo "build-qemu: built in $(( $(date +%s) - T0 )) s: $OUT/qemu-system-x86_64"
