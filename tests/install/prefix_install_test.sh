#!/bin/bash
# prefix_install_test.sh BUILD LIBDIR GUESTLIBDIR
# `cmake --install BUILD --prefix P` into a fresh P (no root needed): the
# layout (LIBDIR, GUESTLIBDIR relative to P), the files that name P
# (wormhole.pc, the unit, the config), an edited config kept on reinstall,
# and P/bin/wormhole-run finding P's drop-ins by itself: forwarded
# vector_add (shared and static CUDA runtime) against P's wormhole-server.
set -euo pipefail
build=$(cd "$1" && pwd)
libdir=$2
guestlibdir=$3
fail() { echo "prefix_install_test: FAIL: $*" >&2; exit 1; }
shared=$build/tests/forward/programs/vector_add
static=$build/tests/forward/programs-static/vector_add
[ -x "$shared" ] && [ -x "$static" ] ||
  fail "vector_add is not built (cmake --build $build --target fwd_vector_add fwds_vector_add)"
work=$(mktemp -d /tmp/wh-prefix-XXXXXX)
p=$work/prefix
spid=""
trap '[ -n "$spid" ] && kill -KILL "$spid" 2>/dev/null; rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$p" >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "cmake --install"; }

for f in bin/wormhole-server bin/wormhole-run include/wormhole/region.h etc/wormhole/server.toml \
         lib/systemd/system/wormhole-server.service "$libdir/pkgconfig/wormhole.pc"; do
  [ -e "$p/$f" ] || fail "$f not installed"
done
for l in libcudart.so.13 libcuda.so.1 libcublas.so.13 libcublasLt.so.13 libcufft.so.12 libcurand.so.10 libcudnn.so.9; do
  [ -f "$p/$guestlibdir/$l" ] || fail "$guestlibdir/$l not installed"
  link=${l%.so.*}.so
  [ "$(readlink "$p/$guestlibdir/$link")" = "$l" ] || fail "$guestlibdir/$link is not a link to $l"
done
[ -x "$p/bin/wormhole-run" ] || fail "wormhole-run not executable"
pc() { PKG_CONFIG_LIBDIR="$p/$libdir/pkgconfig" pkg-config "$@" wormhole; }
[ "$(pc --variable=prefix)" = "$p" ] || fail "wormhole.pc: prefix $(pc --variable=prefix), want $p"
[ "$(pc --libs | xargs)" = "-L$p/$guestlibdir -Xlinker -rpath=$p/$guestlibdir" ] ||
  fail "pkg-config --libs wormhole: $(pc --libs)"
grep -qx "ExecStart=$p/bin/wormhole-server --config $p/etc/wormhole/server.toml" \
  "$p/lib/systemd/system/wormhole-server.service" || fail "the unit's ExecStart does not name $p"

# Installing again keeps an edited config.
echo '# edited' >>"$p/etc/wormhole/server.toml"
cmake --install "$build" --prefix "$p" >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "reinstall"; }
tail -1 "$p/etc/wormhole/server.toml" | grep -qx '# edited' || fail "reinstall overwrote the edited config"
[ -f "$p/etc/wormhole/server.toml.dist" ] || fail "no server.toml.dist beside the edited config"

sock=$work/s.sock
"$p/bin/wormhole-server" --backend sim --socket "$sock" --log-level warn >"$work/server.log" 2>&1 &
spid=$!
for _ in $(seq 1 200); do
  [ -S "$sock" ] && break
  kill -0 "$spid" 2>/dev/null || { cat "$work/server.log" >&2; fail "the installed server exited"; }
  sleep 0.05
done
for prog in "$shared" "$static"; do
  out=$(env -u LD_LIBRARY_PATH -u WORMHOLE_LIB_DIR "$p/bin/wormhole-run" --socket "$sock" --explain "$prog" 2>&1) ||
    { echo "$out" >&2; fail "$prog through $p/bin/wormhole-run"; }
  grep -q "LD_LIBRARY_PATH=$p/$guestlibdir " <<<"$out" || { echo "$out" >&2; fail "wormhole-run chose another library directory"; }
  grep -q '^PASS vector_add' <<<"$out" || { echo "$out" >&2; fail "$prog did not pass"; }
done
kill -TERM "$spid"; wait "$spid"; spid=""
echo "prefix_install_test: PASS ($p)"
