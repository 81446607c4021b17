"""Model zoo for the import pipeline tests (found by a robustness sweep): index."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv = nn.Conv2d(3, 4, 3, padding=1, padding_mode='circular')
        s.conv2 = nn.Conv2d(4, 5, 3)
        s.emb = nn.Parameter(torch.randn(10, 5))
    def forward(s, x, seg, idx, y):
        h = s.conv(x)
        h = F.pad(h, (1, 1, 1, 1), mode='reflect')
        logits = s.conv2(h)                                  # B,5,H,W
        l1 = F.cross_entropy(logits, seg, ignore_index=0, weight=torch.linspace(0.5, 1, 5))
        flat = logits.flatten(2).transpose(1, 2)            # B, HW, 5
        picked = flat[torch.arange(flat.shape[0]), idx]     # advanced indexing
        top, ti = picked.topk(2, dim=-1)
        mx, am = flat.max(dim=1)
        g = torch.gather(flat, 1, idx.view(-1, 1, 1).expand(-1, 1, 5)).squeeze(1)
        z = torch.zeros(flat.shape[0], 10).scatter_add(1, ti, top)
        e = s.emb[y] + s.emb.flip(0)[y].roll(1, -1)
        v, m = torch.var_mean(mx, dim=-1)
        return l1 + (z.sum() + g.std() + e.sum() + v.sum() + m.sum()) * 1e-2 + F.cross_entropy(picked, y % 5, reduction='none').mean()
def make():
    return M(), [(torch.randn(2, 3, 6, 6), torch.randint(0, 5, (2, 6, 6)), torch.randint(0, 36, (2,)), torch.randint(0, 10, (2,))) for _ in range(2)]
