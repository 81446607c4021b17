"""The importer fuzzer's small seed: one Linear layer with an MSE loss
(micro.pt2; regenerate.sh re-captures it)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Micro(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, x, y):
        return F.mse_loss(self.fc(x), y)


def make():
    g = torch.Generator().manual_seed(0)
    return Micro(), [(torch.randn(2, 2, generator=g), torch.randn(2, 1, generator=g))]
