"""The model test_checkpoint_pp.py pipelines: an input projection, four
`layers.N` blocks and a head whose weight is the projection's (tied), with a
cross-entropy loss. Small enough that a capture, a compile and a few steps
on 4 ranks take seconds.

The tie matters to checkpoints: cut into stages, the projection (stage 0)
and the head (the last stage) are on different ranks, so two programs hold
the same weight and its optimizer state, and a checkpoint must write it
once and give it back to both. Follows the capture protocol (`make()`).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

DIM = 8
BATCH = 8
NUM_BATCHES = 3


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(DIM, DIM, bias=False)
        self.layers = nn.ModuleList([Block() for _ in range(4)])
        self.head = nn.Linear(DIM, DIM, bias=False)
        self.head.weight = self.proj.weight

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        for layer in self.layers:
            h = layer(h)
        return F.cross_entropy(self.head(h), y)


def make():
    model = Model()
    batches = [(torch.randn(BATCH, DIM), torch.randint(0, DIM, (BATCH,))) for _ in range(NUM_BATCHES)]
    return model, batches
