"""A small ResNet: three residual blocks of 3x3 convolutions with
BatchNorm2d, for test_kernel_workspace.py.

``blocks.{0,1,2}``: conv, batch norm, ReLU, conv, batch norm, added to the
block input, ReLU; a 3x3 stem convolution, global average pooling and a
Linear head with cross entropy. On the CPU oneDNN's convolutions allocate
reorders and im2col columns while they run, more than their results and
dependent on the CPU and the threads: no rule in the compiler predicts
them, the kernel workspace profile measures them.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CHANNELS = 8
SIZE = 8
BATCH = 8
NUM_BATCHES = 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(CHANNELS)
        self.c2 = nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(CHANNELS)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, CHANNELS, 3, padding=1)
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(CHANNELS, 10)

    def forward(self, x, y):
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        return F.cross_entropy(self.head(h.mean((2, 3))), y)


def make():
    batches = [(torch.randn(BATCH, 3, SIZE, SIZE), torch.randint(0, 10, (BATCH,)))
               for _ in range(NUM_BATCHES)]
    return Model(), batches
