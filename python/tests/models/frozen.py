"""Model zoo for the import pipeline tests (found by a robustness sweep): frozen."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.backbone = nn.Linear(8, 16)
        s.backbone.weight.requires_grad_(False)
        s.register_buffer('scale', torch.linspace(0.5, 1.5, 16), persistent=False)
        s.register_buffer('shift', torch.zeros(16))
        s.cls = nn.Linear(16, 4)
        s.reg = nn.Linear(16, 2)
        s.bin = nn.Linear(16, 1)
    def forward(s, x, yc, yr, yb):
        h = torch.tanh(s.backbone(x)) * s.scale + s.shift
        return (F.cross_entropy(s.cls(h), yc) + F.mse_loss(s.reg(h), yr)
                + F.binary_cross_entropy(torch.sigmoid(s.bin(h)).squeeze(1), yb))
def make():
    return M(), [(torch.randn(5, 8), torch.randint(0, 4, (5,)), torch.randn(5, 2), torch.rand(5)) for _ in range(2)]
