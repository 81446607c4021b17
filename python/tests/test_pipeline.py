"""End to end through the C++ tools: capture -> loom-import -> loom-opt.

The FLOPs that ``loom-opt --loom-stats`` counts on the imported step must be
exactly what PyTorch's own ``FlopCounterMode`` counts for one eager forward
and backward of the same model and batch (both count matmuls, convolutions
and attention with the same formulas), and the imported parameter bytes must
be the model's.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import subprocess
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from build_tools import BUILD, LOOM_IMPORT, LOOM_OPT, REPO, needs_tools  # noqa: F401

pytestmark = needs_tools(LOOM_IMPORT, LOOM_OPT)


def capture(model_file: Path, out: Path) -> None:
    """``python -m loom.capture FILE --out OUT --steps 1``, run in this
    process (capture's own main, as test_capture.py does): torch is imported
    once per test file instead of once per model."""
    from loom import capture as loom_capture

    with contextlib.redirect_stdout(io.StringIO()):
        assert loom_capture.main([str(model_file), "--out", str(out), "--steps", "1"]) == 0


def loom_stats(out: Path) -> dict:
    subprocess.run([str(LOOM_IMPORT), str(out / "step.pt2"), "-o",
                    str(out / "step.mlir")], check=True, capture_output=True,
                   text=True)
    result = subprocess.run(
        [str(LOOM_OPT), str(out / "step.mlir"), "--loom-stats=json=true", "-o",
         os.devnull], check=True, capture_output=True, text=True)
    return json.loads(result.stderr)


def eager_flops(model_file: Path) -> tuple[int, int]:
    torch.manual_seed(0)  # capture seeds the same way before make()
    model, batches = runpy.run_path(str(model_file))["make"]()
    counter = FlopCounterMode(display=False)
    with counter:
        model(*batches[0]).backward()
    params = {id(p): p for p in model.parameters()}  # tied weights once
    param_bytes = sum(p.numel() * p.element_size() for p in params.values())
    return counter.get_total_flops(), param_bytes


@pytest.mark.parametrize("name", ["mlp", "gpt", "vit"])
def test_stats_match_pytorch_flop_counter(name, tmp_path):
    model_file = REPO / "examples" / f"{name}.py"
    capture(model_file, tmp_path)
    stats = loom_stats(tmp_path)
    flops, param_bytes = eager_flops(model_file)
    assert stats["flops"]["total"] == flops
    assert stats["flops"]["forward"] > 0 and stats["flops"]["backward"] > 0
    assert stats["arguments"]["parameter"]["bytes"] == param_bytes
    # Every op is tagged with a phase: nothing is left "untagged".
    assert set(stats["ops_by_phase"]) == {"forward", "backward"}
