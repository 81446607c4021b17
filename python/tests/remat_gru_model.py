"""A bidirectional GRU block and a mean-pooled logistic head, for
test_sac_ilp.py.

``layers.0``: a GRU (the CPU decomposition: one small matmul and a handful
of pointwise ops per time step and direction) followed by ELU. Recomputing
the whole block is not the least memory here: its region brings every time
step's gates back at once before the block's backward, which needs more
room than the block frees across the gap, so the smallest feasible budget is
that of a decision between saving and recomputing everything.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

FEATURES = 5
HIDDEN = 6
TIME = 7
BATCH = 8
NUM_BATCHES = 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(FEATURES, HIDDEN, batch_first=True, bidirectional=True)

    def forward(self, x):
        out, _ = self.rnn(x)
        return F.elu(out)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Block()])
        self.head = nn.Linear(2 * HIDDEN, 1)

    def forward(self, x, y):
        h = x
        for layer in self.layers:
            h = layer(h)
        logit = self.head(h.mean(1)).squeeze(-1)
        return F.binary_cross_entropy_with_logits(logit, y)


def make():
    batches = [(torch.randn(BATCH, TIME, FEATURES), torch.randint(0, 2, (BATCH,)).float())
               for _ in range(NUM_BATCHES)]
    return Model(), batches
