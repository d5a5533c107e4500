#!/usr/bin/env bash
# Fetches Debian's qemu 7.2 source package into $1 with a private apt
# configuration (deb-src for bookworm main), without touching the system's.
set -euo pipefail
DEST=$1
mkdir -p "$DEST/apt/lists/partial" "$DEST/apt/cache/archives/partial"
cat > "$DEST/apt/sources.list" <<SRC
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian bookworm-updates main
deb-src http://deb.debian.org/debian-security bookworm-security main
SRC
APTOPT=(-o Dir::Etc::SourceList="$DEST/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o Dir::State::Lists="$DEST/apt/lists" -o Dir::Cache="$DEST/apt/cache" -o APT::Sandbox::User=root)
apt-get "${APTOPT[@]}" update -qq
cd "$DEST" && apt-get "${APTOPT[@]}" source --download-only qemu >/dev/null
ls "$DEST"/qemu_*.dsc
