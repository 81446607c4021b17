"""Calibration micro-model: a long chain of elementwise ops on tiny tensors.

Its step time is almost entirely the runtime's per-op cost (dispatch,
argument conversion, slot bookkeeping, allocation), which
bench/calibrate_cpu.py divides by the op count to get the CPU spec's
`op_overhead`. Not a training example.

    PYTHONPATH=python python -m loom.capture bench/models/op_chain.py --out out/chain
"""

import torch
import torch.nn as nn

CHAIN = 300
WIDTH = 8
NUM_BATCHES = 4


class Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(WIDTH))

    def forward(self, x):
        h = x * self.w
        for _ in range(CHAIN):
            h = torch.tanh(h)
        return h.sum()


def make():
    return Chain(), [(torch.randn(WIDTH),) for _ in range(NUM_BATCHES)]
