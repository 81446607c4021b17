"""Gradients that are not contiguous: einsum's backward leaves each 3-D
expert weight's gradient permuted. FSDP packs every gradient of a unit into
one buffer to reduce-scatter; it once viewed each as [ranks, n], which ATen
refuses for a permuted tensor, and the step failed on its first
reduce-scatter. It reshapes them now (a copy where the gradient is not
contiguous, which the peak-memory analysis counts from the strides each
view gives its base, and which a cast to the reduce dtype keeps).

An einsum mixture of experts on 2 Gloo ranks: Loom's FSDP equals PyTorch's
fully_shard bitwise (losses and parameters, tolerance 0; the check fails on
PyTorch's parameters one AdamW step short), and every rank measures the
peak the compiler predicts, in f32 and with bf16 parameters reduced in f32.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, needs_tools, predicted_peaks
from capture_cli import loom_capture
from test_fsdp_peak_memory import measured_peaks
from test_torch_dp_parity import EXACT, run

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODEL = Path(__file__).parent / "einsum_moe_model.py"
WORLD = 2
STEPS = 4


@pytest.fixture(scope="module")
def step(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("moe")
    result = loom_capture([MODEL, "--out", out, "--steps", str(STEPS),
                           "--split", str(WORLD), "--reference", "fsdp"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, out / "step.pt2", "-o", out / "step.mlir"])
    assert result.returncode == 0, result.stderr
    return out


def compile_fsdp(step: Path, artifact: Path, *flags: str) -> int:
    """Compiles for FSDP on WORLD ranks; the predicted peak."""
    compiled = run([LOOM_COMPILE, step / "step.mlir", "-o", artifact, "--dp=fsdp", "--summary",
                    *flags])
    assert compiled.returncode == 0, compiled.stderr
    predicted = set(predicted_peaks(compiled.stderr))
    assert len(predicted) == 1, compiled.stderr
    return predicted.pop()


def train(artifact: Path, step: Path, trace: Path, *check: str):
    return run([LOOM_RUN, artifact, "--nproc", str(WORLD), "--batches",
                step / "batches.safetensors", "--steps", str(STEPS), "--no-progress",
                "--trace", trace, *check])


def test_permuted_gradients_reduce_scatter_as_fully_shard(step, tmp_path):
    artifact = tmp_path / "step.loomx"
    peak = compile_fsdp(step, artifact)
    result = train(artifact, step, tmp_path / "trace.json",
                   "--check", step / "reference.json", *EXACT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within rtol 0" in result.stdout and "PASS" in result.stdout
    assert "fully_shard" in json.loads((step / "reference.json").read_text())["reference"]
    assert measured_peaks(tmp_path / "trace.json") == {
        rank: [peak] * STEPS for rank in range(WORLD)}

    result = train(artifact, step, tmp_path / "short.json",
                   "--check", step / "one-step-short" / "reference.json", *EXACT)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout and "FAIL" in result.stdout


def test_permuted_gradients_cast_for_the_reduction_are_predicted(step, tmp_path):
    # bf16 matmuls take oneDNN workspace on this CPU: measured first, as
    # `loom run --measure-workspace` does, so the prediction counts it.
    mixed = ["--param-dtype=bf16", "--reduce-dtype=f32"]
    compile_fsdp(step, tmp_path / "plain.loomx", *mixed)
    workspace = tmp_path / "workspace.json"
    result = train(tmp_path / "plain.loomx", step, tmp_path / "plain.json",
                   "--kernel-workspace", workspace)
    assert result.returncode == 0, result.stdout + result.stderr
    artifact = tmp_path / "step.loomx"
    peak = compile_fsdp(step, artifact, *mixed, f"--kernel-workspace={workspace}")
    result = train(artifact, step, tmp_path / "trace.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert measured_peaks(tmp_path / "trace.json") == {
        rank: [peak] * STEPS for rank in range(WORLD)}
