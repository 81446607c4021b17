"""Complex weights: a Llama-style decoder whose rotary embeddings come from a
complex64 buffer (`freqs_cis`, as torchtitan registers it) and a complex
tensor constant (a plain attribute, as Meta's reference code keeps it).
loom-import once refused the archive ("weights for 'freqs_cis' have an
element type safetensors cannot hold"); it stores them as safetensors C64
now, which loom-run reads.

On one rank the step equals PyTorch eager bitwise (every loss and parameter,
tolerance 0, 6 AdamW steps); on 2 Gloo ranks Loom's FSDP equals PyTorch's
fully_shard bitwise and every rank measures the peak the compiler predicts
(the buffer counted at 8 bytes an element). Negative control: the exact
check against PyTorch's parameters one step short fails.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools
from capture_cli import loom_capture
from test_fsdp_peak_memory import measured_peaks
from test_permuted_gradients import compile_fsdp
from test_torch_dp_parity import EXACT, run

sys.path.insert(0, str(REPO / "python"))
from loom.safetensors_io import load_tensors  # noqa: E402

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODEL = Path(__file__).parent / "rope_llama_model.py"
STEPS = 6


def capture_and_import(out: Path, *flags: str) -> Path:
    result = loom_capture([MODEL, "--out", out, "--steps", str(STEPS), "--optimizer", "adamw",
                           *flags])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, out / "step.pt2", "-o", out / "step.mlir"])
    assert result.returncode == 0, result.stderr
    return out


def train(artifact: Path, step: Path, reference: Path, *flags: str):
    return run([LOOM_RUN, artifact, "--batches", step / "batches.safetensors", "--steps",
                str(STEPS), "--no-progress", "--check", reference / "reference.json", *EXACT,
                *flags])


def test_complex_buffers_import_as_c64_and_train_as_eager(tmp_path):
    step = capture_and_import(tmp_path)
    mlir = (step / "step.mlir").read_text()
    assert re.search(r"tensor<8x4xcomplex<f32>>", mlir), "freqs_cis is not a complex weight"
    weights, _ = load_tensors(step / "step.weights.safetensors")
    assert weights["freqs_cis"].dtype == torch.complex64
    artifact = tmp_path / "step.loomx"
    result = run([LOOM_COMPILE, step / "step.mlir", "-o", artifact, "--optimizer=adamw"])
    assert result.returncode == 0, result.stderr
    result = train(artifact, step, step)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within rtol 0" in result.stdout and "PASS" in result.stdout
    losses = json.loads((step / "reference.json").read_text())["losses"]
    assert losses[-1] < losses[0]


def test_complex_buffers_shard_as_fully_shard(tmp_path):
    step = capture_and_import(tmp_path, "--split", "2", "--reference", "fsdp")
    artifact = tmp_path / "step.loomx"
    peak = compile_fsdp(step, artifact, "--optimizer=adamw")
    result = train(artifact, step, step, "--nproc", "2", "--trace", tmp_path / "trace.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within rtol 0" in result.stdout and "PASS" in result.stdout
    assert "fully_shard" in json.loads((step / "reference.json").read_text())["reference"]
    assert measured_peaks(tmp_path / "trace.json") == {
        rank: [peak] * STEPS for rank in range(2)}

    result = train(artifact, step, step / "one-step-short", "--nproc", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout and "FAIL" in result.stdout
