"""PyTorch's pipeline-test model: a stack of ``MLPModule(d_hid)`` blocks
(``net1`` Linear, ReLU, ``net2`` Linear), as ``test_composability`` builds its
pipeline stages from, with the cross-entropy loss of its ``loss_fn`` (scaled
by 1e-4 there; unscaled here, so the gradients are not near zero).

The blocks are ``stack.0`` .. ``stack.7``: a Sequential held under a name
other than ``layers``, so the default stage split must find the repeated
blocks from the model's structure. ``make(layers=8, dim=10, batch=8)``
follows the capture protocol.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLPModule(nn.Module):
    def __init__(self, d_hid: int):
        super().__init__()
        self.net1 = nn.Linear(d_hid, d_hid)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(d_hid, d_hid)
        # test_composability's init.
        nn.init.kaiming_uniform_(self.net1.weight, mode="fan_in", nonlinearity="relu")
        nn.init.kaiming_uniform_(self.net2.weight, mode="fan_in", nonlinearity="relu")

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


class Stack(nn.Module):
    def __init__(self, layers: int, dim: int):
        super().__init__()
        self.stack = nn.Sequential(*[MLPModule(dim) for _ in range(layers)])

    def forward(self, x, target):
        return F.cross_entropy(self.stack(x), target)


def make(layers: int = 8, dim: int = 10, batch: int = 8):
    model = Stack(int(layers), int(dim))
    batches = [(torch.randn(int(batch), int(dim)), torch.randint(0, int(dim), (int(batch),)))
               for _ in range(3)]
    return model, batches
