"""Batch tensors without a batch dim: a causal mask every sample shares and
a per-step temperature.

Two attention blocks over ``(B, T, D)`` inputs take the ``(T, T)`` boolean
mask as a batch tensor (as a training loop passes one mask with every
batch), and the loss divides the logits by a 0-d temperature that changes
from step to step. Data parallelism must hand every rank the whole mask and
temperature (``--batch-dims 0,0,none,0``: a 0-d tensor is unbatched without
being told); slicing the mask's rows per rank fails to broadcast.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm(x)).chunk(3, -1)
        return x + self.out(F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


class SharedMask(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens, targets, mask, temperature):
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h, mask)
        logits = self.head(h) / temperature
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(0, 1))


def make(batch: int = 8, seq: int = 6, vocab: int = 24, dim: int = 16, layers: int = 2,
         steps: int = 3):
    model = SharedMask(vocab, dim, layers)
    mask = torch.ones(seq, seq, dtype=torch.bool).tril()
    batches = [(torch.randint(0, vocab, (batch, seq)), torch.randint(0, vocab, (batch, seq)),
                mask, torch.tensor(1.0 + 0.5 * i)) for i in range(steps)]
    return model, batches
