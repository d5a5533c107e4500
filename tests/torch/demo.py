"""make demo-torch: a PyTorch training script as people write it, run
unmodified in style through Wormhole: an MLP on Fashion-MNIST with AdamW,
compiled with torch.compile (Inductor's Triton kernels and cuBLAS), a
progress bar, the test accuracy and a loss plot. The three lines marked
WORMHOLE are what the sim device needs (docs/pytorch.md, torch.compile).
Usage: demo.py [--epochs N] [--batch B] [--plot FILE.png] [--data DIR]"""
import argparse
import gzip
import os
import shutil
import subprocess
import sys
import time

import torch
import torch._inductor.config
import torch.nn as nn
import torch.nn.functional as F

torch._inductor.config.joint_graph_constant_folding = False  # WORMHOLE (1)

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--batch", type=int, default=128)
p.add_argument("--plot", default="")
p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
args = p.parse_args()


def idx(name, offset):
    with gzip.open(os.path.join(args.data, name)) as f:
        return torch.frombuffer(bytearray(f.read()[offset:]), dtype=torch.uint8)


x_train = idx("train-images-idx3-ubyte.gz", 16).view(-1, 784).float() / 255
y_train = idx("train-labels-idx1-ubyte.gz", 8).long()
x_test = idx("t10k-images-idx3-ubyte.gz", 16).view(-1, 784).float() / 255
y_test = idx("t10k-labels-idx1-ubyte.gz", 8).long()
print(f"Fashion-MNIST: {len(x_train)} training, {len(x_test)} test images; device {torch.cuda.get_device_name()}")

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
one = torch.tensor(1.0).cuda()  # WORMHOLE (2): the seed gradient, made once
forward = torch.compile(lambda x, y: F.cross_entropy(model(x), y))
predict = torch.compile(lambda x: model(x).argmax(dim=1))
opt_step = torch.compile(opt.step)  # WORMHOLE (3): the update as Triton kernels

steps_per_epoch = len(x_train) // args.batch
losses = []
t_start = time.time()
for epoch in range(args.epochs):
    perm = torch.randperm(len(x_train))
    t_epoch = time.time()
    for i in range(steps_per_epoch):
        b = perm[i * args.batch:(i + 1) * args.batch]
        opt.zero_grad(set_to_none=True)
        loss = forward(x_train[b].cuda(), y_train[b].cuda())
        loss.backward(one)
        opt_step()
        if i % 20 == 0 or i == steps_per_epoch - 1:
            losses.append((epoch + (i + 1) / steps_per_epoch, loss.item()))
            done = (i + 1) * 30 // steps_per_epoch
            print(f"\repoch {epoch + 1}/{args.epochs} [{'#' * done}{'.' * (30 - done)}] "
                  f"loss {losses[-1][1]:.4f}", end="", flush=True)
    print(f"  {time.time() - t_epoch:.1f} s")

correct = 0
with torch.no_grad():
    for i in range(0, len(x_test), 1000):
        pred = predict(x_test[i:i + 1000].cuda()).cpu()
        correct += int((pred == y_test[i:i + 1000]).sum())
acc = 100.0 * correct / len(x_test)
images = args.epochs * steps_per_epoch * args.batch
secs = time.time() - t_start
print(f"final test_acc={acc:.2f}% images_per_s={images / secs:.0f} ({secs:.1f} s with compilation)")

if args.plot:
    dat = args.plot + ".dat"
    with open(dat, "w") as f:
        f.writelines(f"{e:.4f} {l:.5f}\n" for e, l in losses)
    if shutil.which("gnuplot"):
        subprocess.run(["gnuplot", "-e", f"set terminal png size 800,480; set output '{args.plot}'; "
                        f"set xlabel 'epoch'; set ylabel 'training loss'; set title 'PyTorch MLP on Fashion-MNIST through Wormhole'; "
                        f"plot '{dat}' with lines title 'loss'"], check=False)
if acc < 80.0:
    print(f"FAIL: test accuracy {acc:.2f}% (expected at least 80%)")
    sys.exit(1)
