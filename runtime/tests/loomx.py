"""Write .loomx artifacts (docs/artifact.md, format version 1) from Python.

Test fixtures only: the runtime's tests hand-build small artifacts with this,
independently of the compiler's writer, so the runtime is checked against
the specification text rather than against the compiler.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any, Mapping

import torch
from safetensors.torch import save as safetensors_save

MAGIC = b"LOOMX\r\n\x1a"
VERSION = 1

DTYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "bool",
    torch.complex64: "c64",
    torch.complex128: "c128",
}


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPES[dtype]


def float_arg(x: float) -> Any:
    """A JSON float; non-finite values are the strings the spec names."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def program_json(program: Mapping[str, Any]) -> bytes:
    # allow_nan=False: a stray NaN must fail here, not produce invalid JSON.
    return json.dumps(program, allow_nan=False, indent=1).encode("utf-8")


def weights_bytes(weights: Mapping[str, torch.Tensor]) -> bytes:
    return safetensors_save({k: v.detach().contiguous().clone() for k, v in weights.items()})


def artifact_bytes(
    program: Mapping[str, Any] | bytes,
    weights: Mapping[str, torch.Tensor] | bytes,
    *,
    version: int = VERSION,
    flags: int = 0,
    magic: bytes = MAGIC,
) -> bytes:
    prog = program if isinstance(program, bytes) else program_json(program)
    w = weights if isinstance(weights, bytes) else weights_bytes(weights)
    return magic + struct.pack("<IIQQ", version, flags, len(prog), len(w)) + prog + w


def write_artifact(path, program, weights, **kwargs) -> None:
    with open(path, "wb") as f:
        f.write(artifact_bytes(program, weights, **kwargs))


def tensor_input(name: str, role: str, slot: int, t: torch.Tensor, batch_index: int | None = None) -> dict:
    entry = {"name": name, "role": role, "slot": slot, "dtype": dtype_name(t.dtype), "shape": list(t.shape)}
    if batch_index is not None:
        entry["batch_index"] = batch_index
    return entry


def optimizer_json(opt: torch.optim.Optimizer) -> dict:
    """The artifact's optimizer object for a torch.optim optimizer."""
    g = opt.param_groups[0]
    name = {torch.optim.SGD: "sgd", torch.optim.Adam: "adam", torch.optim.AdamW: "adamw"}[type(opt)]
    return {
        "name": name,
        "lr": float(g["lr"]),
        "betas": [float(b) for b in g.get("betas", (0.9, 0.999))],
        "eps": float(g.get("eps", 1e-8)),
        "weight_decay": float(g["weight_decay"]),
        "momentum": float(g.get("momentum", 0.0)),
        "dampening": float(g.get("dampening", 0.0)),
        "nesterov": bool(g.get("nesterov", False)),
        "maximize": bool(g["maximize"]),
    }


def num_state_slots(optimizer: Mapping[str, Any]) -> int:
    if optimizer["name"] == "sgd":
        return 1 if optimizer["momentum"] != 0 else 0
    return 2


STATE_NAMES = {"sgd": ["momentum_buffer"], "adam": ["exp_avg", "exp_avg_sq"], "adamw": ["exp_avg", "exp_avg_sq"]}


def save_batches(path, batches: list[tuple[torch.Tensor, ...]]) -> None:
    """batches.safetensors in the capture's layout."""
    tensors = {f"step{i}.arg{j}": t.contiguous().clone() for i, b in enumerate(batches) for j, t in enumerate(b)}
    data = safetensors_save(tensors, metadata={"num_steps": str(len(batches)), "num_args": str(len(batches[0]))})
    with open(path, "wb") as f:
        f.write(data)


def save_reference(directory, losses: list[float], final: Mapping[str, torch.Tensor], tied: Mapping[str, str] | None = None,
                   extra: Mapping[str, object] | None = None) -> None:
    """reference.json (plus `extra` keys) and reference.safetensors in the
    capture's layout."""
    import os

    with open(os.path.join(directory, "reference.json"), "w") as f:
        json.dump({"losses": losses, "tied_parameters": dict(tied or {}), **dict(extra or {})}, f, indent=2)
    data = safetensors_save({k: v.detach().contiguous().clone() for k, v in final.items()})
    with open(os.path.join(directory, "reference.safetensors"), "wb") as f:
        f.write(data)


def train_reference(directory, model, optimizer, batches, steps: int, extra: Mapping[str, object] | None = None) -> None:
    """Trains `model` eagerly for `steps` steps (batch s mod len) and saves
    the losses and final state as the reference loom-run --check reads."""
    losses = []
    for s in range(steps):
        optimizer.zero_grad()
        loss = model(*batches[s % len(batches)])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    save_reference(directory, losses, model.state_dict(), extra=extra)
