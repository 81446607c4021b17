"""Tiny Vision Transformer classifier trained with cross entropy.

16x16 RGB images are cut into 4x4 patches by a strided Conv2d, a learned cls
token is prepended, learned position embeddings are added, and the sequence
goes through pre-LayerNorm transformer blocks; the head classifies the final
cls token. Attention is written out with matmuls and softmax so that the
exported joint graph only has plain aten ops.

Module names: ``patch``, ``cls``/``pos`` (parameters of the root),
``layers.{i}.ln1``, ``layers.{i}.attn.{qkv,proj}``, ``layers.{i}.ln2``,
``layers.{i}.mlp.{fc1,fc2}``, ``norm``, ``head``.

    PYTHONPATH=python python -m loom.capture examples/vit.py --out out/vit
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

IMAGE = 16
PATCH = 4
CHANNELS = 3
DIM = 32
LAYERS = 2
HEADS = 2
NUM_CLASSES = 10
BATCH = 4
NUM_BATCHES = 4


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        # (b, t, 3, heads, hd) -> three tensors of shape (b, heads, t, hd)
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        out = F.softmax(scores, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        num_patches = (IMAGE // PATCH) ** 2
        self.patch = nn.Conv2d(CHANNELS, DIM, kernel_size=PATCH, stride=PATCH)
        self.cls = nn.Parameter(torch.randn(1, 1, DIM) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, num_patches + 1, DIM) * 0.02)
        self.layers = nn.ModuleList(Block(DIM, HEADS) for _ in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, NUM_CLASSES)

    def forward(self, images, labels):
        x = self.patch(images).flatten(2).transpose(1, 2)  # (b, patches, dim)
        cls = self.cls.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos
        for layer in self.layers:
            x = layer(x)
        return F.cross_entropy(self.head(self.norm(x)[:, 0]), labels)


def make(batch=BATCH):
    """The model and NUM_BATCHES batches of `batch` rows (capture's
    `--make-arg batch=N`)."""
    model = ViT()
    batches = [
        (
            torch.randn(batch, CHANNELS, IMAGE, IMAGE),
            torch.randint(0, NUM_CLASSES, (batch,)),
        )
        for _ in range(NUM_BATCHES)
    ]
    return model, batches
