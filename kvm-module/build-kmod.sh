#!/usr/bin/env bash
# Builds kvm.ko, kvm-intel.ko (and kvm-amd.ko, which must match kvm.ko) from
# Debian's linux-source-6.1 with Wormhole's patch series, using the config
# and Module.symvers of Debian's running-kernel package so they load into
# Debian's 6.1 kernel.  Output: $WH_CACHE/kmod-<hash>/{kvm,kvm-intel,kvm-amd}.ko
# and a symlink $WH_CACHE/kmod-current.  Cached by the hash of all inputs.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WH_CACHE=${WH_CACHE:-/var/cache/wormhole}
JOBS=${JOBS:-2}
"$HERE/../scripts/deps.sh" exitless

KREL=$(ls /usr/src | sed -n 's/^linux-headers-\(6\.1\.[0-9-]*-amd64\)$/\1/p' | sort -V | tail -1)
[[ -n "$KREL" ]] || { echo "build-kmod: no linux-headers-6.1.*-amd64" >&2; exit 1; }
HDR=/usr/src/linux-headers-$KREL
CONFIG=/boot/config-$KREL
[[ -f $CONFIG ]] || CONFIG=$HDR/.config
SRCVER=$(dpkg-query -W -f='${Version}' linux-source-6.1)
HDRVER=$(dpkg-query -W -f='${Version}' "linux-headers-$KREL")

HASH=$( (echo "$SRCVER $HDRVER $KREL"; cat "$HERE"/patches/*.patch "$HERE"/lib/*.[ch] "$0") | sha256sum | cut -c1-16)
OUT=$WH_CACHE/kmod-$HASH
if [[ -f $OUT/kvm-intel.ko && -f $OUT/kvm.ko ]]; then
  ln -sfn "$OUT" "$WH_CACHE/kmod-current"
  echo "build-kmod: cached $OUT"; exit 0
fi

# A prepared tree per source/headers version (untar + config + modules_prepare).
TREE=$WH_CACHE/linux-src-$SRCVER-$KREL
if [[ ! -f $TREE/.wh-prepared ]]; then
  rm -rf "$TREE"; mkdir -p "$TREE"
  echo "build-kmod: unpacking linux-source-6.1 $SRCVER"
  tar xf /usr/src/linux-source-6.1.tar.xz -C "$TREE" --strip-components=1
  cp "$CONFIG" "$TREE/.config"
  cp "$HDR/Module.symvers" "$TREE/Module.symvers"
  (cd "$TREE" && scripts/config --set-str SYSTEM_TRUSTED_KEYS "" \
      --set-str SYSTEM_REVOCATION_KEYS "" --set-str MODULE_SIG_KEY "" \
      --disable MODULE_SIG_ALL \
    && make -s olddefconfig && make -s -j"$JOBS" modules_prepare KERNELRELEASE="$KREL")
  touch "$TREE/.wh-prepared"
fi

cd "$TREE"
# Undo a series left applied by an interrupted run.
if [[ -d .wh-applied ]]; then
  for p in $(ls -r .wh-applied/*.patch); do patch -s -R -p1 < "$p"; done
  rm -rf .wh-applied arch/x86/kvm/vmx/wh_view.[ch] arch/x86/kvm/vmx/wh_types.h
fi
cleanup() {
  if [[ -d .wh-applied ]]; then
    for p in $(ls -r .wh-applied/*.patch); do patch -s -R -p1 < "$p"; done
    rm -rf .wh-applied arch/x86/kvm/vmx/wh_view.[ch] arch/x86/kvm/vmx/wh_types.h
  fi
}
trap cleanup EXIT
mkdir .wh-applied
for p in "$HERE"/patches/*.patch; do
  echo "build-kmod: applying $(basename "$p")"
  patch -s -p1 --dry-run < "$p"
  patch -s -p1 < "$p"
  cp "$p" .wh-applied/
done
cp "$HERE"/lib/wh_view.c "$HERE"/lib/wh_view.h "$HERE"/lib/wh_types.h arch/x86/kvm/vmx/
echo "build-kmod: building arch/x86/kvm modules (-j$JOBS)"
t0=$(date +%s)
make -s -j"$JOBS" M=arch/x86/kvm modules KERNELRELEASE="$KREL" CONFIG_KVM_WERROR=y
echo "build-kmod: built in $(( $(date +%s) - t0 )) s"
mkdir -p "$OUT.tmp"
cp arch/x86/kvm/kvm.ko arch/x86/kvm/kvm-intel.ko arch/x86/kvm/kvm-amd.ko "$OUT.tmp/"
make -s M=arch/x86/kvm clean KERNELRELEASE="$KREL" >/dev/null 2>&1 || true
rm -rf "$OUT"; mv "$OUT.tmp" "$OUT"
ln -sfn "$OUT" "$WH_CACHE/kmod-current"
modinfo "$OUT/kvm-intel.ko" | grep -E '^vermagic'
echo "build-kmod: done $OUT"
