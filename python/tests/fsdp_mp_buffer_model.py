"""A model that adds a float32 buffer to bf16 activations, for
test_fsdp_parity.py::test_fsdp_bf16_leaves_float_buffers_alone.

Under FSDP2's MixedPrecisionPolicy(param_dtype=bf16) the buffer stays
float32 (FSDP2 casts parameters and forward inputs, never buffers), so
`logits + shift` promotes to float32 and the loss is computed in float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 16), nn.Linear(16, 4)])
        self.register_buffer("shift", torch.randn(4) * 0.1)

    def forward(self, x, y):
        logits = self.layers[1](F.relu(self.layers[0](x))) + self.shift
        return F.cross_entropy(logits, y)


def make():
    return Net(), [(torch.randn(8, 8), torch.randint(0, 4, (8,))) for _ in range(2)]
