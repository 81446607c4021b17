"""rope_llama_model.py's decoder with the RMSNorms people write, whose casts
an f32 trace does not show.

``norm="meta"``: Meta's Llama reference, ``self._norm(x.float()).type_as(x) *
self.weight``; ``norm="hf"``: Hugging Face's LlamaRMSNorm, which remembers the
input dtype, normalises ``x.to(torch.float32)`` and returns ``weight *
x.to(input_dtype)``; ``norm="torch"``: ``nn.RMSNorm`` with its ``eps`` given,
whose decomposition casts a bf16 input up and the result back. Traced in f32
every one of those casts converts a tensor to its own dtype and leaves no op;
under FSDP2's bf16 policy they are real (docs/distributed.md, "Casts the
model makes").
"""

import functools

import torch
import torch.nn as nn

import rope_llama_model


class MetaRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x.float()).type_as(x) * self.weight


class HFRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


NORMS = {"meta": MetaRMSNorm, "hf": HFRMSNorm,
         "torch": functools.partial(nn.RMSNorm, eps=1e-5)}


def make(norm: str = "meta", batch: int = 4, steps: int = 4):
    torch.manual_seed(0)
    vocab, seq = rope_llama_model.VOCAB, rope_llama_model.SEQ
    batches = [(torch.randint(0, vocab, (batch, seq)), torch.randint(0, vocab, (batch, seq)))
               for _ in range(steps)]
    return rope_llama_model.RopeLlama(NORMS[norm]), batches
