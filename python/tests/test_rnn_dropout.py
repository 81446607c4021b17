"""Stacked nn.LSTM / nn.GRU / nn.RNN with dropout between their layers
(``rnn_dropout_model.py``): torch 2.9's traced RNNs leave that dropout out
(loom/rnn_dropout.py), so the step trained another model than eager;
capture puts it back.

Each kind is captured, compiled and trained 4 steps against eager with the
same seed: the GRU (bidirectional, batch-first) and the ReLU RNN bitwise,
the LSTM within 1e-6 (eager runs oneDNN's fused LSTM kernel on this CPU,
the traced step torch's decomposition of it: 1.2e-7 apart after 4 steps).
Negative control: captured without the fix, each fails the same check from
the first loss on.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, needs_tools
from capture_cli import loom_capture
from loom import rnn_dropout

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODEL = Path(__file__).parent / "rnn_dropout_model.py"
STEPS = 4
TOLERANCE = {"lstm": ["--rtol", "1e-6", "--atol", "1e-6"],
             "gru": ["--rtol", "0", "--atol", "0"],
             "rnn": ["--rtol", "0", "--atol", "0"]}


def run(cmd: list) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600)


def train(kind: str, out: Path) -> subprocess.CompletedProcess:
    dims = "0,0" if kind == "gru" else "1,1"
    result = loom_capture([MODEL, "--out", out, "--steps", STEPS, "--seed", "3",
                           "--make-arg", f"kind={kind}", "--batch-dims", dims])
    assert result.returncode == 0, result.stdout + result.stderr
    result = run([LOOM_IMPORT, out / "step.pt2", "-o", out / "step.mlir"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_COMPILE, out / "step.mlir", "-o", out / "step.loomx"])
    assert result.returncode == 0, result.stderr
    return run([LOOM_RUN, out / "step.loomx", "--batches", out / "batches.safetensors",
                "--steps", STEPS, "--seed", "3", "--check", out / "reference.json",
                "--no-progress", *TOLERANCE[kind]])


@pytest.mark.parametrize("kind", list(TOLERANCE))
def test_dropout_between_layers_trains_as_eager(kind, tmp_path, monkeypatch):
    result = train(kind, tmp_path / "fixed")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within" in result.stdout and "PASS" in result.stdout

    monkeypatch.setattr(rnn_dropout, "between_layers", contextlib.nullcontext)
    result = train(kind, tmp_path / "torch")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "step   0  loss" in result.stdout and "MISMATCH" in result.stdout.split("step   1")[0]
