#!/usr/bin/env python3
"""A user's Numba program, run through Wormhole (wormhole-run python3 ...):
an elementwise kernel with three array arguments, a block reduction in shared
memory, a histogram with atomics, and cuda.reduce; every result is checked
against NumPy on the host. Exits 1 on a mismatch."""
import sys

import numpy as np
from numba import cuda, float32

TPB = 128


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def block_sums(x, partial):
    # Each block sums its TPB elements in shared memory (tree reduction).
    tile = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i] if i < x.size else 0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            tile[t] += tile[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


@cuda.jit
def histogram(values, bins):
    i = cuda.grid(1)
    if i < values.size:
        cuda.atomic.add(bins, values[i] % bins.size, 1)


def main():
    rng = np.random.default_rng(7)
    n = 10_000
    failures = []

    def check(name, ok):
        print("%-10s %s" % (name, "ok" if ok else "MISMATCH"))
        if not ok:
            failures.append(name)

    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    dout = cuda.device_array_like(x)
    blocks = (n + TPB - 1) // TPB
    saxpy[blocks, TPB](np.float32(2.5), dx, dy, dout)
    check("saxpy", np.allclose(dout.copy_to_host(), 2.5 * x + y, rtol=1e-6, atol=1e-6))

    partial = cuda.device_array(blocks, np.float32)
    block_sums[blocks, TPB](dx, partial)
    sums = partial.copy_to_host()
    want = np.array([x[b * TPB:(b + 1) * TPB].sum(dtype=np.float64) for b in range(blocks)])
    check("blocksum", np.allclose(sums, want, rtol=1e-4, atol=1e-4))

    values = rng.integers(0, 1 << 20, n).astype(np.int32)
    bins = cuda.to_device(np.zeros(16, np.int32))
    histogram[blocks, TPB](cuda.to_device(values), bins)
    check("histogram", np.array_equal(bins.copy_to_host(), np.bincount(values % 16, minlength=16)))

    total = cuda.reduce(lambda a, b: a + b)(values.astype(np.int64))
    check("reduce", int(total) == int(values.astype(np.int64).sum()))

    if failures:
        print("FAIL: " + ", ".join(failures))
        return 1
    print("PASS numba_example")
    return 0


if __name__ == "__main__":
    sys.exit(main())
