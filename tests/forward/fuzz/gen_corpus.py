#!/usr/bin/env python3
"""Writes the structured seed corpus of the session fuzzer (fuzz_session.cpp).

Each seed is a short, valid request sequence in the fuzzer's input format,
with live objects named through references (0xFEED words into known[];
0xFE5E words: offsets in grown pinned segments):
known[0] = the real fatbin's size, known[1] = the data area size,
known[2] = the pinned heap offset, then every 8-byte word of each
successful synchronous response's fixed part, in order.

Usage: gen_corpus.py OUT_DIR   (the committed corpus/ was made this way)
"""
import os
import struct
import sys

# Commands: an operation's index in the fuzzer's dense table (kAllOps), i.e.
# its position in the .def files in wire.hpp's WH_OP_LIBRARIES order,
# starting at 1 (read from the tables so seeds follow them). Not the opcode:
# opcodes sit in per-library blocks.
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "../../..")
TABLES = [os.path.join(ROOT, f) for f in (
    "proto/include/wormhole/proto/cudart_api.def", "libs/cublas/cublas_api.def", "libs/cufft/cufft_api.def",
    "libs/cublaslt/cublaslt_api.def", "libs/curand/curand_api.def", "libs/cudnn/cudnn_api.def",
    "proto/include/wormhole/proto/remote_api.def", "proto/include/wormhole/proto/peer_api.def",
    "libs/nvml/nvml_api.def")]
OPS = []
for t in TABLES:
    for line in open(t):
        s = line.strip()
        if s.startswith("X(") and "," in s:
            OPS.append(s[2:s.index(",")].strip())
OP = {name: i + 1 for i, name in enumerate(OPS)}
NOPS = len(OPS) + 1  # kOpCount (Pad included)

POSTED = 1


def ref(i, addend=0):
    return 0xFEED << 48 | (addend & 0xFFFFFF) << 8 | (i & 0xFF)


def seg(k, off):
    """An offset in grown pinned segment k (0 to 3): (k << 40) + off."""
    return 0xFE5E << 48 | (k & 3) << 32 | (off & 0xFFFFFFFF)


class Seq:
    def __init__(self):
        self.b = bytearray()
        self.known = 3  # fatbin size, data size, pinned offset

    def req(self, name, payload=b"", posted=False, resp_words=0):
        op = OP[name]
        assert op < 0xF0
        self.b += struct.pack("<BBH", op, POSTED if posted else 0, len(payload)) + payload
        at = self.known
        if not posted:
            self.known += resp_words
        return at  # index in known[] of the response's first word

    def write(self, off, data):
        p = struct.pack("<I", off) + data
        self.b += struct.pack("<BBH", 0xF0, 0, len(p)) + p

    def fatbin(self, off):
        p = struct.pack("<I", off)
        self.b += struct.pack("<BBH", 0xF1, 0, len(p)) + p


def q(*words):
    return struct.pack("<%dQ" % len(words), *words)


def seeds():
    out = {}
    # Memory: malloc, inline copy, staged-style copy from the data area, back, free.
    s = Seq()
    d = s.req("Malloc", q(4096), resp_words=1)
    s.req("MemcpyHtoDInline", q(ref(d), 0) + bytes(range(64)))
    s.write(8192, b"\x5a" * 256)
    s.req("MemcpyHtoD", q(ref(d, 64), 8192, 256, 0, 1))
    s.req("MemcpyDtoH", q(16384, ref(d), 512, 0, 2))
    s.req("MemcpyDtoD", q(ref(d, 1024), ref(d), 512, 0))
    s.req("Memset", q(ref(d, 2048), 1024, 0) + struct.pack("<iI", 0x33, 0))
    s.req("Memcpy2D", q(ref(d), 64, ref(d, 2048), 64, 32, 8) + struct.pack("<II", 3, 0) + q(0))
    s.req("Memcpy2D", q(20000, 64, ref(d), 64, 32, 8) + struct.pack("<II", 2, 0) + q(0))
    s.req("MemGetInfo", resp_words=2)
    s.req("DeviceSynchronize")
    s.req("Free", q(ref(d)))
    out["memory"] = s.b
    # Modules and launches: the real fatbin, kernels by name, launches on
    # the device allocation and on the mapped data area, a fault, a reset.
    s = Seq()
    d = s.req("Malloc", q(4096), resp_words=1)
    s.fatbin(32768)
    m = s.req("ModuleLoad", q(32768, ref(0)), resp_words=1)
    kf = s.req("ModuleGetKernel", q(ref(m)) + b"fill_words", resp_words=2)
    kc = s.req("ModuleGetKernel", q(ref(m)) + b"copy_words", resp_words=2)
    ke = s.req("ModuleGetKernel", q(ref(m)) + b"empty_kernel", resp_words=2)
    s.req("FuncGetAttributes", q(ref(kf)), resp_words=4)
    launch = lambda k, g, b, params, posted=True: s.req(
        "Launch", q(ref(k), 0) + struct.pack("<6III", g, 1, 1, b, 1, 1, 0, 0) + params, posted=posted)
    launch(kf, 4, 256, q(ref(d)) + struct.pack("<II", 7, 1024))
    launch(ke, 1, 1, b"")
    mp = s.req("MapDataArea", resp_words=2)
    launch(kc, 4, 256, q(ref(d), ref(mp, 65536)) + struct.pack("<I", 1024))
    s.req("StreamSynchronize", q(0))
    launch(kf, 8, 256, q(ref(d)) + struct.pack("<II", 1, 2048))  # out of bounds: a fault
    s.req("DeviceSynchronize")
    s.req("DeviceReset")
    s.req("ModuleUnload", q(ref(m)))
    out["modules"] = s.b
    # Symbols of a module (hostile_kernels has none: a failing lookup) and a
    # module image built in the data area by the input itself.
    s = Seq()
    s.write(40000, b"\x50\xed\x55\xba" + b"\x01\x00\x10\x00" + struct.pack("<Q", 64) + b"\x00" * 64)
    s.req("ModuleLoad", q(40000, 80), resp_words=1)
    m = s.req("ModuleLoad", q(40000, 16), resp_words=1)
    # A __fatBinC_Wrapper_t: its pointer must never be followed (it crashed
    # the server before the session refused wrappers).
    s.write(48000, struct.pack("<IIQQ", 0x466243b1, 1, 0xdeadbeefdeadbeef, 0))
    s.req("ModuleLoad", q(48000, 24), resp_words=1)
    s.req("ModuleGetGlobal", q(ref(m)) + b"counter", resp_words=2)
    out["module_garbage"] = s.b
    # Streams and events.
    s = Seq()
    st = s.req("StreamCreate", struct.pack("<Ii", 1, 0), resp_words=1)
    e1 = s.req("EventCreate", struct.pack("<II", 0, 0), resp_words=1)
    e2 = s.req("EventCreate", struct.pack("<II", 0, 0), resp_words=1)
    s.req("EventRecord", q(ref(e1), ref(st)), posted=True)
    s.req("StreamWaitEvent", q(ref(st), ref(e1)) + struct.pack("<II", 0, 0), posted=True)
    s.req("EventRecord", q(ref(e2), ref(st)), posted=True)
    s.req("EventSynchronize", q(ref(e2)))
    s.req("EventQuery", q(ref(e2)))
    s.req("EventElapsedTime", q(ref(e1), ref(e2)), resp_words=1)
    s.req("StreamQuery", q(ref(st)))
    s.req("StreamDestroy", q(ref(st)))
    s.req("EventDestroy", q(ref(e1)))
    s.req("EventRecord", q(ref(e1), 0))  # stale
    out["streams_events"] = s.b
    # BLAS: a handle, vectors, axpy, dot (host result), a small gemm.
    s = Seq()
    h = s.req("BlasCreate", resp_words=2)
    x = s.req("Malloc", q(4096), resp_words=1)
    y = s.req("Malloc", q(4096), resp_words=1)
    one = struct.unpack("<I", struct.pack("<f", 1.0))[0]
    s.req("BlasAxpy", q(ref(h), 0, one, ref(x), ref(y)) + struct.pack("<iiiI", 256, 1, 1, 0))
    s.req("BlasDot", q(ref(h), 0, ref(x), ref(y), 0) + struct.pack("<iiiI", 256, 1, 1, 0), resp_words=1)
    s.req("BlasGemm", q(ref(h), 0, one, 0, ref(x), ref(y), ref(x, 2048)) + struct.pack("<qqq", 16, 16, 16) +
          struct.pack("<iiiIIIII", 16, 16, 16, 0, 0, 0, 0, 0))
    s.req("BlasDestroy", q(ref(h)))
    out["blas"] = s.b
    # BLAS generic ops: level 1 (daxpy, zdotu with a host result), level 2
    # (cgemv), level 3 (strided zgemm, sgemm on a device pointer array),
    # GemmEx strided (fp16 in, fp32 out), getrf on a pointer array.
    s = Seq()
    h = s.req("BlasCreate", resp_words=2)
    x = s.req("Malloc", q(4096), resp_words=1)
    y = s.req("Malloc", q(4096), resp_words=1)
    P = s.req("Malloc", q(64), resp_words=1)
    s.req("MemcpyHtoDInline", q(ref(P), 0) + q(ref(x), ref(x, 1024), ref(y)))
    d1 = struct.unpack("<Q", struct.pack("<d", 1.0))[0]
    s.req("BlasL1", q(ref(h), 0, d1, 0, 0, 0, 0, ref(x), ref(y), 0) + struct.pack("<iiiIII", 64, 1, 1, 0, 1, 0))
    s.req("BlasL1", q(ref(h), 0, 0, 0, 0, 0, 0, ref(x), ref(y), 0) + struct.pack("<iiiIII", 16, 1, -1, 5, 3, 0),
          resp_words=3)
    s.req("BlasL2", q(ref(h), 0, d1, 0, d1, 0, ref(x), ref(y), ref(y, 1024)) + struct.pack("<q", 8) +
          struct.pack("<iiiiii", 8, 8, 0, 0, 1, 1) + struct.pack("<IIIIII", 0, 2, 0, 2, 0, 0))
    s.req("BlasL3", q(ref(h), 0, d1, 0, 0, 0, ref(x), ref(x, 512), ref(y)) + struct.pack("<qqqqqq", 4, 4, 4, 16, 16, 16) +
          struct.pack("<iiii", 4, 4, 4, 2) + struct.pack("<10I", 0, 3, 1, 0, 0, 0, 2, 0, 0, 0))
    s.req("BlasL3", q(ref(h), 0, d1, 0, 0, 0, ref(P), ref(P), ref(P)) + struct.pack("<qqqqqq", 4, 4, 4, 0, 0, 0) +
          struct.pack("<iiii", 4, 4, 4, 3) + struct.pack("<10I", 0, 0, 2, 0, 0, 0, 0, 0, 0, 0))
    s.req("BlasGemmExBatched", q(ref(h), 0, d1, 0, ref(x), ref(x, 512), ref(y)) +
          struct.pack("<qqqqqq", 8, 8, 8, 64, 64, 64) + struct.pack("<iiiiII", 8, 8, 8, 2, 0, 0) +
          struct.pack("<iiiiiIII", 2, 2, 0, 68, -1, 0, 1, 0))
    s.req("BlasLuBatched", q(ref(h), 0, ref(P), 0, ref(y, 2048), ref(y, 3072)) + struct.pack("<qq", 4, 4) +
          struct.pack("<iiiIIIII", 4, 0, 3, 0, 1, 0, 0, 0))
    s.req("StreamSynchronize", q(0))
    s.req("BlasDestroy", q(ref(h)))
    out["blas_generic"] = s.b
    # cuBLASLt: a handle, a 16x16 fp32 matmul with a bias + ReLU (mask in
    # aux) epilogue, then the backward DReLU with a bias gradient.
    s = Seq()
    h = s.req("LtCreate", resp_words=2)
    a = s.req("Malloc", q(4096), resp_words=1)
    d = s.req("Malloc", q(4096), resp_words=1)
    aux = s.req("Malloc", q(1024), resp_words=1)
    one = struct.unpack("<I", struct.pack("<f", 1.0))[0]

    def lt(epilogue):
        return (q(ref(h), 0, one, 0, ref(a), ref(a), ref(d), ref(d), ref(a, 1024), ref(aux), 0, 0) +
                struct.pack("<20q", *([16, 16, 16, 0] * 4 + [128, 0, 0, 0])) +
                struct.pack("<16i", 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 68, 0, -1, -1) +
                struct.pack("<6I", 0, 1, epilogue, 0, 0, 0))
    s.req("LtMatmul", lt(2 | 4 | 128))
    s.req("LtMatmul", lt(8 | 128 | 16))
    # A transform: D = 2 A + D^T (both 16 x 16 fp32), posted.
    s.req("LtTransform", q(ref(h), 0, struct.unpack("<I", struct.pack("<f", 2.0))[0], one, ref(a), ref(d), ref(d)) +
          struct.pack("<12q", *([16, 16, 16, 0] * 3)) + struct.pack("<4i", 0, 0, 0, 0) +
          struct.pack("<iiiI", 0, 0, 0, 0) + struct.pack("<iiiIII", 1, 1, 1, 0, 1, 0))
    s.req("DeviceSynchronize")
    s.req("LtDestroy", q(ref(h)))
    out["blaslt"] = s.b
    # Graphs: a node list (kernel, 4-byte memset, event record, a segment
    # split, copy to the data area, event wait) instantiated, launched
    # segment by segment, a kernel node updated, the list re-sent through
    # the data area (unresolved handles there: refused), destroyed.
    s = Seq()
    d = s.req("Malloc", q(4096), resp_words=1)
    s.fatbin(32768)
    m = s.req("ModuleLoad", q(32768, ref(0)), resp_words=1)
    kf = s.req("ModuleGetKernel", q(ref(m)) + b"fill_words", resp_words=2)
    ev = s.req("EventCreate", struct.pack("<II", 0, 0), resp_words=1)
    node = lambda op, body: struct.pack("<HHI", op, 0, len(body)) + body
    kbody = q(ref(kf)) + struct.pack("<8I", 4, 1, 1, 256, 1, 1, 0, 16) + q(ref(d)) + struct.pack("<II", 7, 1024)
    copy = q(20000, ref(d), 4096, 4096, 0, 0, 4096, 1, 1) + struct.pack("<II", 2, 0)
    mset = q(ref(d, 1024), 0, 64, 1) + struct.pack("<II", 0x3FC00000, 4)
    nodes = node(1, kbody) + node(3, mset) + node(4, q(ref(ev))) + node(6, b"") + node(2, copy) + node(5, q(ref(ev)))
    g = s.req("GraphInstantiate", q(0, 0, 0) + struct.pack("<II", 5, 2) + nodes, resp_words=1)
    s.req("GraphLaunch", q(ref(g), 0) + struct.pack("<II", 0, 0), posted=True)
    s.req("GraphLaunch", q(ref(g), 0) + struct.pack("<II", 1, 0), posted=True)
    s.req("GraphExecSetKernel", q(ref(g)) + struct.pack("<8I", 0, 4, 1, 1, 256, 1, 1, 0) + q(ref(d)) +
          struct.pack("<II", 9, 1024))
    s.req("StreamSynchronize", q(0))
    s.write(50000, nodes)
    s.req("GraphInstantiate", q(ref(g), 50000, len(nodes)) + struct.pack("<II", 5, 2), resp_words=1)
    s.req("GraphExecDestroy", q(ref(g)))
    # Degenerate memset nodes: a zero width with a 2^64-1 height, and a
    # 1-byte-wide, 4096-high one whose rows touch (one fill, not 4096).
    flat = node(3, q(ref(d), 0, 0, 2**64 - 1) + struct.pack("<II", 0, 1)) + \
        node(3, q(ref(d), 1, 1, 4096) + struct.pack("<II", 0x5A, 1))
    g = s.req("GraphInstantiate", q(0, 0, 0) + struct.pack("<II", 2, 1) + flat, resp_words=1)
    s.req("GraphLaunch", q(ref(g), 0) + struct.pack("<II", 0, 0), posted=True)
    s.req("GraphExecDestroy", q(ref(g)))
    out["graphs"] = s.b
    # cuRAND: generators, settings, every kind of generation, refusals
    # (a count that is no multiple of the dimensions, a range past the
    # allocation, a stale handle).
    s = Seq()
    d = s.req("Malloc", q(8192), resp_words=1)
    x = s.req("RandCreate", struct.pack("<iI", 101, 0), resp_words=2)
    so = s.req("RandCreate", struct.pack("<iI", 201, 0), resp_words=2)
    s.req("RandSet", q(ref(x), 1234, 5) + struct.pack("<iIII", 103, 0, 7, 0), resp_words=1)
    s.req("RandSet", q(ref(so), 0, 0) + struct.pack("<iIII", 201, 3, 8, 0), resp_words=1)
    gen = lambda h, off, n, kind, p0=0.0, p1=1.0: s.req(
        "RandGenerate", q(ref(h), 0, ref(d, off), n) + struct.pack("<ddiI", p0, p1, kind, 0), posted=True)
    gen(x, 0, 256, 3)
    gen(x, 1024, 128, 5, 0.0, 2.0)
    gen(x, 2048, 64, 9, 300.0)
    gen(so, 4096, 96, 1)
    gen(so, 0, 10, 3)
    gen(x, 8000, 1024, 3)
    s.req("DeviceSynchronize")
    s.req("RandDestroy", q(ref(x)))
    s.req("RandDestroy", q(ref(x)))
    s.req("RandDestroy", q(ref(so)))
    s.req("Free", q(ref(d)))
    out["rand"] = s.b
    # cuDNN: descriptors travel by value (DnnTensor: dtype, nb, dim[8], stride[8]).
    def t4(n, c, h, w):
        dims = [n, c, h, w] + [0] * 4
        strides = [c * h * w, h * w, w, 1] + [0] * 4
        return struct.pack("<ii8i8i", 0, 4, *dims, *strides)
    s = Seq()
    d = s.req("Malloc", q(4096), resp_words=1)
    s.req("DnnCreate")
    x = t4(1, 2, 4, 4)
    s.req("DnnActFwd", q(0) + struct.pack("<iid", 1, 0, 0.0) + x + x + q(ref(d), ref(d, 512))
          + struct.pack("<dd", 1.0, 0.0), posted=True)
    s.req("DnnSoftmaxFwd", q(0) + struct.pack("<ii", 1, 1) + x + x + q(ref(d, 512), ref(d, 1024))
          + struct.pack("<dd", 1.0, 0.0), posted=True)
    s.req("DeviceSynchronize")
    s.req("Free", q(ref(d)))
    out["dnn"] = s.b
    # cuDNN batch normalization, LRN, dropout and reduction (half data for LRN).
    def t4h(n, c, h, w):
        dims = [n, c, h, w] + [0] * 4
        strides = [c * h * w, h * w, w, 1] + [0] * 4
        return struct.pack("<ii8i8i", 2, 4, *dims, *strides)
    s = Seq()
    d = s.req("Malloc", q(8192), resp_words=1)
    s.req("DnnCreate")
    x, bn = t4(2, 2, 4, 4), t4(1, 2, 1, 1)
    s.req("DnnBnFwdTrain", q(0) + struct.pack("<iI", 1, 0) + x + x + bn
          + q(ref(d), ref(d, 512), ref(d, 1024), ref(d, 1032), ref(d, 1040), ref(d, 1048), ref(d, 1056), ref(d, 1064))
          + struct.pack("<dddd", 1.0, 0.0, 0.5, 1e-5), posted=True)
    s.req("DnnBnBwd", q(0) + struct.pack("<iI", 1, 0) + x + x + x + bn
          + q(ref(d), ref(d, 512), ref(d, 1536), ref(d, 1024), ref(d, 1072), ref(d, 1080), ref(d, 1056), ref(d, 1064))
          + struct.pack("<ddddd", 1.0, 0.0, 1.0, 0.0, 1e-5), posted=True)
    s.req("DnnLrnFwd", q(0) + struct.pack("<IIddd", 5, 0, 1e-4, 0.75, 2.0) + t4h(2, 2, 4, 4) + t4h(2, 2, 4, 4)
          + q(ref(d, 2048), ref(d, 2304)) + struct.pack("<dd", 1.0, 0.0), posted=True)
    s.req("DnnDropoutInit", q(0, ref(d, 4096), 64, 42), posted=True)
    s.req("DnnDropoutFwd", q(0) + x + x + q(ref(d), ref(d, 2560), ref(d, 4096), 64, ref(d, 4160), 64)
          + struct.pack("<d", 0.25), posted=True)
    s.req("DnnReduceTensor", q(0) + struct.pack("<6i", 3, 0, 0, 1, 0, 0) + x + t4(1, 2, 1, 1)
          + q(ref(d), ref(d, 4352), ref(d, 4368), 8) + struct.pack("<dd", 1.0, 0.0), posted=True)
    s.req("DeviceSynchronize")
    s.req("Free", q(ref(d)))
    out["dnn_norm"] = s.b
    # Peer copies between servers: a ticket for a real range, then forged,
    # replayed and out-of-range ones (no peer server: a push fails cleanly).
    s = Seq()
    d = s.req("Malloc", q(1 << 16), resp_words=1)
    t = s.req("PeerTicket", q(ref(d), 4096), resp_words=3)
    s.req("PeerTicket", q(ref(d, 1 << 16), 4096))
    s.req("PeerTicket", q(ref(d), 0))
    s.req("PeerTicket", q(ref(d), 1 << 40))
    s.req("PeerCommit", q(ref(t), ref(t + 1)))
    s.req("PeerCommit", q(0x1234, 0x5678))
    s.req("PeerPush", q(ref(d), 4096, ref(t), ref(t + 1), ref(d)) + b"ucx://127.0.0.1:1")
    s.req("PeerPush", q(ref(d), 4096, 1, 2, ref(d)) + b"not a url")
    s.req("PeerPush", q(ref(d, 1 << 16), 4096, 1, 2, ref(d)))
    s.req("Free", q(ref(d)))
    out["peer"] = s.b
    # Grown pinned memory: a segment, copies through its offsets (inside,
    # straddling its end, in an absent segment), a memset on its device
    # mapping, a grow past the harness's source, releases (twice, of the
    # first area) and a copy from the released segment.
    s = Seq()
    d = s.req("Malloc", q(1 << 16), resp_words=1)
    g = s.req("PinnedGrow", q(1, 0), resp_words=3)
    s.req("MemcpyHtoD", q(ref(d), seg(1, 4096), 4096, 0, 0))
    s.req("MemcpyDtoH", q(seg(1, 8192), ref(d), 4096, 0, 0))
    s.req("MemcpyDtoH", q(seg(1, (64 << 20) - 100), ref(d), 4096, 0, 0))
    s.req("MemcpyHtoD", q(ref(d), seg(2, 0), 4096, 0, 0))
    s.req("Memset", q(ref(g + 2), 4096, 0) + struct.pack("<iI", 0x21, 0))
    s.req("PinnedGrow", q(1 << 30, 0))
    s.req("PinnedRelease", q(ref(g)))
    s.req("PinnedRelease", q(ref(g)))
    s.req("PinnedRelease", q(0))
    s.req("MemcpyHtoD", q(ref(d), seg(1, 4096), 4096, 0, 0))
    s.req("Free", q(ref(d)))
    out["pinned"] = s.b
    # Device queries and protocol edge cases.
    s = Seq()
    s.req("GetDeviceCount")
    s.req("GetDeviceProps", struct.pack("<i", 0))
    s.req("DeviceGetLimit", struct.pack("<iI", 1, 0), resp_words=1)
    s.req("SetDevice", struct.pack("<iI", 0, 0))
    s.req("GetStats")
    s.b += struct.pack("<BBH", NOPS, 0, 0)  # one past the last opcode: unknown
    s.b += struct.pack("<BBH", OP["Malloc"], 0, 3) + b"\x01\x02\x03"  # short
    s.b += struct.pack("<BBH", OP["Free"], 0, 16) + b"\x00" * 16  # tail where none allowed
    out["device_and_framing"] = s.b
    return out


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
    os.makedirs(outdir, exist_ok=True)
    for name, b in seeds().items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(bytes(b))


if __name__ == "__main__":
    main()
