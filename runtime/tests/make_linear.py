"""A hand-written .loomx for a linear layer + MSE loss, and PyTorch's numbers.

Usage: make_linear.py OUT_DIR [--optimizer sgd|adam|adamw] [--steps K]

Writes OUT_DIR/step.loomx (one instruction per ATen call of the joint
forward+backward graph, written by hand from the operators' schemas, plus
optimizer instructions), OUT_DIR/batches.safetensors, and the eager
reference (reference.json, reference.safetensors) that `loom-run --check`
compares with: nn.Linear + F.mse_loss + torch.optim on the same batches.

The model also counts its calls in an int64 buffer, so the artifact has a
buffer mutation, and the program exercises kwargs, dtype/layout/device/
memory_format ARGs, `free`, and `grad` outputs.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loomx  # noqa: E402

IN, OUT, BATCH = 6, 3, 5


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(IN, OUT)
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return F.mse_loss(self.fc(x), target)


def make_optimizer(name: str, params) -> torch.optim.Optimizer:
    # Non-default hyperparameters, so every term of the update is exercised.
    # foreach=False: the runtime's single-tensor loop, which torch.optim
    # picks by itself for CPU tensors but not for CUDA ones.
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True, foreach=False)
    if name == "adam":
        return torch.optim.Adam(params, lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.02, foreach=False)
    return torch.optim.AdamW(params, lr=0.01, weight_decay=0.1, foreach=False)


def program(optimizer: dict, model: Model, batch) -> dict:
    W, b = model.fc.weight, model.fc.bias
    x, target = batch
    inputs = [
        loomx.tensor_input("fc.weight", "parameter", 0, W),
        loomx.tensor_input("fc.bias", "parameter", 1, b),
        loomx.tensor_input("calls", "buffer", 2, model.calls),
        loomx.tensor_input("x", "input", 3, x, batch_index=0),
        loomx.tensor_input("target", "input", 4, target, batch_index=1),
    ]
    T = lambda s: {"tensor": s}  # noqa: E731
    fwd = {"phase": "forward", "stream": 0}
    bwd = {"phase": "backward", "stream": 0}
    instructions = [
        {"op": "aten", "kernel": "aten::t", "overload": "default", "args": [T(0)], "results": [5], "name": "t", "module": "fc", **fwd},
        {"op": "aten", "kernel": "aten::addmm", "overload": "default", "args": [T(1), T(3), T(5)], "results": [6], "name": "addmm", "module": "fc", **fwd},
        # reduction=Mean is the enum value 1.
        {"op": "aten", "kernel": "aten::mse_loss", "overload": "default", "args": [T(6), T(4), {"int": 1}], "results": [7], "name": "mse_loss", "module": "", **fwd},
        {"op": "aten", "kernel": "aten::add", "overload": "Scalar", "args": [T(2), {"int": 1}], "results": [8], "name": "add", "module": "", **fwd},
        {"op": "aten", "kernel": "aten::ones_like", "overload": "default", "args": [T(7)],
         "kwargs": {"dtype": {"dtype": "f32"}, "layout": {"layout": "strided"}, "device": {"device": "cpu"},
                    "pin_memory": {"bool": False}, "memory_format": {"memory_format": "preserve_format"}},
         "results": [9], "name": "ones_like", **bwd},
        {"op": "aten", "kernel": "aten::mse_loss_backward", "overload": "default", "args": [T(9), T(6), T(4), {"int": 1}], "results": [10], "name": "mse_loss_backward", "module": "", **bwd},
        {"op": "aten", "kernel": "aten::t", "overload": "default", "args": [T(10)], "results": [11], "name": "t_1", "module": "fc", **bwd},
        {"op": "aten", "kernel": "aten::mm", "overload": "default", "args": [T(11), T(3)], "results": [12], "name": "mm", "module": "fc", **bwd},
        # keepdim is positional in the schema but given by name, as Python allows.
        {"op": "aten", "kernel": "aten::sum", "overload": "dim_IntList", "args": [T(10), {"ints": [0]}], "kwargs": {"keepdim": {"bool": False}}, "results": [13], "name": "sum", "module": "fc", **bwd},
        {"op": "free", "slots": [5, 6, 9, 10, 11]},
    ]
    k = loomx.num_state_slots(optimizer)
    state = []
    next_slot = 14
    for name, p, grad in (("fc.weight", W, 12), ("fc.bias", b, 13)):
        slots = []
        for s in range(k):
            suffix = loomx.SCHEMA.state_names(optimizer)[s]
            state.append({"name": f"{name}.{suffix}", "param": name, "slot": next_slot, "dtype": "f32", "shape": list(p.shape), "init": loomx.state_init(optimizer)})
            slots.append(next_slot)
            next_slot += 1
        instructions.append({"op": "optimizer", "param": name, "param_slot": 0 if name == "fc.weight" else 1, "grad": grad, "state": slots, "phase": "optimizer", "name": f"opt_{name}"})
    return {
        "format": "loomx",
        "version": loomx.VERSION,
        "producer": "runtime/tests/make_linear.py",
        "source": "hand-written",
        "pipeline": "",
        "world_size": 1,
        "num_slots": next_slot,
        "optimizer": optimizer,
        "inputs": inputs,
        "state": state,
        "outputs": [
            {"role": "loss", "slot": 7},
            {"role": "buffer_mutation", "target": "calls", "slot": 8},
            {"role": "grad", "target": "fc.weight", "slot": 12},
            {"role": "grad", "target": "fc.bias", "slot": 13},
        ],
        "programs": [{"rank": 0, "streams": ["compute"], "instructions": instructions}],
    }


def main(argv: list[str] | None = None) -> int:
    """Also called in-process by the tests (one torch import for many artifacts)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--optimizer", choices=["sgd", "adam", "adamw"], default="sgd")
    ap.add_argument("--steps", type=int, default=6)
    # cuda: the artifact's `device` says cuda and the reference is PyTorch
    # eager trained on the GPU (the initial weights and batches are the
    # CPU's, drawn before anything moves).
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    torch.manual_seed(0)
    model = Model()
    batches = [(torch.randn(BATCH, IN), torch.randn(BATCH, OUT)) for _ in range(3)]
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt_json = loomx.optimizer_json(make_optimizer(args.optimizer, copy.deepcopy(model).parameters()))
    prog = program(opt_json, model, batches[0])
    if args.device != "cpu":
        prog["device"] = args.device
    loomx.write_artifact(os.path.join(args.out, "step.loomx"), prog, initial)
    loomx.save_batches(os.path.join(args.out, "batches.safetensors"), batches)
    if args.device != "cpu":
        model.to(args.device)
        batches = [tuple(t.to(args.device) for t in b) for b in batches]

    loomx.train_reference(args.out, model, make_optimizer(args.optimizer, model.parameters()), batches, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
