"""autocast.py: mixed precision on the sim device. A small causal
transformer (models.TinyGPT) trained for 50 steps in the usual loop with
torch.autocast(bfloat16) around a compiled forward, loss.backward() and a
compiled AdamW step, against the same model trained in float32 on the CPU:
every step's loss within 1e-2 relative. Under autocast the matrix products
run in bfloat16 (cuBLAS and cuBLASLt with bfloat16 data, float
accumulation) and Inductor's Triton kernels convert to and from bfloat16;
the test also checks that the forward really ran in bfloat16 (the logits'
dtype). As in compile.py, constant folding is off and backward() gets
its seed gradient (docs/pytorch.md)."""
import sys
import time

import torch
import torch._inductor.config as inductor
import torch.nn.functional as F

from models import TinyGPT, VOCAB, T, math_attention_only

inductor.joint_graph_constant_folding = False
math_attention_only()
STEPS = 50


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


torch.manual_seed(3)
XT, YT = torch.randint(0, VOCAB, (8, T)), torch.randint(0, VOCAB, (8, T))
torch.manual_seed(4)
init = TinyGPT().state_dict()


def train(device):
    torch.manual_seed(5)
    net = TinyGPT().to(device)
    net.load_state_dict(init)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
    x, y = XT.to(device), YT.to(device)
    one = torch.tensor(1.0).to(device)
    dtypes = set()

    def forward(x, y):
        logits = net(x)
        return F.cross_entropy(logits.float().reshape(-1, VOCAB), y.reshape(-1)), logits.dtype

    def opt_step():
        opt.step()

    if device == "cuda":
        forward, opt_step = torch.compile(forward), torch.compile(opt_step)
    losses, times = [], []
    for _ in range(STEPS):
        t = time.time()
        opt.zero_grad(set_to_none=True)
        if device == "cuda":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss, dt = forward(x, y)
        else:
            loss, dt = forward(x, y)
        dtypes.add(dt)
        loss.backward(one)
        opt_step()
        losses.append(loss.item())
        times.append(time.time() - t)
    return losses, times, dtypes


cpu, _, cpu_dtypes = train("cpu")
dev, times, dev_dtypes = train("cuda")
if dev_dtypes != {torch.bfloat16} or cpu_dtypes != {torch.float32}:
    fail(f"logits' dtypes: {dev_dtypes} under autocast on the device, {cpu_dtypes} on the CPU")
worst = 0.0
for i, (a, b) in enumerate(zip(cpu, dev)):
    worst = max(worst, abs(a - b) / abs(a))
    if not abs(a - b) <= 1e-2 * abs(a):
        fail(f"step {i}: loss {b} under bfloat16 autocast on the device, {a} in float32 on the CPU")
if not cpu[-1] < 0.8 * cpu[0]:
    fail(f"the loss did not fall: {cpu}")
print(f"ok   bfloat16 autocast transformer: {STEPS} losses within {worst:.1e} relative of float32 on the CPU "
      f"({cpu[0]:.4f} -> {cpu[-1]:.4f}; first step {times[0]:.1f} s with compilation, then "
      f"{sum(times[1:]) / len(times[1:]) * 1e3:.1f} ms a step)", flush=True)
print("all checks passed")
