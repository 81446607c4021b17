"""A mixture of experts written with einsum over 3-D expert weights (dense
dispatch of the top-2 router's weights): the gradient of each expert
weight comes out of einsum's backward permuted, not contiguous, as
PyTorch's autograd leaves it."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MoE(nn.Module):
    def __init__(self, dim: int = 16, experts: int = 4, hidden: int = 32, k: int = 2):
        super().__init__()
        self.gate = nn.Linear(dim, experts, bias=False)
        self.k = k
        self.w1 = nn.Parameter(torch.randn(experts, dim, hidden) * 0.1)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, dim) * 0.1)

    def forward(self, x):
        scores = F.softmax(self.gate(x), -1)
        top, index = scores.topk(self.k, -1)
        weights = torch.zeros_like(scores).scatter(-1, index, top)
        h = torch.einsum("btd,edf->btef", x, self.w1)
        out = torch.einsum("btef,efd->bted", F.silu(h), self.w2)
        return x + (out * weights.unsqueeze(-1)).sum(2)


class Model(nn.Module):
    def __init__(self, vocab: int = 40, dim: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([MoE(dim) for _ in range(2)])
        self.norm = nn.RMSNorm(dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens, targets):
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return F.cross_entropy(self.out(self.norm(h)).flatten(0, 1), targets.flatten())


def make():
    model = Model()
    batches = [(torch.randint(0, 40, (4, 6)), torch.randint(0, 40, (4, 6))) for _ in range(2)]
    return model, batches
