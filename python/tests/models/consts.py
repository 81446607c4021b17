"""Model zoo for the import pipeline tests (found by a robustness sweep): consts."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.wt = nn.Parameter(torch.randn(6, 6)[:, :].t())          # non-contiguous parameter
        s.temp = nn.Parameter(torch.tensor(0.7))            # 0-d parameter
        big = torch.arange(20, dtype=torch.float32)
        s.register_buffer('sl', big[4:10])                  # storage offset
        s.register_buffer('ex', torch.ones(1).expand(6))    # stride-0 buffer
        s.register_buffer('cnt', torch.zeros((), dtype=torch.int64))

    def forward(s, x, t, y):
        w = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])     # lifted tensor constant
        h = x @ s.wt.t() * w + s.sl * s.ex
        h = h + h / t
        s.cnt += 1
        return F.cross_entropy(h / s.temp, y)
def make():
    return M(), [(torch.randn(3, 6), torch.tensor(2.0), torch.randint(0, 6, (3,))) for _ in range(2)]
