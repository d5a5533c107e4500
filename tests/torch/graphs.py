"""graphs.py: torch.cuda.graph on the sim device. A compiled training step
of an MLP (forward, backward and the SGD update in one compiled function,
updating the parameters in place) is captured once into a CUDA graph with
static input tensors, then replayed 10 times with new batches copied into
them: the losses must equal those of the same compiled step run eagerly on
the device (bit for bit: the same kernels on the same data) and be within
1e-4 relative of the CPU's. The graph holds Triton kernels, cuBLAS and
cuBLASLt calls (the linear layers' products and bias epilogues) and the
copies between them. Then mode="reduce-overhead" (Inductor's own CUDA
graphs, cudagraph trees) on the functional form of the same step, against
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
STEPS, BATCH = 10, 64


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


torch.manual_seed(0)
XS, YS = torch.randn(STEPS, BATCH, 64), torch.randint(0, 10, (STEPS, BATCH))
torch.manual_seed(1)
model = mlp()
init = {k: v.detach().clone() for k, v in model.named_parameters()}


def loss_fn(params, x, y):
    return F.cross_entropy(functional_call(model, params, (x,)), y)


def step(params, x, y):
    grads, loss = grad_and_value(loss_fn)(params, x, y)
    with torch.no_grad():
        for k, p in params.items():
            p.sub_(0.1 * grads[k])
    return loss


def fresh(device):
    return {k: v.clone().to(device) for k, v in init.items()}


def eager(device, fn):
    params = fresh(device)
    return [fn(params, XS[i].to(device), YS[i].to(device)).item() for i in range(STEPS)]


def graphed(fn):
    params = fresh("cuda")
    sx, sy = XS[0].cuda(), YS[0].cuda()
    # Warm up (compiles) on a side stream, as PyTorch's documentation asks.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(params, sx, sy)
    torch.cuda.current_stream().wait_stream(side)
    for k, v in init.items():  # the warm-up trained them: start again
        params[k].copy_(v)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        sloss = fn(params, sx, sy)
    losses = []
    for i in range(STEPS):
        sx.copy_(XS[i])
        sy.copy_(YS[i])
        g.replay()
        losses.append(sloss.item())
    return losses


def check(what, cpu, dev, exact=None):
    for i, (a, b) in enumerate(zip(cpu, dev)):
        if not abs(a - b) <= 1e-4 * abs(a):
            fail(f"{what}, step {i}: loss {b} on the device, {a} on the CPU")
    if exact is not None and exact != dev:
        fail(f"{what}: replayed losses {dev} differ from the eager run's {exact}")
    print(f"ok   {what}: {len(dev)} losses match the CPU ({cpu[0]:.4f} -> {cpu[-1]:.4f})"
          + (", and the eager run's exactly" if exact is not None else ""), flush=True)


cpu = eager("cpu", step)
if not cpu[-1] < cpu[0]:
    fail(f"the loss did not fall: {cpu}")
compiled = torch.compile(step)
t = time.time()
dev_eager = eager("cuda", compiled)
check("compiled step, no graph", cpu, dev_eager)
t = time.time()
dev_graph = graphed(compiled)
check(f"torch.cuda.graph of the compiled step, {STEPS} replays ({time.time() - t:.1f} s)", cpu, dev_graph, dev_eager)



# Inductor's CUDA graphs (cudagraph trees) need a step that does not mutate
# its inputs: the functional form, new parameters out.
def functional_step(params, x, y):
    grads, loss = grad_and_value(loss_fn)(params, x, y)
    return {k: p - 0.1 * grads[k] for k, p in params.items()}, loss


t = time.time()
counters.clear()
overhead = torch.compile(functional_step, mode="reduce-overhead")
params = fresh("cuda")
losses = []
for i in range(STEPS):
    torch.compiler.cudagraph_mark_step_begin()
    params, loss = overhead(params, XS[i].cuda(), YS[i].cuda())
    params = {k: v.clone() for k, v in params.items()}  # the graph's outputs are overwritten by its next replay
    losses.append(loss.item())
if counters["inductor"]["cudagraph_skips"]:
    fail(f"Inductor did not use CUDA graphs: {dict(counters['inductor'])}")
check(f"mode='reduce-overhead' ({time.time() - t:.1f} s with compilation)", cpu, losses)
print("all checks passed")
