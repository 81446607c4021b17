"""Pipeline parallelism trains like gradient accumulation, bit for bit.

A step captured for one microbatch (``loom.capture --microbatches M``) is
compiled two ways: the single-rank step that accumulates M microbatches
(``loom-accumulate-gradients``) and the pipelined step (``loom-compile
--pp=P --pp-schedule=S``: ``loom-pipeline-split`` +
``loom-pipeline-schedule``, one MPMD program per rank, activations and
gradients sent point to point over Gloo). Both run every microbatch's
forward and backward with the same kernels on the same rows, and sum the
microbatch gradients in microbatch order before dividing by M, so every
loss and every final parameter must be EQUAL (tolerance 0) for the
schedules that run each stage's backwards in microbatch order (GPipe,
1F1B, Interleaved1F1B, and InterleavedZeroBubble, ZBVZeroBubble and
DualPipeV, whose backwards run as separate input- and weight-gradient
parts), given one ATen thread per rank in both runs. LoopedBFS runs them from the last microbatch down,
so its sums round differently (by an ulp of the gradient, which AdamW
turns into parameter differences of a few 1e-8 after three steps): it is
checked at |a - b| <= 1e-7 + 1e-6 |b|, and the exact comparison must fail
(the tolerance is needed, so the check can fail). Every pipelined run also passes ``loom-run --check`` against
PyTorch eager on the whole batch (reference.json).

Models: examples/mlp.py (three Linear layers: the split falls back to the
root's children), examples/gpt.py under every schedule (tied embedding and
head on the first and last stage: the head's gradient contribution crosses back to the first
stage, and the reduced gradient goes to the last, so both copies take the
same AdamW update; ``gpt-fused`` captures it with ``--optimizer-impl
fused``, so both runs update with ATen's fused AdamW) and PyTorch's
pipeline-test stack of MLPModule blocks (pp_mlp_stack.py, ``stack.0..7``),
and PyTorch's ``CompositeParamModel`` under a loss wrapper
(torch_test_models.py ``compositeparam``: the split descends into the
wrapper's only child; the model's own ``mm`` by its parameter ``p`` runs
after the cut, and its backward's transpose of ``p``, which reads nothing
computed, goes with it; the buffer no op reads stays on the first stage,
where the check against eager finds it).
"""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools
from capture_cli import loom_capture

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

STEPS = 3
MODELS = {
    "mlp": (REPO / "examples" / "mlp.py", []),
    "gpt": (REPO / "examples" / "gpt.py", []),
    "stack": (REPO / "python" / "tests" / "pp_mlp_stack.py", []),
    "composite": (REPO / "python" / "tests" / "torch_test_models.py",
                  ["--make-arg", "model=compositeparam"]),
    # AdamW as ATen's fused kernel (torch.optim.AdamW(fused=True)) on every
    # stage's parameters: the run configuration carries it to loom-compile.
    "gpt-fused": (REPO / "examples" / "gpt.py",
                  ["--optimizer", "adamw", "--optimizer-impl", "fused"]),
}
# GPT has two blocks: the schedules with two stages per rank cut it into
# four at the blocks and the final norm (the stack has eight blocks).
MULTI_STAGE = {"Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble",
               "DualPipeV"}


def pp_flags(name: str, schedule: str, pp: int) -> list:
    flags = [f"--pp={pp}", f"--pp-schedule={schedule}"]
    if name.startswith("gpt") and schedule in MULTI_STAGE:
        flags.append("--pp-boundaries=layers.0,layers.1,norm")
    return flags


# (model, schedule, pipeline ranks, microbatches, exact)
CASES = [
    ("mlp", "GPipe", 2, 4, True),
    ("gpt", "GPipe", 2, 4, True),
    ("gpt", "1F1B", 2, 4, True),
    ("gpt", "Interleaved1F1B", 2, 4, True),
    ("gpt", "LoopedBFS", 2, 4, False),
    ("gpt", "InterleavedZeroBubble", 2, 4, True),
    ("gpt", "ZBVZeroBubble", 2, 4, True),
    ("gpt", "DualPipeV", 2, 4, True),
    ("gpt-fused", "1F1B", 2, 4, True),
    ("composite", "1F1B", 2, 4, True),
    ("stack", "GPipe", 2, 4, True),
    ("stack", "1F1B", 2, 4, True),
    ("stack", "1F1B", 4, 4, True),
    ("stack", "Interleaved1F1B", 2, 4, True),
    ("stack", "LoopedBFS", 2, 4, False),
    ("stack", "InterleavedZeroBubble", 2, 4, True),
    ("stack", "ZBVZeroBubble", 2, 4, True),
    ("stack", "DualPipeV", 2, 4, True),
]


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600,
                          **kwargs)


# Captures are deterministic: each (model, microbatches, split) is captured
# once per session and linked into every test that uses it.
_CAPTURES: dict = {}
_CAPTURE_ROOT = Path(tempfile.mkdtemp(prefix="loom-pp-captures-"))
atexit.register(shutil.rmtree, _CAPTURE_ROOT, ignore_errors=True)


def capture(name: str, microbatches: int, out: Path, split: int = 1) -> None:
    key = (name, microbatches, split)
    if key not in _CAPTURES:
        dest = _CAPTURE_ROOT / f"{name}-{microbatches}mb-split{split}"
        dest.mkdir()
        model, make_args = MODELS[name]
        result = loom_capture([model, "--out", dest, "--steps",
                      str(STEPS), "--microbatches", str(microbatches), "--split", str(split),
                      *make_args])
        assert result.returncode == 0, result.stderr
        result = run([LOOM_IMPORT, dest / "step.pt2", "-o", dest / "step.mlir"])
        assert result.returncode == 0, result.stderr
        _CAPTURES[key] = dest
    for f in _CAPTURES[key].iterdir():
        (out / f.name).symlink_to(f)


class Run:
    """One training run: the loss at every step (every rank reports the
    loss of the rank that holds the last stage) and the final parameters."""

    def __init__(self, out: Path, tag: str):
        trace = json.loads((out / f"{tag}.trace.json").read_text())["traceEvents"]
        steps = [e for e in trace if e.get("ph") == "X" and "loss" in e.get("args", {})]
        by_step = {}
        for e in steps:
            by_step.setdefault(e["name"], set()).add(e["args"]["loss"])
        assert all(len(v) == 1 for v in by_step.values()), by_step
        self.losses = sorted((name, v.pop()) for name, v in by_step.items())
        self.params = safetensors_torch.load_file(str(out / f"{tag}.safetensors"))


def train(out: Path, tag: str, flags: list, nproc: int, steps: int = STEPS,
          check: bool = False) -> Run:
    artifact = out / f"{tag}.loomx"
    result = run([LOOM_COMPILE, out / "step.mlir", "-o", artifact, *flags])
    assert result.returncode == 0, result.stderr
    extra = ["--check", out / "reference.json"] if check else []
    result = run([LOOM_RUN, artifact, "--nproc", str(nproc), "--batches",
                  out / "batches.safetensors", "--steps", str(steps), "--no-progress",
                  # One ATen thread on every rank of both runs: intra-op
                  # parallel reductions (bias gradients) round by thread count.
                  "--threads", "1",
                  "--trace", out / f"{tag}.trace.json", "--save-params",
                  out / f"{tag}.safetensors", *extra])
    assert result.returncode == 0, result.stdout + result.stderr
    return Run(out, tag)


def differences(got: Run, want: Run, rtol: float = 0.0, atol: float = 0.0) -> list[str]:
    def close(a, b):
        return torch.allclose(a, b, rtol=rtol, atol=atol) if rtol else torch.equal(a, b)

    diffs = []
    if len(got.losses) != len(want.losses):
        diffs.append(f"{len(got.losses)} losses != {len(want.losses)}")
    diffs += [f"loss at {s}: {a!r} != {b!r}" for (s, a), (_, b) in zip(got.losses, want.losses)
              if not close(torch.tensor(a), torch.tensor(b))]
    if sorted(got.params) != sorted(want.params):
        diffs.append(f"tensors {sorted(got.params)} != {sorted(want.params)}")
    diffs += [f"parameter {name}" for name in sorted(want.params)
              if name in got.params and not close(got.params[name], want.params[name])]
    return diffs


@pytest.mark.parametrize("name, schedule, pp, microbatches, exact", CASES,
                         ids=[f"{n}-{s}-pp{p}-{m}mb" for n, s, p, m, _ in CASES])
def test_pipeline_trains_like_accumulation(name, schedule, pp, microbatches, exact, tmp_path):
    capture(name, microbatches, tmp_path)
    accumulated = train(tmp_path, "accumulate", [], 1)
    assert len(accumulated.losses) == STEPS
    piped = train(tmp_path, "pipeline", pp_flags(name, schedule, pp), pp,
                  check=True)
    if name.endswith("-fused"):
        # Both runs update with the fused kernel (the loop's updates differ
        # from it in the last bits, so equality below tells them apart).
        for tag in ("accumulate", "pipeline"):
            assert b'"impl":"fused"' in (tmp_path / f"{tag}.loomx").read_bytes(), tag
    if exact:
        assert differences(piped, accumulated) == []
    else:
        assert differences(piped, accumulated, rtol=1e-6, atol=1e-7) == []
        assert differences(piped, accumulated) != [], "the tolerance is not needed"

    # Negative control (once, to keep the suite short): the comparison sees
    # one step of training.
    if (name, schedule) == CASES[0][:2]:
        short = train(tmp_path, "short", pp_flags(name, schedule, pp), pp,
                      steps=STEPS - 1)
        assert any(d.startswith("parameter ") for d in differences(short, accumulated))


def test_pipeline_groups_and_lr_schedule_train_like_accumulation(tmp_path):
    """Parameter groups and a learning-rate schedule reach every rank's
    updates: GPT under 1F1B with the norms and biases in a group of their
    own (no weight decay, another lr) and a linear warm-up trains bit for bit
    like the accumulation step compiled with the same options; without them
    the pipeline trains differently (they took effect)."""
    capture("gpt", 4, tmp_path)
    # The capture's AdamW (lr 1e-3, weight decay 0.01) with a group and a
    # warm-up on top.
    optimizer = ["--param-groups=ndim<2:lr=0.003:weight-decay=0",
                 "--lr-warmup-steps=2", "--lr-warmup-start-factor=0.25"]
    pp = ["--pp=2", "--pp-schedule=1F1B"]
    accumulated = train(tmp_path, "accumulate", optimizer, 1)
    piped = train(tmp_path, "pipeline", [*optimizer, *pp], 2)
    assert differences(piped, accumulated) == []
    plain = train(tmp_path, "plain", pp, 2)
    assert any(d.startswith("parameter ") for d in differences(plain, accumulated))


@pytest.mark.parametrize("schedule", ["GPipe", "1F1B"])
def test_scheduled_pipeline_trains_like_accumulation(schedule, tmp_path):
    """``--schedule`` (loom-schedule) on every pipeline rank's program keeps
    its sends, receives and their waits in program order: the receives,
    which read nothing, used to start first and, with two collectives in
    flight, a rank blocked on a gradient before sending the activation its
    peer computes it from (GPipe timed out on 2 ranks). Reordering changes
    no value, so the step still trains bit for bit like accumulation."""
    capture("gpt", 4, tmp_path)
    accumulated = train(tmp_path, "accumulate", [], 1)
    piped = train(tmp_path, "pipeline", [*pp_flags("gpt", schedule, 2), "--schedule"], 2,
                  check=True)
    assert differences(piped, accumulated) == []
