"""PyTorch's own FSDP/DTensor test models as Loom capture targets: the test Transformer and MLPStack.

``make(model="transformer")`` is ``Transformer(ModelArgs(...))`` from
``torch.testing._internal.distributed._tensor.common_dtensor`` (tied
embeddings, its blocks at ``layers.N``) with a cross-entropy loss;
``make(model="mlpstack")`` is ``MLPStack`` from
``torch.testing._internal.common_fsdp`` (a ``Sequential`` of three MLPs, one
3x wide so shards are uneven, its blocks at ``0``, ``1``, ``2``) with a mean
squared output as the loss. Dropout is off (``dropout_p=0``): every rank
would draw different masks, which no single reference reproduces.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.testing._internal.common_fsdp import MLPStack
from torch.testing._internal.distributed._tensor.common_dtensor import ModelArgs, Transformer


class TransformerLoss(Transformer):
    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = super().forward(tokens)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(0, 1))


class MLPStackLoss(MLPStack):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).pow(2).mean()


def make(model: str = "transformer", batch: int = 8, steps: int = 4, n_layers: int = 2,
         dim: int = 16, vocab: int = 32, seq: int = 8):
    if model == "transformer":
        args = ModelArgs(n_layers=n_layers, vocab_size=vocab, max_seq_len=seq, dim=dim,
                         n_heads=4, dropout_p=0.0)
        net = TransformerLoss(args)
        batches = [(torch.randint(0, vocab, (batch, seq)), torch.randint(0, vocab, (batch, seq)))
                   for _ in range(steps)]
        return net, batches
    if model == "mlpstack":
        net = MLPStackLoss(dim)
        return net, [(torch.randn(batch, dim),) for _ in range(steps)]
    raise ValueError(f"model must be 'transformer' or 'mlpstack', got '{model}'")
