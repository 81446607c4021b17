"""Model zoo for the import pipeline tests (found by a robustness sweep): embbag."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.bag = nn.EmbeddingBag(50, 8, mode='mean')
        s.bag2 = nn.EmbeddingBag(50, 8, mode='sum')
        s.emb = nn.Embedding(10, 8, padding_idx=0)
        s.fc = nn.Linear(8, 1)
    def forward(s, idx, offsets, idx2d, cat, y):
        h = s.bag(idx, offsets) + s.bag2(idx2d) + s.emb(cat)
        h = F.leaky_relu(h, 0.1) + F.softplus(h, beta=2.0)
        return F.huber_loss(s.fc(h).squeeze(-1), y, delta=0.5)
def make():
    return M(), [(torch.randint(0, 50, (10,)), torch.tensor([0, 3, 7]), torch.randint(0, 50, (3, 4)),
                  torch.randint(0, 10, (3,)), torch.randn(3)) for _ in range(2)]
