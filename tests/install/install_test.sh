#!/bin/bash
# install_test.sh BUILD SRC NVCC [NVCC_FLAGS...]
# The .deb on a fresh Debian 12: builds the package from BUILD (cpack),
# makes a minimal Debian root (debootstrap --variant=minbase from the apt
# mirror this machine uses, its root cached under $WH_INSTALL_TEST_CACHE,
# default /var/cache/wormhole-test, keyed by the suite, mirror and the
# package's Depends), installs the .deb there with apt (its Depends resolved
# from Debian), starts the installed server as the systemd unit would
# (user wormhole, RuntimeDirectory, the unit's ExecStart and Environment,
# /etc/wormhole/server.toml) on the sim backend, and runs already-built
# forwarded programs in the root as a member of the group wormhole: through
# wormhole-run (shared and static CUDA runtime, cuBLAS, cuFFT) and one built
# here with `nvcc $(pkg-config --cflags --libs wormhole)` run without it.
# Then removes and purges the package. Needs root; exits 77 (skipped)
# without it. Prints one summary line with the timings.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
nvcc=$3
shift 3
nvcc_flags=("$@")
suite=${WH_DEBIAN_SUITE:-bookworm}
cache=${WH_INSTALL_TEST_CACHE:-/var/cache/wormhole-test}

if [ "$(id -u)" != 0 ]; then
  echo "install_test: needs root (debootstrap, chroot): skipped"
  exit 77
fi
# Mounts (proc, tmpfs) live in a private mount namespace: they end with it.
if [ -z "${WH_INSTALL_TEST_NS:-}" ]; then
  "$src/scripts/deps.sh" package
  WH_INSTALL_TEST_NS=1 exec unshare --mount --propagation private "$0" "$build" "$src" "$nvcc" "$@"
fi

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
t_start=$(now)

# The programs, built by the tree's build (targets named).
declare -A progs=(
  [vector_add]="$build/tests/forward/programs/vector_add:fwd_vector_add"
  [vector_add_static]="$build/tests/forward/programs-static/vector_add:fwds_vector_add"
  [blas_test]="$build/tests/blas/wh_blas_test:wh_blas_test_prog"
  [fft_test]="$build/tests/fft/wh_fft_test:wh_fft_test_prog"
)
for p in "${!progs[@]}"; do
  f=${progs[$p]%%:*}
  [ -x "$f" ] || fail "$f is not built (cmake --build $build --target ${progs[$p]#*:})"
done

mount_root() {  # ROOT: proc, /run, /dev/shm and the basic device nodes
  mount -t proc proc "$1/proc"
  mount -t tmpfs -o mode=0755 tmpfs "$1/run"
  mkdir -p "$1/dev/shm"
  mount -t tmpfs -o mode=1777 tmpfs "$1/dev/shm"
  for n in null zero full random urandom tty; do
    if [ ! -c "$1/dev/$n" ]; then
      rm -f "$1/dev/$n"; touch "$1/dev/$n"; mount --bind "/dev/$n" "$1/dev/$n"
    fi
  done
}
umount_root() {
  for m in dev/shm run proc; do umount -l "$1/$m" 2>/dev/null || true; done
  for n in null zero full random urandom tty; do umount "$1/dev/$n" 2>/dev/null || true; done
}
work=$(mktemp -d /var/tmp/wh-install-test-XXXXXX)
root=$work/root
spid=""
cleanup() {
  if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then kill -KILL "$spid" 2>/dev/null || true; fi
  umount_root "$root"
  if [ -d "$work/debootstrap" ]; then umount_root "$work/debootstrap"; fi
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# 1. The package.
t0=$(now)
out=$(cd "$build" && cpack -G DEB 2>&1) || { echo "$out" >&2; fail "cpack"; }
deb=$(printf '%s\n' "$out" | sed -n 's/^CPack: - package: \(.*\.deb\) generated\.$/\1/p' | tail -1)
[ -f "$deb" ] || { echo "$out" >&2; fail "cpack made no .deb"; }
t_pkg=$(secs "$t0" "$(now)")
depends=$(dpkg-deb -f "$deb" Depends)
recommends=$(dpkg-deb -f "$deb" Recommends)
echo "install_test: $(basename "$deb"): Depends: $depends; Recommends: ${recommends:-none}"
# apt installs Recommends by default: the root holds them too.
wanted="$depends${recommends:+, $recommends}"

# 2. The Debian root: minbase, then the package's Depends and Recommends installed by apt
#    from the mirror apt uses here (`apt-get satisfy`: virtual packages such
#    as libspdlog1.10-fmt9 resolve as they will for a user).
mirror=${WH_DEBIAN_MIRROR:-$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
                               awk -v s="$suite" '$2 == s { print $1; exit }')}
mirror=${mirror:-http://deb.debian.org/debian/}
arch=$(dpkg --print-architecture)
key=$(printf '%s\n' "$suite" "$mirror" "$arch" minbase "$wanted" | sha256sum | cut -c1-16)
tarball=$cache/debian-$suite-$arch-minbase-$key.tar
t0=$(now)
if [ -f "$tarball" ]; then
  kind=warm
else
  kind=cold
  echo "install_test: no cached root ($tarball): debootstrap $suite from $mirror"
  mkdir -p "$cache"
  fresh=$work/debootstrap
  if ! debootstrap --variant=minbase --arch="$arch" "$suite" "$fresh" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -30 "$work/debootstrap.log" >&2
    tail -30 "$fresh/debootstrap/debootstrap.log" >&2 2>/dev/null || true
    fail "debootstrap"
  fi
  mount_root "$fresh"
  if ! chroot "$fresh" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C DEBIAN_FRONTEND=noninteractive \
       sh -c 'apt-get update -q && apt-get satisfy -y -q --no-install-recommends "$1" && apt-get clean' sh "$wanted" \
       >"$work/satisfy.log" 2>&1; then
    tail -30 "$work/satisfy.log" >&2
    fail "apt-get satisfy of the package's Depends and Recommends in the fresh root"
  fi
  umount_root "$fresh"
  tar -C "$fresh" --numeric-owner -cf "$tarball.tmp.$$" .
  mv "$tarball.tmp.$$" "$tarball"
  rm -rf --one-file-system "$fresh"
  # Older roots (another Depends) go.
  find "$cache" -maxdepth 1 -name "debian-$suite-$arch-minbase-*.tar" ! -name "$(basename "$tarball")" -delete
fi
mkdir "$root"
tar -C "$root" --numeric-owner -xpf "$tarball"
t_root=$(secs "$t0" "$(now)")
mount_root "$root"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C "$@"; }

# 3. apt installs it; its Depends and Recommends are all satisfied by the Debian packages
#    already in the root (nothing else may be installed).
t0=$(now)
cp "$deb" "$root/tmp/wormhole.deb"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/wormhole.deb \
  >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "apt-get install of the .deb"; }
grep -q '^0 upgraded, 1 newly installed, 0 to remove' "$work/apt.log" ||
  { cat "$work/apt.log" >&2; fail "apt installed more than the .deb"; }
t_install=$(secs "$t0" "$(now)")

# What it installed, and where.
libdir=/usr/lib/$(gcc -print-multiarch)
for f in /usr/bin/wormhole-server /usr/bin/wormhole-run /etc/wormhole/server.toml \
         /usr/lib/systemd/system/wormhole-server.service $libdir/pkgconfig/wormhole.pc \
         /usr/include/wormhole/region.h; do
  [ -e "$root$f" ] || fail "$f not installed"
done
for l in libcudart.so.13 libcuda.so.1 libcublas.so.13 libcublasLt.so.13 libcufft.so.12 libcurand.so.10 libcudnn.so.9; do
  [ -f "$root$libdir/wormhole/$l" ] || fail "$libdir/wormhole/$l not installed"
  soname=$(readelf -d "$root$libdir/wormhole/$l" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "$l" ] || fail "$l has soname '$soname'"
done
# Private: nothing of Wormhole's on the system's library path.
if in_root ldconfig -p | grep -E 'libcudart|libcuda\.so|libcublas|libcufft|libcurand'; then
  fail "a drop-in is on the system library path"
fi
in_root dpkg-query -W -f='${Conffiles}\n' wormhole | grep -q '/etc/wormhole/server.toml' ||
  fail "/etc/wormhole/server.toml is not a conffile"
in_root getent group wormhole >/dev/null || fail "postinst made no group wormhole"
in_root getent passwd wormhole >/dev/null || fail "postinst made no user wormhole"
in_root /usr/bin/wormhole-server --version | grep -q '^wormhole-server ' || fail "wormhole-server --version"
if command -v systemd-analyze >/dev/null; then
  # The unit's syntax (systemd of the host; its ExecStart checked in the root).
  unit=$work/wormhole-server.service
  sed "s|^ExecStart=/|ExecStart=$root/|" "$root/usr/lib/systemd/system/wormhole-server.service" >"$unit"
  if ! out=$(systemd-analyze verify "$unit" 2>&1) || printf '%s' "$out" | grep -q 'wormhole-server.service:'; then
    echo "$out" >&2; fail "systemd-analyze verify of wormhole-server.service"
  fi
fi

# 4. The server, started as the unit starts it: its user and group, its
#    RuntimeDirectory, Environment and ExecStart (sim backend: no GPU here).
unit_file=$root/usr/lib/systemd/system/wormhole-server.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit_file")
unit_env=$(sed -n 's/^Environment=//p' "$unit_file")
run_dir=/$(sed -n 's/^RuntimeDirectory=//p' "$unit_file")
run_dir=/run${run_dir}
wuid=$(in_root id -u wormhole)
wgid=$(in_root getent group wormhole | cut -d: -f3)
mkdir -p "$root$run_dir"
chown "$wuid:$wgid" "$root$run_dir"
chmod 0755 "$root$run_dir"
sock=$(printf '%s\n' $unit_env | sed -n 's/^WORMHOLE_SOCKET=//p')
[ -n "$sock" ] || fail "the unit sets no WORMHOLE_SOCKET"
# shellcheck disable=SC2086
chroot --userspec="$wuid:$wgid" "$root" /usr/bin/env -i PATH=/usr/bin:/bin $unit_env \
  $exec_start --backend sim >"$work/server.log" 2>&1 &
spid=$!
for _ in $(seq 1 200); do
  [ -S "$root$sock" ] && break
  kill -0 "$spid" 2>/dev/null || { cat "$work/server.log" >&2; fail "the installed server exited"; }
  sleep 0.05
done
[ -S "$root$sock" ] || { cat "$work/server.log" >&2; fail "no socket $sock"; }
mode=$(stat -c '%a %g %u' "$root$sock")
[ "$mode" = "660 $wgid $wuid" ] || fail "socket $sock: mode/group/owner '$mode', want '660 $wgid $wuid'"

# 5. A user of the group wormhole runs the programs.
in_root useradd --create-home --groups wormhole alice
auid=$(in_root id -u alice)
agid=$(in_root id -g alice)
mkdir -p "$root/opt/wormhole-test"
for p in "${!progs[@]}"; do install -m 0755 "${progs[$p]%%:*}" "$root/opt/wormhole-test/$p"; done
# Built against the installed wormhole.pc (its -L in the root, its rpath
# the installed private directory): binds the drop-ins with no wormhole-run.
# (pkg-config's sysroot would move the rpath too: the root's -L is added.)
pc=(env PKG_CONFIG_LIBDIR="$root$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$root" pkg-config)
"${pc[@]}" --exists wormhole || fail "pkg-config finds no wormhole.pc"
libs=$(PKG_CONFIG_LIBDIR="$root$libdir/pkgconfig" pkg-config --libs wormhole)
echo "install_test: pkg-config --libs wormhole: $libs"
"$nvcc" -cudart shared -O2 -std=c++17 "${nvcc_flags[@]}" -I"$src/tests/forward/programs" \
  -o "$root/opt/wormhole-test/vector_add_pc" "$src/tests/forward/programs/vector_add.cu" \
  -L"$root$libdir/wormhole" $libs || fail "nvcc with pkg-config --libs wormhole"
readelf -d "$root/opt/wormhole-test/vector_add_pc" | grep -q "R.*PATH.*\[$libdir/wormhole\]" ||
  fail "vector_add_pc: no rpath $libdir/wormhole"
printf '#include <wormhole/region.h>\nint main(void) { return (int)sizeof(struct wh_region_hdr) == 0; }\n' >"$work/h.c"
gcc -fsyntax-only $("${pc[@]}" --cflags wormhole) "$work/h.c" || fail "region.h with pkg-config --cflags"
g++ -x c++ -fsyntax-only $("${pc[@]}" --cflags wormhole) "$work/h.c" || fail "region.h from C++"

t0=$(now)
as_alice() {
  chroot --userspec="$auid:$agid" --groups="$wgid" "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/home/alice \
    LC_ALL=C "$@"
}
run_prog() {  # NAME EXPECTED-OUTPUT COMMAND...
  local name=$1 want=$2; shift 2
  local out rc=0
  out=$(cd "$root/opt/wormhole-test" && as_alice "$@" 2>&1) || rc=$?
  if [ $rc -ne 0 ] || ! grep -q "$want" <<<"$out"; then
    printf '%s\n' "$out" | tail -30 >&2
    echo "--- server log:" >&2; tail -30 "$work/server.log" >&2
    fail "$name (exit $rc; wanted '$want')"
  fi
  echo "install_test: $name: $(printf '%s\n' "$out" | grep "$want" | tail -1)"
}
t=/opt/wormhole-test
run_prog vector_add 'PASS vector_add' /usr/bin/wormhole-run $t/vector_add
run_prog vector_add_static 'PASS vector_add' /usr/bin/wormhole-run $t/vector_add_static
run_prog blas_test '^OK: [1-9][0-9]* passed, 0 failed' /usr/bin/wormhole-run $t/blas_test
run_prog fft_test 'all cuFFT checks passed' /usr/bin/wormhole-run $t/fft_test
run_prog vector_add_pc 'PASS vector_add' env WORMHOLE_SOCKET="$sock" $t/vector_add_pc
out=$(as_alice env LD_TRACE_LOADED_OBJECTS=1 $t/vector_add_pc)
grep -q "libcudart.so.13 => $libdir/wormhole/libcudart.so.13" <<<"$out" ||
  { echo "$out" >&2; fail "vector_add_pc did not bind $libdir/wormhole/libcudart.so.13"; }
# Not a member of the group: refused at the socket (0660, group wormhole),
# and for that reason: connect() fails with EACCES, which the library
# reports naming the socket. Any other failure (no server, a wrong path, a
# crash) is not the refusal this checks.
in_root useradd --create-home bob
buid=$(in_root id -u bob)
if out=$(chroot --userspec="$buid:$buid" "$root" /usr/bin/env -i PATH=/usr/bin:/bin \
         /usr/bin/wormhole-run $t/vector_add 2>&1); then
  fail "a user outside the group wormhole reached the server"
fi
if ! grep -qF "wormhole: cannot reach wormhole-server at $sock: Permission denied" <<<"$out"; then
  printf '%s\n' "$out" | tail -20 >&2
  fail "a user outside the group wormhole failed, but not with the socket's permission refusal (EACCES on $sock)"
fi
echo "install_test: outside the group: $(printf '%s\n' "$out" | grep -F 'cannot reach wormhole-server' | head -1)"
t_progs=$(secs "$t0" "$(now)")

# 6. SIGTERM stops it cleanly (statistics printed, socket removed).
kill -TERM "$spid"
rc=0; wait "$spid" || rc=$?
spid=""
[ $rc -eq 0 ] || { cat "$work/server.log" >&2; fail "the server exited with $rc on SIGTERM"; }
grep -q 'wormhole-server statistics' "$work/server.log" || fail "no statistics at exit"
[ ! -e "$root$sock" ] || fail "socket left behind"

# 7. Remove keeps the edited config; purge removes it.
echo '# edited' >>"$root/etc/wormhole/server.toml"
in_root env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q wormhole >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log" >&2; fail "apt-get remove"; }
[ ! -e "$root/usr/bin/wormhole-server" ] && [ ! -e "$root$libdir/wormhole/libcudart.so.13" ] ||
  fail "files left after remove"
[ -f "$root/etc/wormhole/server.toml" ] || fail "remove deleted the edited conffile"
in_root dpkg --purge wormhole >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "dpkg --purge"; }
[ ! -e "$root/etc/wormhole/server.toml" ] || fail "purge left /etc/wormhole/server.toml"

echo "install_test: PASS ($kind root): package ${t_pkg}s, root ${t_root}s, apt install ${t_install}s," \
     "programs ${t_progs}s, total $(secs "$t_start" "$(now)")s"
