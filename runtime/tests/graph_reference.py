"""PyTorch's own execution of a capture's joint graph, for bitwise checks.

`run_graph(capture_dir, steps)` calls the exported joint graph
(step.pt2's graph module: forward, loss and backward as ATen ops) with
PyTorch, then torch.optim (foreach=False) with the optimizer recorded in
reference.json, for `steps` steps over batches.safetensors. A runtime that
executes the same graph with the same kernels must reproduce these numbers
exactly; the capture's eager reference (reference.safetensors) can differ by
rounding, because eager autograd computes some gradients with other kernels
than the exported decomposition does.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch.export.graph_signature import InputKind, OutputKind

OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
HYPERPARAMETERS = ("lr", "betas", "eps", "weight_decay", "momentum", "dampening", "nesterov", "maximize")


def run_graph(capture_dir: Path, steps: int) -> tuple[list[float], dict[str, torch.Tensor]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.load(str(capture_dir / "step.pt2"))
    reference = json.loads((capture_dir / "reference.json").read_text())
    batches = load_file(str(capture_dir / "batches.safetensors"))
    num_batches = len({k.split(".")[0] for k in batches})
    specs = ep.graph_signature.input_specs

    def initial(target: str) -> torch.Tensor:
        return (ep.state_dict[target] if target in ep.state_dict else ep.constants[target]).clone()

    params = {s.target: torch.nn.Parameter(initial(s.target)) for s in specs if s.kind == InputKind.PARAMETER}
    buffers = {s.target: initial(s.target) for s in specs if s.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR)}
    o = reference["optimizer"]
    hp = {k: o[k] for k in HYPERPARAMETERS if k in o}
    opt = OPTIMIZERS[o["name"]](list(params.values()), foreach=False, **hp)

    losses = []
    for step in range(steps):
        args, user = [], 0
        for s in specs:
            if s.kind == InputKind.PARAMETER:
                args.append(params[s.target].detach())
            elif s.kind == InputKind.USER_INPUT:
                args.append(batches[f"step{step % num_batches}.arg{user}"])
                user += 1
            else:
                args.append(buffers[s.target])
        with torch.no_grad():
            outs = ep.graph_module(*args)
        for value, s in zip(outs, ep.graph_signature.output_specs):
            if s.kind == OutputKind.LOSS_OUTPUT:
                losses.append(value.item())
            elif s.kind == OutputKind.GRADIENT_TO_PARAMETER:
                params[s.target].grad = value
            elif s.kind == OutputKind.BUFFER_MUTATION:
                buffers[s.target].copy_(value)
        opt.step()
    final = {k: p.detach() for k, p in params.items()}
    final.update(buffers)
    return losses, final
