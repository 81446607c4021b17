"""Fused optimizers: loom-compile --optimizer-impl=fused against torch.optim's fused=True.

capture --optimizer-impl fused trains the eager reference with
``fused=True`` (recorded in run.json); the runtime then calls the same ATen
kernels (``_fused_sgd_``, ``_fused_adam_``, ``_fused_adamw_``) per parameter,
which update each tensor of a list on its own, so on one rank the GPT's 20
losses and final parameters are bitwise equal to eager's
(``--rtol 0 --atol 0``). On 2 FSDP ranks the gradients are summed in another
order, so the comparison is at loom-run's distributed default, 1e-5, as
test_fsdp_parity.py's. The negative control: the single-tensor loop
(forloop) rounds differently from the fused kernel, so the forloop artifact
fails the exact check against the fused reference.
"""

from __future__ import annotations

import os

import pytest

from test_distributed_parity import (LOOM_COMPILE, LOOM_RUN, STEPS, capture_and_import,  # noqa: F401
                                     pytestmark, run,
                                     train)
from test_runtime_parity import EXACT



# (capture flags, loom-compile flags) of each optimizer, fused.
FUSED = {
    "sgd": (["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--optimizer-impl", "fused"],
            ["--optimizer=sgd", "--lr=0.05", "--momentum=0.9", "--optimizer-impl=fused"]),
    "adam": (["--optimizer", "adam", "--optimizer-impl", "fused"],
             ["--optimizer=adam", "--lr=0.001", "--optimizer-impl=fused"]),
    "adamw": (["--optimizer", "adamw", "--weight-decay", "0.1", "--optimizer-impl", "fused"],
              ["--optimizer=adamw", "--lr=0.001", "--weight-decay=0.1",
               "--optimizer-impl=fused"]),
}


def compile_step(out, *flags, artifact: str = "step.loomx") -> None:
    result = run([LOOM_COMPILE, out / "step.mlir", "-o", out / artifact, *flags])
    assert result.returncode == 0, result.stderr


def check_exact(out, artifact: str = "step.loomx"):
    return run([LOOM_RUN, out / artifact, "--batches", out / "batches.safetensors",
                "--steps", str(STEPS), "--check", out / "reference.json", "--no-progress", *EXACT],
               timeout=600)


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_fused_gpt_bitwise_equal_to_eager_fused(optimizer, tmp_path):
    capture_flags, compile_flags = FUSED[optimizer]
    capture_and_import("gpt", 1, tmp_path, optimizer=capture_flags)
    compile_step(tmp_path, *compile_flags)
    result = check_exact(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    assert len([l for l in result.stdout.splitlines() if l.startswith("step")]) == STEPS
    if optimizer == "sgd":
        # SGD's fused update is the loop's arithmetic: no control.
        return
    # The negative control: the same step with the single-tensor loop, whose
    # bias corrections round differently from the kernel's. The fused
    # capture's run configuration makes loom-compile refuse the loop, so the
    # loop artifact comes from a loop capture of the same seeded model and
    # batches, checked against the fused reference.
    loop = tmp_path / "loop"
    capture_and_import("gpt", 1, loop, optimizer=[f for f in capture_flags
                                                  if f not in ("--optimizer-impl", "fused")])
    refused = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "x.loomx",
                   *[f for f in compile_flags if not f.startswith("--optimizer-impl")],
                   "--optimizer-impl=forloop"])
    assert refused.returncode != 0 and "contradicts the run configuration" in refused.stderr
    compile_step(loop, *[f for f in compile_flags if not f.startswith("--optimizer-impl")])
    os.link(loop / "step.loomx", tmp_path / "loop.loomx")
    result = check_exact(tmp_path, "loop.loomx")
    assert result.returncode != 0, result.stdout
    assert "FAIL" in result.stdout + result.stderr


def test_fused_adamw_fsdp_two_ranks_within_1e5_of_eager_fused(tmp_path):
    capture_and_import("gpt", 2, tmp_path, optimizer=FUSED["adamw"][0])
    compile_step(tmp_path, *FUSED["adamw"][1], "--dp=fsdp", "--world-size=2")
    result = train(tmp_path, 2)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
