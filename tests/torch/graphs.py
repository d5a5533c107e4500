"""graphs.py: torch.cuda.graph on the sim device. A compiled training step
(forward, backward and the SGD update in one compiled function, updating
the parameters in place) is captured once into a CUDA graph with static
input tensors, then replayed 10 times with new batches copied into them:
the losses must equal those of the same compiled step run without a graph
(bit for bit: the same kernels on the same data) and be within 1e-4
relative of the CPU's. Two models: an MLP (the graph holds Triton kernels,
cuBLAS and cuBLASLt calls, the copies between them) and a CNN (cuDNN's
convolutions too). Then mode="reduce-overhead" (Inductor's own CUDA
graphs, cudagraph trees) on the functional form of the MLP's step, against
the CPU too."""
import sys
import time

import torch
import torch._inductor.config as inductor
import torch.nn.functional as F
from torch._dynamo.utils import counters
from torch.func import functional_call, grad_and_value

from models import mlp

inductor.joint_graph_constant_folding = False
STEPS = 10


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


class Case:
    """A model, its initial parameters and STEPS batches."""

    def __init__(self, name, model, xs, ys, lr):
        self.name, self.model, self.xs, self.ys, self.lr = name, model, xs, ys, lr
        self.init = {k: v.detach().clone() for k, v in model.named_parameters()}

    def loss(self, params, x, y):
        return F.cross_entropy(functional_call(self.model, params, (x,)), y)

    def step(self, params, x, y):
        """One SGD step, in place."""
        grads, loss = grad_and_value(self.loss)(params, x, y)
        with torch.no_grad():
            for k, p in params.items():
                p.sub_(self.lr * grads[k])
        return loss

    def functional_step(self, params, x, y):
        """The same, new parameters out (cudagraph trees need inputs left alone)."""
        grads, loss = grad_and_value(self.loss)(params, x, y)
        return {k: p - self.lr * grads[k] for k, p in params.items()}, loss

    def fresh(self, device):
        return {k: v.clone().to(device) for k, v in self.init.items()}

    def eager(self, device, fn):
        params = self.fresh(device)
        return [fn(params, self.xs[i].to(device), self.ys[i].to(device)).item() for i in range(STEPS)]

    def graphed(self, fn):
        params = self.fresh("cuda")
        sx, sy = self.xs[0].cuda(), self.ys[0].cuda()
        # Warm up (compiles) on a side stream, as PyTorch's documentation asks.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn(params, sx, sy)
        torch.cuda.current_stream().wait_stream(side)
        for k, v in self.init.items():  # the warm-up trained them: start again
            params[k].copy_(v)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            sloss = fn(params, sx, sy)
        losses = []
        for i in range(STEPS):
            sx.copy_(self.xs[i])
            sy.copy_(self.ys[i])
            g.replay()
            losses.append(sloss.item())
        return losses


def check(what, cpu, dev, exact=None):
    for i, (a, b) in enumerate(zip(cpu, dev)):
        if not abs(a - b) <= 1e-4 * abs(a):
            fail(f"{what}, step {i}: loss {b} on the device, {a} on the CPU")
    if exact is not None and exact != dev:
        fail(f"{what}: replayed losses {dev} differ from the run without a graph {exact}")
    print(f"ok   {what}: {len(dev)} losses match the CPU ({cpu[0]:.4f} -> {cpu[-1]:.4f})"
          + (", and the run without a graph exactly" if exact is not None else ""), flush=True)


torch.manual_seed(0)
xs, ys = torch.randn(STEPS, 64, 64), torch.randint(0, 10, (STEPS, 64))
torch.manual_seed(1)
mlp_case = Case("MLP", mlp(), xs, ys, 0.1)
torch.manual_seed(2)
xs, ys = torch.randn(STEPS, 16, 3, 16, 16), torch.randint(0, 10, (STEPS, 16))
cnn = torch.nn.Sequential(
    torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
    torch.nn.Linear(16 * 4 * 4, 10))
cnn_case = Case("CNN", cnn, xs, ys, 0.05)

for case in (mlp_case, cnn_case):
    cpu = case.eager("cpu", case.step)
    if not cpu[-1] < cpu[0]:
        fail(f"{case.name}: the loss did not fall: {cpu}")
    t = time.time()
    compiled = torch.compile(case.step)
    plain = case.eager("cuda", compiled)
    check(f"{case.name}: compiled step, no graph ({time.time() - t:.1f} s with compilation)", cpu, plain)
    t = time.time()
    replayed = case.graphed(compiled)
    check(f"{case.name}: torch.cuda.graph of the compiled step, {STEPS} replays ({time.time() - t:.1f} s)",
          cpu, replayed, plain)

t = time.time()
counters.clear()
overhead = torch.compile(mlp_case.functional_step, mode="reduce-overhead")
params, losses = mlp_case.fresh("cuda"), []
for i in range(STEPS):
    torch.compiler.cudagraph_mark_step_begin()
    params, loss = overhead(params, mlp_case.xs[i].cuda(), mlp_case.ys[i].cuda())
    params = {k: v.clone() for k, v in params.items()}  # the graph's outputs are overwritten by its next replay
    losses.append(loss.item())
if counters["inductor"]["cudagraph_skips"]:
    fail(f"Inductor did not use CUDA graphs: {dict(counters['inductor'])}")
check(f"MLP: mode='reduce-overhead' ({time.time() - t:.1f} s with compilation)", mlp_case.eager("cpu", mlp_case.step),
      losses)
print("all checks passed")
