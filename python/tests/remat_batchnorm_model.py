"""Three residual blocks with BatchNorm1d and a mean-squared-error loss, for
test_remat_parity.py and test_sac_ilp.py.

``blocks.{0,1,2}``: Linear, BatchNorm1d, GELU, Linear, added to the block
input; a Linear head and ``F.mse_loss``. Two things here are not in the
transformers: batch norm's forward returns its updated running statistics
(the step returns them as buffer mutations, so they live to its end whatever
is recomputed) and its CPU backward kernel holds a gradient-sized
temporary; and a reduced ``mse_loss`` keeps its input-sized elementwise
buffer as the storage of its 0-dim result until the loss dies at the end of
the step. The runtime measures all three, so the prediction must count them.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

FEATURES = 10
DIM = 32
BATCH = 64
NUM_BATCHES = 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(DIM, 2 * DIM)
        self.bn = nn.BatchNorm1d(2 * DIM)
        self.out = nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        return x + self.out(F.gelu(self.bn(self.fc(x))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(FEATURES, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(DIM, 1)

    def forward(self, x, y):
        h = self.inp(x)
        for block in self.blocks:
            h = block(h)
        return F.mse_loss(self.head(h).squeeze(-1), y)


def make():
    batches = [(torch.randn(BATCH, FEATURES), torch.randn(BATCH)) for _ in range(NUM_BATCHES)]
    return Model(), batches
