"""Model zoo for the import pipeline tests (found by a robustness sweep): pool3d."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.c = nn.Conv3d(2, 4, 3, padding=1)
        s.bn = nn.BatchNorm3d(4)
        s.inorm = nn.InstanceNorm1d(4, affine=True)
        s.fc = nn.Linear(4, 3)
    def forward(s, x, y):
        h = F.max_pool3d(F.relu6(s.bn(s.c(x))), 2)
        h = s.inorm(h.flatten(2))
        h = F.adaptive_max_pool1d(h, 1).squeeze(-1)
        return F.nll_loss(F.log_softmax(s.fc(h), -1), y) + F.kl_div(F.log_softmax(h, -1), F.softmax(h.detach(), -1), reduction='batchmean')
def make():
    return M(), [(torch.randn(2, 2, 6, 6, 6), torch.randint(0, 3, (2,))) for _ in range(2)]
