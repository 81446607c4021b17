"""Model zoo for the import pipeline tests (found by a robustness sweep): tenc."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(30, 16)
        s.layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.1, batch_first=True)
        s.fc = nn.Linear(16, 3)
    def forward(s, x, y):
        h = s.layer(s.emb(x))
        return F.cross_entropy(s.fc(h.mean(1)), y)
def make():
    return M(), [(torch.randint(0, 30, (2, 5)), torch.randint(0, 3, (2,))) for _ in range(2)]
