"""What the checkpoint tests (test_checkpoint.py, test_checkpoint_pp.py,
test_load.py) share: a run's verdict, its losses from --trace, the complete
checkpoints of a directory, and a checkpoint rewritten with other values."""

from __future__ import annotations

import json
import subprocess
import zlib
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import load_file, save_file


def ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def trace_losses(path: Path) -> dict[int, float]:
    """Rank 0's loss of every step, as --trace records it (a double: the
    step lines round to 7 digits)."""
    events = json.loads(path.read_text())["traceEvents"]
    return {int(e["name"].split()[1]): e["args"]["loss"] for e in events
            if e.get("cat") == "step" and e["pid"] == 0}


def complete(ckdir: Path) -> list[str]:
    """The checkpoints under `ckdir` whose index was published."""
    return sorted(p.name for p in ckdir.iterdir() if (p / "index.json").exists())


def rewrite_checkpoint(ck: Path, change) -> None:
    """Applies `change(name, tensor) -> tensor` to every rank file and makes
    the index's sizes and checksums match again (a well-formed checkpoint
    holding other values)."""
    index = json.loads((ck / "index.json").read_text())
    for f in index["files"]:
        p = ck / f["path"]
        with safe_open(str(p), framework="pt") as fh:
            meta = fh.metadata()
        tensors = {k: change(k, v) for k, v in load_file(str(p)).items()}
        save_file(tensors, str(p), metadata=meta)
        data = p.read_bytes()
        f["bytes"] = len(data)
        f["crc32"] = f"{zlib.crc32(data):08x}"
    (ck / "index.json").write_text(json.dumps(index))
