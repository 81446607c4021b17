"""PyTorch's own test Transformer, as its selective-checkpointing ILP test builds it.

``torch.testing._internal.distributed._tensor.common_dtensor.Transformer`` with
the ``ModelArgs`` of ``test_sac_ilp.py``'s ``TestSACILP``: 4 layers, 12 heads,
dim 768, vocabulary 8192, sequence 1024, dropout 0.1 (its other fields keep
their defaults: tied output weights, an attention mask), on a batch of 8
sequences of 1024 tokens. The loss is the sum of the logits, as that test
takes it. The class is imported from PyTorch, not written again, so the step
is exactly the test's model.

Capture it without weights (``--meta``) with Adam as the test uses it:

    PYTHONPATH=python python -m loom.capture bench/models/pt_test_transformer.py \\
        --meta --optimizer adam --lr 1e-2 --out out/pt-transformer

``make()``'s keyword arguments (``--make-arg KEY=VALUE``) change the shape:
``n_layers``, ``n_heads``, ``dim``, ``vocab_size``, ``max_seq_len``,
``dropout_p``, ``batch``, ``checkpoint_activations``.
"""

import torch
from torch.testing._internal.distributed._tensor.common_dtensor import ModelArgs, Transformer

TEST_SAC_ILP = dict(n_layers=4, n_heads=12, vocab_size=8192, max_seq_len=1024, dim=768,
                    dropout_p=0.1)


class SummedTransformer(Transformer):
    """The test's Transformer with the test's loss, ``model(inp).sum()``."""

    def forward(self, tokens):
        return super().forward(tokens).sum()


def make(batch: int = 8, **shape):
    args = ModelArgs(**{**TEST_SAC_ILP, **shape})
    model = SummedTransformer(args)
    tokens = torch.randint(0, args.vocab_size, (batch, args.max_seq_len))
    return model, [(tokens,)]
