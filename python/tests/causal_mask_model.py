"""nn.TransformerEncoder / nn.Transformer given a causal mask and no
``is_causal``, for test_causal_masks.py.

``make(model="encoder")``: PyTorch's word-language-model TransformerModel,
sequence-first, ``nn.Transformer.generate_square_subsequent_mask(T)`` built
in forward, dropout 0.1 (eager asks whether that mask is the causal one).
``make(model="transformer")``: an encoder-decoder ``nn.Transformer``,
batch-first, the target's causal mask built in forward and the sources'
padding mask an input (the decoder asks; the encoder has no mask).
``make(model="varying")``: the encoder given its mask as an input that is
the causal mask in step 0 and a band mask in step 1.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 40
DIM = 32
SEQ = 12


class Encoder(nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.transformer_encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(DIM, 4, 2 * DIM, dropout), 2, enable_nested_tensor=False)
        self.decoder = nn.Linear(DIM, VOCAB)

    def forward(self, src, y, mask=None):
        if mask is None:
            mask = nn.Transformer.generate_square_subsequent_mask(len(src))
        h = self.transformer_encoder(self.emb(src) * math.sqrt(DIM), mask)
        return F.cross_entropy(self.decoder(h).flatten(0, 1), y.flatten())


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src = nn.Embedding(VOCAB, DIM)
        self.tgt = nn.Embedding(VOCAB, DIM)
        self.transformer = nn.Transformer(DIM, 4, 2, 2, 2 * DIM, dropout=0.1, batch_first=True)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, x, pad, y_in, y):
        mask = nn.Transformer.generate_square_subsequent_mask(y_in.shape[1])
        h = self.transformer(self.src(x), self.tgt(y_in), tgt_mask=mask,
                             src_key_padding_mask=pad, memory_key_padding_mask=pad)
        return F.cross_entropy(self.head(h).flatten(0, 1), y.flatten())


def band_mask() -> torch.Tensor:
    """-inf beyond one position either side: not the causal mask."""
    i = torch.arange(SEQ)
    return torch.zeros(SEQ, SEQ).masked_fill((i[:, None] - i[None, :]).abs() > 1, float("-inf"))


def make(model: str = "encoder", batch: int = 4, steps: int = 3):
    if model == "transformer":
        batches = []
        for _ in range(steps):
            pad = torch.zeros(batch, SEQ, dtype=torch.bool)
            pad[:, SEQ - 3:] = True
            batches.append((torch.randint(0, VOCAB, (batch, SEQ)), pad,
                            torch.randint(0, VOCAB, (batch, SEQ - 2)),
                            torch.randint(0, VOCAB, (batch, SEQ - 2))))
        return Seq2Seq(), batches
    tokens = [(torch.randint(0, VOCAB, (SEQ, batch)), torch.randint(0, VOCAB, (SEQ, batch)))
              for _ in range(steps)]
    if model == "varying":
        masks = [nn.Transformer.generate_square_subsequent_mask(SEQ), band_mask()]
        return Encoder(0.0), [(*t, masks[i % 2]) for i, t in enumerate(tokens)]
    return Encoder(0.1), tokens
