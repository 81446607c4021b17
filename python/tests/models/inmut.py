"""Model zoo for the import pipeline tests (found by a robustness sweep): inmut."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.fc = nn.Linear(4, 4)
        s.register_buffer('ema', torch.zeros(4))
    def forward(s, x, y):
        x.mul_(2.0)                                  # user-input mutation
        with torch.no_grad():
            s.ema.mul_(0.9).add_(0.1 * x.mean(0))
        h = s.fc(x)
        stacked = torch.stack([F.mse_loss(h, y), F.l1_loss(h, y), (h - y).abs().max()])
        return stacked.sum()
def make():
    return M(), [(torch.randn(3, 4), torch.randn(3, 4)) for _ in range(2)]
