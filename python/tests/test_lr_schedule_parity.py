"""Parameter groups and learning-rate schedules next to PyTorch's own loop on 1, 2 and 4 ranks.

groups_mlp.py defines ``param_groups(model)`` (weight decay 0.1 on the
matrices; none and half the learning rate on the biases). Capture builds
the real ``torch.optim`` optimizer from it, records its groups and the
``--lr-*`` schedule in run.json, and trains the reference with the same
optimizer and ``SequentialLR([LinearLR, CosineAnnealingLR | LinearLR |
StepLR | ExponentialLR | MultiStepLR | PolynomialLR |
CosineAnnealingWarmRestarts], milestones=[W])``:
single-device eager (1 rank, AdamW, warm-up then cosine; or then StepLR; or
then PolynomialLR with power 0.9, reaching 0 before the end),
``DistributedDataParallel`` (2 ranks, SGD with momentum, warm-up then linear
decay; or then ExponentialLR; or then MultiStepLR), ``fully_shard`` on 2
ranks (AdamW, warm-up then CosineAnnealingWarmRestarts with periods 3, 6,
12)
or ``fully_shard`` (4 ranks, AdamW, warm-up then cosine), 20 steps. loom-compile is given nothing but the world size and the data
parallelism: the groups and the schedule come from the capture.

Tolerance 0 (``--rtol 0 --atol 0``): on each layout Loom runs the same ATen
kernels as the reference (eager exactly; DDP's and FSDP's gradient
reductions as the dp reference's parity tests show) and computes every
group's rate with lr_scheduler's own recursion, so losses and parameters
are bitwise equal. loom-run prints each step's rate with every digit; it
must equal the reference's ``get_last_lr()`` of the default-lr group.

Negative control: the same capture compiled with a warm-up one step
shorter (the recorded schedule edited in step.mlir) must fail the check.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools
from capture_cli import loom_capture

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODEL = REPO / "python" / "tests" / "groups_mlp.py"
STEPS = 20
WARMUP = 5
EXACT = ["--rtol", "0", "--atol", "0"]
ADAMW = ["--optimizer", "adamw", "--lr", "1e-2"]
SGD = ["--optimizer", "sgd", "--lr", "5e-2", "--momentum", "0.9"]
COSINE = ["--lr-decay", "cosine", "--lr-decay-steps", "15", "--lr-eta-min", "1e-4"]
LINEAR = ["--lr-decay", "linear", "--lr-decay-steps", "15", "--lr-end-factor", "0.1"]
STEP = ["--lr-decay", "step", "--lr-decay-steps", "4", "--lr-gamma", "0.5"]
EXPONENTIAL = ["--lr-decay", "exponential", "--lr-gamma", "0.9"]
MULTISTEP = ["--lr-decay", "multistep", "--lr-milestones", "3,8,9", "--lr-gamma", "0.5"]
POLYNOMIAL = ["--lr-decay", "polynomial", "--lr-decay-steps", "12", "--lr-power", "0.9"]
RESTARTS = ["--lr-decay", "cosine-restarts", "--lr-decay-steps", "3", "--lr-t-mult", "2",
            "--lr-eta-min", "1e-4"]
# mode: (ranks, capture flags, loom-compile flags)
CASES = {
    "eager": (1, [*ADAMW, *COSINE], []),
    "ddp": (2, [*SGD, *LINEAR, "--reference", "ddp"], ["--dp=replicate"]),
    "fsdp": (4, [*ADAMW, *COSINE, "--reference", "fsdp"], ["--dp=fsdp"]),
    "eager-step": (1, [*ADAMW, *STEP], []),
    "ddp-exponential": (2, [*SGD, *EXPONENTIAL, "--reference", "ddp"], ["--dp=replicate"]),
    "ddp-multistep": (2, [*SGD, *MULTISTEP, "--reference", "ddp"], ["--dp=replicate"]),
    "eager-polynomial": (1, [*ADAMW, *POLYNOMIAL], []),
    "fsdp-restarts": (2, [*ADAMW, *RESTARTS, "--reference", "fsdp"], ["--dp=fsdp"]),
}


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600,
                          **kwargs)


@pytest.mark.parametrize("mode", sorted(CASES))
def test_groups_and_schedule_equal_pytorch(mode, tmp_path):
    world, capture_flags, flags = CASES[mode]
    result = loom_capture([MODEL, "--out", tmp_path,
                  "--steps", str(STEPS), "--split", str(world), "--lr-warmup-steps", str(WARMUP),
                  "--lr-warmup-start-factor", "0.1", *capture_flags])
    assert result.returncode == 0, result.stderr
    config = json.loads((tmp_path / "run.json").read_text())
    assert [g["weight_decay"] for g in config["param_groups"]] == [0.1, 0.0]
    assert config["lr_schedule"]["warmup_steps"] == WARMUP
    mlir = tmp_path / "step.mlir"
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", mlir])
    assert result.returncode == 0, result.stderr

    def check(step_mlir) -> subprocess.CompletedProcess:
        artifact = tmp_path / "step.loomx"
        result = run([LOOM_COMPILE, step_mlir, "-o", artifact, *flags,
                      f"--world-size={world}"])
        assert result.returncode == 0, result.stderr
        return run([LOOM_RUN, artifact, "--nproc", str(world), "--batches",
                    tmp_path / "batches.safetensors", "--steps", str(STEPS), "--check",
                    tmp_path / "reference.json", "--no-progress", *EXACT])

    result = check(mlir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within" in result.stdout
    assert "PASS" in result.stdout
    # Every step's rate, bit for bit: the matrices' group has the default lr.
    lrs = [float(v) for v in re.findall(r"\blr (\S+)", result.stdout)]
    want = [step[0] for step in json.loads((tmp_path / "reference.json").read_text())["lrs"]]
    assert lrs == want

    # Negative control: a warm-up one step shorter fails the same check.
    text = mlir.read_text()
    short = tmp_path / "short.mlir"
    short.write_text(text.replace(f"warmup_steps = {WARMUP} : i64",
                                  f"warmup_steps = {WARMUP - 1} : i64"))
    assert short.read_text() != text
    result = check(short)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout and "FAIL" in result.stdout
