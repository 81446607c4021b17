"""Model zoo for the import pipeline tests (found by a robustness sweep): gru."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.rnn = nn.GRU(5, 6, batch_first=True, bidirectional=True)
        s.fc = nn.Linear(12, 1)
    def forward(s, x, y):
        out, h = s.rnn(x)
        logit = s.fc(F.elu(out).mean(1)).squeeze(-1)
        return F.binary_cross_entropy_with_logits(logit, y)
def make():
    return M(), [(torch.randn(3, 7, 5), torch.randint(0, 2, (3,)).float()) for _ in range(2)]
