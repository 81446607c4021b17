"""remat_dropout_model.py's blocks, each run under torch.utils.checkpoint as
older training code calls it, for test_remat_parity.py.

``make(reentrant=...)``: "true" (``use_reentrant=True``), "default" (not
given: PyTorch 2.9 warns and runs the reentrant variant) or "false". A
Linear stem before the blocks makes the first block's input require grad,
which the reentrant variant needs to give the block's parameters a
gradient. Dropout draws inside the regions: every variant recomputes with
the RNG state of the forward, so each trains like the step without
checkpoint.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from remat_dropout_model import BATCH, CLASSES, DIM, NUM_BATCHES, Block


class Model(nn.Module):
    def __init__(self, reentrant: str):
        super().__init__()
        self.stem = nn.Linear(DIM, DIM)
        self.layers = nn.ModuleList(Block() for _ in range(2))
        self.head = nn.Linear(DIM, CLASSES)
        self.reentrant = reentrant

    def forward(self, x, y):
        x = self.stem(x)
        for layer in self.layers:
            if self.reentrant == "default":
                x = checkpoint(layer, x)
            else:
                x = checkpoint(layer, x, use_reentrant=self.reentrant == "true")
        return F.cross_entropy(self.head(x), y)


def make(reentrant: str = "true"):
    batches = [(torch.randn(BATCH, DIM), torch.randint(0, CLASSES, (BATCH,)))
               for _ in range(NUM_BATCHES)]
    return Model(reentrant), batches
