"""A sequence-first model, as PyTorch's sequence modules take their input by default.

``nn.TransformerEncoder`` (``batch_first=False``, two layers, dropout off)
then ``nn.GRU`` (sequence-first too) over ``(S, B)`` tokens, a linear head
and a mean cross-entropy: the samples are on dim 1 of every batch tensor,
so data parallelism and microbatching must split dim 1
(``--batch-dims 1``); splitting dim 0 would cut the sequence instead.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class SeqFirst(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(dim, 2, dim_feedforward=2 * dim, dropout=0.0),
            layers, enable_nested_tensor=False)
        self.rnn = nn.GRU(dim, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.embed(tokens))
        h, _ = self.rnn(h)
        logits = self.head(h)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(0, 1))


def make(batch: int = 8, seq: int = 6, vocab: int = 24, dim: int = 16, layers: int = 2,
         steps: int = 3):
    model = SeqFirst(vocab, dim, layers)
    batches = [(torch.randint(0, vocab, (seq, batch)), torch.randint(0, vocab, (seq, batch)))
               for _ in range(steps)]
    return model, batches
