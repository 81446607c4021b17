"""A model that runs its blocks under ``torch.autocast("cpu", bfloat16)``, as
mixed-precision users write it, with the loss in f32 outside: pre-norm MLP
blocks at ``layers.N`` and a classifier head. Traced with f32 parameters,
autocast writes a bf16 cast before each matmul (of the activation and of the
weight) and autograd a cast of each gradient back to f32."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Net(nn.Module):
    def __init__(self, dim: int = 16, n_layers: int = 3, classes: int = 7):
        super().__init__()
        self.layers = nn.ModuleList(Block(dim) for _ in range(n_layers))
        self.head = nn.Linear(dim, classes)

    def forward(self, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            for layer in self.layers:
                x = layer(x)
            logits = self.head(x)
        return F.cross_entropy(logits.float(), y)


def make(batch: int = 8, steps: int = 4, dim: int = 16):
    return Net(dim), [(torch.randn(batch, dim), torch.randint(0, 7, (batch,)))
                      for _ in range(steps)]
