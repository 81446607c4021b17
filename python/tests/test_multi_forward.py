"""Modules called more than once per forward under Loom's FSDP, against PyTorch's fully_shard.

multi_forward.py holds two models. ``inner_outer`` is PyTorch's
test_fully_shard_training.py::TestFullyShard1DTrainingCore::test_multi_forward_module
(``outer(inner(x) + inner(x))``, ``fully_shard(model.inner)`` then the
root, input ``(32, 4)``) on 2 ranks; ``twice`` has the shape of
TestFullyShardPrefetch's multi-forward case (a 3-block model called twice
per step, ``fully_shard`` on each block and on the model) on 4 ranks. Both
train with Adam lr 1e-2, as those tests do. Each case captures the model
with ``--reference fsdp`` (PyTorch's real ``fully_shard`` on the same Gloo
ranks, with the same reshard-after-forward), compiles it with the same
units and checks ``loom-run --check`` exactly (``--rtol 0 --atol 0``): the
summation order is PyTorch's, so nothing is left to tolerate. Negative
control: PyTorch's parameters one step before the end fail the same check.

The collectives per step are FSDP2's, counted on PyTorch's own run:

- forward: each unit once per call of its module when it reshards after
  forward, else once;
- backward: again before a call's backward if the unit is sharded then:
  resharded after forward, or by the previous call's post-backward hook,
  which runs only when that call's forward inputs require gradients
  (``inner``'s input ``x`` does not: one backward gather; the blocks'
  inputs do: one per call, also with reshard-after-forward false);
- one reduce-scatter per unit: a gradient used twice is complete only
  after both calls' backward.

Every case::

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
EXACT = ["--rtol", "0", "--atol", "0"]
TWICE_UNITS = "--units=model.layers.0,model.layers.1,model.layers.2,model"
# (model, reshard-after-forward): (ranks, loom-compile flags, collectives
# issued per step). For "twice", `model` is FSDP2's root (the wrapper holds
# no parameter), which auto keeps unsharded; Loom's root is the wrapper, so
# auto says it with a unit setting.
CASES = {
    ("inner_outer", "auto"): (2, ["--units=inner"], {"all_gather": 1 + 2 + 1,
                                                     "reduce_scatter": 2}),
    ("inner_outer", "true"): (2, ["--units=inner"], {"all_gather": 1 + 2 + 1 + 1,
                                                     "reduce_scatter": 2}),
    ("inner_outer", "false"): (2, ["--units=inner"], {"all_gather": 1 + 1,
                                                      "reduce_scatter": 2}),
    ("twice", "auto"): (4, [TWICE_UNITS, "--unit-settings=model:reshard-after-forward=false"],
                        {"all_gather": 7 + 6, "reduce_scatter": 4}),
    ("twice", "true"): (4, [TWICE_UNITS], {"all_gather": 8 + 7, "reduce_scatter": 4}),
    ("twice", "false"): (4, [TWICE_UNITS], {"all_gather": 4 + 3, "reduce_scatter": 4}),
    ("twice", "2"): (4, [TWICE_UNITS], {"all_gather": 8 + 7, "reduce_scatter": 4}),
}
# About 17 s a case on 2 cores: `true` of each model by default, every case
# with LOOM_ZOO_FULL=1, as test_torch_test_models.py; the lit test
# fsdp-multi-forward.test pins every setting's counts and orders in the suite.
RUN = (sorted(CASES) if os.environ.get("LOOM_ZOO_FULL") == "1"
       else [("inner_outer", "true"), ("twice", "true")])


def run(cmd: list) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600)


def check(artifact: Path, out: Path, world: int, reference: Path) -> subprocess.CompletedProcess:
    return run([LOOM_RUN, artifact, "--nproc", str(world), "--batches",
                out / "batches.safetensors", "--steps", str(STEPS), "--check", reference,
                "--no-progress", *EXACT])


@pytest.mark.parametrize("model, reshard", RUN, ids=["-".join(c) for c in RUN])
def test_multi_forward_module_equals_fully_shard(model, reshard, tmp_path):
    world, flags, expected = CASES[(model, reshard)]
    batch = 32 if model == "inner_outer" else 8
    result = loom_capture([MODEL, "--out", tmp_path, "--steps", str(STEPS),
                           "--make-arg", f"model={model}", "--make-arg", f"batch={batch}",
                           "--split", str(world), "--optimizer", "adam", "--lr", "1e-2",
                           "--reference", "fsdp", "--reshard-after-forward", reshard])
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((tmp_path / "reference.json").read_text())["reference"].startswith(
        "PyTorch fully_shard")
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    # The second call is told apart from the first, in forward and in the
    # backward that differentiates it.
    text = (tmp_path / "step.mlir").read_text()
    module = "inner" if model == "inner_outer" else "model.head"
    for phase in ("forward", "backward"):
        assert f'1 : i64}}, loom.module = "{module}", loom.phase = #loom.phase<{phase}>' in text
    artifact = tmp_path / "step.loomx"
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", artifact, "--dp=fsdp",
                  f"--world-size={world}", f"--reshard-after-forward={reshard}", *flags])
    assert result.returncode == 0, result.stderr
    result = check(artifact, tmp_path, world, tmp_path / "reference.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    for kind, count in expected.items():
        assert issued(result.stdout, kind) == [count] * STEPS, (kind, result.stdout)
    result = check(artifact, tmp_path, world, tmp_path / "one-step-short" / "reference.json")
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
