"""loom-compile --dp=replicate --grouping=units (FSDP2-based replicate) against PyTorch's own replicate on PyTorch's test Transformer.

``torch_test_models.py``'s ``Transformer`` (2 blocks, tied embeddings) is
captured for 2 ranks with ``--reference replicate``: loom.dp_reference
trains it with ``torch.distributed._composable.replicate_with_fsdp.replicate``
on each block and then the root (as test_replicate_training.py's
``test_train_parity_multi_groups``), Adam lr 1e-2, 3 steps, 2 Gloo ranks.
Loom compiles it with the default units (``layers.0``, ``layers.1``, the
root) and ``loom-run --check`` must match exactly (``--rtol 0 --atol 0``):
on 2 ranks the averaged gradient is ``(a + b) / 2`` whichever rank's term
comes first, and Loom runs every other op as PyTorch does. The collectives
loom-run reports are replicate's: per step one all-reduce per unit (3), no
all-gather, no reduce-scatter. Negative control: PyTorch's parameters one
step before the end fail the same check.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, needs_tools
from capture_cli import loom_capture
from run_output import issued

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODELS = Path(__file__).parent / "torch_test_models.py"
STEPS = 3
WORLD = 2
EXACT = ["--rtol", "0", "--atol", "0"]


def run(cmd: list) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600)


def check(artifact: Path, out: Path, reference: Path) -> subprocess.CompletedProcess:
    return run([LOOM_RUN, artifact, "--nproc", str(WORLD), "--batches",
                out / "batches.safetensors", "--steps", str(STEPS), "--check", reference,
                "--no-progress", *EXACT])


def test_replicate_units_equal_pytorch_replicate(tmp_path):
    result = loom_capture([MODELS, "--out", tmp_path, "--steps", str(STEPS), "--split",
                           str(WORLD), "--make-arg", "model=transformer", "--optimizer",
                           "adam", "--lr", "1e-2", "--reference", "replicate"])
    assert result.returncode == 0, result.stdout + result.stderr
    reference = json.loads((tmp_path / "reference.json").read_text())
    assert reference["reference"] == "PyTorch replicate (FSDP2-based) on 2 Gloo ranks"

    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    artifact = tmp_path / "step.loomx"
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", artifact, "--summary",
                  "--dp=replicate", "--grouping=units"])
    assert result.returncode == 0, result.stderr
    assert ("replicate units (default: the model's repeated blocks): layers.0, layers.1, "
            "<root>") in result.stderr

    result = check(artifact, tmp_path, tmp_path / "reference.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within rtol 0" in result.stdout and "PASS" in result.stdout
    assert issued(result.stdout, "all_reduce") == [3] * STEPS
    assert issued(result.stdout, "all_gather") == [0] * STEPS
    assert issued(result.stdout, "reduce_scatter") == [0] * STEPS

    # Negative control: one optimizer step fewer is caught by the same check.
    result = check(artifact, tmp_path, tmp_path / "one-step-short" / "reference.json")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout and "FAIL" in result.stdout
