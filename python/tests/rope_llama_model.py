"""A Llama-style decoder as Meta's and torchtitan's code write it: rotary
embeddings as complex numbers (`torch.polar`, `view_as_complex`,
`view_as_real`) from a complex64 buffer `freqs_cis`, grouped-query attention
(`repeat_interleave`), `nn.RMSNorm` (``make(norm="layer")``: `nn.LayerNorm`),
a SwiGLU MLP and an untied output head.
The buffer reaches Loom as a complex weight; a plain attribute (not a
buffer) of complex type is lifted as a tensor constant.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

DIM, HEADS, KV_HEADS, SEQ, VOCAB = 32, 4, 2, 8, 64


def precompute_freqs_cis(seq: int, head_dim: int) -> torch.Tensor:
    freqs = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rotary(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    rotated = xc * freqs_cis.view(1, x.shape[1], 1, -1)
    return torch.view_as_real(rotated).flatten(3).type_as(x)


class Block(nn.Module):
    def __init__(self, norm=nn.RMSNorm):
        super().__init__()
        head_dim = DIM // HEADS
        self.attention_norm = norm(DIM)
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * head_dim, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * head_dim, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)
        self.ffn_norm = norm(DIM, eps=1e-6)
        self.w1 = nn.Linear(DIM, 64, bias=False)
        self.w2 = nn.Linear(64, DIM, bias=False)
        self.w3 = nn.Linear(DIM, 64, bias=False)

    def forward(self, x, freqs_cis):
        b, t, _ = x.shape
        h = self.attention_norm(x)
        q = apply_rotary(self.wq(h).view(b, t, HEADS, -1), freqs_cis)
        k = apply_rotary(self.wk(h).view(b, t, KV_HEADS, -1), freqs_cis)
        v = self.wv(h).view(b, t, KV_HEADS, -1)
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=2)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, t, DIM))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class RopeLlama(nn.Module):
    def __init__(self, norm=nn.RMSNorm):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList([Block(norm) for _ in range(2)])
        self.norm = norm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(SEQ, DIM // HEADS))
        # Meta's reference code keeps it as a plain attribute instead.
        self.scale_cis = torch.polar(torch.ones(1), torch.zeros(1))

    def forward(self, tokens, labels):
        h = self.tok_embeddings(tokens)
        freqs_cis = self.freqs_cis * self.scale_cis
        for layer in self.layers:
            h = layer(h, freqs_cis)
        logits = self.output(self.norm(h))
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def make(batch: int = 4, steps: int = 4, norm: str = "rms"):
    torch.manual_seed(0)
    batches = [(torch.randint(0, VOCAB, (batch, SEQ)), torch.randint(0, VOCAB, (batch, SEQ)))
               for _ in range(steps)]
    return RopeLlama({"rms": nn.RMSNorm, "layer": nn.LayerNorm}[norm]), batches
