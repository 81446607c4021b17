"""Three bias-free Linear layers registered in the reverse of their use, for DDP on 3 ranks.

``make()`` returns ``(model, batches)`` (Loom's capture protocol): ``x ->
a -> relu -> b -> relu -> c -> cross_entropy``, with ``c``, ``b``, ``a``
registered in that order, so the model's parameter order is the order
backward produces their gradients. DDP packs its first step's bucket in
model order and rebuilds it in gradient-ready order after that step;
here both orders are the same, so every step all-reduces the same layout
as Loom's buckets, and with 3 ranks (where Gloo's ring sums each chunk of
the bucket in a different order, and a sum divided by 3 rounds unlike
DDP's gradients multiplied by 1/3 and summed) the comparison is exact.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ReversedMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Linear(40, 10, bias=False)
        self.b = nn.Linear(48, 40, bias=False)
        self.a = nn.Linear(32, 48, bias=False)

    def forward(self, x, y):
        return F.cross_entropy(self.c(F.relu(self.b(F.relu(self.a(x))))), y)


def make(batch: str = "6", steps: str = "4"):
    n = int(batch)
    batches = [(torch.randn(n, 32), torch.randint(0, 10, (n,))) for _ in range(int(steps))]
    return ReversedMLP(), batches
