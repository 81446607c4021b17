"""Model zoo for the import pipeline tests (found by a robustness sweep): cnn."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.f = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(p=0.1), nn.Linear(16, 10))
    def forward(s, x, y):
        return F.cross_entropy(s.f(x), y)
def make():
    return M(), [(torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))) for _ in range(2)]
