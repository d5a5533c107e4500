#!/usr/bin/env python3
"""basic.py: unmodified PyTorch (PyPI's CUDA wheel) on Wormhole, each result
compared with the same computation on the CPU. What needs only the runtime,
copies, memsets and cuBLAS must work; PyTorch's own kernels (SASS only in the
wheel) must either match the CPU or be refused cleanly, leaving the session
usable. PyTorch's jiterated operations (CUDA C++ compiled at run time with
NVRTC) run on the sim device, and its cuDNN convolutions through Wormhole's
cuDNN. Exit 0 on success, 1 with the first mismatch."""
import ctypes
import os
import sys

import torch


def fail(msg):
    print(f"FAIL {msg}", flush=True)
    sys.exit(1)


def expect_close(name, dev, ref, tol):
    if dev.device.type != "cuda":
        fail(f"{name}: result on {dev.device}, not on the device")
    got = dev.cpu()
    if got.dtype != ref.dtype or got.shape != ref.shape:
        fail(f"{name}: {got.dtype} {tuple(got.shape)}, CPU {ref.dtype} {tuple(ref.shape)}")
    if not torch.allclose(got, ref, rtol=tol, atol=tol):
        fail(f"{name}: max |difference| from the CPU {(got - ref).abs().max().item()}")
    print(f"ok   {name}", flush=True)


if not torch.cuda.is_available():
    fail("torch.cuda.is_available() is False")
if torch.cuda.device_count() != 1:
    fail(f"device_count {torch.cuda.device_count()}")
name = torch.cuda.get_device_name()
if "Wormhole" not in name:
    fail(f"device name {name!r}: not Wormhole's device")
free, total = torch.cuda.mem_get_info()
if not 0 < free <= total:
    fail(f"mem_get_info {free} {total}")
print(f"ok   device: {name}, {total >> 20} MiB", flush=True)


def library_of(addr):
    for ln in open("/proc/self/maps"):
        f = ln.split()
        lo, hi = (int(v, 16) for v in f[0].split("-"))
        if lo <= addr < hi and len(f) > 5:
            return f[5]
    return None


# The libraries PyTorch binds by soname are Wormhole's drop-ins (NVIDIA's
# copies, which PyTorch also opens by path, serve nothing): the library each
# soname resolves to in this process holds the function called through it.
rt = ctypes.CDLL("libcudart.so.13", mode=os.RTLD_NOLOAD)
if not hasattr(rt, "wh_guest_connection"):
    fail("libcudart.so.13 in this process is not Wormhole's")
wh_dir = os.path.dirname(library_of(ctypes.cast(rt.cudaMalloc, ctypes.c_void_p).value))
for soname, fn in [("libcudart.so.13", "cudaMalloc"), ("libcublas.so.13", "cublasCreate_v2"),
                   ("libcublasLt.so.13", "cublasLtCreate"), ("libcufft.so.12", "cufftPlan1d"),
                   ("libcurand.so.10", "curandCreateGenerator"), ("libcudnn.so.9", "cudnnGetVersion"),
                   ("libnvrtc.so.13", "nvrtcCompileProgram")]:
    lib = ctypes.CDLL(soname, mode=os.RTLD_NOLOAD)
    where = library_of(ctypes.cast(getattr(lib, fn), ctypes.c_void_p).value)
    if os.path.dirname(where) != wh_dir:
        fail(f"{soname}: {fn} served by {where}, not by Wormhole's drop-in in {wh_dir}")
print(f"ok   PyTorch's CUDA libraries are Wormhole's ({wh_dir})", flush=True)

# PyTorch's NVML-based device count (PYTORCH_NVML_BASED_CUDA_CHECK=1, which
# spares a forked worker a CUDA context) reads Wormhole's libnvidia-ml.so.1.
nvml_count = torch.cuda._raw_device_count_nvml()
if nvml_count != torch.cuda.device_count():
    fail(f"NVML device count {nvml_count}, CUDA's {torch.cuda.device_count()}")
print(f"ok   NVML device count {nvml_count}", flush=True)

# What startup helpers ask (torch.utils.collect_env, is_acceptable): the
# cuDNN version, which PyTorch checks against the one it was built with.
try:
    v = torch.backends.cudnn.version()
except RuntimeError as e:
    fail(f"torch.backends.cudnn.version(): {e}")
if not torch.backends.cudnn.is_available() or v is None or v // 10000 != 9:
    fail(f"cuDNN available {torch.backends.cudnn.is_available()}, version {v}")
print(f"ok   torch.backends.cudnn.version() {v}", flush=True)

g = torch.Generator().manual_seed(7)
A = torch.randn(96, 80, generator=g)
B = torch.randn(80, 72, generator=g)
expect_close("copy to the device and back", A.cuda(), A, 0)
expect_close("torch.zeros on the device (memset)", torch.zeros(33, 5, device="cuda"), torch.zeros(33, 5), 0)
expect_close("a @ b, float32 (cuBLAS)", A.cuda() @ B.cuda(), A @ B, 1e-4)
expect_close("a @ b, float64 (cuBLAS)", A.double().cuda() @ B.double().cuda(), A.double() @ B.double(), 1e-12)
expect_close("a.T @ b.T, float32 (cuBLAS, transposed operands)", B.cuda().t() @ A.cuda().t(), B.t() @ A.t(), 1e-4)
expect_close("batched a @ b (cuBLAS strided batched)",
             torch.bmm(A.view(4, 24, 80).cuda(), B.expand(4, 80, 72).contiguous().cuda()),
             torch.bmm(A.view(4, 24, 80), B.expand(4, 80, 72).contiguous()), 1e-4)

# torch.nn.functional.linear with a bias: addmm through cuBLASLt with a bias
# epilogue, on PyTorch's cuBLAS handle used as a cuBLASLt handle.
W, bias = torch.randn(24, 80, generator=g), torch.randn(24, generator=g)
expect_close("F.linear with bias (cuBLASLt, bias epilogue)",
             torch.nn.functional.linear(A.cuda(), W.cuda(), bias.cuda()), torch.nn.functional.linear(A, W, bias), 1e-4)

# Reductions through cuBLAS (dot, gemv).
x, y = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
expect_close("torch.dot, float32 (cuBLAS)", torch.dot(x.cuda(), y.cuda()), torch.dot(x, y), 1e-3)
expect_close("torch.dot, float64 (cuBLAS)", torch.dot(x.double().cuda(), y.double().cuda()),
             torch.dot(x.double(), y.double()), 1e-10)
expect_close("row sums as A @ ones (cuBLAS gemv)", torch.mv(A.cuda(), torch.ones(80).cuda()), A.sum(1), 1e-4)

# Elementwise kernels PyTorch compiles at run time (jiterator: NVRTC, then
# PTX the sim device runs).
expect_close("torch.special.i0 (jiterated kernel)", torch.special.i0(x.cuda()), torch.special.i0(x), 1e-4)
expect_close("torch.special.bessel_j0 (jiterated kernel)", torch.special.bessel_j0(x.cuda()),
             torch.special.bessel_j0(x), 1e-5)
n, m = torch.arange(1, 200), torch.arange(7, 206)
expect_close("torch.lcm, int64 (jiterated kernel)", torch.lcm(n.cuda(), m.cuda()), torch.lcm(n, m), 0)

# Convolutions: PyTorch drives cuDNN through its backend (graph) API, whose
# one-convolution graphs Wormhole's cuDNN runs with the legacy calls it
# forwards (no bias: adding one is one of PyTorch's own kernels).
F = torch.nn.functional
X, K = torch.randn(2, 4, 9, 8, generator=g), torch.randn(6, 2, 3, 2, generator=g)
conv = dict(padding=(2, 1), stride=(1, 2), dilation=(2, 1), groups=2)
expect_close("F.conv2d, padding, stride, dilation, groups (cuDNN backend API)", F.conv2d(X.cuda(), K.cuda(), **conv),
             F.conv2d(X, K, **conv), 1e-4)
dY = torch.randn(2, 6, 9, 5, generator=g)
Xr, Kr = X.clone().requires_grad_(), K.clone().requires_grad_()
ref_dx, ref_dw = torch.autograd.grad(F.conv2d(Xr, Kr, **conv), (Xr, Kr), dY)
Xd, Kd = X.cuda().requires_grad_(), K.cuda().requires_grad_()
dx, dw = torch.autograd.grad(F.conv2d(Xd, Kd, **conv), (Xd, Kd), dY.cuda())
expect_close("conv2d gradient of the input (cuDNN backward data)", dx, ref_dx, 1e-4)
expect_close("conv2d gradient of the weight (cuDNN backward filter)", dw, ref_dw, 1e-4)
T = torch.randn(4, 3, 3, 3, generator=g)
expect_close("F.conv_transpose2d, stride 2", F.conv_transpose2d(X.cuda(), T.cuda(), stride=2),
             F.conv_transpose2d(X, T, stride=2), 1e-4)
Xc, Kc = X.to(memory_format=torch.channels_last), K.to(memory_format=torch.channels_last)
expect_close("F.conv2d, channels_last input and weight", F.conv2d(Xc.cuda(), Kc.cuda(), **conv),
             F.conv2d(X, K, **conv), 1e-4)
Xh, Kh = X.half(), K.half()
expect_close("F.conv2d, half", F.conv2d(Xh.cuda(), Kh.cuda(), **conv),
             F.conv2d(Xh.float(), Kh.float(), **conv).half(), 2e-2)

# PyTorch's own kernels: matched against the CPU where the device can run
# them, else refused as an invalid kernel image (never a wrong answer, never
# a hang), and the session goes on.
for what, run, ref in [("x + 1", lambda: A.cuda() + 1, A + 1),
                       ("x.sum()", lambda: A.cuda().sum(), A.sum())]:
    try:
        out = run()
    except RuntimeError as e:
        if "cudaErrorInvalidKernelImage" not in str(e):
            fail(f"{what}: {e}")
        print(f"ok   {what}: refused (the wheel's kernels are SASS only)", flush=True)
        continue
    expect_close(what, out, ref, 1e-3)
expect_close("a @ b after a refused kernel", A.cuda() @ B.cuda(), A @ B, 1e-4)
torch.cuda.synchronize()
print("PASS torch basic", flush=True)
