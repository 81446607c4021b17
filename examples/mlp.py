"""Tiny MLP classifier (32 -> 64 -> 64 -> 10) trained with cross entropy.

The smallest Loom example: three Linear layers with ReLU, no buffers, no
weight sharing. Follows the Loom capture protocol: ``make()`` returns
``(model, batches)`` where ``model(*batch)`` is a scalar loss.

    PYTHONPATH=python python -m loom.capture examples/mlp.py --out out/mlp
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

IN_FEATURES = 32
HIDDEN = 64
NUM_CLASSES = 10
BATCH = 8
NUM_BATCHES = 4


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN_FEATURES, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, NUM_CLASSES)

    def forward(self, x, y):
        h = F.relu(self.fc1(x))
        h = F.relu(self.fc2(h))
        return F.cross_entropy(self.fc3(h), y)


def make():
    model = MLP()
    # Distinct batches so that a runtime feeding the wrong step's data shows up
    # as a loss mismatch rather than passing by accident.
    batches = [
        (torch.randn(BATCH, IN_FEATURES), torch.randint(0, NUM_CLASSES, (BATCH,)))
        for _ in range(NUM_BATCHES)
    ]
    return model, batches
