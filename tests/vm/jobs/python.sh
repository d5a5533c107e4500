# Numba inside the guest: the host's files (its Python, the pinned Numba
# environment, this build's drop-ins) are read through a read-only 9p share
# and entered with chroot over the guest's own /proc, /sys and /dev, so
# the program finds the VM's ivshmem device and forwards through it, as a
# user's Python in a VM does. The program checks its results against NumPy.
mkdir -p /host
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose host /host; then
  wh_result numba_example FAIL "the host share (9p) did not mount"
  wh_exit
fi
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
# Scratch space (caches, temporary files) on the host's /mnt: the host's
# /tmp stays visible (a build tree may be there).
mount -t tmpfs tmpfs /host/mnt
wh_run numba_example chroot /host /usr/bin/env HOME=/mnt TMPDIR=/mnt NUMBA_CACHE_DIR=/mnt \
  "$WH_BUILD/bin/wormhole-run" "$WH_VENV/bin/python" "$WH_SRC/tests/python/numba_example.py"
# CuPy, a reduced set of tests/cupy/test_cupy.py (named below; kernels
# compiled by NVRTC in the guest).
wh_run cupy_reduced chroot /host /usr/bin/env HOME=/mnt TMPDIR=/mnt CUPY_CACHE_DIR=/mnt/cupy \
  "$WH_BUILD/bin/wormhole-run" "$WH_CUPY_VENV/bin/python" "$WH_SRC/tests/cupy/test_cupy.py" \
  test_dropins_loaded test_creation_and_copies test_elementwise test_reductions test_raw_kernel test_matmul test_fft
wh_exit
