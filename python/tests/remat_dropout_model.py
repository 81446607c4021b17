"""Two residual blocks with dropout, for test_remat_parity.py.

``layers.{0,1}``: LayerNorm, Linear, GELU, Dropout(0.25), Linear, added to
the block input; a Linear head and cross entropy. Recomputing a block must
not draw its dropout mask again: the mask is saved, so training with and
without recompute is bitwise the same.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

DIM = 16
HIDDEN = 64
CLASSES = 4
BATCH = 64
NUM_BATCHES = 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, HIDDEN)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return x + self.fc2(self.drop(F.gelu(self.fc1(self.ln(x)))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(2))
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, x, y):
        for layer in self.layers:
            x = layer(x)
        return F.cross_entropy(self.head(x), y)


def make():
    batches = [(torch.randn(BATCH, DIM), torch.randint(0, CLASSES, (BATCH,)))
               for _ in range(NUM_BATCHES)]
    return Model(), batches
