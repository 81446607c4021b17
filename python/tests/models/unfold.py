"""Model zoo for the import pipeline tests (found by a robustness sweep): unfold."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.unfold = nn.Unfold(kernel_size=4, stride=4)
        s.patch = nn.Linear(3 * 16, 12)
        s.fc = nn.Linear(12, 6)
    def forward(s, x, y):
        x = F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False)
        p = s.unfold(x).transpose(1, 2)      # B, L, C*16
        h = F.gelu(s.patch(p))
        h = F.interpolate(h.transpose(1, 2), size=8, mode='nearest').transpose(1, 2)
        return F.cross_entropy(s.fc(h.amax(1)), y)
def make():
    return M(), [(torch.randn(2, 3, 8, 8), torch.randint(0, 6, (2,))) for _ in range(2)]
