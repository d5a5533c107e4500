#!/usr/bin/env python3
"""fatbin_census.py LIB...: what the .nv_fatbin section of each shared library
carries: fatbins, entries per kind and architecture, PTX or not, compression,
bytes. Reads the ELF section table itself (no CUDA tools needed)."""
import collections
import struct
import sys


def section(path, want):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def sh(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
    stroff = sh(shstrndx)[4]
    for i in range(shnum):
        name, _, _, _, off, size, *_ = sh(i)
        end = data.index(b"\0", stroff + name)
        if data[stroff + name:end].decode() == want:
            return data[off:off + size]
    return None


def census(path):
    sec = section(path, ".nv_fatbin")
    if sec is None:
        print(f"{path}: no .nv_fatbin section")
        return
    kinds = collections.Counter()
    nbytes = collections.Counter()
    comp = collections.Counter()
    fatbins = pos = 0
    sizes = []
    while pos + 16 <= len(sec):
        magic, _, hsize, psize = struct.unpack_from("<IHHQ", sec, pos)
        if magic != 0xBA55ED50:
            pos += 8  # fatbins are 8-aligned; skip padding
            continue
        fatbins += 1
        sizes.append(hsize + psize)
        e, end = pos + hsize, pos + hsize + psize
        while e + 64 <= end:
            kind, _, ehs, eps = struct.unpack_from("<HHIQ", sec, e)
            arch, = struct.unpack_from("<I", sec, e + 28)
            flags, = struct.unpack_from("<Q", sec, e + 40)
            k = ("PTX compute_%d" if kind == 1 else "ELF sm_%d") % arch
            kinds[k] += 1
            nbytes[k] += eps
            comp[(k, "zstd" if flags & 0x8000 else "lz4" if flags & 0x2000 else "plain")] += 1
            e += ehs + eps
        pos = end
    sizes.sort()
    print(f"{path}: {fatbins} fatbins, {len(sec)} bytes; one fatbin: median "
          f"{sizes[len(sizes) // 2] / 2**20:.2f} MiB, largest {sizes[-1] / 2**20:.2f} MiB")
    for k in sorted(kinds):
        cs = ", ".join(f"{c} {n}" for (kk, c), n in sorted(comp.items()) if kk == k)
        print(f"  {k:16} {kinds[k]:6} entries {nbytes[k] / 2**20:9.1f} MiB  ({cs})")


for p in sys.argv[1:]:
    census(p)
