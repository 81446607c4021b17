"""Recompute changes no number: loom-remat on and off train bitwise the same.

GPT and ViT (examples/), a two-block model with dropout
(remat_dropout_model.py) and a batch-norm MLP (remat_batchnorm_model.py,
whose blocks return running statistics) are captured for 1, 2 and 4 ranks
(GPT also with 2 microbatches) and compiled three times: without recompute, with ``--remat=full`` (checkpoint_wrapper
on every ``layers.N``) and with ``--remat=selective`` (torchtitan's
op-level SAC: matmul outputs saved, the rest recomputed). One rank runs the
single-device step, more ranks FSDP (``--dp=fsdp``). loom-run trains each
for STEPS steps from the same weights and batches; every rank's loss at
every step and the final parameters must EQUAL those of the run without
recompute (tolerance 0): a recompute region runs the same kernels on the
same inputs, and dropout masks are saved, not drawn again (loom-run seeds
its generator, so two runs draw the same masks). The peak the runtime
measures (the CPU allocator's, ``loom-run --trace``) must be lower with
recompute.

Negative control: the run without recompute stopped one step early must
differ from the full run, so the comparison sees a single step of training.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_OPT, LOOM_RUN, REPO, needs_tools
from capture_cli import loom_capture

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_OPT, LOOM_RUN)

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

STEPS = 6
MODELS = {
    "gpt": REPO / "examples" / "gpt.py",
    "vit": REPO / "examples" / "vit.py",
    "dropout": REPO / "python" / "tests" / "remat_dropout_model.py",
    "batchnorm": REPO / "python" / "tests" / "remat_batchnorm_model.py",
    "gru": REPO / "python" / "tests" / "remat_gru_model.py",
    # test_kernel_workspace.py's
    "conv": REPO / "python" / "tests" / "remat_conv_model.py",
}
# (model, ranks, microbatches): loom-accumulate-gradients copies the regions
# into every microbatch.
CASES = [("gpt", 1, 1), ("gpt", 4, 1), ("gpt", 2, 2), ("vit", 1, 1),
         ("vit", 2, 1), ("dropout", 1, 1), ("dropout", 2, 1), ("batchnorm", 2, 1)]
MODES = ("full", "selective")


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600,
                          **kwargs)


def capture(name: str, world: int, out: Path, microbatches: int = 1) -> None:
    result = loom_capture([MODELS[name], "--out", out, "--steps",
                  str(STEPS), "--split", str(world), "--microbatches", str(microbatches)])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, out / "step.pt2", "-o", out / "step.mlir"])
    assert result.returncode == 0, result.stderr


class Run:
    """One training run: every rank's loss per step, the final parameters
    and the highest measured peak."""

    def __init__(self, out: Path, tag: str):
        trace = json.loads((out / f"{tag}.trace.json").read_text())["traceEvents"]
        steps = [e for e in trace if e.get("ph") == "X" and "loss" in e.get("args", {})]
        self.losses = {(e["pid"], e["name"]): e["args"]["loss"] for e in steps}
        self.peak = max(e["args"]["peak_bytes"] for e in steps)
        self.params = safetensors_torch.load_file(str(out / f"{tag}.safetensors"))


def train(out: Path, world: int, mode: str, steps: int = STEPS, tag: str | None = None) -> Run:
    tag = tag or mode
    artifact = out / f"{mode}.loomx"
    if not artifact.exists():
        dp = ["--dp=fsdp"] if world > 1 else []
        result = run([LOOM_COMPILE, out / "step.mlir", "-o", artifact, f"--remat={mode}", *dp])
        assert result.returncode == 0, result.stderr
    result = run([LOOM_RUN, artifact, "--nproc", str(world), "--batches",
                  out / "batches.safetensors", "--steps", str(steps), "--no-progress",
                  "--trace", out / f"{tag}.trace.json", "--save-params",
                  out / f"{tag}.safetensors"])
    assert result.returncode == 0, result.stdout + result.stderr
    return Run(out, tag)


def differences(got: Run, want: Run) -> list[str]:
    """What differs, bit for bit, between two runs (losses compared on the
    steps both ran)."""
    diffs = [f"loss of rank {pid} at {step}: {loss!r} != {want.losses[pid, step]!r}"
             for (pid, step), loss in got.losses.items()
             if (pid, step) in want.losses and loss != want.losses[pid, step]]
    if sorted(got.params) != sorted(want.params):
        diffs.append(f"tensors {sorted(got.params)} != {sorted(want.params)}")
    diffs += [f"parameter {name}" for name in sorted(want.params)
              if name in got.params and not torch.equal(got.params[name], want.params[name])]
    return diffs


@pytest.mark.parametrize("name, world, microbatches", CASES,
                         ids=[f"{n}-{w}rank-{m}mb" for n, w, m in CASES])
def test_remat_trains_bitwise_like_no_remat(name, world, microbatches, tmp_path):
    capture(name, world, tmp_path, microbatches)
    plain = train(tmp_path, world, "none")
    assert len(plain.losses) == STEPS * world
    for mode in MODES:
        remat = train(tmp_path, world, mode)
        assert differences(remat, plain) == [], f"--remat={mode}"
        assert remat.peak < plain.peak, f"--remat={mode}: peak {remat.peak} >= {plain.peak}"

    # Negative control: one step of training is seen by the comparison.
    short = train(tmp_path, world, "none", steps=STEPS - 1, tag="short")
    diffs = differences(short, plain)
    assert diffs and all(d.startswith("parameter ") for d in diffs), diffs


def test_dropout_masks_are_saved_not_recomputed(tmp_path):
    """The dropout model's blocks get their regions, and both dropouts stay
    in forward (the verifier rejects random ops in a region): backward
    reads the masks forward drew."""
    capture("dropout", 1, tmp_path)
    step = (tmp_path / "step.mlir").read_text()
    result = run([LOOM_OPT, tmp_path / "step.mlir", "--pass-pipeline",
                  "builtin.module(func.func(loom-remat{mode=full}))"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.count('loom.recompute "layers.') == 2
    assert step.count('"aten::native_dropout.default"') == 2
    assert result.stdout.count('"aten::native_dropout.default"') == 2


# PyTorch's own test Transformer with checkpoint_activations=True: every
# block runs under torch.utils.checkpoint, which capture keeps as
# loom.ac_region tags (small shapes, no dropout).
CHECKPOINTED_TRANSFORMER = ["--make-arg", "n_layers=2", "--make-arg", "dim=16", "--make-arg",
                            "n_heads=4", "--make-arg", "vocab_size=32", "--make-arg",
                            "max_seq_len=8", "--make-arg", "batch=4", "--make-arg", "dropout_p=0.0",
                            "--make-arg", "checkpoint_activations=True"]


def test_captured_checkpoint_regions_train_like_pytorch(tmp_path):
    """--remat=captured rebuilds the model's own checkpoint regions: it trains
    bitwise like the step without them, with a lower measured peak, and
    matches PyTorch eager (which ran the checkpoints) within --check's
    tolerance."""
    result = loom_capture([REPO / "bench" / "models" / "pt_test_transformer.py", "--out", tmp_path,
                  "--steps", str(STEPS), *CHECKPOINTED_TRANSFORMER])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    assert "loom.ac_region" in (tmp_path / "step.mlir").read_text()
    plain = train(tmp_path, 1, "none")
    captured = train(tmp_path, 1, "captured")
    assert differences(captured, plain) == []
    assert captured.peak < plain.peak, (captured.peak, plain.peak)
    result = run([LOOM_RUN, tmp_path / "captured.loomx", "--batches",
                  tmp_path / "batches.safetensors", "--steps", str(STEPS), "--no-progress",
                  "--check", tmp_path / "reference.json"])
    assert result.returncode == 0 and "PASS" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize("reentrant", ["true", "default"])
def test_reentrant_checkpoint_regions_train_like_pytorch(reentrant, tmp_path):
    """torch.utils.checkpoint with use_reentrant=True, and without the
    argument (PyTorch 2.9 warns and runs the reentrant variant), around
    blocks with dropout: capture traces each region as a non-reentrant one
    (the same step, op for op, as the use_reentrant=False model's), and
    --remat=captured trains bitwise equal to PyTorch eager, which ran the
    reentrant checkpoints and their dropout recomputes, with a lower peak
    than the step without regions."""
    model = REPO / "python" / "tests" / "remat_reentrant_model.py"
    steps = {}
    for variant in (reentrant, "false"):
        out = tmp_path / variant
        result = loom_capture([model, "--out", out, "--steps", str(STEPS), "--make-arg",
                               f"reentrant={variant}"])
        assert result.returncode == 0, result.stderr
        result = run([LOOM_IMPORT, out / "step.pt2", "-o", out / "step.mlir"])
        assert result.returncode == 0, result.stderr
        steps[variant] = (out / "step.mlir").read_text().replace(str(out), "OUT")
    assert steps[reentrant] == steps["false"]
    assert steps[reentrant].count("loom.ac_region") > 0
    out = tmp_path / reentrant
    plain, captured = train(out, 1, "none"), train(out, 1, "captured")
    assert differences(captured, plain) == []
    assert captured.peak < plain.peak, (captured.peak, plain.peak)
    result = run([LOOM_RUN, out / "captured.loomx", "--batches", out / "batches.safetensors",
                  "--steps", str(STEPS), "--no-progress", "--check", out / "reference.json",
                  "--rtol", "0", "--atol", "0"])
    assert result.returncode == 0 and "PASS" in result.stdout, result.stdout + result.stderr
