"""Two small models for the optimizer tests (test_optimizers_parity.py).

``make(kind="wide")``: one bias-free 64x64 linear layer on a batch of one
row, so the step's peak memory is the optimizer update (its temporaries
beside the gradient), where the predicted scratch of each algorithm shows.
``make(kind="odd")``: two linear layers whose rows no world size from 2 to
4 divides (7 and 3), so FSDP pads every parameter and its optimizer state,
on batches of 12 rows. ``make()`` follows the capture protocol.
"""

import torch
import torch.nn as nn


class Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64, bias=False)

    def forward(self, x):
        return self.fc(x).square().mean()


class Odd(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(5, 7)
        self.b = nn.Linear(7, 3)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x))).square().mean()


def make(kind: str = "wide"):
    if kind == "wide":
        return Wide(), [(torch.randn(1, 64),) for _ in range(3)]
    return Odd(), [(torch.randn(12, 5),) for _ in range(4)]
