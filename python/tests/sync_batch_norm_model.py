"""A convolutional net whose batch norms are ``nn.SyncBatchNorm`` (through
``convert_sync_batchnorm``, as a DDP user makes them): a block
(``features``: convolution, 2-d batch norm with running statistics, ReLU,
convolution, tanh), a 1-d batch norm on the pooled features, and a
classifier. ``make(sync="0")`` keeps plain batch norm (the negative
control: each rank then normalises by its own rows), ``affine="0"`` and
``track="0"`` drop the first batch norm's weight and bias and its running
statistics. Eight samples per batch, shifted and scaled away from zero mean
so the statistics matter."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, affine: bool, track: bool):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8, affine=affine, track_running_stats=track),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1),
            nn.Tanh(),
        )
        self.fc = nn.Linear(8, 6)
        self.bn2 = nn.BatchNorm1d(6, momentum=0.3)
        self.head = nn.Linear(6, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.features(x).mean((2, 3))
        h = F.relu(self.bn2(self.fc(h)))
        return F.cross_entropy(self.head(h), y)


def make(sync: str = "1", affine: str = "1", track: str = "1", steps: str = "3"):
    model = Net(affine == "1", track == "1")
    if sync == "1":
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(8, 3, 6, 6, generator=g) * (1 + i) + 0.5 * i,
                torch.randint(0, 4, (8,), generator=g)) for i in range(int(steps))]
    return model, batches
