"""Model zoo for the import pipeline tests (found by a robustness sweep): dwconv."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        s.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        s.grp = nn.Conv2d(8, 16, 1, groups=2)
        s.act = nn.Hardswish()
        s.pool = nn.AvgPool2d(2)
        s.head = nn.Linear(16 * 4 * 4, 5)
    def forward(s, x, y):
        h = s.act(s.stem(x))
        h = s.act(s.dw(h)) + h
        h = s.pool(s.grp(h))
        return F.cross_entropy(s.head(h.flatten(1)), y, label_smoothing=0.1)
def make():
    return M(), [(torch.randn(2, 3, 16, 16), torch.randint(0, 5, (2,))) for _ in range(2)]
