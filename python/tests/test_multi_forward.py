"""A module called twice per forward under Loom's FSDP, against PyTorch's fully_shard.

multi_forward.py is the model of PyTorch's
test_fully_shard_training.py::TestFullyShard1DTrainingCore::test_multi_forward_module
(``outer(inner(x) + inner(x))``, ``fully_shard(model.inner)`` then the
root, input ``(32, 4)``), trained with Adam lr 1e-2 as that test does.
Each case captures it for 2 ranks with ``--reference fsdp`` (PyTorch's real
``fully_shard`` on 2 Gloo ranks, with the same reshard-after-forward),
compiles it with ``--units=inner`` and checks ``loom-run --check`` exactly
(``--rtol 0 --atol 0``): the summation order is PyTorch's, so nothing is
left to tolerate. Negative control: PyTorch's parameters one step before
the end fail the same check.

The collectives per step are FSDP2's, measured on the same run of PyTorch
(its all-gathers and reduce-scatters counted per step):

- forward: the root once, ``inner`` once per call (2) unless it keeps its
  parameters (reshard-after-forward false: once);
- backward: the root again if it resharded (true), ``inner`` once: its
  second call's pre-backward finds it unsharded, since ``x`` does not
  require gradients and so no post-backward hook resharded it in between;
- one reduce-scatter per unit: the gradient of ``inner``'s weight is
  complete only after both calls' backward.

All three settings::

    LOOM_ZOO_FULL=1 .venv/bin/python -m pytest -q python/tests/test_multi_forward.py
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, needs_tools
from capture_cli import loom_capture
from run_output import issued

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODEL = Path(__file__).parent / "multi_forward.py"
STEPS = 3
WORLD = 2
EXACT = ["--rtol", "0", "--atol", "0"]
# reshard-after-forward: the collectives issued per step.
CASES = {
    "auto": {"all_gather": 1 + 2 + 1, "reduce_scatter": 2},
    "true": {"all_gather": 1 + 2 + 1 + 1, "reduce_scatter": 2},
    "false": {"all_gather": 1 + 1, "reduce_scatter": 2},
}
# About 17 s a case on 2 cores: `true` (every collective kind) by default,
# all three with LOOM_ZOO_FULL=1, as test_torch_test_models.py; the lit test
# fsdp-multi-forward.test pins every setting's counts in the suite.
RUN = sorted(CASES) if os.environ.get("LOOM_ZOO_FULL") == "1" else ["true"]


def run(cmd: list) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600)


def check(artifact: Path, out: Path, reference: Path) -> subprocess.CompletedProcess:
    return run([LOOM_RUN, artifact, "--nproc", str(WORLD), "--batches",
                out / "batches.safetensors", "--steps", str(STEPS), "--check", reference,
                "--no-progress", *EXACT])


@pytest.mark.parametrize("reshard", RUN)
def test_multi_forward_module_equals_fully_shard(reshard, tmp_path):
    result = loom_capture([MODEL, "--out", tmp_path, "--steps", str(STEPS),
                           "--split", str(WORLD), "--optimizer", "adam", "--lr", "1e-2",
                           "--reference", "fsdp", "--reshard-after-forward", reshard])
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((tmp_path / "reference.json").read_text())["reference"].startswith(
        "PyTorch fully_shard")
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    # The second call of inner is told apart from the first, in forward and
    # in the backward that differentiates it.
    text = (tmp_path / "step.mlir").read_text()
    for phase in ("forward", "backward"):
        assert ('loom.calls = {inner = 1 : i64}, loom.module = "inner", '
                f'loom.phase = #loom.phase<{phase}>') in text
    artifact = tmp_path / "step.loomx"
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", artifact, "--dp=fsdp",
                  f"--world-size={WORLD}", "--units=inner", f"--reshard-after-forward={reshard}"])
    assert result.returncode == 0, result.stderr
    result = check(artifact, tmp_path, tmp_path / "reference.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    for kind, count in CASES[reshard].items():
        assert issued(result.stdout, kind) == [count] * STEPS, (kind, result.stdout)
    result = check(artifact, tmp_path, tmp_path / "one-step-short" / "reference.json")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout and "FAIL" in result.stdout


def test_module_calls_read_from_nn_module_stack():
    """torch.export keys a module's later calls '<key>@N' (same path); the
    first call, the root and a suffix that is no call index are left out."""
    from types import SimpleNamespace

    from loom.capture import module_calls

    stack = {"L__self__": ("", "M"), "L__self___model@1": ("model", "Stack"),
             "L__self___model_layers_0@1": ("model.layers.0", "Block"),
             "L__self___model_layers_0_lin": ("model.layers.0.lin", "Linear"),
             "L__self___odd@x": ("odd", "Linear")}
    node = SimpleNamespace(meta={"nn_module_stack": stack})
    assert module_calls(node) == {"model": 1, "model.layers.0": 1}
    assert module_calls(SimpleNamespace(meta={})) == {}
