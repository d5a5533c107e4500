"""torch.compile on the sim device: Inductor's kernels are Triton kernels,
which Triton compiles to PTX (wormhole-ptxas keeps them PTX), and its
matrix products are cuBLAS calls; none of PyTorch's own (SASS-only)
kernels runs. Checked against the same code on torch's CPU device:
  - a compiled elementwise function, element by element;
  - an MLP trained functionally (torch.func.grad_and_value, the SGD update
    inside the compiled step): the loss of every step within 1e-4 relative.
Compile-time constant folding runs PyTorch's own kernels on the device, so
it is turned off (docs/pytorch.md); a step's backward that starts from
loss.backward() needs PyTorch's fill kernel and is not used here."""
import sys
import time

import torch
import torch._inductor.config as inductor
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value

inductor.joint_graph_constant_folding = False


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


# An elementwise function: one fused Triton kernel.
x = torch.linspace(-4, 4, 4099)


def f(t):
    return torch.sin(t) * 2 + torch.exp(-t * t) - 1


t0 = time.time()
y = torch.compile(f)(x.cuda()).cpu()
err = (y - f(x)).abs().max().item()
if not err <= 1e-5:
    fail(f"compiled elementwise function: max error {err}")
print(f"ok   compiled sin/exp on 4099 elements: max error {err:.2e} ({time.time() - t0:.1f} s with compilation)",
      flush=True)

# An MLP trained for 8 steps.
torch.manual_seed(0)
X, Y = torch.randn(256, 64), torch.randint(0, 10, (256,))
torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def loss_fn(params, x, y):
    return F.cross_entropy(functional_call(model, params, (x,)), y)


def step(params, x, y):
    grads, loss = grad_and_value(loss_fn)(params, x, y)
    return {k: p - 0.1 * grads[k] for k, p in params.items()}, loss


def train(device, fn, steps=8):
    params = {k: v.detach().to(device) for k, v in model.named_parameters()}
    x, y = X.to(device), Y.to(device)
    losses, times = [], []
    for _ in range(steps):
        t = time.time()
        params, loss = fn(params, x, y)
        losses.append(loss.item())
        times.append(time.time() - t)
    return losses, times


cpu, _ = train("cpu", step)
dev, times = train("cuda", torch.compile(step))
for i, (a, b) in enumerate(zip(cpu, dev)):
    if not abs(a - b) <= 1e-4 * abs(a):
        fail(f"step {i}: loss {b} on the device, {a} on the CPU")
if not cpu[-1] < cpu[0]:
    fail(f"the loss did not fall: {cpu}")
print(f"ok   compiled MLP training step: 8 losses match the CPU ({cpu[0]:.4f} -> {cpu[-1]:.4f}); "
      f"first step {times[0]:.1f} s (compilation), then {sum(times[1:]) / len(times[1:]) * 1e3:.1f} ms a step",
      flush=True)
print("all checks passed")
