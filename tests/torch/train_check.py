"""train_check.py: PyTorch training as users write it (nn.Module, the usual
loop, torch.optim), compiled for the sim device and checked against torch's
CPU device in the same process; run on the host and inside guest VMs
(tests/vm/torch_guests.sh).
  a) an MLP with autograd and torch.optim, SGD with momentum and AdamW:
     5 steps each on the device and on the CPU, every loss within 1e-4
     relative;
  b) a CNN (nn.Conv2d, nn.BatchNorm2d, nn.MaxPool2d, dropout off) trained
     on Fashion-MNIST for 100 steps on the device; at every step the CPU
     computes the loss of the same batch from the device's parameters and
     buffers of that moment, within 1e-3 relative; the loss falls and the
     accuracy on 1000 test images is reported. (Two runs of this CNN that
     differ in the last bit somewhere part ways within some 20 steps,
     through which of two equal maxima max pooling passes the gradient to:
     PyTorch's CPU code compiled and not compiled do. So the device's
     steps are checked one by one, not as one trajectory against another.)
The lines marked as in docs/pytorch.md (torch.compile) are what the sim
device needs. Usage: train_check.py [--data DIR] [--cnn-steps N]"""
import argparse
import copy
import gzip
import os
import sys

import torch
import torch._inductor.config
import torch.nn as nn
import torch.nn.functional as F

from models import mlp, usual_loop

torch._inductor.config.joint_graph_constant_folding = False  # (1)

p = argparse.ArgumentParser()
p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
p.add_argument("--cnn-steps", type=int, default=100)
args = p.parse_args()


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def idx(name, offset, count):
    with gzip.open(os.path.join(args.data, name)) as f:
        return torch.frombuffer(bytearray(f.read()[offset:offset + count]), dtype=torch.uint8)


# a) The MLP, both devices.
torch.manual_seed(0)
X, Y = torch.randn(256, 64), torch.randint(0, 10, (256,))
for name, make_opt in (("MLP, SGD with momentum", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
                       ("MLP, AdamW", lambda p: torch.optim.AdamW(p, lr=0.01))):
    runs = []
    for device in ("cpu", "cuda"):
        torch.manual_seed(1)
        net = mlp().to(device)
        runs.append(usual_loop(device, net, make_opt(net.parameters()), [(X, Y)] * 5))
    (cpu, _), (dev, t) = runs
    worst = max(abs(a - b) / abs(a) for a, b in zip(cpu, dev))
    if not worst <= 1e-4:
        fail(f"{name}: losses {dev} on the device, {cpu} on the CPU")
    if not cpu[-1] < cpu[0]:
        fail(f"{name}: the loss did not fall: {cpu}")
    print(f"ok   {name}: 5 losses within {worst:.1e} relative of the CPU's ({cpu[0]:.4f} -> {cpu[-1]:.4f}; "
          f"{t:.1f} s with compilation)", flush=True)

# b) The CNN on the first images of Fashion-MNIST's training set.
B = 32
n = B * args.cnn_steps
images = idx("train-images-idx3-ubyte.gz", 16, n * 784).view(n, 1, 28, 28).float() / 255
labels = idx("train-labels-idx1-ubyte.gz", 8, n).long()
test_x = idx("t10k-images-idx3-ubyte.gz", 16, 1000 * 784).view(1000, 1, 28, 28).float() / 255
test_y = idx("t10k-labels-idx1-ubyte.gz", 8, 1000).long()
torch.manual_seed(2)
cnn = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(16 * 7 * 7, 10))
shadow = copy.deepcopy(cnn)  # the CPU's copy, loaded with the device's state before each step
cnn = cnn.cuda()
cpu_losses = []


def cpu_step(net, x, y):
    shadow.load_state_dict({k: v.cpu() for k, v in net.state_dict().items()})
    with torch.no_grad():
        cpu_losses.append(F.cross_entropy(shadow(x), y).item())


batches = [(images[i * B:(i + 1) * B], labels[i * B:(i + 1) * B]) for i in range(args.cnn_steps)]
dev, t = usual_loop("cuda", cnn, torch.optim.SGD(cnn.parameters(), lr=0.02, momentum=0.9), batches, cpu_step)
worst = 0.0
for i, (a, b) in enumerate(zip(cpu_losses, dev)):
    worst = max(worst, abs(a - b) / abs(a))
    if not abs(a - b) <= 1e-3 * abs(a):
        fail(f"CNN, step {i}: loss {b} on the device, {a} on the CPU from the same parameters")
if not sum(dev[-10:]) < 0.5 * sum(dev[:10]):
    fail(f"CNN: the loss did not fall: {dev}")
cnn.eval()
with torch.no_grad():
    acc = (torch.compile(lambda x: cnn(x).argmax(1))(test_x.cuda()).cpu() == test_y).float().mean().item()
shadow.load_state_dict({k: v.cpu() for k, v in cnn.state_dict().items()})
shadow.eval()
with torch.no_grad():
    cpu_acc = (shadow(test_x).argmax(1) == test_y).float().mean().item()
if abs(acc - cpu_acc) > 0.005:
    fail(f"CNN: test accuracy {acc:.3f} on the device, {cpu_acc:.3f} on the CPU from the same parameters")
print(f"ok   CNN on Fashion-MNIST: {len(dev)} steps, each loss within {worst:.1e} relative of the CPU's from the "
      f"same parameters ({dev[0]:.4f} -> {dev[-1]:.4f}; {t:.1f} s with compilation); test accuracy {acc:.1%} "
      f"on 1000 images (the CPU: {cpu_acc:.1%})", flush=True)
print("all checks passed")
