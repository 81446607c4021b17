"""Loom next to PyTorch's real DDP, FSDP2 and HSDP on 2 Gloo ranks, bitwise.

The GPT example (two blocks, tied embeddings) is captured once for 2 ranks
(10 AdamW steps, PyTorch's defaults). For each data-parallel mode Loom
compiles it (``--dp=replicate``; ``--dp=fsdp``; ``--dp=fsdp
--replicate-size=2``, a (replicate 2, shard 1) mesh) and ``loom-run`` trains
it on 2 ranks; loom.dp_reference trains the same model, batches and
optimizer with ``DistributedDataParallel`` or ``fully_shard`` (every
``layers.i``, then the root; HSDP on the same (2, 1) mesh) on 2 Gloo
processes. The per-step losses (averaged over the ranks) and the final
parameters must be equal: tolerance 0 (``--rtol 0 --atol 0``). Two ranks
sum in either order to the same value, and both sides run the same ATen
kernels on one thread per rank, so any difference is a real one.

Negative control: the same exact check against PyTorch's parameters one
AdamW step before the end must fail, so the comparison sees a single step
of training.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools
from capture_cli import loom_capture

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODEL = REPO / "examples" / "gpt.py"
WORLD = 2
STEPS = 10
EXACT = ["--rtol", "0", "--atol", "0"]
# loom-compile flags of each mode, and what the compiled program must hold.
MODES = {
    "ddp": (["--dp=replicate"], {"shape": [2], "axes": ["dp"]}),
    "fsdp": (["--dp=fsdp"], {"shape": [2], "axes": ["shard"]}),
    "hsdp": (["--dp=fsdp", "--replicate-size=2"], {"shape": [2, 1], "axes": ["replicate", "shard"]}),
}


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600,
                          **kwargs)


@pytest.fixture(scope="module")
def step(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpt2")
    result = loom_capture([MODEL, "--out", out, "--steps", str(STEPS),
                  "--split", str(WORLD)])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, out / "step.pt2", "-o", out / "step.mlir"])
    assert result.returncode == 0, result.stderr
    return out


def check(artifact: Path, step: Path, reference: Path) -> subprocess.CompletedProcess:
    return run([LOOM_RUN, artifact, "--nproc", str(WORLD), "--batches",
                step / "batches.safetensors", "--steps", str(STEPS), "--check",
                reference / "reference.json", "--no-progress", *EXACT])


@pytest.mark.parametrize("mode", sorted(MODES))
def test_loom_equals_pytorch_data_parallel(mode, step, tmp_path):
    flags, mesh = MODES[mode]
    artifact = tmp_path / "step.loomx"
    result = run([LOOM_COMPILE, step / "step.mlir", "-o", artifact, *flags,
                  f"--world-size={WORLD}"])
    assert result.returncode == 0, result.stderr
    program = run([LOOM_COMPILE, step / "step.mlir", "--emit=program", *flags,
                   f"--world-size={WORLD}"])
    assert program.returncode == 0, program.stderr
    assert json.loads(program.stdout)["mesh"] == mesh

    torch_ref = tmp_path / f"torch-{mode}"
    result = run([sys.executable, "-m", "loom.dp_reference", MODEL, "--capture", step,
                  "--out", torch_ref, "--mode", mode],
                 env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    assert result.returncode == 0, result.stdout + result.stderr
    losses = json.loads((torch_ref / "reference.json").read_text())["losses"]
    assert len(losses) == STEPS and losses[-1] < losses[0]

    result = check(artifact, step, torch_ref)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within rtol 0" in result.stdout
    assert "PASS" in result.stdout

    # Negative control: one AdamW step fewer is caught by the exact check.
    result = check(artifact, step, torch_ref / "one-step-short")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout and "FAIL" in result.stdout


BATCH_NORM_MODEL = REPO / "python" / "tests" / "remat_batchnorm_model.py"


def batch_norm_run(tmp_path: Path, mode: str, flags: list, steps: int, microbatches: int = 1,
                   capture_flags: tuple = ()):
    """Captures the residual BatchNorm1d blocks for 2 ranks with PyTorch's
    ``mode`` reference, compiles them with ``flags``; returns the exact
    check of the trained artifact against a reference.json."""
    result = loom_capture([BATCH_NORM_MODEL, "--out", tmp_path, "--steps", str(steps),
                           "--split", "2", "--microbatches", str(microbatches),
                           "--optimizer", "adamw", "--reference", mode, *capture_flags])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    artifact = tmp_path / "step.loomx"
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", artifact, *flags])
    assert result.returncode == 0, result.stderr

    def check(reference: Path) -> subprocess.CompletedProcess:
        return run([LOOM_RUN, artifact, "--nproc", "2", "--batches",
                    tmp_path / "batches.safetensors", "--steps", str(steps), "--check",
                    reference, "--no-progress", *EXACT])

    return check


def test_ddp_reference_keeps_each_ranks_batch_norm_statistics(tmp_path):
    """Batch norm's running statistics under ``--dp=replicate`` stay each
    rank's own (loom-replicate, as DDP with ``broadcast_buffers=False``), and
    the DDP reference is built that way: three residual blocks with
    BatchNorm1d on 2 ranks, 5 AdamW steps, every loss, parameter and each
    rank's statistics bitwise. DDP's default (``broadcast_buffers=True``)
    overwrites rank 1's statistics with rank 0's before every forward (by
    hand, a residual conv net on 2 ranks: 12 of rank 1's statistics off by up
    to 5e-3)."""
    check = batch_norm_run(tmp_path, "ddp", ["--dp=replicate"], steps=5)
    report = json.loads((tmp_path / "reference.json").read_text())
    assert "broadcast_buffers=False" in report["reference"], report["reference"]
    result = check(tmp_path / "reference.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every rank checks its own" in result.stdout and "PASS" in result.stdout
    # The statistics are each rank's: the reference holds rank 1's apart.
    from safetensors import safe_open

    with safe_open(str(tmp_path / "reference.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert any(k.endswith("running_mean@rank1") for k in keys), keys

    # Negative control: one AdamW step fewer is caught by the exact check.
    result = check(tmp_path / "one-step-short" / "reference.json")
    assert result.returncode == 1, result.stdout + result.stderr


@pytest.mark.parametrize("microbatches", [1, 2])
def test_broadcast_buffers_equals_ddp_default(microbatches, tmp_path):
    """``--broadcast-buffers=true`` is DDP's default ``broadcast_buffers=True``:
    every buffer takes rank 0's value before the step's forward (before the
    first microbatch's only, as DDP's ``no_sync`` loop). Three residual
    BatchNorm1d blocks on 2 ranks, AdamW: every loss, parameter and each
    rank's statistics bitwise equal to DDP's. Negative control: the same
    step compiled without the broadcast (each rank keeps its statistics)
    fails that check, and the broadcast step fails the
    ``broadcast_buffers=False`` reference."""
    steps = 4
    check = batch_norm_run(tmp_path / "on", "ddp", ["--dp=replicate", "--broadcast-buffers=true"],
                           steps=steps, microbatches=microbatches,
                           capture_flags=("--broadcast-buffers", "true"))
    reference = tmp_path / "on" / "reference.json"
    assert "broadcast_buffers=True" in json.loads(reference.read_text())["reference"]
    result = check(reference)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout

    kept = batch_norm_run(tmp_path / "off", "ddp", ["--dp=replicate"], steps=steps,
                          microbatches=microbatches)
    for run, against in ((kept, reference), (check, tmp_path / "off" / "reference.json")):
        result = run(against)
        out = result.stdout + result.stderr
        assert result.returncode == 1, out
        # Rank 0's statistics are its own either way; rank 1's differ.
        assert "--check failed on rank(s) 1" in out and "running_mean" in out, out


@pytest.mark.parametrize("hook, microbatches", [("fp16-compress", 1), ("bf16-compress", 1),
                                                 ("fp16-compress", 2)])
def test_compress_hooks_equal_ddp_with_them(hook, microbatches, tmp_path):
    """``--comm-hook=fp16-compress|bf16-compress`` is DDP with PyTorch's
    ``fp16_compress_hook`` / ``bf16_compress_hook`` registered: the GPT
    example on 2 ranks, 10 AdamW steps, every loss and parameter bitwise
    equal to DDP's with the hook; with 2 microbatches the hook reduces the
    mean of their gradients, as a loop that divides each microbatch's loss
    by 2 does (a sum halved after the 16-bit cast rounds small gradients
    differently). Negative control: the same step reduced in f32 (no hook)
    fails that check."""
    result = loom_capture([MODEL, "--out", tmp_path, "--steps", str(STEPS), "--split",
                           str(WORLD), "--microbatches", str(microbatches),
                           "--reference", "ddp", "--comm-hook", hook])
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "reference.json").read_text())["reference"]
    assert f"{hook.replace('-', '_')}_hook" in report, report
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    for name, flags in (("hooked", [f"--comm-hook={hook}"]), ("plain", [])):
        result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / f"{name}.loomx",
                      "--dp=replicate", "--world-size=2", *flags])
        assert result.returncode == 0, result.stderr
    result = check(tmp_path / "hooked.loomx", tmp_path, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    result = check(tmp_path / "plain.loomx", tmp_path, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr


def test_ddp_on_three_ranks_scales_each_gradient_like_ddp(tmp_path):
    """With 3 ranks the order of the division matters: DDP's reducer
    multiplies each gradient by 1/3 as it copies it into the bucket and
    sums the buckets, and Loom's buckets do the same (``aten::mul`` before
    packing, ``reduce <sum>``). ddp_order_model.py (its parameters in the
    order backward produces them, so DDP's first-step bucket layout is the
    one it rebuilds and Loom packs): 6 SGD steps with momentum on 3 Gloo
    ranks, every loss and parameter bitwise equal to DDP's. Negative
    control: FSDP2-based replicate's reduction of the same step
    (``--grouping=units``: a sum divided by 3) fails that check."""
    world, steps = 3, 6
    result = loom_capture([REPO / "python" / "tests" / "ddp_order_model.py", "--out", tmp_path,
                           "--steps", str(steps), "--split", str(world), "--make-arg",
                           f"steps={steps}", "--optimizer", "sgd", "--lr", "0.2",
                           "--momentum", "0.9", "--reference", "ddp"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    outcomes = {}
    for name, flags in (("ddp", []), ("units", ["--grouping=units"])):
        artifact = tmp_path / f"{name}.loomx"
        result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", artifact, "--dp=replicate",
                      f"--world-size={world}", *flags])
        assert result.returncode == 0, result.stderr
        outcomes[name] = run([LOOM_RUN, artifact, "--nproc", str(world), "--batches",
                              tmp_path / "batches.safetensors", "--steps", str(steps),
                              "--check", tmp_path / "reference.json", "--no-progress", *EXACT])
    assert outcomes["ddp"].returncode == 0, outcomes["ddp"].stdout + outcomes["ddp"].stderr
    assert "PASS" in outcomes["ddp"].stdout
    assert outcomes["units"].returncode == 1, outcomes["units"].stdout + outcomes["units"].stderr
    assert "MISMATCH" in outcomes["units"].stdout + outcomes["units"].stderr


@pytest.mark.parametrize("mode, flags", [("fsdp", ["--dp=fsdp"]), ("ddp", ["--dp=replicate"])])
def test_accumulation_chains_batch_norm_statistics(mode, flags, tmp_path):
    """Gradient accumulation over a model with batch norm: each microbatch
    updates the running statistics the one before left, as PyTorch's loop
    (``no_sync`` / ``set_requires_gradient_sync`` on all but the last)
    runs the module M times. Three residual BatchNorm1d blocks on 2 ranks,
    2 microbatches, 4 AdamW steps: every loss, parameter and each rank's
    statistics bitwise equal to fully_shard's and DDP's (loom-accumulate-
    gradients used to refuse the step)."""
    check = batch_norm_run(tmp_path, mode, flags, steps=4, microbatches=2)
    result = check(tmp_path / "reference.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    result = check(tmp_path / "one-step-short" / "reference.json")
    assert result.returncode == 1, result.stdout + result.stderr
