"""Stacked RNNs with dropout between their layers, for test_rnn_dropout.py.

``make(kind=...)``: a token model whose recurrent core is a 3-layer
``nn.LSTM`` (sequence-first), a 2-layer bidirectional ``nn.GRU``
(batch-first) or a 2-layer ``nn.RNN`` with ReLU, each with ``dropout=0.3``
between its layers, then a linear head and cross entropy.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 30
DIM = 16
SEQ = 7
BATCH = 4


class Net(nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.batch_first = kind == "gru"
        self.emb = nn.Embedding(VOCAB, DIM)
        if kind == "lstm":
            self.rnn = nn.LSTM(DIM, DIM, 3, dropout=0.3)
        elif kind == "gru":
            self.rnn = nn.GRU(DIM, DIM, 2, dropout=0.3, bidirectional=True, batch_first=True)
        else:
            self.rnn = nn.RNN(DIM, DIM, 2, nonlinearity="relu", dropout=0.3)
        self.head = nn.Linear(2 * DIM if kind == "gru" else DIM, VOCAB)

    def forward(self, tokens, targets):
        out, _ = self.rnn(self.emb(tokens))
        return F.cross_entropy(self.head(out).flatten(0, 1), targets.flatten())


def make(kind: str = "lstm", steps: int = 3):
    shape = (BATCH, SEQ) if kind == "gru" else (SEQ, BATCH)
    return Net(kind), [(torch.randint(0, VOCAB, shape), torch.randint(0, VOCAB, shape))
                       for _ in range(steps)]
