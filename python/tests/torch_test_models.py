"""PyTorch's own FSDP/DTensor test models as Loom capture targets: the test Transformer, MLPStack and TransformerWithSharedParams.

``make(model="transformer")`` is ``Transformer(ModelArgs(...))`` from
``torch.testing._internal.distributed._tensor.common_dtensor`` (tied
embeddings, its blocks at ``layers.N``) with a cross-entropy loss;
``make(model="mlpstack")`` is ``MLPStack`` from
``torch.testing._internal.common_fsdp`` (a ``Sequential`` of three MLPs, one
3x wide so shards are uneven, its blocks at ``0``, ``1``, ``2``) with a mean
squared output as the loss. Dropout is off (``dropout_p=0``): every rank
would draw different masks, which no single reference reproduces.
``make(model="twsp")`` is ``TransformerWithSharedParams`` from
``torch.testing._internal.common_fsdp`` as PyTorch's FSDP tests build it
(``deterministic=True``, so in eval mode; ``add_bn=True``: a
``BatchNorm1d(2)`` on the target embedding; ``nn.Transformer`` with two
encoder and two decoder layers, sequence-first; the embedding tied to the
output projection) with its own ``get_loss`` (summed cross-entropy). Its
source and target are ``(6 * batch / 2, 2)`` and ``(4 * batch / 2, 2)``
tokens, so a split slices each along its own dim 0.
``make(model="doublelinear")`` is ``DoubleLinear(dim,
use_second_linear=False)`` from ``torch.testing._internal.common_fsdp``,
PyTorch's model for an unused module: ``lin2`` is trainable but the loss
never reads it, so its parameters receive no gradient (torch.optim leaves
them as they are; DDP needs ``find_unused_parameters=True``).
``make(model="compositeparam")`` is ``CompositeParamModel`` from
``torch.testing._internal.common_dist_composable`` (a Linear, two
``UnitModule``s, a parameter ``p`` of its own it multiplies by, and a
registered buffer its forward never reads) under a wrapper that adds the
loss, so the model is the root's only child ``model``: its own code runs
before and after its children, and its buffer belongs to no op.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.testing._internal.common_dist_composable import CompositeParamModel
from torch.testing._internal.common_fsdp import (
    DEVICEInitMode,
    DoubleLinear,
    MLPStack,
    TransformerWithSharedParams,
)
from torch.testing._internal.distributed._tensor.common_dtensor import ModelArgs, Transformer


class TransformerLoss(Transformer):
    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = super().forward(tokens)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(0, 1))


class MLPStackLoss(MLPStack):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).pow(2).mean()


class DoubleLinearLoss(DoubleLinear):
    def __init__(self, dim: int):
        super().__init__(dim, use_second_linear=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).pow(2).mean()


class CompositeParamModelLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = CompositeParamModel(torch.device("cpu"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x).pow(2).mean()


class _OneProcess:
    """The process group TransformerWithSharedParams asks its rank and size
    (for its own inputs, which these batches replace)."""

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return 1


class TransformerWithSharedParamsLoss(TransformerWithSharedParams):
    def __init__(self):
        super().__init__(_OneProcess(), DEVICEInitMode.DEVICE_NEVER, add_bn=True,
                         deterministic=True)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return self.get_loss((src, tgt), super().forward(src, tgt))


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
    if model == "twsp":
        net = TransformerWithSharedParamsLoss()
        vocab = net.embed_tokens.num_embeddings
        rows = batch // 2
        return net, [(torch.randint(0, vocab, (6 * rows, 2)), torch.randint(0, vocab, (4 * rows, 2)))
                     for _ in range(steps)]
    if model == "doublelinear":
        return DoubleLinearLoss(dim), [(torch.randn(batch, dim),) for _ in range(steps)]
    if model == "compositeparam":
        return CompositeParamModelLoss(), [(torch.randn(batch, 100),) for _ in range(steps)]
    raise ValueError("model must be 'transformer', 'mlpstack', 'twsp', 'doublelinear' or "
                     f"'compositeparam', got '{model}'")
