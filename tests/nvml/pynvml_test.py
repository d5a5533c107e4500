"""NVIDIA's Python binding (pynvml, nvidia-ml-py) on Wormhole's
libnvidia-ml.so.1, as monitoring code uses it, checked against Wormhole's
CUDA runtime in the same process (ctypes on libcudart.so.13): device count,
name, memory (it moves with cudaMalloc), the process list, and NVML's
not-supported error for what Wormhole does not have."""
import ctypes
import os
import sys

import pynvml as N

cudart = ctypes.CDLL("libcudart.so.13")


def check(ok, what):
    if not ok:
        print("FAIL:", what)
        sys.exit(1)


def cuda(call, *args):
    r = call(*args)
    check(r == 0, f"{call.__name__} returned {r}")


N.nvmlInit()
count = ctypes.c_int()
cuda(cudart.cudaGetDeviceCount, ctypes.byref(count))
check(N.nvmlDeviceGetCount() == count.value, "device count")
h = N.nvmlDeviceGetHandleByIndex(0)
name = N.nvmlDeviceGetName(h)
uuid = N.nvmlDeviceGetUUID(h)
check(N.nvmlDeviceGetHandleByUUID(uuid) is not None and uuid.startswith("GPU-"), "UUID " + uuid)
print("pynvml:", name, uuid, "driver", N.nvmlSystemGetDriverVersion(), "CUDA", N.nvmlSystemGetCudaDriverVersion())

free, total = ctypes.c_size_t(), ctypes.c_size_t()
cuda(cudart.cudaMemGetInfo, ctypes.byref(free), ctypes.byref(total))
m0 = N.nvmlDeviceGetMemoryInfo(h)
check(m0.total == total.value, f"memory total {m0.total} against cudaMemGetInfo's {total.value}")
ptr = ctypes.c_void_p()
size = 32 << 20
cuda(cudart.cudaMalloc, ctypes.byref(ptr), ctypes.c_size_t(size))
m1 = N.nvmlDeviceGetMemoryInfo(h)
check(m1.used >= m0.used + size, f"used {m0.used} -> {m1.used} after a 32 MiB cudaMalloc")
procs = N.nvmlDeviceGetComputeRunningProcesses(h)
check(any(p.pid == os.getpid() and p.usedGpuMemory >= size for p in procs),
      f"this process ({os.getpid()}) in {[(p.pid, p.usedGpuMemory) for p in procs]}")
u = N.nvmlDeviceGetUtilizationRates(h)
check(0 <= u.gpu <= 100, f"utilization {u.gpu}")
try:
    N.nvmlDeviceGetTemperature(h, N.NVML_TEMPERATURE_GPU)
    check(False, "temperature should be not supported")
except N.NVMLError_NotSupported:
    pass
cuda(cudart.cudaFree, ptr)
N.nvmlShutdown()
print("pynvml: all checks passed")
