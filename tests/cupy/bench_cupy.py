#!/usr/bin/env python3
"""The cost of a small CuPy operation through Wormhole.

    tests/cupy/run.sh BUILD_DIR tests/cupy/bench_cupy.py [SECONDS]

`z = x + y` on 1,000 float32 elements (one elementwise kernel launch, the
array allocated from CuPy's pool) as ops/s: queued (one synchronisation at
the end) and synchronised after each op; beside it, a forwarded null call
made from Python (cupy.cuda.runtime.memGetInfo: one round trip) and the
same addition in NumPy on the host; and, for bursts of 500 queued ops, the
time per op to issue them and to have them all done. Prints one summary line.
"""
import sys
import time

import numpy as np

import cupy as cp


def rate(fn, seconds):
    """Calls fn in batches for about `seconds`; returns calls per second."""
    n, batch, t0 = 0, 64, time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        n += batch
        dt = time.perf_counter() - t0
        if dt >= seconds:
            return n / dt


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    x = cp.arange(1000, dtype=cp.float32)
    y = cp.full(1000, 0.5, dtype=cp.float32)
    z = x + y  # compiles the kernel once (NVRTC), outside the timing
    cp.cuda.Device().synchronize()

    def add():
        nonlocal z
        z = x + y

    def add_sync():
        add()
        cp.cuda.Device().synchronize()
    queued = rate(add, seconds)
    cp.cuda.Device().synchronize()
    synced = rate(add_sync, seconds)
    # Issue cost alone: a burst of 500 queued ops, then the wait for the device.
    bursts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(500):
            add()
        t1 = time.perf_counter()
        cp.cuda.Device().synchronize()
        bursts.append(((t1 - t0) / 500, (time.perf_counter() - t0) / 500))
    issue_us = min(b[0] for b in bursts) * 1e6
    device_us = min(b[1] for b in bursts) * 1e6
    null = rate(cp.cuda.runtime.memGetInfo, seconds)
    hx, hy = x.get(), y.get()
    host = rate(lambda: hx + hy, seconds)
    # The last result is right (a launch that did nothing would show here).
    assert np.array_equal(z.get(), hx + hy), "x + y is wrong"
    print(f"cupy small_add_per_s={queued:.0f} small_add_sync_per_s={synced:.0f} "
          f"null_call_py_per_s={null:.0f} null_call_py_ns={1e9 / null:.0f} "
          f"numpy_add_per_s={host:.0f} add_vs_null_call={null / queued:.2f} "
          f"burst_issue_us={issue_us:.1f} burst_total_us={device_us:.1f}")


if __name__ == "__main__":
    main()
