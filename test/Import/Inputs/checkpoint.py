"""The checkpoint import test's model: three Linear -> ReLU blocks, the
first under plain torch.utils.checkpoint, the second under selective
checkpointing that saves matmuls and recomputes the rest, the third not
checkpointed."""

import functools

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)


def save_matmuls(ctx, op, *args, **kwargs):
    if op == torch.ops.aten.mm.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4, bias=False)

    def forward(self, x):
        return F.relu(self.fc(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))

    def forward(self, x, y):
        h = checkpoint(self.blocks[0], x, use_reentrant=False)
        h = checkpoint(self.blocks[1], h, use_reentrant=False,
                       context_fn=functools.partial(create_selective_checkpoint_contexts,
                                                    save_matmuls))
        return F.cross_entropy(self.blocks[2](h), y)


def make():
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(2, 4, generator=g), torch.tensor([0, 3]))]
    return Net(), batches
