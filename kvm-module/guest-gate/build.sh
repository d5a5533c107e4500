#!/usr/bin/env bash
# Builds wormhole_gate.ko against Debian's linux-headers-6.1 into $1 (default: ./out)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(realpath -m "${1:-$HERE/out}")
KREL=$(ls /usr/src | sed -n 's/^linux-headers-\(6\.1\.[0-9-]*-amd64\)$/\1/p' | sort -V | tail -1)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$HERE"/wormhole_gate.c "$HERE"/wormhole_gate_uapi.h "$HERE"/../gate/wh_gate.h "$tmp/"
echo 'obj-m += wormhole_gate.o' > "$tmp/Makefile"
make -s -C "/usr/src/linux-headers-$KREL" M="$tmp" modules
mkdir -p "$OUT"; cp "$tmp/wormhole_gate.ko" "$OUT/"
echo "wormhole_gate.ko for $KREL in $OUT"
