"""Training parity: capture -> loom-import -> loom-compile -> loom-run --check.

Each example trains 20 steps in Loom's runtime (the GPT with each optimizer,
the others with one each: the optimizers' kernels are checked against
torch.optim op for op by the runtime's own tests, OptimizerTest and
optimizer-golden) and must reproduce PyTorch eager (`reference.json`, `reference.safetensors` from the
capture) bitwise: every loss and every final parameter and buffer equal
(`loom-run --check --rtol 0 --atol 0`), because the joint graph calls eager
autograd's kernels and the runtime runs torch.optim's single-tensor
algorithms op for op. The negative controls show the exact check fails on a
reference one float32 ulp off, in a loss or in a parameter.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools
from capture_cli import loom_capture

sys.path.insert(0, str(REPO / "python"))
from loom.safetensors_io import load_tensors, save_tensors  # noqa: E402

STEPS = 20
EXACT = ["--rtol", "0", "--atol", "0"]

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
    # SwiGLU and Mish: backwards eager runs as kernels of their own.
    "swiglu": Path(__file__).parent / "swiglu_mish_model.py",
}


@pytest.mark.parametrize("name, optimizer", [
    ("gpt", "sgd"), ("gpt", "adam"), ("gpt", "adamw"),
    ("mlp", "sgd"), ("vit", "adamw"), ("batchnorm", "adam"), ("swiglu", "adamw")])
def test_trains_at_parity_with_eager(name, optimizer, tmp_path):
    capture_flags, compile_flags = OPTIMIZERS[optimizer]
    result = loom_capture([MODELS[name],
                  "--out", tmp_path, "--steps", str(STEPS), *capture_flags])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "step.loomx",
                  *compile_flags])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_RUN, tmp_path / "step.loomx", "--batches",
                  tmp_path / "batches.safetensors", "--steps", str(STEPS), "--check",
                  tmp_path / "reference.json", *EXACT])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    lines = [l for l in result.stdout.splitlines() if l.startswith("step")]
    assert len(lines) == STEPS
    # The reference really trained (the check is not vacuous).
    losses = json.loads((tmp_path / "reference.json").read_text())["losses"]
    assert losses[-1] < losses[0]


@pytest.fixture(scope="module")
def mlp_step(tmp_path_factory) -> Path:
    """The MLP captured (3 AdamW steps) and compiled, once."""
    out = tmp_path_factory.mktemp("mlp")
    assert loom_capture([REPO / "examples" / "mlp.py", "--out",
                out, "--steps", "3"]).returncode == 0
    assert run([LOOM_IMPORT, out / "step.pt2", "-o", out / "step.mlir"]).returncode == 0
    assert run([LOOM_COMPILE, out / "step.mlir", "-o", out / "step.loomx"]).returncode == 0
    return out


def check_against(step: Path, reference: Path, *tolerance: str) -> subprocess.CompletedProcess:
    return run([LOOM_RUN, step / "step.loomx", "--batches", step / "batches.safetensors",
                "--steps", "3", "--check", reference / "reference.json", *tolerance])


def copy_reference(step: Path, to: Path) -> Path:
    to.mkdir()
    for name in ("reference.json", "reference.safetensors"):
        (to / name).write_bytes((step / name).read_bytes())
    return to


def test_exact_check_passes_the_true_reference(mlp_step):
    result = check_against(mlp_step, mlp_step, *EXACT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout


def test_exact_check_fails_on_a_loss_one_ulp_off(mlp_step, tmp_path):
    wrong = copy_reference(mlp_step, tmp_path / "ref")
    ref = json.loads((wrong / "reference.json").read_text())
    f32 = torch.tensor(ref["losses"][2], dtype=torch.float32)
    ref["losses"][2] = torch.nextafter(f32, torch.tensor(math.inf)).item()
    (wrong / "reference.json").write_text(json.dumps(ref))
    result = check_against(mlp_step, wrong, *EXACT)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL" in result.stdout + result.stderr


def test_exact_check_fails_on_a_parameter_one_ulp_off(mlp_step, tmp_path):
    wrong = copy_reference(mlp_step, tmp_path / "ref")
    tensors, metadata = load_tensors(wrong / "reference.safetensors")
    w = tensors["fc1.weight"].clone()
    w.view(-1)[0] = torch.nextafter(w.view(-1)[0], torch.tensor(math.inf))
    tensors["fc1.weight"] = w
    save_tensors(wrong / "reference.safetensors", tensors, metadata)
    result = check_against(mlp_step, wrong, *EXACT)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "fc1.weight" in result.stdout + result.stderr
    # The default tolerance (1e-5) does not see one ulp: this is what the
    # exact check adds.
    assert check_against(mlp_step, wrong).returncode == 0


def test_check_fails_on_a_wrong_reference(tmp_path):
    """--check is a real comparison: a perturbed reference loss fails it."""
    assert loom_capture([REPO / "examples" / "mlp.py", "--out",
                tmp_path, "--steps", "3", "--optimizer", "adamw"]).returncode == 0
    ref = json.loads((tmp_path / "reference.json").read_text())
    ref["losses"][2] *= 1.0001
    (tmp_path / "reference.json").write_text(json.dumps(ref))
    assert run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"]).returncode == 0
    assert run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "step.loomx"]).returncode == 0
    result = run([LOOM_RUN, tmp_path / "step.loomx", "--batches", tmp_path / "batches.safetensors",
                  "--steps", "3", "--check", tmp_path / "reference.json"])
    assert result.returncode == 1
    assert "FAIL" in result.stdout + result.stderr
