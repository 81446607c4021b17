"""Reading and writing the tensor files that Loom captures (safetensors).

safetensors is the interchange format between the Python capture side and
the C++ runtimes: a JSON header plus raw little-endian data, trivial to read
without Python. These helpers only paper over the two things
``safetensors.torch`` is strict about: tensors must be contiguous and may not
share storage (tied parameters, or one batch reused for several steps, would
otherwise be rejected), and metadata values must be strings.
"""

from __future__ import annotations

import os
from typing import Mapping

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def save_tensors(
    path: str | os.PathLike,
    tensors: Mapping[str, torch.Tensor],
    metadata: Mapping[str, object] | None = None,
) -> None:
    """Write ``tensors`` to ``path``; metadata values are stringified."""
    # clone() gives every entry its own contiguous storage, which is what
    # safetensors requires; capture sizes are small, so the copy is cheap.
    owned = {name: t.detach().cpu().clone().contiguous() for name, t in tensors.items()}
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    save_file(owned, os.fspath(path), metadata=meta)


def load_tensors(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Return ``(tensors, metadata)`` from a safetensors file, in file order."""
    with safe_open(os.fspath(path), framework="pt") as f:
        metadata = dict(f.metadata() or {})
        tensors = {name: f.get_tensor(name) for name in f.keys()}
    return tensors, metadata
