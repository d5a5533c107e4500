# wh-cnn (LeNet-5-like, cuDNN + cuBLAS through the drop-in libcudnn and
# libcublas) inside the guest, forwarded through ivshmem: one epoch over all
# 60,000 Fashion-MNIST images from seed 1. An untrained or broken network
# stays near 10%; the host run of the same command ends at 87.32%, so the
# floor is 85%. The host check (tests/vm/check-same.sh) then requires both
# guests to have printed the same epoch and accuracy lines.
wh_expect cnn_accuracy 'final test_acc=(8[5-9]|9[0-9])\.' \
  wh-cnn --epochs 1 --batch 64 --seed 1 --data /data/fashion-mnist --no-progress
wh_exit
