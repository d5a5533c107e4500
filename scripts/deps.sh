#!/usr/bin/env bash
# Installs the Debian packages a make target needs, and only those missing.
# Usage: scripts/deps.sh GROUP...   (groups: core vm exitless qemu-build debug bench package compare gvirtus server-test)
set -euo pipefail

declare -A GROUP
# python3-venv, python3-dev: the Python tests' environments, and Triton
# (torch.compile) builds its kernel launcher against Python's headers.
GROUP[core]="build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libspdlog-dev libfmt-dev
  libtomlplusplus-dev nlohmann-json3-dev libcpp-httplib-dev libzstd-dev libelf-dev libopenblas-dev libfftw3-dev libdnnl-dev nettle-dev zlib1g-dev
  libucx-dev iproute2
  dataset-fashion-mnist fortunes gnuplot-nox clang lld libclang-rt-14-dev
  python3-venv python3-dev llvm-16-dev"
# Guest images and VMs under QEMU (TCG), libvirt XML validation.
GROUP[vm]="qemu-system-x86 qemu-utils busybox-static linux-image-amd64 kmod cpio
  libvirt-clients libvirt-daemon-system"
# The Bochs test bed of the exitless switch and the kernel module build.
GROUP[exitless]="bochs bochsbios vgabios grub-pc-bin grub-common xorriso mtools
  linux-source-6.1 linux-headers-amd64 bc flex bison libssl-dev libelf-dev
  dwarves rsync xz-utils kmod cpio busybox-static linux-image-amd64"
# Plots drawn by the benchmark scripts.
GROUP[bench]="gnuplot-nox"
# The server's metrics endpoint checked by promtool and scraped by a real
# Prometheus (tests/server).
GROUP[server-test]="prometheus"
# Single-stepping the ring's critical path (tests/ring/bench/critpath).
GROUP[debug]="gdb"
# The .deb (CPack: dpkg-shlibdeps, file) and its install test in a fresh
# Debian root (tests/install).
GROUP[package]="dpkg-dev file debootstrap"
# make bench-compare: the plot (tests/compare/run_compare.sh).
GROUP[compare]="gnuplot-nox"
# Building GVirtuS for make bench-compare (docs/compare.md).
GROUP[gvirtus]="cmake ninja-build liblog4cplus-dev librdmacm-dev libibverbs-dev nlohmann-json3-dev"
# Building Debian's QEMU from its source package.
GROUP[qemu-build]="dpkg-dev meson ninja-build libglib2.0-dev libpixman-1-dev
  libfdt-dev flex bison zlib1g-dev python3-venv"

want=()
for g in "$@"; do
  [[ -n "${GROUP[$g]+x}" ]] || { echo "deps.sh: unknown group '$g'" >&2; exit 2; }
  for p in ${GROUP[$g]}; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      want+=("$p")
    fi
  done
done
((${#want[@]})) || exit 0
echo "deps.sh: installing ${want[*]}"
SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# Refresh the lists only when a package is not known to apt yet.
if ! apt-cache show "${want[@]}" >/dev/null 2>&1; then $SUDO apt-get update -qq; fi
$SUDO apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
