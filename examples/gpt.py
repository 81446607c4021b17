"""Tiny GPT language model trained on next-token prediction.

Token + learned position embeddings, pre-LayerNorm transformer blocks
(causal self-attention, GELU MLP), a final LayerNorm and an lm head whose
weight is tied to the token embedding. Attention is written out with
matmuls, a causal-mask buffer and softmax so that every step is a plain aten
op in the exported joint graph.

Module names the compiler relies on: ``tok``, ``pos``,
``layers.{i}.ln1``, ``layers.{i}.attn.{wq,wk,wv,wo}``, ``layers.{i}.ln2``,
``layers.{i}.mlp.{fc1,fc2}``, ``norm``, ``head`` (tied to ``tok``).

    PYTHONPATH=python python -m loom.capture examples/gpt.py --out out/gpt
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 64
DIM = 32
LAYERS = 2
HEADS = 2
SEQ = 16
BATCH = 4
NUM_BATCHES = 4


class Attention(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.heads = heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        # Non-persistent: the mask is derived data, not model state, so it
        # stays out of the state dict (export lifts it as a constant buffer).
        mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads

        def split(z):
            return z.view(b, t, self.heads, hd).transpose(1, 2)

        q, k, v = split(self.wq(x)), split(self.wk(x)), split(self.wv(x))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        scores = scores.masked_fill(~self.mask[:t, :t], float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.wo(out.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, seq)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        self.layers = nn.ModuleList(Block(DIM, HEADS, SEQ) for _ in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.tok.weight
        # GPT-2 style small embedding init: with the default N(0, 1) init the
        # tied head produces huge logits and the initial loss is far above
        # log(VOCAB).
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for layer in self.layers:
            x = layer(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def make(batch=BATCH):
    """The model and NUM_BATCHES batches of `batch` rows (capture's
    `--make-arg batch=N`)."""
    model = GPT()
    batches = []
    for _ in range(NUM_BATCHES):
        # Targets are the inputs shifted by one, as in real LM training.
        seq = torch.randint(0, VOCAB, (batch, SEQ + 1))
        batches.append((seq[:, :-1].contiguous(), seq[:, 1:].contiguous()))
    return model, batches
