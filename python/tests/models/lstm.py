"""Model zoo for the import pipeline tests (found by a robustness sweep): lstm."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(20, 8)
        s.rnn = nn.LSTM(8, 12, num_layers=2, batch_first=True)
        s.fc = nn.Linear(12, 4)
    def forward(s, x, y):
        out, (h, c) = s.rnn(s.emb(x))
        return F.cross_entropy(s.fc(out[:, -1]), y)
def make():
    return M(), [(torch.randint(0, 20, (3, 6)), torch.randint(0, 4, (3,))) for _ in range(2)]
