"""PyTorch's FSDP2 multi-forward test models, as capture targets.

``make(model="inner_outer")`` (the default) is the model of
test_fully_shard_training.py::TestFullyShard1DTrainingCore::test_multi_forward_module
(and test_replicate_training.py::test_multi_forward_module):
``inner = Linear(4, 4)``, ``outer = Linear(4, 5)``,
``outer(inner(x) + inner(x))``: ``inner`` runs twice in one forward. With
``fully_shard(model.inner); fully_shard(model)`` the units are ``inner`` and
the root (which holds ``outer``), as ``fsdp_units`` tells
loom.dp_reference. The loss is the output's sum; every batch is the test's
``(32, 4)`` input.

``make(model="twice")`` is the shape of TestFullyShardPrefetch's
multi-forward case (``loss1 = model(inp); loss2 = model(inp)`` on a
Transformer with 3 blocks, ``fully_shard`` on each block and the model),
small: ``model`` has a stem ``Linear(4, 4)``, blocks ``layers.0..2``
(``Linear(4, 4)`` and tanh) and a head ``Linear(4, 4)``, and the step calls
it twice, ``model(x).sum() + model(x).sum()``. The blocks' inputs require
gradients (they come from the stem), ``model``'s do not, as the
Transformer's token ids; ``fully_shard(model.model)`` makes it FSDP2's root,
as in the test (the wrapper holds no parameter).
"""

import torch
import torch.nn as nn

BATCH = 32


class MultiForward(nn.Module):
    # What loom.dp_reference passes to fully_shard before the root (the
    # test's fully_shard(model.inner)); Loom compiles with --units=inner.
    fsdp_units = ("inner",)

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)
        self.outer = nn.Linear(4, 5)

    def forward(self, x):
        return self.outer(self.inner(x) + self.inner(x)).sum()


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, h):
        return torch.tanh(self.lin(h))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.layers = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(4, 4)

    def forward(self, x):
        h = self.stem(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


class Twice(nn.Module):
    fsdp_units = ("model.layers.0", "model.layers.1", "model.layers.2", "model")

    def __init__(self):
        super().__init__()
        self.model = Stack()

    def forward(self, x):
        return self.model(x).sum() + self.model(x).sum()


def make(steps: int = 4, model: str = "inner_outer", batch: int = BATCH):
    net = {"inner_outer": MultiForward, "twice": Twice}[model]()
    return net, [(torch.randn(batch, 4),) for _ in range(steps)]
