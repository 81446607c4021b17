"""Model zoo for the import pipeline tests (found by a robustness sweep): conv1d_gn."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv1d(4, 8, 5, padding=2)
        s.gn = nn.GroupNorm(2, 8)
        s.c2 = nn.Conv1d(8, 8, 3, dilation=2, padding='same')
        s.gn2 = nn.GroupNorm(4, 8, affine=False)
        s.out = nn.Linear(8, 3)
    def forward(s, x, y):
        h = F.silu(s.gn(s.c1(x)))
        h = F.mish(s.gn2(s.c2(h)))
        return F.l1_loss(s.out(h.mean(-1)), y)
def make():
    return M(), [(torch.randn(3, 4, 20), torch.randn(3, 3)) for _ in range(2)]
