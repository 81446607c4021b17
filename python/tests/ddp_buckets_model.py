"""An MLP whose gradients (4.8 MiB) span several DDP buckets: the 2 MiB
fc2.weight closes DDP's 1 MiB first bucket, and with bucket_cap_mb=0.5
every layer's gradients fill one bucket. Used by
test_distributed_parity.py::test_ddp_buckets_equal_pytorch_ddp."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 1024)
        self.fc2 = nn.Linear(1024, 512)
        self.fc3 = nn.Linear(512, 256)
        self.head = nn.Linear(256, 10)

    def forward(self, x, y):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        return F.cross_entropy(self.head(x), y)


def make():
    return Net(), [(torch.randn(4, 64), torch.randint(0, 10, (4,)))]
