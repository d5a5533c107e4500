# A shortened Fashion-MNIST training inside the guest, forwarded through
# ivshmem (cuBLAS for the dense layers, the program's own kernels for the
# rest); the test accuracy must reach 82%.
wh_expect train_accuracy 'final test_acc=(8[2-9]|9[0-9])\.' \
  wh-train --epochs 1 --batch 128 --seed 42 --data /data/fashion-mnist --no-progress
wh_exit
