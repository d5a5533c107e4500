#!/bin/bash
# A program linked with -lcuda against the toolkit's stub resolves
# libcuda.so.1 to Wormhole's drop-in (and libcudart.so.13 under it): the real
# soname, unversioned symbols as NVIDIA's, every imported symbol defined,
# at least the stub's exports, no loader warnings.
# Usage: check_libcuda.sh <build-dir> <program>
build="$1"; prog="$2"
so=libcuda.so.1
lib="$build/guest-lib/$so"
stub=/usr/local/cuda/lib64/stubs/libcuda.so
fail=0
out=$(LD_LIBRARY_PATH="$build/guest-lib" ldd "$prog")
echo "$out" | grep -q "$so => $lib" || { echo "FAIL: $so is not the drop-in"; echo "$out"; fail=1; }
deps=$(LD_LIBRARY_PATH="$build/guest-lib" ldd "$lib")
echo "$deps" | grep -q "libcudart.so.13 => $build/guest-lib/libcudart.so.13" || { echo "FAIL: libcudart under it is not the drop-in"; echo "$deps"; fail=1; }
objdump -p "$lib" | grep -q "SONAME *$so" || { echo "FAIL: soname"; fail=1; }
objdump -p "$lib" | grep -q "NEEDED *libcudart.so.13" || { echo "FAIL: drop-in does not need libcudart.so.13"; fail=1; }
# Unversioned, as NVIDIA's: no version definitions.
readelf -V "$lib" | grep -q "Version definition" && { echo "FAIL: the drop-in defines symbol versions"; fail=1; }
defined=$(nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "W" {print $3}')
for s in $(nm -D --undefined-only "$prog" | awk '{print $2}' | grep '^cu[A-Z]'); do
  echo "$defined" | grep -qx "$s" || { echo "FAIL: drop-in lacks $s"; fail=1; }
done
n=$(nm -D --defined-only "$lib" | awk '$3 ~ /^cu/' | wc -l)
real=$(nm -D --defined-only "$stub" 2>/dev/null | awk '$2=="T"' | wc -l)
echo "drop-in exports $n cu* functions (toolkit stub: $real)"
[ "$real" -eq 0 ] || [ "$n" -ge "$real" ] || { echo "FAIL: fewer exports than the stub"; fail=1; }
warn=$(env LD_LIBRARY_PATH="$build/guest-lib" LD_BIND_NOW=1 ${WH_PRELOAD:+LD_PRELOAD="$WH_PRELOAD"} WORMHOLE_SOCKET=/nonexistent "$prog" 2>&1 | grep -i "version\|symbol lookup" || true)
[ -z "$warn" ] || { echo "FAIL: loader warnings: $warn"; fail=1; }
[ $fail -eq 0 ] && echo OK
exit $fail
