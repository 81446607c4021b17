"""PyTorch's own test models (the DTensor test Transformer, FSDP's MLPStack, TransformerWithSharedParams and DoubleLinear with its unused module) under Loom's DDP, FSDP and HSDP, checked against PyTorch's own run (and the Transformer with recompute against PyTorch's fully_shard without).

Each case captures ``torch_test_models.py`` for N ranks with
``loom.capture --reference ddp|fsdp|hsdp``, so that ``reference.*`` hold
PyTorch's ``DistributedDataParallel`` / ``fully_shard`` run on N Gloo ranks
(the right reference for Adam and AdamW, docs/distributed.md), compiles it
with the same mode and no ``--units`` (the default units must be the
model's blocks: ``layers.N`` for the Transformer, ``0..2`` for the
Sequential MLPStack) and checks ``loom-run --check`` exactly (``--rtol 0
--atol 0``). Negative control: the same check against PyTorch's parameters
one step before the end fails.

The default matrix covers every setting once (CI budget); the full cross
product (4 models x DDP, FSDP auto/true/false/2, HSDP 2x2, accumulation x 2
and 4 ranks x AdamW/Adam/SGD) runs with ``LOOM_ZOO_FULL=1``::

    LOOM_ZOO_FULL=1 .venv/bin/python -m pytest -q python/tests/test_torch_test_models.py
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, needs_tools, predicted_peaks
from capture_cli import loom_capture

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODELS = Path(__file__).parent / "torch_test_models.py"
STEPS = 3
EXACT = ["--rtol", "0", "--atol", "0"]
# PyTorch's tests train these with Adam/AdamW at lr 1e-2 and SGD.
OPTIMIZERS = {"adamw": ["--optimizer", "adamw", "--lr", "1e-2"],
              "adam": ["--optimizer", "adam", "--lr", "1e-2"],
              "sgd": ["--optimizer", "sgd", "--lr", "1e-2"]}
# (reference mode, reshard-after-forward, microbatches, replicate size)
SETTINGS = {
    "ddp": ("ddp", "auto", 1, 1),
    "fsdp-auto": ("fsdp", "auto", 1, 1),
    "fsdp-true": ("fsdp", "true", 1, 1),
    "fsdp-false": ("fsdp", "false", 1, 1),
    "fsdp-2": ("fsdp", "2", 1, 1),
    "hsdp-2x2": ("hsdp", "auto", 1, 2),
    "ddp-accumulate": ("ddp", "auto", 2, 1),
    "fsdp-accumulate": ("fsdp", "false", 2, 1),
}
# Every kind of setting once, each model and optimizer, both world sizes,
# within the CI budget (about 25 s a case); `auto` is `true` for the blocks.
DEFAULT = [
    ("transformer", "fsdp-auto", 2, "adamw"),
    ("mlpstack", "fsdp-2", 4, "adamw"),
    ("transformer", "hsdp-2x2", 4, "adam"),
    ("mlpstack", "ddp", 4, "sgd"),
    ("mlpstack", "fsdp-accumulate", 2, "adamw"),
    ("twsp", "fsdp-auto", 2, "adamw"),
    # lin2 receives no gradient: captured frozen; DDP's reference runs with
    # find_unused_parameters=True (without it, its second step fails).
    ("doublelinear", "ddp", 2, "adamw"),
    ("doublelinear", "fsdp-auto", 2, "adamw"),
]
# Left out of the full matrix: TransformerWithSharedParams under DDP on 4
# ranks with Adam/AdamW. nn.MultiheadAttention's key bias has a gradient
# that is zero but for rounding (a constant added to every key cancels in
# the softmax); Adam normalises that noise into lr-sized steps, so the 1-ulp
# summation-order difference of DDP's first-step bucket on 4 Gloo ranks
# (tolerance() below) becomes a 1e-2 difference in those 16 elements. SGD
# and every FSDP/HSDP setting are exact.
FULL = [(m, s, w, o) for m, s, w, o in
        itertools.product(("transformer", "mlpstack", "twsp", "doublelinear"), SETTINGS, (2, 4), OPTIMIZERS)
        if not (s == "fsdp-2" and w == 2) and not (s == "hsdp-2x2" and w == 2)
        and not (m == "twsp" and s.startswith("ddp") and w == 4 and o != "sgd")]
CASES = FULL if os.environ.get("LOOM_ZOO_FULL") == "1" else DEFAULT
UNITS = {"transformer": "layers.0, layers.1, <root>", "mlpstack": "0, 1, 2, <root>",
         "doublelinear": "<root>",
         "twsp": "transformer.encoder.layers.0, transformer.encoder.layers.1, "
                 "transformer.decoder.layers.0, transformer.decoder.layers.1, <root>"}


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600,
                          **kwargs)


def tolerance(mode: str, world: int) -> list[str]:
    """Exact, except DDP on 4 ranks: losses and parameters end up to 1 ulp
    from PyTorch's DDP after 3 steps (1.2e-7 at 1.0), because DDP's first
    step reduces its bucket in parameter order and Loom's in the order
    backward produces the gradients, and Gloo's 4-rank all-reduce sums an
    element in an order that depends on its offset (docs/distributed.md,
    "PyTorch's test models"). 1e-6 relative is 8 ulps; AdamW's
    normalised step turns a 1-ulp gradient difference on a small gradient
    into up to 1.04e-7 (measured, at |ref| 0.088), hence atol 2e-7, still
    five orders below one lr-1e-2 step."""
    return ["--rtol", "1e-6", "--atol", "2e-7"] if mode == "ddp" and world > 2 else EXACT


def check(artifact: Path, out: Path, world: int, reference: Path, tol: list[str],
          *extra) -> subprocess.CompletedProcess:
    return run([LOOM_RUN, artifact, "--nproc", str(world), "--batches",
                out / "batches.safetensors", "--steps", str(STEPS), "--check", reference,
                "--no-progress", *tol, *extra])


@pytest.mark.parametrize("model, setting, world, optimizer", CASES,
                         ids=["-".join(map(str, c)) for c in CASES])
def test_pytorch_test_model_equals_pytorch(model, setting, world, optimizer, tmp_path):
    mode, reshard, microbatches, replicate = SETTINGS[setting]
    batch = 16 if world * microbatches > 4 else 8
    result = loom_capture([MODELS, "--out", tmp_path,
                  "--steps", str(STEPS), "--split", str(world), "--microbatches",
                  str(microbatches), "--make-arg", f"model={model}", "--make-arg",
                  f"batch={batch}", *OPTIMIZERS[optimizer], "--reference", mode,
                  "--replicate-size", str(replicate), "--reshard-after-forward", reshard])
    assert result.returncode == 0, result.stdout + result.stderr
    reference = json.loads((tmp_path / "reference.json").read_text())
    assert reference["reference"].startswith("PyTorch ")

    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    flags = ["--dp=replicate"] if mode == "ddp" else ["--dp=fsdp",
                                                      f"--reshard-after-forward={reshard}"]
    if mode == "hsdp":
        flags.append(f"--replicate-size={replicate}")
    artifact = tmp_path / "step.loomx"
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", artifact, "--summary", *flags])
    assert result.returncode == 0, result.stderr
    if mode != "ddp":
        assert f"fsdp units (default: the model's repeated blocks): {UNITS[model]}" in result.stderr

    # The kernels' own temporaries (the CPU attention backward's) measured
    # on one step, for the peak prediction (loom run --measure-workspace).
    workspace = tmp_path / "workspace.json"
    result = run([LOOM_RUN, artifact, "--nproc", str(world), "--batches",
                  tmp_path / "batches.safetensors", "--steps", "1", "--no-progress",
                  "--kernel-workspace", workspace])
    assert result.returncode == 0, result.stdout + result.stderr
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", artifact, "--summary", *flags,
                  f"--kernel-workspace={workspace}"])
    assert result.returncode == 0, result.stderr
    predicted = set(predicted_peaks(result.stderr))
    assert len(predicted) == 1, result.stderr  # every rank runs the same program

    tol = tolerance(mode, world)
    report = tmp_path / "memory.jsonl"
    result = check(artifact, tmp_path, world, tmp_path / "reference.json", tol,
                   "--memory-report", report)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within rtol " in result.stdout
    assert "PASS" in result.stdout
    # Every rank's every step holds what the compiler predicts with the
    # measured workspace (the gathered parameters each in storage of their
    # own: TransformerWithSharedParams's batch-norm weight, one element per
    # rank, was a view that kept its unit's whole gathered buffer alive,
    # 1,896 B above the prediction).
    measured = {(r["rank"], r["step"]): r["tracked_peak_bytes"]
                for r in map(json.loads, report.read_text().splitlines())}
    assert len(measured) == world * STEPS
    assert set(measured.values()) == predicted, (measured, predicted)

    # Negative control: one optimizer step fewer is caught by the same check.
    result = check(artifact, tmp_path, world, tmp_path / "one-step-short" / "reference.json", tol)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout and "FAIL" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--reference", "fsdp"], "--reference fsdp needs --split N with N > 1"),
    (["--split", "4", "--reference", "hsdp", "--replicate-size", "3"],
     "--replicate-size must be > 1 and divide --split 4, got 3"),
])
def test_distributed_reference_options_are_checked(args, message, tmp_path, capsys):
    # capture's own main in this process: a usage error stops before any work.
    from loom import capture

    with pytest.raises(SystemExit) as exc:
        capture.main([str(MODELS), "--out", str(tmp_path), *args])
    stderr = capsys.readouterr().err
    assert exc.value.code == 2 and message in stderr, stderr



SHARED_LAYER_MODEL = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, lin):
        super().__init__()
        self.lin = lin
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return x + torch.tanh(self.lin(self.norm(x)))


class Net(nn.Module):
    # ALBERT-style: every block reuses one Linear.
    def __init__(self):
        super().__init__()
        shared = nn.Linear(8, 8)
        self.layers = nn.ModuleList([Block(shared) for _ in range(2)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x.pow(2).mean()


def make():
    return Net(), [(torch.randn(4, 8),)]
"""


def test_a_reference_pytorch_refuses_is_a_clear_error(tmp_path):
    """A parameter shared by two blocks cannot be in two fully_shard units:
    PyTorch fails inside fully_shard ("FSDP requires named DeviceMesh
    dims"); the capture says which parameter and units, as the reference
    rank reported it, instead of a traceback."""
    model = tmp_path / "shared.py"
    model.write_text(SHARED_LAYER_MODEL)
    result = loom_capture([model, "--out", tmp_path / "out", "--steps", "1", "--split", "2",
                           "--reference", "fsdp"])
    assert result.returncode == 2, result.stdout + result.stderr
    assert ("loom.capture: error: --reference fsdp: PyTorch's run failed on rank "
            in result.stderr), result.stderr
    assert ("ValueError: parameter 'layers.1.lin.weight' is shared by the units 'layers.0' "
            "and 'layers.1'; PyTorch's fully_shard cannot put one parameter in two units"
            in result.stderr), result.stderr
    assert "Traceback" not in result.stderr


def test_units_sharing_a_parameter_are_found_as_fully_shard_would():
    """Siblings sharing a layer both manage it (refused); a unit nested in
    another is applied first and keeps its own parameters (fine), as
    fully_shard skips modules wrapped before."""
    import torch

    from loom.dp_reference import check_units_share_nothing

    shared = torch.nn.Linear(2, 2)
    siblings = torch.nn.ModuleDict({"a": torch.nn.Sequential(shared),
                                    "b": torch.nn.Sequential(shared)})
    with pytest.raises(ValueError, match="parameter 'b.0.weight' is shared by the units 'a' and 'b'"):
        check_units_share_nothing(siblings, ["a", "b"])
    nested = torch.nn.ModuleDict({"outer": torch.nn.Sequential(torch.nn.Linear(2, 2))})
    check_units_share_nothing(nested, ["outer.0", "outer"])
    # The other order: the outer unit took the inner one's parameters first.
    with pytest.raises(ValueError, match="'outer.0.weight' is shared by the units 'outer' and"):
        check_units_share_nothing(nested, ["outer", "outer.0"])


def test_recompute_on_the_test_transformer_equals_fully_shard(tmp_path):
    """Recompute on PyTorch's test Transformer with FSDP on 2 ranks, checked
    exactly against PyTorch's own ``fully_shard`` run (which recomputes
    nothing: recompute must not change a bit): ``--remat=full``,
    ``--remat=selective`` and ``--recompute-budget`` at the midpoint between
    the peak without recompute and the smallest feasible budget, and at that
    smallest one. Each measured peak equals the prediction, and the
    budgeted ones are within their budgets."""
    world = 2
    result = loom_capture([MODELS, "--out", tmp_path, "--steps", str(STEPS), "--split",
                           str(world), "--make-arg", "model=transformer", "--make-arg", "batch=8",
                           *OPTIMIZERS["adamw"], "--reference", "fsdp"])
    assert result.returncode == 0, result.stdout + result.stderr
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr

    def compile_step(tag: str, *flags: str) -> tuple[subprocess.CompletedProcess, int | None]:
        result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / f"{tag}.loomx",
                      "--summary", "--dp=fsdp", *flags])
        peaks = predicted_peaks(result.stderr)
        return result, peaks[0] if peaks else None

    result, plain = compile_step("plain")
    assert result.returncode == 0, result.stderr
    result, _ = compile_step("probe", "--recompute-budget=1B")
    assert result.returncode != 0
    least = int(re.search(r"the smallest feasible budget is .*?\((\d+) B\)",
                          result.stderr).group(1))
    assert least < plain
    variants = {"full": ["--remat=full"], "selective": ["--remat=selective"],
                "mid": [f"--recompute-budget={(plain + least) // 2}B"],
                "least": [f"--recompute-budget={least}B"]}
    for tag, flags in variants.items():
        result, predicted = compile_step(tag, *flags)
        assert result.returncode == 0, result.stderr
        report = tmp_path / f"{tag}.memory.json"
        result = run([LOOM_RUN, tmp_path / f"{tag}.loomx", "--nproc", str(world), "--batches",
                      tmp_path / "batches.safetensors", "--steps", str(STEPS), "--check",
                      tmp_path / "reference.json", "--no-progress", "--memory-report", report,
                      *EXACT])
        assert result.returncode == 0 and "PASS" in result.stdout, \
            tag + result.stdout + result.stderr
        measured = max(json.loads(line)["tracked_peak_bytes"]
                       for line in report.read_text().splitlines() if line.strip())
        assert measured == predicted < plain, f"{tag}: measured {measured}, predicted {predicted}"
        if tag in ("mid", "least"):
            assert predicted <= int(flags[0].split("=")[1].rstrip("B"))
