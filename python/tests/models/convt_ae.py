"""Model zoo for the import pipeline tests (found by a robustness sweep): convt_ae."""
import torch, torch.nn as nn, torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.enc = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ELU(), nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.LeakyReLU(0.2))
        s.dec = nn.Sequential(nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1), nn.ReLU(),
                              nn.ConvTranspose2d(4, 1, 3, stride=2, padding=1, output_padding=1), nn.Sigmoid())
    def forward(s, x):
        return F.mse_loss(s.dec(s.enc(x)), x)
def make():
    return M(), [(torch.rand(2, 1, 16, 16),) for _ in range(2)]
