#!/bin/bash
# The forwarded program resolves a library (default libcublas.so.13) and
# libcudart.so.13 to Wormhole's drop-ins, with the real soname and version
# node, and imports versioned symbols of the library that the drop-in defines.
# Usage: check_dropin.sh <build-dir> <program> [soname prefix]  (e.g. libcufft.so.12 cufft)
build="$1"; prog="$2"; so="${3:-libcublas.so.13}"; prefix="${4:-cublas}"
lib="$build/guest-lib/$so"
fail=0
out=$(LD_LIBRARY_PATH="$build/guest-lib" ldd "$prog")
echo "$out" | grep -q "$so => $build/guest-lib/$so" || { echo "FAIL: $so not the drop-in"; echo "$out"; fail=1; }
echo "$out" | grep -q "libcudart.so.13 => $build/guest-lib/libcudart.so.13" || { echo "FAIL: libcudart not the drop-in"; fail=1; }
objdump -p "$lib" | grep -q "SONAME *$so" || { echo "FAIL: soname"; fail=1; }
objdump -p "$lib" | grep -q "NEEDED *libcudart.so.13" || { echo "FAIL: drop-in does not need libcudart.so.13"; fail=1; }
# Every symbol of the library the program imports is defined, with the version node.
for s in $(objdump -T "$prog" | awk -v so="$so" '/\*UND\*/ && index($0, so) {print $NF}'); do
  objdump -T "$lib" | grep -q "$so *$s\$" || { echo "FAIL: drop-in lacks $s@$so"; fail=1; }
done
n=$(objdump -T "$lib" | grep -c " $so *$prefix")
real=$(nm -D --defined-only "/usr/local/cuda/lib64/$so" 2>/dev/null | awk '$2=="T"' | wc -l)
echo "drop-in exports $n versioned $prefix* functions (toolkit library: $real)"
[ "$real" -eq 0 ] || [ "$n" -ge "$real" ] || { echo "FAIL: fewer exports than the toolkit library"; fail=1; }
# No loader warnings when the program starts (no server needed to load).
warn=$(env LD_LIBRARY_PATH="$build/guest-lib" LD_BIND_NOW=1 ${WH_PRELOAD:+LD_PRELOAD="$WH_PRELOAD"} WORMHOLE_SOCKET=/nonexistent "$prog" 2>&1 | grep -i "version\|symbol lookup" || true)
[ -z "$warn" ] || { echo "FAIL: loader warnings: $warn"; fail=1; }
[ $fail -eq 0 ] && echo OK
exit $fail
