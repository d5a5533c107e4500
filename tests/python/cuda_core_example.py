#!/usr/bin/env python3
"""A user's cuda-python program, run through Wormhole (wormhole-run python3
...): CUDA C++ compiled with cuda.core's Program for the device's own
architecture (a cubin asked for, PTX handed back by Wormhole's NVRTC),
launched with cuda.core, the data moved with cuda.bindings' driver calls;
the result is checked against NumPy on the host. Exits 1 on a mismatch."""
import sys

import numpy as np
from cuda.bindings import driver as drv
from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

SRC = r"""
extern "C" __global__ void axpb(float* x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + b;
}
"""


def check(what, err):
    if err != drv.CUresult.CUDA_SUCCESS:
        print(f"FAIL {what}: {err}")
        sys.exit(1)


dev = Device()
dev.set_current()
stream = dev.create_stream()
cc = dev.compute_capability
kernel = Program(SRC, "c++", ProgramOptions(arch=f"sm_{cc.major}{cc.minor}")).compile("cubin").get_kernel("axpb")

n = 1000
host = np.linspace(-4, 4, n, dtype=np.float32)
buf = dev.allocate(host.nbytes, stream=stream)
(err,) = drv.cuMemcpyHtoD(int(buf.handle), host.ctypes.data, host.nbytes)
check("cuMemcpyHtoD", err)
launch(stream, LaunchConfig(grid=(n + 127) // 128, block=128), kernel, buf, np.float32(2.5), np.float32(-1), np.int32(n))
stream.sync()
out = np.empty_like(host)
(err,) = drv.cuMemcpyDtoH(out.ctypes.data, int(buf.handle), host.nbytes)
check("cuMemcpyDtoH", err)
ref = np.float32(2.5) * host + np.float32(-1)
if not np.allclose(out, ref, rtol=1e-6, atol=1e-6):
    print(f"FAIL axpb: max |difference| {np.abs(out - ref).max()}")
    sys.exit(1)
print(f"PASS cuda.core: a kernel compiled for sm_{cc.major}{cc.minor} ran on {dev.name}")
