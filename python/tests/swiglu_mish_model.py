"""A SwiGLU feed-forward stack (Llama's MLP) with a Mish head: the activations
whose backward ATen runs as a kernel of its own (``silu_backward``,
``mish_backward``) in eager, and whose composite form, which tracing used
to take instead, rounds differently in about half the elements."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.norm = nn.RMSNorm(dim)

    def forward(self, x):
        h = self.norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Model(nn.Module):
    def __init__(self, dim: int = 32, hidden: int = 64, classes: int = 10):
        super().__init__()
        self.layers = nn.ModuleList([SwiGLU(dim, hidden) for _ in range(2)])
        self.head = nn.Linear(dim, classes)

    def forward(self, x, y):
        for layer in self.layers:
            x = layer(x)
        return F.cross_entropy(F.mish(self.head(x)), y)


def make():
    model = Model()
    batches = [(torch.randn(16, 32), torch.randint(0, 10, (16,))) for _ in range(4)]
    return model, batches
