"""The importer tests' model: Linear -> BatchNorm1d -> ReLU -> Linear with a
cross-entropy loss. Small enough that its archive is a committed fixture
(tiny.pt2); regenerate it with `regenerate.sh` after a schema change."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x, y):
        h = F.relu(self.bn(self.fc1(x)))
        return F.cross_entropy(self.fc2(h), y)


def make():
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(2, 4, generator=g), torch.tensor([0, 2]))]
    return Tiny(), batches
