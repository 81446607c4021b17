"""Gradient clipping (``--max-grad-norm``) next to PyTorch's ``clip_grad_norm_`` loop on 1, 2 and 4 ranks.

clip_mlp.py (three ``layers.N`` and a head, gradient norm 2-3 over the run)
is captured for N ranks (20 AdamW steps, lr 1e-2); Loom compiles it with
``--max-grad-norm`` and ``loom-run`` trains it; clip_reference.py trains
the same model, batches and optimizer with ``clip_grad_norm_(params,
max_norm, norm_type)`` before every ``opt.step()``: single-device eager (1
rank, norm inf, max_norm 0.25), ``DistributedDataParallel`` (2 ranks, norm
2, max_norm 1), ``fully_shard`` (4 ranks, norm 2, max_norm 1) or
``fully_shard`` on a 2 x 2 ``("replicate", "shard")`` mesh (HSDP, 4 ranks,
norm 2, max_norm 1: the norm crosses the shards, not the replicas, whose
gradients are already averaged).

Tolerances. Eager and DDP are compared exactly (``--rtol 0 --atol 0``): both
sides take the norm of each whole gradient, stack them in parameter order
and run the same ATen kernels. Under FSDP each rank holds shards: Loom sums
the squared norm of its shards and all-reduces that one number, while
PyTorch's DTensor completes each parameter's partial norm on its own; the
float32 sums associate differently, so the total norm differs in its last
bits (about 1e-7 relative). That scales an update by 1 + 1e-7; over 20 steps
the parameters end within 1e-7 and the losses within 2e-7 relative of
PyTorch's, so the FSDP check allows ``--rtol 1e-6 --atol 1e-6``, ten times
the measured drift and four orders of magnitude below what clipping changes.
HSDP drifts the same way (measured: losses within 1.6e-7 relative,
parameters within 9e-8) and is checked at the same tolerance.

Negative control: every step's norm is above max_norm (asserted), so the
same model compiled without ``--max-grad-norm`` must fail the same check.

The run configuration: ``--max-grad-norm`` given to capture (or ``loom
run``) makes capture's own references clip (eager and PyTorch's data
parallelism), records ``clip_grad_norm`` in run.json, and loom-compile
clips from it without being told (test/Import/run-config.test has its
parsing and the refusal of a contradicting flag).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools
from capture_cli import loom_capture

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODEL = REPO / "python" / "tests" / "clip_mlp.py"
STEPS = 20
EXACT = ["--rtol", "0", "--atol", "0"]
# mode: (ranks, loom-compile flags, norm type, max_norm, tolerance); the inf
# norm (the largest gradient element) stays within 0.4-1.0 on this model.
CASES = {
    "eager": (1, [], "inf", 0.25, EXACT),
    "ddp": (2, ["--dp=replicate"], "2", 1.0, EXACT),
    "fsdp": (4, ["--dp=fsdp"], "2", 1.0, ["--rtol", "1e-6", "--atol", "1e-6"]),
    "hsdp": (4, ["--dp=fsdp", "--replicate-size=2"], "2", 1.0,
             ["--rtol", "1e-6", "--atol", "1e-6"]),
}


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600,
                          **kwargs)


@pytest.mark.parametrize("mode", sorted(CASES))
def test_clipping_equals_pytorch(mode, tmp_path):
    world, flags, norm_type, max_norm, tolerance = CASES[mode]
    result = loom_capture([MODEL, "--out", tmp_path,
                  "--steps", str(STEPS), "--split", str(world), "--optimizer", "adamw",
                  "--lr", "1e-2"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr

    torch_ref = tmp_path / "torch"
    result = run([sys.executable, REPO / "python" / "tests" / "clip_reference.py", MODEL,
                  "--capture", tmp_path, "--out", torch_ref, "--mode", mode,
                  "--world", str(world), "--max-norm", str(max_norm), "--norm-type",
                  norm_type])
    assert result.returncode == 0, result.stdout + result.stderr
    norms = json.loads((torch_ref / "norms.json").read_text())
    assert len(norms) == STEPS and min(norms) > max_norm, norms

    def check(clip: list[str]) -> subprocess.CompletedProcess:
        artifact = tmp_path / "step.loomx"
        result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", artifact, *flags,
                      f"--world-size={world}", *clip])
        assert result.returncode == 0, result.stderr
        return run([LOOM_RUN, artifact, "--nproc", str(world), "--batches",
                    tmp_path / "batches.safetensors", "--steps", str(STEPS), "--check",
                    torch_ref / "reference.json", "--no-progress", *tolerance])

    result = check([f"--max-grad-norm={max_norm}", f"--grad-norm-type={norm_type}"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within" in result.stdout
    assert "PASS" in result.stdout

    # Negative control: without clipping the same check fails.
    result = check([])
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout and "FAIL" in result.stdout


def test_capture_records_clipping_for_the_reference_and_compile(tmp_path):
    """``--max-grad-norm`` given to capture (here through ``loom run``) is
    part of the run configuration: PyTorch's own fully_shard reference clips
    with ``clip_grad_norm_`` before each update, run.json records
    ``clip_grad_norm``, and loom-compile takes it from there without being
    told. The clipped run passes its check at the FSDP tolerance above; the
    reference without clipping trains differently (the clipping took effect
    in the reference, whose gradient norms on this model stay above 1)."""
    from test_run_command import loom_run

    def train(out: Path, *flags: str) -> subprocess.CompletedProcess:
        return loom_run(MODEL, "--nproc", "2", "--dp", "fsdp", "--reference", "fsdp",
                        "--optimizer", "adamw", "--lr", "1e-2", "--steps", "6", "--check",
                        "--rtol", "1e-6", "--atol", "1e-6", *flags, out=out)

    clipped = train(tmp_path / "clipped", "--max-grad-norm", "1", "--grad-norm-type", "2")
    assert clipped.returncode == 0, clipped.stdout + clipped.stderr
    assert "gradient clipping: clip_grad_norm_(max_norm=1, norm_type=2)" in clipped.stdout
    assert "PASS" in clipped.stdout
    config = json.loads((tmp_path / "clipped" / "run.json").read_text())
    assert config["clip_grad_norm"] == {"max_norm": 1.0, "norm_type": "2"}
    compile_line = next(l for l in clipped.stdout.splitlines() if l.startswith("[compile]"))
    assert "--max-grad-norm" not in compile_line, compile_line

    plain = train(tmp_path / "plain")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    losses = [json.loads((tmp_path / d / "reference.json").read_text())["losses"]
              for d in ("clipped", "plain")]
    assert losses[0][0] == losses[1][0] and losses[0][1:] != losses[1][1:], losses


@pytest.mark.parametrize("nproc, flags, norm_type, control", [
    (2, [], "2", True),
    (4, ["--dp", "fsdp"], "2", False),
    (4, ["--dp", "replicate"], "inf", False),
], ids=["pp2", "pp2-fsdp2", "pp2-ddp2-inf"])
def test_pipelined_clipping_equals_eager(nproc, flags, norm_type, control, tmp_path):
    """``--max-grad-norm`` with ``--pp=2``: each pipeline rank's norm is
    completed over the pipeline ranks (torchtitan's clip_grad_norm_ over its
    pp mesh), the tied embedding of the GPT example, which both pipeline
    ranks hold, counted once, on the rank whose REDUCE_GRAD made its
    gradient. 1F1B, 2 microbatches, SGD lr 0.5 with max_norm 0.05 (every
    step clips): losses and parameters within loom-run's default tolerance
    (1e-5) of eager PyTorch clipping the whole model on one device. The
    norms sum in another order, so not bitwise. Negative control (on 2
    ranks; the reference and tolerance are the same for all three): the
    same artifact against the unclipped reference fails."""
    from test_run_command import loom_run

    common = ["--nproc", str(nproc), "--pp=2", "--microbatches", "2", "--optimizer", "sgd",
              "--lr", "0.5", "--steps", "4", "--check", *flags]
    out = tmp_path / "clipped"
    result = loom_run(REPO / "examples" / "gpt.py", *common, "--max-grad-norm", "0.05",
                      "--grad-norm-type", norm_type, out=out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    if not control:
        return
    plain = loom_run(REPO / "examples" / "gpt.py", *common, out=tmp_path / "plain")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    result = run([LOOM_RUN, out / "step.loomx", "--batches", out / "batches.safetensors",
                  "--steps", "4", "--check", tmp_path / "plain" / "reference.json",
                  "--no-progress"])
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout + result.stderr
