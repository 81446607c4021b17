"""Models trained in bf16, f16 or f64 throughout (``model.to(dtype)``, not
mixed precision): capture once took fp32 models only. Every dtype goes
through the same kernels as eager, so the step is bitwise equal to PyTorch:

- one rank, bf16 / f16 / f64, against eager (AdamW, and SGD for f16);
- bf16 on 2 Gloo ranks with Loom's FSDP against PyTorch's ``fully_shard``,
  losses (each rank's bf16 loss averaged in float32 by both) and
  parameters.

Negative control: the same exact check against PyTorch's parameters one
step short fails.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools
from capture_cli import loom_capture
from test_torch_dp_parity import EXACT, run

sys.path.insert(0, str(REPO / "python"))
from loom.safetensors_io import load_tensors  # noqa: E402

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODEL = Path(__file__).parent / "low_precision_model.py"
STEPS = 4
MLIR_TYPE = {"bfloat16": "bf16", "float16": "f16", "float64": "f64"}


def capture_and_compile(out: Path, dtype: str, optimizer: str, *flags: str) -> Path:
    result = loom_capture([MODEL, "--out", out, "--steps", str(STEPS), "--make-arg",
                           f"dtype={dtype}", "--optimizer", optimizer, "--lr", "1e-3", *flags])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, out / "step.pt2", "-o", out / "step.mlir"])
    assert result.returncode == 0, result.stderr
    dp = ["--dp=fsdp"] if "--split" in flags else []
    result = run([LOOM_COMPILE, out / "step.mlir", "-o", out / "step.loomx", *dp])
    assert result.returncode == 0, result.stderr
    return out


def train(step: Path, reference: Path, *flags: str):
    return run([LOOM_RUN, step / "step.loomx", "--batches", step / "batches.safetensors",
                "--steps", str(STEPS), "--no-progress", "--check",
                reference / "reference.json", *EXACT, *flags])


@pytest.mark.parametrize("dtype, optimizer", [
    ("bfloat16", "adamw"), ("float16", "sgd"), ("float64", "adamw")])
def test_one_dtype_model_equals_eager(dtype, optimizer, tmp_path):
    step = capture_and_compile(tmp_path, dtype, optimizer)
    weight = re.search(r"tensor<\d+x\d+x(\w+)>", (step / "step.mlir").read_text())
    assert weight and weight.group(1) == MLIR_TYPE[dtype]
    result = train(step, step)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within rtol 0" in result.stdout and "PASS" in result.stdout
    # The check is not vacuous: training moved every weight of the model.
    initial, _ = load_tensors(step / "step.weights.safetensors")
    final, _ = load_tensors(step / "reference.safetensors")
    moved = [name for name, t in initial.items()
             if name in final and t.is_floating_point() and not t.equal(final[name])]
    assert len(moved) > 10 and all(final[name].dtype == initial[name].dtype for name in moved)


def test_bf16_model_shards_as_fully_shard(tmp_path):
    step = capture_and_compile(tmp_path, "bfloat16", "adamw", "--split", "2",
                               "--reference", "fsdp")
    assert "fully_shard" in json.loads((step / "reference.json").read_text())["reference"]
    result = train(step, step, "--nproc", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within rtol 0" in result.stdout and "PASS" in result.stdout

    result = train(step, step / "one-step-short", "--nproc", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout and "FAIL" in result.stdout
