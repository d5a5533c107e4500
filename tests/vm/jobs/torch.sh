# PyTorch inside the guest (tests/vm/torch_guests.sh): the host's Python and
# pinned PyTorch environment, this build's drop-ins and the Fashion-MNIST
# files are read through a read-only 9p share and entered with chroot over
# the guest's own /proc, /sys and /dev, so the program forwards through the
# VM's ivshmem device. Inductor's and Triton's caches, filled by the host's
# run of the same script, are copied to scratch space first: compiling
# afresh under TCG takes minutes per graph. The script checks itself
# against torch's CPU device.
mkdir -p /host
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose host /host; then
  wh_result torch_train FAIL "the host share (9p) did not mount"
  wh_exit
fi
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
mount -t tmpfs tmpfs /host/mnt
cp -a "/host$WH_TORCH_CACHE" /host/mnt/cache
wh_run torch_train chroot /host /usr/bin/env HOME=/mnt TMPDIR=/mnt \
  TRITON_CACHE_DIR=/mnt/cache/triton TORCHINDUCTOR_CACHE_DIR=/mnt/cache/inductor \
  "$WH_BUILD/bin/wormhole-run" "$WH_VENV/bin/python" "$WH_SRC/tests/torch/train_check.py"
wh_exit
