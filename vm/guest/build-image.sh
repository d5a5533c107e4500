#!/usr/bin/env bash
# Builds a Wormhole guest: a Debian 6.1 kernel and a busybox initramfs that
# carries whatever programs, libraries and files it is given.
#
# Usage: vm/guest/build-image.sh --out DIR [options]
#   --out DIR             where the image goes (DIR/vmlinux or DIR/bzImage,
#                         DIR/initramfs.cpio.gz, DIR/image.env, DIR/contents.txt)
#   --bin PATH[:DEST]     a program; DEST defaults to /usr/bin/<name>. Its
#                         shared libraries (ldd) and the dynamic loader come along.
#   --lib PATH[:DIR]      a shared library into DIR (default /usr/lib/wormhole),
#                         plus its dependencies. Its soname is then never taken
#                         from the host (so a guest-lib libcudart.so.13 wins
#                         over a host CUDA install). DIR is put in ld.so.cache.
#   --file SRC:DEST       a file or a directory, copied as is
#   --job PATH[:NAME]     a job script, run by /init with wh.job=NAME
#                         (default NAME: the file's name without .sh)
#   --module NAME         a kernel module (and what it depends on), loaded at boot
#   --manifest FILE       lines of: bin PATH [DEST] | lib PATH [DIR] |
#                         file SRC DEST | job PATH [NAME] | module NAME
#                         ('#' comments; ${VAR} expands from the environment;
#                         relative paths are relative to the manifest)
#   --kernel-version V    default: the newest installed 6.1 kernel, else the
#                         one linux-image-amd64 depends on (apt-get download)
#   --from-package        take the kernel from the .deb (apt-get download) even
#                         when one is installed in /boot
#   --bzimage             boot the compressed bzImage instead of the
#                         uncompressed vmlinux (PVH entry, about 2x faster boot)
#   --compress gzip|none  initramfs compression (default gzip)
#   --allow-host-cuda     let ldd take libraries from a host CUDA install
#                         (by default that is an error: the guest must get
#                         guest-lib's drop-ins through --lib, not NVIDIA's)
# Kernels are unpacked once into $WH_CACHE (default /var/cache/wormhole,
# else ~/.cache/wormhole), keyed by the vmlinuz's hash.
set -euo pipefail

die() { echo "build-image: $*" >&2; exit 1; }
say() { [[ -n ${WH_QUIET:-} ]] || echo "build-image: $*" >&2; }

OUT=""; KVER=""; BOOT=vmlinux; COMPRESS=gzip; HOST_CUDA=0; FROM_PKG=0
BINS=(); LIBS=(); FILES=(); JOBS=(); MODS=()
SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

expand_vars() {  # ${VAR} from the environment; an unset VAR is an error
  local s=$1 name
  while [[ $s =~ \$\{([A-Za-z_][A-Za-z0-9_]*)\} ]]; do
    name=${BASH_REMATCH[1]}
    [[ -n ${!name+x} ]] || die "manifest: \${$name} is not set"
    s=${s//\$\{$name\}/${!name}}
  done
  printf '%s' "$s"
}

read_manifest() {
  local mf=$1 dir kind a b line
  [[ -f $mf ]] || die "no manifest $mf"
  dir=$(cd "$(dirname "$mf")" && pwd)
  while IFS= read -r line || [[ -n $line ]]; do
    line=${line%%#*}
    line=$(expand_vars "$line")
    read -r kind a b _ <<<"$line" || true
    [[ -z ${kind:-} ]] && continue
    if [[ $kind != module && -n $a && $a != /* ]]; then a=$dir/$a; fi
    case $kind in
      bin)    BINS+=("$a${b:+:$b}") ;;
      lib)    LIBS+=("$a${b:+:$b}") ;;
      file)   [[ -n $b ]] || die "manifest: file needs SRC DEST"; FILES+=("$a:$b") ;;
      job)    JOBS+=("$a${b:+:$b}") ;;
      module) MODS+=("$a") ;;
      *) die "manifest $mf: unknown kind '$kind'" ;;
    esac
  done <"$mf"
}

while (($#)); do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --bin) BINS+=("$2"); shift 2 ;;
    --lib) LIBS+=("$2"); shift 2 ;;
    --file) FILES+=("$2"); shift 2 ;;
    --job) JOBS+=("$2"); shift 2 ;;
    --module) MODS+=("$2"); shift 2 ;;
    --manifest) read_manifest "$2"; shift 2 ;;
    --kernel-version) KVER=$2; shift 2 ;;
    --bzimage) BOOT=bzImage; shift ;;
    --from-package) FROM_PKG=1; shift ;;
    --compress) COMPRESS=$2; shift 2 ;;
    --allow-host-cuda) HOST_CUDA=1; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ -n $OUT ]] || die "--out DIR is required"
[[ $COMPRESS == gzip || $COMPRESS == none ]] || die "--compress gzip|none"
for t in cpio ldd depmod; do command -v $t >/dev/null || die "missing $t (scripts/deps.sh vm)"; done
BUSYBOX=$(command -v busybox || true)
[[ -n $BUSYBOX ]] && file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' || BUSYBOX=/bin/busybox
[[ -x $BUSYBOX ]] || die "no static busybox (apt-get install busybox-static)"

# ---------------------------------------------------------------- kernel
CACHE=${WH_CACHE:-/var/cache/wormhole}
mkdir -p "$CACHE" 2>/dev/null && [[ -w $CACHE ]] || CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/wormhole
mkdir -p "$CACHE"

KROOT=/   # where boot/vmlinuz-V and lib/modules/V are
if [[ -z $KVER ]]; then
  KVER=$(ls /boot/vmlinuz-6.1* 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -V | tail -1 || true)
fi
if ((FROM_PKG)) || [[ -z $KVER || ! -r /boot/vmlinuz-$KVER || ! -d /lib/modules/$KVER ]]; then
  # No installed kernel: fetch the Debian package into the cache and unpack it.
  if [[ -z $KVER ]]; then
    KVER=$(apt-cache depends linux-image-amd64 2>/dev/null |
           sed -n 's/.*Depends: linux-image-\(6\.1[^ ]*-amd64\)$/\1/p' | head -1)
    [[ -n $KVER ]] || die "cannot tell which linux-image-6.1 package to use (apt-get update?)"
  fi
  KROOT=$CACHE/pkg/linux-image-$KVER
  if [[ ! -r $KROOT/boot/vmlinuz-$KVER ]]; then
    say "fetching linux-image-$KVER (apt-get download)"
    mkdir -p "$CACHE/pkg"
    (cd "$CACHE/pkg" && apt-get download -q "linux-image-$KVER" >"$CACHE/pkg/download.log" 2>&1) ||
      { cat "$CACHE/pkg/download.log" >&2; die "apt-get download linux-image-$KVER failed"; }
    rm -rf "$KROOT.tmp"
    deb=$(ls "$CACHE"/pkg/linux-image-"${KVER}"_*.deb | head -1)
    dpkg-deb -x "$deb" "$KROOT.tmp"
    rm -f "$deb"
    mv "$KROOT.tmp" "$KROOT"
  fi
fi
VMLINUZ=$KROOT/boot/vmlinuz-$KVER
MODDIR=$KROOT/lib/modules/$KVER
[[ -r $VMLINUZ ]] || die "cannot read $VMLINUZ"

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT/vmlinux" "$OUT/bzImage"
KERNEL=""
if [[ $BOOT == vmlinux ]]; then
  key=$(sha256sum "$VMLINUZ" | cut -c1-16)
  kc=$CACHE/kernel/$KVER-$key
  if [[ ! -s $kc/vmlinux ]]; then
    # bzImage = setup + compressed vmlinux; find the payload by its magic.
    mkdir -p "$kc"
    tmp=$kc/vmlinux.tmp.$$
    for magic in xz:'\3757zXZ\000' zstd:'(\265/\375' gzip:'\037\213\010'; do
      tool=${magic%%:*}; pat=${magic#*:}
      command -v $tool >/dev/null || continue
      for off in $(LC_ALL=C grep -obUaP "$(printf "$pat" | od -An -tx1 | sed 's/ /\\x/g')" \
                     "$VMLINUZ" 2>/dev/null | cut -d: -f1 | head -5); do
        case $tool in
          xz) tail -c +$((off + 1)) "$VMLINUZ" | xz -dc --single-stream >"$tmp" 2>/dev/null || true ;;
          zstd) tail -c +$((off + 1)) "$VMLINUZ" | zstd -dcq >"$tmp" 2>/dev/null || true ;;
          gzip) tail -c +$((off + 1)) "$VMLINUZ" | gzip -dcq >"$tmp" 2>/dev/null || true ;;
        esac
        if [[ $(head -c4 "$tmp" 2>/dev/null | od -An -tx1 | tr -d ' ') == 7f454c46 ]]; then
          mv "$tmp" "$kc/vmlinux"; break 2
        fi
      done
    done
    rm -f "$tmp"
  fi
  # QEMU boots an ELF vmlinux only through its PVH entry (Xen note 0x12).
  if [[ -s $kc/vmlinux ]] && readelf -n "$kc/vmlinux" 2>/dev/null | grep -q 'Xen.*(0x00000012)'; then
    cp "$kc/vmlinux" "$OUT/vmlinux"; KERNEL=$OUT/vmlinux
  fi
  [[ -n $KERNEL ]] || say "no PVH vmlinux could be extracted; booting the bzImage"
fi
if [[ -z $KERNEL ]]; then cp "$VMLINUZ" "$OUT/bzImage"; KERNEL=$OUT/bzImage; fi

# ---------------------------------------------------------------- root tree
ROOT=$OUT/root
rm -rf "$ROOT"
mkdir -p "$ROOT"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,usr/bin,usr/sbin,usr/lib/wormhole,usr/lib64,usr/lib/x86_64-linux-gnu,wh/jobs}
ln -s usr/lib "$ROOT/lib"      # merged /usr, as on Debian 12
ln -s usr/lib64 "$ROOT/lib64"
cp "$BUSYBOX" "$ROOT/bin/busybox"
for a in $("$ROOT/bin/busybox" --list-full); do
  [[ -e $ROOT/$a || -L $ROOT/$a ]] || ln -s /bin/busybox "$ROOT/$a"
done
install -m 0755 "$SRC_DIR/init" "$ROOT/init"
install -m 0644 "$SRC_DIR/wh-lib.sh" "$ROOT/wh/lib.sh"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$ROOT/etc/passwd"
printf 'root:x:0:\n' >"$ROOT/etc/group"
: >"$ROOT/etc/wh-modules"

declare -A PROVIDED=()   # sonames given by --lib: never copied from the host
declare -A COPIED=()

soname_of() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }

copy_host_file() {  # copy_host_file SRC DEST-in-image (follows symlinks)
  local src=$1 dst=$2
  [[ -n ${COPIED[$dst]:-} ]] && return 0
  mkdir -p "$ROOT$(dirname "$dst")"
  cp -L "$src" "$ROOT$dst"
  COPIED[$dst]=1
}

copy_deps() {  # the shared libraries that ldd resolves for $1, and the loader
  local f=$1 line name path
  local out
  # Resolve against the carried libraries first (the drop-ins), as the
  # guest's loader will, not against a host CUDA install.
  out=$(LD_LIBRARY_PATH="$LIBSRC_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$f" 2>&1) || {
    grep -q 'not a dynamic executable\|statically linked' <<<"$out" && return 0
    die "ldd $f: $out"
  }
  while IFS= read -r line; do
    line=${line#"${line%%[![:space:]]*}"}
    if [[ $line =~ ^([^[:space:]]+)\ =\>\ not\ found ]]; then
      name=${BASH_REMATCH[1]}
      [[ -n ${PROVIDED[$name]:-} ]] || MISSING+=("$name (needed by $f)")
    elif [[ $line =~ ^([^[:space:]]+)\ =\>\ ([^[:space:]]+)\ \( ]]; then
      name=${BASH_REMATCH[1]}; path=${BASH_REMATCH[2]}
      [[ -n ${PROVIDED[$name]:-} ]] && continue
      if ((!HOST_CUDA)) && [[ $path == */cuda* || $name =~ ^lib(cudart|cuda|cublas|cublasLt|nvrtc)\.so ]]; then
        HOSTCUDA+=("$name => $path (needed by $f)")
        continue
      fi
      # Keep the directory ldd found it in, /lib -> /usr/lib merged.
      copy_host_file "$path" "$(sed 's|^/lib/|/usr/lib/|' <<<"$path")"
    elif [[ $line =~ ^(/[^[:space:]]+)\ \( ]]; then
      path=${BASH_REMATCH[1]}   # the dynamic loader
      copy_host_file "$path" "$path"
    fi
  done <<<"$out"
}

MISSING=() HOSTCUDA=()
LDDIRS=()
LIBSRC_PATH=""
for spec in "${LIBS[@]}"; do LIBSRC_PATH+="${LIBSRC_PATH:+:}$(dirname "${spec%%:*}")"; done
# Libraries first, so that their sonames are known before programs resolve.
for spec in "${LIBS[@]}"; do
  src=${spec%%:*}; dir=/usr/lib/wormhole
  [[ $spec == *:* ]] && dir=${spec#*:}
  [[ -f $src ]] || die "--lib $src: no such file"
  so=$(soname_of "$src"); [[ -n $so ]] || so=$(basename "$src")
  PROVIDED[$so]=1
  PROVIDED[$(basename "$src")]=1
done
for spec in "${LIBS[@]}"; do
  src=${spec%%:*}; dir=/usr/lib/wormhole
  [[ $spec == *:* ]] && dir=${spec#*:}
  copy_host_file "$src" "$dir/$(basename "$src")"
  so=$(soname_of "$src")
  [[ -n $so && $so != "$(basename "$src")" ]] && ln -sf "$(basename "$src")" "$ROOT$dir/$so"
  LDDIRS+=("$dir")
  copy_deps "$src"
done
for spec in "${BINS[@]}"; do
  src=${spec%%:*}; dst=/usr/bin/$(basename "$src")
  [[ $spec == *:* ]] && dst=${spec#*:}
  [[ -f $src && -x $src ]] || die "--bin $src: no such executable"
  rm -f "$ROOT$dst"   # may shadow a busybox applet
  copy_host_file "$src" "$dst"
  chmod 0755 "$ROOT$dst"
  copy_deps "$src"
done
for spec in "${FILES[@]}"; do
  src=${spec%%:*}; dst=${spec#*:}
  [[ $spec == *:* && -n $dst ]] || die "--file needs SRC:DEST"
  [[ -e $src ]] || die "--file $src: no such file"
  mkdir -p "$ROOT$(dirname "$dst")"
  cp -rL "$src" "$ROOT$dst"
done
for spec in "${JOBS[@]}"; do
  src=${spec%%:*}; name=$(basename "$src" .sh)
  [[ $spec == *:* ]] && name=${spec#*:}
  [[ -f $src ]] || die "--job $src: no such file"
  install -m 0755 "$src" "$ROOT/wh/jobs/$name.sh"
done
((${#MISSING[@]} == 0)) || die "unresolved libraries: ${MISSING[*]}"
((${#HOSTCUDA[@]} == 0)) || die "these would come from the host's CUDA install: ${HOSTCUDA[*]};
  carry guest-lib's drop-in (--lib / manifest 'lib') or pass --allow-host-cuda"

# Library search path: ld.so.cache inside the image, our directories first.
{ printf '%s\n' /usr/lib/wormhole "${LDDIRS[@]}" /usr/local/lib; } | awk '!s[$0]++' >"$ROOT/etc/ld.so.conf"
if command -v ldconfig >/dev/null; then
  ldconfig -r "$ROOT" -f /etc/ld.so.conf -C /etc/ld.so.cache 2>/dev/null ||
    say "ldconfig -r failed; programs need LD_LIBRARY_PATH=/usr/lib/wormhole"
fi

# Kernel modules (none are needed for ivshmem: the BAR is mapped via sysfs).
if ((${#MODS[@]})); then
  [[ -d $MODDIR ]] || die "no modules directory $MODDIR"
  for m in "${MODS[@]}"; do
    deps=$(modprobe -S "$KVER" -d "$KROOT" --show-depends "$m" 2>&1) || die "module $m: $deps"
    while read -r kind path _; do
      [[ $kind == insmod ]] || continue
      mkdir -p "$ROOT$(dirname "$path")"
      cp "$KROOT$path" "$ROOT$path"
    done <<<"$deps"
    echo "$m" >>"$ROOT/etc/wh-modules"
  done
  for f in modules.order modules.builtin modules.builtin.modinfo; do
    [[ -f $MODDIR/$f ]] && cp "$MODDIR/$f" "$ROOT/lib/modules/$KVER/"
  done
  depmod -b "$ROOT" "$KVER"
fi

# ---------------------------------------------------------------- pack
INITRD=$OUT/initramfs.cpio.gz
[[ $COMPRESS == none ]] && INITRD=$OUT/initramfs.cpio
rm -f "$OUT/initramfs.cpio" "$OUT/initramfs.cpio.gz"
(cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) |
  { if [[ $COMPRESS == gzip ]]; then gzip -1 -n; else cat; fi; } >"$INITRD"
(cd "$ROOT" && find . -type f -o -type l | LC_ALL=C sort) >"$OUT/contents.txt"
cat >"$OUT/image.env" <<EOF
WH_KERNEL=$KERNEL
WH_INITRD=$INITRD
WH_KERNEL_VERSION=$KVER
WH_BOOT=$(basename "$KERNEL")
EOF
say "$(basename "$KERNEL") $KVER + $(basename "$INITRD") $(du -h "$INITRD" | cut -f1) ($(wc -l <"$OUT/contents.txt") files) in $OUT"
