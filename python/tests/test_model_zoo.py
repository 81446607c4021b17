"""Models built from ordinary torch.nn layers, none of them Loom's examples,
go through capture -> loom-import -> loom-opt unchanged: the archive imports
and verifies, every op is tagged with a phase, the IR round-trips, and where
PyTorch's FlopCounterMode counts the same kernels Loom's FLOPs equal it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from test_pipeline import LOOM_OPT, capture, eager_flops, loom_stats, pytestmark  # noqa: F401

MODELS = Path(__file__).parent / "models"

# FlopCounterMode under-counts these on CPU, or counts differently on purpose:
# lstm (the fused CPU LSTM kernel has no flop rule) and dwconv (flop_counter
# multiplies a grouped conv's weight gradient by `groups`).
INEXACT = {"lstm", "dwconv"}


@pytest.mark.parametrize("name", sorted(p.stem for p in MODELS.glob("*.py")))
def test_model_imports_and_analyses(name, tmp_path):
    model_file = MODELS / f"{name}.py"
    capture(model_file, tmp_path)
    stats = loom_stats(tmp_path)
    assert set(stats["ops_by_phase"]) <= {"forward", "backward"}
    assert stats["ops_by_phase"]["forward"] > 0 and stats["ops_by_phase"]["backward"] > 0
    text = subprocess.run([str(LOOM_OPT), str(tmp_path / "step.mlir")], check=True,
                          capture_output=True, text=True).stdout
    again = subprocess.run([str(LOOM_OPT)], input=text, check=True, capture_output=True,
                           text=True).stdout
    assert text == again
    if name not in INEXACT:
        flops, param_bytes = eager_flops(model_file)
        assert stats["flops"]["total"] == flops
        assert stats["arguments"]["parameter"]["bytes"] == param_bytes
