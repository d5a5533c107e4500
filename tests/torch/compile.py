"""torch.compile on the sim device: Inductor's kernels are Triton kernels,
which Triton compiles to PTX (wormhole-ptxas keeps them PTX), and its
matrix products are cuBLAS calls; none of PyTorch's own (SASS-only)
kernels runs. Checked against the same code on torch's CPU device:
  - a compiled elementwise function, element by element;
  - an MLP trained functionally (torch.func.grad_and_value, the SGD update
    inside the compiled step): the loss of every step within 1e-4 relative;
  - a CNN (convolutions through cuDNN, batch normalization, ReLU, max
    pooling, a linear layer) trained the same way;
  - a small causal transformer (embedding, nn.TransformerEncoderLayer:
    attention, layer normalization, feed-forward; a linear head), the same;
  - the usual loop: an nn.Module's compiled forward, loss.backward() (its
    compiled backward), torch.optim's SGD with momentum and AdamW with a
    compiled step().
Compile-time constant folding runs PyTorch's own kernels on the device, so
it is turned off (docs/pytorch.md); loss.backward() is given its seed
gradient (made on the CPU and copied once): without one, autograd makes it
with PyTorch's fill kernel."""
import sys
import time

import torch
import torch._inductor.config as inductor
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value

from models import TinyGPT, VOCAB, T, math_attention_only, mlp, usual_loop

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
model = mlp()


def loss_fn(params, x, y):
    return F.cross_entropy(functional_call(model, params, (x,)), y)


def step(params, x, y):
    grads, loss = grad_and_value(loss_fn)(params, x, y)
    return {k: p - 0.1 * grads[k] for k, p in params.items()}, loss


def train(device, fn, net, x, y, steps):
    params = {k: v.detach().to(device) for k, v in net.named_parameters()}
    x, y = x.to(device), y.to(device)
    losses, times = [], []
    for _ in range(steps):
        t = time.time()
        params, loss = fn(params, x, y)
        losses.append(loss.item())
        times.append(time.time() - t)
    return losses, times


def check_losses(what, cpu, dev, how):
    """Each step's loss on the device within 1e-4 of the CPU's; the loss falls."""
    for i, (a, b) in enumerate(zip(cpu, dev)):
        if not abs(a - b) <= 1e-4 * abs(a):
            fail(f"{what}, step {i}: loss {b} on the device, {a} on the CPU")
    if not cpu[-1] < cpu[0]:
        fail(f"{what}: the loss did not fall: {cpu}")
    print(f"ok   {what}: {len(cpu)} losses match the CPU ({cpu[0]:.4f} -> {cpu[-1]:.4f}; {how})", flush=True)


def compare(what, fn, net, x, y, steps):
    cpu, _ = train("cpu", fn, net, x, y, steps)
    dev, times = train("cuda", torch.compile(fn), net, x, y, steps)
    check_losses(f"compiled {what} training step", cpu, dev,
                 f"first step {times[0]:.1f} s with compilation, then "
                 f"{sum(times[1:]) / len(times[1:]) * 1e3:.1f} ms a step")


compare("MLP", step, model, X, Y, 8)

# A CNN: batch normalization's running statistics are buffers, passed in
# unchanged (training mode uses the batch's own).
torch.manual_seed(2)
XC, YC = torch.randn(32, 3, 28, 28), torch.randint(0, 10, (32,))
cnn = torch.nn.Sequential(
    torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
    torch.nn.Linear(16 * 7 * 7, 10))


def cnn_loss(params, buffers, x, y):
    return F.cross_entropy(functional_call(cnn, (params, buffers), (x,)), y)


def cnn_step(params, x, y):
    # The statistics' updates go to this copy, an input of the transform.
    buffers = {k: v.detach().clone().to(x.device) for k, v in cnn.named_buffers()}
    grads, value = grad_and_value(cnn_loss)(params, buffers, x, y)
    return {k: p - 0.05 * grads[k] for k, p in params.items()}, value


compare("CNN", cnn_step, cnn, XC, YC, 4)

# A transformer.
math_attention_only()
torch.manual_seed(3)
XT, YT = torch.randint(0, VOCAB, (8, T)), torch.randint(0, VOCAB, (8, T))
gpt = TinyGPT()


def gpt_loss(params, x, y):
    return F.cross_entropy(functional_call(gpt, params, (x,)).reshape(-1, VOCAB), y.reshape(-1))


def gpt_step(params, x, y):
    grads, value = grad_and_value(gpt_loss)(params, x, y)
    return {k: p - 0.1 * grads[k] for k, p in params.items()}, value


compare("transformer", gpt_step, gpt, XT, YT, 4)


# The usual loop.
def mlp_loop(device, make_opt, steps=5):
    torch.manual_seed(1)
    net = mlp().to(device)
    return usual_loop(device, net, make_opt(net.parameters()), [(X, Y)] * steps)[0]


for name, make_opt in (("SGD with momentum", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
                       ("AdamW", lambda p: torch.optim.AdamW(p, lr=0.01))):
    t = time.time()
    cpu, dev = mlp_loop("cpu", make_opt), mlp_loop("cuda", make_opt)
    check_losses(f"the usual loop with {name}", cpu, dev, f"{time.time() - t:.1f} s with compilation")
print("all checks passed")
