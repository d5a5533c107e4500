#!/usr/bin/env python3
"""Numba kernel launch cost through Wormhole (run under wormhole-run).

A kernel with three device-array arguments, kernel[4, 32](a, b, c), is
launched for SECONDS; then cuda.synchronize(). For comparison, the same
compiled kernel is launched straight through cuda-python's driver binding
(cuLaunchKernel with its three pointers, what is left of the launch without
Numba's dispatch). Prints the launches each made and one summary line:

  numba_launch_per_s=.. numba_launch_us=.. driver_launch_per_s=.. driver_launch_us=..
  numba_launches=N driver_launches=M

Usage: bench_numba_launch.py [SECONDS]
"""
import ctypes
import sys
import time

import numpy as np
from cuda.bindings import driver as drv
from numba import cuda


@cuda.jit("void(float32[::1], float32[::1], float32[::1])")
def add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


def timed(fn, seconds):
    """Calls fn() in batches of 1000 for `seconds`; returns (calls, elapsed)."""
    n = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        for _ in range(1000):
            fn()
        n += 1000
        now = time.perf_counter()
        if now >= end:
            return n, now - start


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    n = 128
    a = cuda.to_device(np.arange(n, dtype=np.float32))
    b = cuda.to_device(np.ones(n, dtype=np.float32))
    c = cuda.device_array(n, dtype=np.float32)
    add[4, 32](a, b, c)  # compiles, loads
    cuda.synchronize()
    if not np.array_equal(c.copy_to_host(), np.arange(n, dtype=np.float32) + 1):
        print("FAIL: the kernel's result is wrong")
        return 1

    numba_n, numba_t = timed(lambda: add[4, 32](a, b, c), seconds)
    cuda.synchronize()

    # The same kernel through the driver binding: Numba's array arguments are
    # (meminfo, parent, nitems, itemsize, data, shape, strides) each.
    kernel = add.overloads[add.signatures[0]]
    cufunc = kernel._codelibrary.get_cufunc()
    fn = drv.CUfunction(int(cufunc.handle))
    vals = []
    for arr in (a, b, c):
        vals += [ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_int64(n), ctypes.c_int64(4),
                 ctypes.c_void_p(arr.device_ctypes_pointer.value), ctypes.c_int64(n), ctypes.c_int64(4)]
    ptrs = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
    args = ctypes.addressof(ptrs)

    def launch():
        (err,) = drv.cuLaunchKernel(fn, 4, 1, 1, 32, 1, 1, 0, 0, args, 0)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeError(err)

    c.copy_to_device(np.zeros(n, dtype=np.float32))
    drv_n, drv_t = timed(launch, seconds)
    cuda.synchronize()
    if not np.array_equal(c.copy_to_host(), np.arange(n, dtype=np.float32) + 1):
        print("FAIL: the driver-launched kernel's result is wrong")
        return 1

    print("numba_launches=%d" % numba_n)
    print("driver_launches=%d" % drv_n)
    print("numba_launch_per_s=%.0f numba_launch_us=%.2f driver_launch_per_s=%.0f driver_launch_us=%.2f"
          % (numba_n / numba_t, 1e6 * numba_t / numba_n, drv_n / drv_t, 1e6 * drv_t / drv_n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
