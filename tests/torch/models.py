"""Small models the torch tests train on the sim device and on the CPU."""
import torch

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
