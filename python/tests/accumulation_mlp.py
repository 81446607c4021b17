"""The model of PyTorch's FSDP2 gradient-accumulation test, as a capture target.

``Sequential(Linear(32, 32), MLP(32), MLP(32), MLP(32))`` with ``MLP`` from
``torch.testing._internal.common_fsdp`` (in_proj, relu, out_proj), as
test_fully_shard_training.py::TestFullyShardGradientAccumulation builds it:
with ``fully_shard`` on each MLP and then the root, the units are ``1``,
``2``, ``3`` and the root (which holds the Linear). The loss is the mean
square of the output. ``make()`` follows the capture protocol; every batch
has 12 rows, so 2 or 4 ranks each run 3 microbatches of 2 or 1 rows.
"""

import torch
import torch.nn as nn
from torch.testing._internal.common_fsdp import MLP

DIM = 32
BATCH = 12


class AccumulationMLP(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Linear(DIM, DIM), *(MLP(DIM) for _ in range(3)))

    def forward(self, x):
        return super().forward(x).pow(2).mean()


def make(steps: int = 4):
    return AccumulationMLP(), [(torch.randn(BATCH, DIM),) for _ in range(steps)]
