"""A small MLP stack whose gradient norm is well above 1, for clipping tests.

Three ``layers.N`` blocks (Linear 16->16 with bias, then tanh) and a root
``head`` (Linear 16->8), cross entropy on 8 classes. The targets depend on
the input and the loss is scaled by 4, so that over 20 AdamW steps the total
gradient norm stays above the tests' ``max_norm`` of 1 and clipping changes
every update. ``make()`` follows the capture protocol.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

DIM = 16
CLASSES = 8
BATCH = 16


class ClipMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(DIM, DIM) for _ in range(3))
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, x, target):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return 4 * F.cross_entropy(self.head(x), target)


def make():
    model = ClipMLP()
    batches = []
    for _ in range(4):
        x = torch.randn(BATCH, DIM)
        batches.append((x, (x[:, :CLASSES].argmax(dim=1) + 1) % CLASSES))
    return model, batches
