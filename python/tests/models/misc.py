"""Model zoo for the import pipeline tests (found by a robustness sweep): misc."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(16, 8)
        s.bil = nn.Bilinear(8, 8, 8)
        s.fc = nn.Linear(8, 16)
        s.ps = nn.PixelShuffle(2)
    def forward(s, x, y):
        B, T = x.shape
        pos = torch.cumsum(torch.ones_like(x), dim=1) - 1       # int64 cumsum
        mask = (x == 0)
        h = s.emb(x) + s.emb(pos % 16)
        h = s.bil(h, h)
        h = h.masked_fill(mask.unsqueeze(-1), float('-inf')).softmax(-1)
        h = torch.where(torch.isnan(h), torch.zeros_like(h), h)
        g = s.ps(h.reshape(B, T * 2, 2, 2)).flatten(1)
        logits = s.fc(torch.einsum('btd,bd->bt', h, g[:, :8]).unsqueeze(-1).expand(B, T, 8))
        onehot = F.one_hot(y, 16).float()
        return F.cross_entropy(logits.view(-1, 16), y.view(-1), label_smoothing=0.2) + (logits.log_softmax(-1) * onehot).sum() * -1e-3
def make():
    return M(), [(torch.randint(0, 16, (2, 4)), torch.randint(0, 16, (2, 4))) for _ in range(2)]
