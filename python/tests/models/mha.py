"""Model zoo for the import pipeline tests (found by a robustness sweep): mha."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        s.ln = nn.LayerNorm(16)
        s.fc = nn.Linear(16, 16)
    def forward(s, x, pad):
        T = x.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        a, w = s.attn(x, x, x, attn_mask=causal, key_padding_mask=pad)
        h = s.ln(x + a)
        h = h.masked_fill(pad.unsqueeze(-1), 0.0)
        return F.smooth_l1_loss(s.fc(h), x) + w.mean()
def make():
    pad = torch.zeros(2, 6, dtype=torch.bool); pad[:, -1] = True
    return M(), [(torch.randn(2, 6, 16), pad) for _ in range(2)]
