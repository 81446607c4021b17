"""A Llama-3-8B-shaped language model, for capturing its training step without weights.

Shapes follow torchtitan's ``llama3`` flavor "8B" (torchtitan/models/llama3/__init__.py:
dim 4096, 32 layers, 32 heads, 8 KV heads, FFN hidden
``compute_ffn_hidden_dim(4096, multiple_of=1024, ffn_dim_multiplier=1.3)`` = 14336,
RoPE theta 500000) with the Llama 3 tokenizer's 128256-token vocabulary, and the
training shape of torchtitan's train_configs/llama3_8b.toml (``batch_size = 1``,
``seq_len = 8192``). The module names are torchtitan's: ``tok_embeddings``,
``layers.{i}.attention_norm``, ``layers.{i}.attention.{wq,wk,wv,wo}``,
``layers.{i}.ffn_norm``, ``layers.{i}.feed_forward.{w1,w2,w3}``, ``norm``,
``output`` (not tied to the embedding).

The model is written here, not imported from torchtitan: RMSNorm is spelled
out (x * rsqrt(mean(x^2) + eps) * weight), RoPE is the real-valued
rotate-half form of the same rotation (cos/sin tables as non-persistent
buffers instead of a complex ``freqs_cis``, which Loom's importer does not
type), and attention is ``F.scaled_dot_product_attention(is_causal=True)`` on
the KV heads repeated to the query heads (torchtitan's ``repeat_kv``), so the
exported step is the attention kernel torchtitan runs, not a materialised
8192 x 8192 score matrix. No activation checkpointing.

At full size the model has 8.03 B parameters: capture it on the meta device,
where nothing is allocated (``--meta``), and import it with ``--no-weights``:

    PYTHONPATH=python python -m loom.capture bench/models/llama3.py --meta \
        --make-arg n_layers=2 --out out/llama3-2l
    build/bin/loom-import out/llama3-2l/step.pt2 --no-weights -o out/llama3-2l/step.mlir

``make()``'s keyword arguments (``--make-arg KEY=VALUE``) change the shape:
``dim``, ``n_layers``, ``n_heads``, ``n_kv_heads``, ``ffn_hidden``, ``vocab``,
``seq``, ``batch``; the defaults are the 8B ones. ``FLAVORS`` holds
torchtitan's 8B, 70B and 405B model shapes (its ``llama3_configs``) for
``--make-arg``. ``dtype`` (e.g. ``--make-arg dtype="'bfloat16'"``) casts the
model, so the whole step (parameters, activations, gradients) is in that
type: what a cost model needs to price bf16 compute when no FSDP pass casts
the parameters (bench/pipeline.py sim).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

EIGHT_B = dict(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_hidden=14336,
               vocab=128256, seq=8192, batch=1)
ROPE_THETA = 500000.0
NORM_EPS = 1e-5


def ffn_hidden_dim(dim: int, multiple_of: int, ffn_dim_multiplier: float | None) -> int:
    """Llama's FFN width: 2/3 of 4 * dim, scaled, rounded up to a multiple."""
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


# torchtitan's llama3 flavors (dim, layers, heads, KV heads, and the FFN width
# from its multiple_of and ffn_dim_multiplier): 8.0 B, 70.6 B and 405.9 B
# parameters with the 128256-token vocabulary.
FLAVORS = {
    "8B": dict(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8,
               ffn_hidden=ffn_hidden_dim(4096, 1024, 1.3)),
    "70B": dict(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                ffn_hidden=ffn_hidden_dim(8192, 4096, 1.3)),
    "405B": dict(dim=16384, n_layers=126, n_heads=128, n_kv_heads=8,
                 ffn_hidden=ffn_hidden_dim(16384, 4096, 1.2)),
}


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim: int, n_heads: int, n_kv_heads: int):
        super().__init__()
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.n_heads // self.n_kv_heads
        if rep > 1:  # grouped-query attention: each KV head serves `rep` query heads
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, ffn_hidden):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, n_heads, n_kv_heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, ffn_hidden)

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama3(nn.Module):
    def __init__(self, dim, n_layers, n_heads, n_kv_heads, ffn_hidden, vocab, seq):
        super().__init__()
        if dim % n_heads or n_heads % n_kv_heads or (dim // n_heads) % 2:
            raise ValueError(f"dim {dim}, {n_heads} heads and {n_kv_heads} KV heads do not fit")
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            TransformerBlock(dim, n_heads, n_kv_heads, ffn_hidden) for _ in range(n_layers))
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        head_dim = dim // n_heads
        inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        # Derived tables, not model state (torchtitan's freqs_cis is a
        # non-persistent buffer too).
        self.register_buffer("rope_cos", angles.cos(), persistent=False)
        self.register_buffer("rope_sin", angles.sin(), persistent=False)
        for name, p in self.named_parameters():
            if p.dim() > 1 and not p.is_meta:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * n_layers) if name.endswith(("wo.weight", "w2.weight")) else 0.02)

    def forward(self, tokens, targets):
        t = tokens.shape[1]
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, cos, sin)
        logits = self.output(self.norm(h))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(0, 1))


def make(dim=EIGHT_B["dim"], n_layers=EIGHT_B["n_layers"], n_heads=EIGHT_B["n_heads"],
         n_kv_heads=EIGHT_B["n_kv_heads"], ffn_hidden=EIGHT_B["ffn_hidden"],
         vocab=EIGHT_B["vocab"], seq=EIGHT_B["seq"], batch=EIGHT_B["batch"], dtype="float32"):
    model = Llama3(dim, n_layers, n_heads, n_kv_heads, ffn_hidden, vocab, seq)
    if dtype != "float32":
        model = model.to(getattr(torch, dtype))
    tokens = torch.randint(0, vocab, (batch, seq + 1))
    return model, [(tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())]
