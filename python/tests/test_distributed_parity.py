"""Data-parallel parity: capture --split N -> loom-compile --dp=replicate -> loom-run --nproc N.

Each example is captured with the per-rank batch (``--split N``; the eager
reference trains on the whole batch on one device), compiled with DDP
(``loom-replicate``: gradients averaged with one all-reduce per bucket) for
N ranks, and trained 20 steps on N processes. The (averaged) losses must
match eager's within 1e-5 relative and the final parameters within
1e-5 * max(1, |ref|) (``loom-run --check``), as PyTorch's replicate tests
compare DDP with a single-device model. The collectives the runtime
issued every step must be the ones the compiler placed: one all-reduce
per bucket. With ``--microbatches M`` each rank also accumulates M
microbatches before the one reduction per step.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from run_output import issued
from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools
from capture_cli import loom_capture

STEPS = 20


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)


pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODELS = {
    "mlp": REPO / "examples" / "mlp.py",
    "gpt": REPO / "examples" / "gpt.py",
    "vit": REPO / "examples" / "vit.py",
}
# (capture flags, loom-compile flags) of the optimizer each model trains with.
# ViT trains with SGD: the gradient of its attention's key bias is zero in
# exact arithmetic (softmax ignores a constant added to every key), so in
# float32 it is rounding noise whose value depends on the summation order;
# Adam divides by its magnitude and turns different noise (one batch on one
# device vs. two half batches averaged) into different lr-sized steps.
OPTIMIZERS = {
    "mlp": (["--optimizer", "adamw"], ["--optimizer=adamw", "--lr=0.001"]),
    "gpt": (["--optimizer", "adamw"], ["--optimizer=adamw", "--lr=0.001"]),
    "vit": (["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"],
            ["--optimizer=sgd", "--lr=0.05", "--momentum=0.9"]),
}


# Captures are the slow part (about 10 s each): one per (model, split,
# microbatches, optimizer) for the whole session, shared by this module and
# test_fsdp_parity.py; each test gets hard links to the files in its own
# directory and writes its artifact there.
_CAPTURES: dict[tuple, Path] = {}
_CAPTURED_FILES = ("step.mlir", "step.weights.safetensors", "batches.safetensors", "reference.json",
                   "reference.safetensors")


def capture_and_import(name: str, split: int, out: Path, microbatches: int = 1,
                       optimizer: list[str] | None = None, batch: int | None = None) -> None:
    """Capture MODELS[name] for `split` ranks (with OPTIMIZERS[name] unless
    `optimizer` gives the capture flags; `batch` rows per global batch
    instead of the example's) and import it into `out`."""
    flags = list(optimizer if optimizer is not None else OPTIMIZERS[name][0])
    if batch is not None:
        flags += ["--make-arg", f"batch={batch}"]
    key = (name, split, microbatches, tuple(flags))
    if key not in _CAPTURES:
        cache = Path(tempfile.mkdtemp(prefix=f"loom-capture-{name}-{split}-"))
        atexit.register(shutil.rmtree, cache, ignore_errors=True)
        result = loom_capture([MODELS[name], "--out", cache,
                      "--steps", str(STEPS), *flags, "--split", str(split),
                      "--microbatches", str(microbatches)])
        assert result.returncode == 0, result.stderr
        assert json.loads((cache / "reference.json").read_text())["split"] == split
        result = run([LOOM_IMPORT, cache / "step.pt2", "-o", cache / "step.mlir"])
        assert result.returncode == 0, result.stderr
        _CAPTURES[key] = cache
    out.mkdir(parents=True, exist_ok=True)
    for f in _CAPTURED_FILES:
        os.link(_CAPTURES[key] / f, out / f)


def compile_ddp(name: str, out: Path, world: int, *extra: str) -> dict:
    flags = [*OPTIMIZERS[name][1], "--dp=replicate", f"--world-size={world}", *extra]
    result = run([LOOM_COMPILE, out / "step.mlir", "-o", out / "step.loomx", *flags])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_COMPILE, out / "step.mlir", "--emit=program", *flags])
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def train(out: Path, world: int) -> subprocess.CompletedProcess:
    return run([LOOM_RUN, out / "step.loomx", "--nproc", str(world), "--batches",
                out / "batches.safetensors", "--steps", str(STEPS), "--check",
                out / "reference.json", "--no-progress"], timeout=600)


# Each model once, on 2 or 4 ranks: the DDP lowering does not depend on the
# world size beyond the mesh (test/Transforms pins it for both), and PyTorch's
# real DDP is trained next to Loom on 2 and 4 ranks in test_torch_dp_parity.py
# and test_torch_test_models.py.
@pytest.mark.parametrize("name, split", [("gpt", 2), ("mlp", 4), ("vit", 4)])
def test_ddp_trains_at_parity_with_eager(name, split, tmp_path):
    capture_and_import(name, split, tmp_path)
    program = compile_ddp(name, tmp_path, split)
    assert program["version"] == 8 and program["world_size"] == split
    assert program["mesh"] == {"shape": [split], "axes": ["dp"]}
    starts = [i for i in program["programs"][0]["instructions"] if i["op"] == "all_reduce_start"]
    assert starts and all(s["reduce"] == "sum" and s["axes"] == ["dp"] for s in starts)

    result = train(tmp_path, split)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    # The runtime issued exactly the compiler's all-reduces on every step.
    assert issued(result.stdout, "all_reduce") == [len(starts)] * STEPS
    losses = json.loads((tmp_path / "reference.json").read_text())["losses"]
    assert losses[-1] < losses[0]


def test_ddp_one_all_reduce_per_gradient_without_buckets(tmp_path):
    """bucket-cap-mb=0: one all-reduce per parameter, still at parity."""
    capture_and_import("gpt", 2, tmp_path)
    program = compile_ddp("gpt", tmp_path, 2, "--bucket-cap-mb=0")
    starts = [i for i in program["programs"][0]["instructions"] if i["op"] == "all_reduce_start"]
    assert len(starts) == len(program["state"]) // 2  # AdamW: two state tensors per parameter
    result = train(tmp_path, 2)
    assert result.returncode == 0, result.stdout + result.stderr
    assert issued(result.stdout, "all_reduce") == [len(starts)] * STEPS


def loom_buckets(program: dict) -> list[list[str]]:
    """The gradients of each DDP bucket of a compiled step without optimizer:
    the parameter whose grad output the bucket's last instruction writing
    that slot belongs to (``ddp.bucketK.unflatten`` or ``.wait``), in the
    order the bucket's pieces are written."""
    targets = {o["slot"]: o["target"] for o in program["outputs"] if o["role"] == "grad"}
    last_writer = {}
    for index, inst in enumerate(program["programs"][0]["instructions"]):
        written = inst.get("results", []) + ([inst["result"]] if "result" in inst else [])
        for slot in written:
            for s in slot if isinstance(slot, list) else [slot]:  # Tensor[] results
                last_writer[s] = (index, inst.get("name", ""))
    buckets: dict[int, list[tuple[int, str]]] = {}
    for slot, target in targets.items():
        index, name = last_writer[slot]
        m = re.fullmatch(r"ddp\.bucket(\d+)\.(unflatten|wait)", name)
        assert m, f"the gradient of {target} comes from {name!r}, not a DDP bucket"
        buckets.setdefault(int(m.group(1)), []).append((index, target))
    return [[t for _, t in sorted(buckets[k])] for k in sorted(buckets)]


@pytest.fixture(scope="module")
def bucket_model_step(tmp_path_factory) -> Path:
    """ddp_buckets_model.py captured for 2 ranks and imported, once."""
    out = tmp_path_factory.mktemp("ddp_buckets")
    result = loom_capture([BUCKET_MODEL, "--out", out, "--steps", "1",
                  "--split", "2"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, out / "step.pt2", "-o", out / "step.mlir"])
    assert result.returncode == 0, result.stderr
    return out / "step.mlir"


BUCKET_MODEL = Path(__file__).parent / "ddp_buckets_model.py"


@pytest.mark.parametrize("cap", [None, 0.5])
def test_ddp_buckets_equal_pytorch_ddp(cap, bucket_model_step):
    """loom-replicate's buckets (which gradients, in which bucket, in which
    order) equal the ones PyTorch DDP's Reducer uses after its first
    iteration (ddp_buckets.py), for DDP's default caps (1 MiB first
    bucket, then 25 MiB) and for bucket_cap_mb=0.5 (which DDP also uses for
    the first bucket)."""
    flags = ["--optimizer=none", "--dp=replicate", "--world-size=2"]
    if cap is not None:
        flags.append(f"--bucket-cap-mb={cap}")
    result = run([LOOM_COMPILE, bucket_model_step, "--emit=program", *flags])
    assert result.returncode == 0, result.stderr
    ours = loom_buckets(json.loads(result.stdout))

    cmd = [sys.executable, Path(__file__).parent / "ddp_buckets.py", BUCKET_MODEL]
    if cap is not None:
        cmd += ["--bucket-cap-mb", str(cap)]
    result = run(cmd)
    assert result.returncode == 0, result.stderr
    theirs = json.loads(result.stdout.strip().splitlines()[-1])
    assert ours == theirs
    assert len(ours) == (2 if cap is None else 3)


# On 4 ranks x 2 microbatches the examples' 4-row batches cannot be split:
# those runs capture 8-row batches (`make(batch=8)`).
@pytest.mark.parametrize("name, split, microbatches, batch",
                         [("gpt", 1, 2, None), ("mlp", 2, 2, None), ("gpt", 4, 2, 8),
                          ("vit", 4, 2, 8)])
def test_gradient_accumulation_trains_at_parity_with_eager(name, split, microbatches, batch,
                                                           tmp_path):
    """--microbatches M: each rank runs M microbatches and averages their
    gradients (loom-accumulate-gradients), then DDP reduces once per step,
    as DDP with no_sync on all but the last microbatch; the reference is
    still eager on the whole batch."""
    capture_and_import(name, split, tmp_path, microbatches, batch=batch)
    flags = [*OPTIMIZERS[name][1], f"--microbatches={microbatches}"]
    if split > 1:
        flags += ["--dp=replicate", f"--world-size={split}"]
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "step.loomx", *flags])
    assert result.returncode == 0, result.stderr
    program = json.loads(run([LOOM_COMPILE, tmp_path / "step.mlir", "--emit=program",
                              *flags]).stdout)
    slices = [i for i in program["programs"][0]["instructions"]
              if i["op"] == "aten" and i["kernel"] == "aten::slice" and
              i.get("name", "").startswith("microbatch")]
    assert len(slices) == microbatches * 2  # two batch inputs per microbatch
    starts = [i for i in program["programs"][0]["instructions"] if i["op"] == "all_reduce_start"]
    assert len(starts) == (1 if split > 1 else 0)
    result = train(tmp_path, split)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    assert issued(result.stdout, "all_reduce") == [len(starts)] * STEPS
