#!/usr/bin/env python3
"""probe.py: one line per PyTorch CUDA step, run in order: works (with its
time and a check against the CPU) or fails (with the error). Steps after a
failure still run, so one run maps the whole surface."""
import sys
import time

t0 = time.time()
import torch  # noqa: E402

print(f"import torch {torch.__version__} (CUDA {torch.version.cuda}): {time.time() - t0:.2f} s", flush=True)
ok = True


def step(name, fn):
    global ok
    t = time.time()
    try:
        r = fn()
        print(f"works  {name}: {r} ({time.time() - t:.3f} s)", flush=True)
    except Exception as e:  # noqa: BLE001 - the probe reports every failure
        ok = False
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"FAILS  {name}: {type(e).__name__}: {msg[:300]}", flush=True)


def same(dev, ref, tol=1e-4):
    d = dev.cpu()
    if not torch.allclose(d, ref, rtol=tol, atol=tol):
        raise AssertionError(f"differs from the CPU: max |diff| {(d - ref).abs().max().item()}")
    return "matches the CPU"


g = torch.Generator().manual_seed(1)
A = torch.randn(64, 48, generator=g)
B = torch.randn(48, 32, generator=g)
step("torch.cuda.is_available()", torch.cuda.is_available)
step("torch.cuda.device_count()", torch.cuda.device_count)
step("torch.cuda.get_device_name()", lambda: torch.cuda.get_device_name())
step("torch.cuda.get_device_capability()", lambda: torch.cuda.get_device_capability())
step("torch.cuda.mem_get_info()", lambda: torch.cuda.mem_get_info())
step("torch.empty(4, device='cuda')", lambda: tuple(torch.empty(4, device="cuda").shape))
step("CPU tensor .cuda() and .cpu() (copies)", lambda: same(A.cuda(), A, 0))
step("transposed CPU tensor .cuda()", lambda: same(A.t().cuda(), A.t(), 0))
step("torch.zeros(4, device='cuda')", lambda: same(torch.zeros(4, device="cuda"), torch.zeros(4), 0))
step("torch.ones(4, device='cuda')", lambda: same(torch.ones(4, device="cuda"), torch.ones(4), 0))
step("x + 1", lambda: same(A.cuda() + 1, A + 1))
step("x.sum()", lambda: same(A.cuda().sum(), A.sum(), 1e-3))
step("a @ b (cuBLAS sgemm)", lambda: same(A.cuda() @ B.cuda(), A @ B, 1e-3))
step("torch.mm into preallocated out", lambda: same(torch.mm(A.cuda(), B.cuda(), out=torch.empty(64, 32, device="cuda")), A @ B, 1e-3))
step("a @ b in float64 (cuBLAS dgemm)", lambda: same(A.double().cuda() @ B.double().cuda(), A.double() @ B.double(), 1e-9))
step("F.linear with bias (cuBLASLt)", lambda: same(torch.nn.functional.linear(A.cuda(), B.t().contiguous().cuda(), B[0].cuda()),
                                                   torch.nn.functional.linear(A, B.t().contiguous(), B[0]), 1e-3))
step("torch.dot (cuBLAS)", lambda: same(torch.dot(A[0].cuda(), A[1].cuda()), torch.dot(A[0], A[1]), 1e-3))
step("torch.mv (cuBLAS gemv)", lambda: same(torch.mv(A.cuda(), B[:, 0].contiguous().cuda()), torch.mv(A, B[:, 0].contiguous()), 1e-3))
step("torch.special.i0 (jiterator: NVRTC)", lambda: same(torch.special.i0(A.cuda()), torch.special.i0(A), 1e-3))
step("torch.lcm (jiterator: NVRTC)", lambda: same(torch.lcm(torch.arange(1, 99).cuda(), torch.arange(3, 101).cuda()),
                                                  torch.lcm(torch.arange(1, 99), torch.arange(3, 101)), 0))
step("x.sigmoid()", lambda: same(A.cuda().sigmoid(), A.sigmoid()))
step("torch.randn(8, device='cuda')", lambda: tuple(torch.randn(8, device="cuda").cpu().shape))
step("torch.cuda.synchronize()", torch.cuda.synchronize)
step("torch.cuda.memory_allocated()", torch.cuda.memory_allocated)
print(f"total {time.time() - t0:.2f} s", flush=True)
sys.exit(0 if ok else 1)
