"""make bench-torch: PyTorch through Wormhole on the sim device against
torch on this machine's CPU, one model per run (the server's statistics of
the run give calls and kernel time; tests/torch/bench.sh).
  bench.py op DEVICE N      a compiled x + y on 1,000 floats, N calls
  bench.py mlp DEVICE N     N compiled functional training steps of an MLP
  bench.py cnn DEVICE N     N of a CNN (cuDNN convolutions, batch norm)
With WH_BENCH_CTL="wormholectl --socket S" (cuda), the server's calls,
posted calls and kernel time over the timed calls or steps, per one.
Prints one line: <what> device=.. n=.. first_s=.. per_ms=.. [calls_per=..
posted_per=.. kernel_ms_per=..]"""
import json
import os
import subprocess
import sys
import time

import torch
import torch._inductor.config as inductor
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value

inductor.joint_graph_constant_folding = False
what, device, n = sys.argv[1], sys.argv[2], int(sys.argv[3])


def sync():
    if device == "cuda":
        torch.cuda.synchronize()


def server_stats():
    ctl = os.environ.get("WH_BENCH_CTL")
    if device != "cuda" or not ctl:
        return None
    return json.loads(subprocess.run(ctl.split() + ["--json", "stats"], check=True, capture_output=True, text=True).stdout)


extra = ""


def timed(fn):
    global extra
    t = time.time()
    fn()
    sync()
    first = time.time() - t
    before = server_stats()
    t = time.time()
    for _ in range(n):
        fn()
    sync()
    per = (time.time() - t) / n
    after = server_stats()
    if before and after:
        # (the admin socket's queries are not calls; the one synchronize is)
        extra = (f" calls_per={(after['calls'] - before['calls']) / n:.1f}"
                 f" posted_per={(after['posted'] - before['posted']) / n:.1f}"
                 f" kernel_ms_per={(after['kernel_s'] - before['kernel_s']) * 1e3 / n:.3f}")
    return first, per


if what == "op":
    x, y = torch.randn(1000).to(device), torch.randn(1000).to(device)  # made on the CPU: randn on the device is PyTorch's own kernel
    add = torch.compile(lambda a, b: a + b)
    first, per = timed(lambda: add(x, y))
else:
    torch.manual_seed(0)
    if what == "mlp":
        net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128), torch.nn.ReLU(),
                                  torch.nn.Linear(128, 10))
        X = torch.randn(128, 784)
    else:
        net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
            torch.nn.Linear(16 * 7 * 7, 10))
        X = torch.randn(64, 3, 28, 28)  # three channels: one would take a PyTorch copy kernel (docs/pytorch.md)
    Y = torch.randint(0, 10, (X.shape[0],))
    def loss_fn(params, buffers, x, y):
        return F.cross_entropy(functional_call(net, (params, buffers), (x,)), y)

    def step(params, x, y):
        # batch norm's statistics are updated in this copy, an input of the transform
        buffers = {k: v.detach().clone().to(x.device) for k, v in net.named_buffers()}
        grads, loss = grad_and_value(loss_fn)(params, buffers, x, y)
        return {k: p - 0.05 * grads[k] for k, p in params.items()}, loss

    fn = torch.compile(step)
    state = {"p": {k: v.detach().to(device) for k, v in net.named_parameters()}}
    x, y = X.to(device), Y.to(device)

    def one():
        state["p"], loss = fn(state["p"], x, y)
        state["loss"] = loss

    first, per = timed(one)
    state["loss"].item()
print(f"{what} device={device} n={n} first_s={first:.2f} per_ms={per * 1e3:.3f}{extra}", flush=True)
