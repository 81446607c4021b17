"""Training parity: capture -> loom-import -> loom-compile -> loom-run --check.

Each example trains 20 steps with each optimizer in Loom's runtime and must
reproduce PyTorch eager (`reference.json`, `reference.safetensors` from the
capture): losses within 1e-5 relative, final parameters and buffers within
1e-5 * max(1, |ref|). In practice they are bitwise equal, because the joint
graph calls eager autograd's kernels and the runtime runs torch.optim's
single-tensor algorithms op for op.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools

STEPS = 20

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

# capture flags, and the loom-compile flags that attach the same optimizer.
OPTIMIZERS = {
    "sgd": (["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"],
            ["--optimizer=sgd", "--lr=0.05", "--momentum=0.9"]),
    "adam": (["--optimizer", "adam"], ["--optimizer=adam", "--lr=0.001"]),
    "adamw": (["--optimizer", "adamw", "--weight-decay", "0.1"],
              ["--optimizer=adamw", "--lr=0.001", "--weight-decay=0.1"]),
}


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)


MODELS = {
    "mlp": REPO / "examples" / "mlp.py",
    "gpt": REPO / "examples" / "gpt.py",
    "vit": REPO / "examples" / "vit.py",
    # BatchNorm: buffer mutations written back every step.
    "batchnorm": REPO / "test" / "Import" / "Inputs" / "tiny.py",
}


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_trains_at_parity_with_eager(name, optimizer, tmp_path):
    capture_flags, compile_flags = OPTIMIZERS[optimizer]
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    result = run([sys.executable, "-m", "loom.capture", MODELS[name],
                  "--out", tmp_path, "--steps", str(STEPS), *capture_flags], env=env)
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "step.loomx",
                  *compile_flags])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_RUN, tmp_path / "step.loomx", "--batches",
                  tmp_path / "batches.safetensors", "--steps", str(STEPS), "--check",
                  tmp_path / "reference.json"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    lines = [l for l in result.stdout.splitlines() if l.startswith("step")]
    assert len(lines) == STEPS
    # The reference really trained (the check is not vacuous).
    losses = json.loads((tmp_path / "reference.json").read_text())["losses"]
    assert losses[-1] < losses[0]


def test_check_fails_on_a_wrong_reference(tmp_path):
    """--check is a real comparison: a perturbed reference loss fails it."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    assert run([sys.executable, "-m", "loom.capture", REPO / "examples" / "mlp.py", "--out",
                tmp_path, "--steps", "3", "--optimizer", "adamw"], env=env).returncode == 0
    ref = json.loads((tmp_path / "reference.json").read_text())
    ref["losses"][2] *= 1.0001
    (tmp_path / "reference.json").write_text(json.dumps(ref))
    assert run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"]).returncode == 0
    assert run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "step.loomx"]).returncode == 0
    result = run([LOOM_RUN, tmp_path / "step.loomx", "--batches", tmp_path / "batches.safetensors",
                  "--steps", "3", "--check", tmp_path / "reference.json"])
    assert result.returncode == 1
    assert "FAIL" in result.stdout + result.stderr
