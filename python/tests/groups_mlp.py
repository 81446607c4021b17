"""clip_mlp's model with two parameter groups, for the parameter-group and LR-schedule tests.

``param_groups(model)`` is what a user hands ``torch.optim``: weight decay
0.1 on the matrices, none and half the learning rate on the biases (the
1-D parameters). ``make()`` is clip_mlp's.
"""

from clip_mlp import make  # noqa: F401  (the capture protocol's make())

NO_DECAY_LR = 5e-3


def param_groups(model):
    named = list(model.named_parameters())
    return [
        {"params": [p for _, p in named if p.ndim >= 2], "weight_decay": 0.1},
        {"params": [p for _, p in named if p.ndim < 2], "weight_decay": 0.0, "lr": NO_DECAY_LR},
    ]
