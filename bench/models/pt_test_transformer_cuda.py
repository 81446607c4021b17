"""PyTorch's test_sac_ilp Transformer with the attention kernel CUDA runs for it, capturable on CPU.

On CUDA, ``F.scaled_dot_product_attention`` in fp32 with dropout and a causal
mask dispatches to the memory-efficient kernel, which keeps for the backward
only its output, the log-sum-exp and the RNG seed and offset. On CPU the same
call runs (and exports as) the math form, which materialises four
[batch, heads, seq, seq] tensors per layer. To let Loom predict the step
PyTorch's test measures, ``make()`` builds pt_test_transformer's model and
points the test module's ``F.scaled_dot_product_attention`` at
``aten::_scaled_dot_product_efficient_attention``, whose meta kernel lets a
``--meta`` capture record it (the CPU runtime cannot run it: predictions
only):

    PYTHONPATH=python python -m loom.capture bench/models/pt_test_transformer_cuda.py \\
        --meta --optimizer adam --lr 1e-2 --out out/pt-transformer-cuda

Same keyword arguments as pt_test_transformer.make().
"""

import sys
import types
from pathlib import Path

import torch
import torch.nn.functional as F
import torch.testing._internal.distributed._tensor.common_dtensor as common_dtensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pt_test_transformer  # noqa: E402


def efficient_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False):
    """The memory-efficient SDPA kernel's output (it also returns the
    log-sum-exp and the RNG seed and offset, which autograd keeps)."""
    return torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, attn_mask, True, dropout_p, is_causal)[0]


def use_efficient_attention() -> None:
    """The test Transformer calls ``F.scaled_dot_product_attention`` through
    its module's ``F``; give that module one whose attention is the kernel
    above and everything else torch.nn.functional's."""
    functional = types.SimpleNamespace(**vars(F))
    functional.scaled_dot_product_attention = efficient_attention
    common_dtensor.F = functional


def make(batch: int = 8, **shape):
    use_efficient_attention()
    return pt_test_transformer.make(batch, **shape)
