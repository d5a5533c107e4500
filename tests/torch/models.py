"""Small models the torch tests train on the sim device and on the CPU, and
the training loop as people write it."""
import time

import torch
import torch.nn.functional as F

VOCAB, T, D = 64, 16, 32


def math_attention_only():
    """Attention on PyTorch's math path: its fused attention kernels (flash,
    memory-efficient, cuDNN) are its own (SASS-only) kernels."""
    for enable in (torch.backends.cuda.enable_flash_sdp, torch.backends.cuda.enable_mem_efficient_sdp,
                   torch.backends.cuda.enable_cudnn_sdp):
        enable(False)


class TinyGPT(torch.nn.Module):
    """A causal transformer: embedding, one nn.TransformerEncoderLayer
    (attention, layer normalization, feed-forward), a linear head."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, D)
        self.pos = torch.nn.Parameter(torch.randn(T, D) * 0.02)
        self.block = torch.nn.TransformerEncoderLayer(D, 4, 64, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(D, VOCAB)

    def forward(self, x):
        mask = torch.triu(torch.full((T, T), float("-inf"), device=x.device), 1)
        return self.head(self.block(self.emb(x) + self.pos, src_mask=mask))


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def usual_loop(device, net, opt, batches, each_step=None):
    """The loop as people write it (cross-entropy, zero_grad, backward, step);
    on the device the forward and the optimizer's step are compiled and
    backward() is given its seed gradient, made once (docs/pytorch.md,
    torch.compile). each_step(net, x, y) runs before each step. Returns the
    losses and the seconds the loop took."""
    one = torch.tensor(1.0).to(device)

    def forward(x, y):
        return F.cross_entropy(net(x), y)

    def opt_step():
        opt.step()

    if device == "cuda":
        forward, opt_step = torch.compile(forward), torch.compile(opt_step)
    losses, t0 = [], time.time()
    for x, y in batches:
        if each_step:
            each_step(net, x, y)
        opt.zero_grad(set_to_none=True)
        loss = forward(x.to(device), y.to(device))
        loss.backward(one)
        opt_step()
        losses.append(loss.item())
    return losses, time.time() - t0
