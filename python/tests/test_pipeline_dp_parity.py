"""Pipelining composed with data parallelism (PP=2 x DDP=2 and PP=2 x FSDP=2 on 4 ranks, PP=2 x HSDP 2x2 on 8).

A step captured for one microbatch of one data-parallel rank (``loom.capture
--split 2 --microbatches M``) is compiled two ways:

- ``--pp=2 --dp=replicate``: the [pp, dp] mesh, rank = pp index * 2 + dp
  index; each pipeline rank's program runs on the two ranks of its row, each
  on its half of the batch, and averages its stage's gradients over "dp"
  once per step, after the stage's REDUCE_GRAD (DDP's no_sync on every
  backward but the last);
- ``--dp=replicate --world-size=2`` (no pipelining): two ranks, each
  accumulating its M microbatches, then DDP's all-reduce.

Both sum each rank's microbatch gradients in microbatch order with the same
kernels on the same rows, divide by M, and average two values per element
over Gloo, so for GPipe, 1F1B and Interleaved1F1B (backwards in microbatch
order) every loss and every final parameter must be EQUAL (tolerance 0),
given one ATen thread per rank. The buckets differ (one per stage instead
of one for the model), which does not change an elementwise average of two
values. Models: examples/mlp.py, examples/gpt.py (tied weights across
stages) and the MLPModule stack (pp_mlp_stack.py). The pipelined run also
passes ``loom-run --check`` against PyTorch eager on the whole batch
(reference.json).

PP x FSDP: ``--pp=2 --dp=fsdp`` shards each stage's parameters over "dp"
and, as PyTorch's schedule drives FSDP2 (UNSHARD, microbatch backwards with
no reduction and no reshard, REDUCE_GRAD), gathers every unit once per step
and reduce-scatters it once, after the division by M. The reference is
``--dp=fsdp --world-size=2`` without pipelining: the same gathered values,
the same accumulated sums, the same reduce-scatter per element, so every
loss and parameter must again be EQUAL. The trace shows one all-gather and
one reduce-scatter per unit per step on every rank, whatever M (the counts
PyTorch's ``test_composability`` relies on: FSDP's per-unit collectives are
independent of the microbatch count under pipelining).
"""

from __future__ import annotations

import collections
import json

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools
from test_pipeline_parity import STEPS, differences, run, train
from test_pipeline_parity import capture as pipeline_capture

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

torch = pytest.importorskip("torch")

# (model, schedule, microbatches)
CASES = [
    ("mlp", "GPipe", 2),
    ("stack", "1F1B", 4),
    # Tied embedding and head: the first stage sends its un-averaged
    # gradient to the last, where it is averaged over "dp" again, the same
    # two values.
    ("gpt", "1F1B", 2),
    ("stack", "Interleaved1F1B", 4),
]

# (model, schedule, microbatches, extra flags) with FSDP in each stage.
BF16 = ("--param-dtype=bf16", "--reduce-dtype=f32")
FSDP_CASES = [
    ("mlp", "1F1B", 4, ()),
    # Tied weights: each holder reduce-scatters the same reduced gradient.
    ("gpt", "GPipe", 2, ()),
    # Two stages per rank, the stack's layers one unit each; split backward.
    ("stack", "Interleaved1F1B", 4, ()),
    ("stack", "ZBVZeroBubble", 4, ()),
    # Mixed precision: activations and their gradients cross in bf16.
    ("gpt", "1F1B", 2, BF16),
    ("stack", "Interleaved1F1B", 4, BF16),
]


def capture(name: str, split: int, microbatches: int, out) -> None:
    pipeline_capture(name, microbatches, out, split=split)


@pytest.mark.parametrize("name, schedule, microbatches", CASES,
                         ids=[f"{n}-{s}-{m}mb" for n, s, m in CASES])
def test_pp_x_ddp_trains_like_ddp(name, schedule, microbatches, tmp_path):
    capture(name, 2, microbatches, tmp_path)
    ddp = train(tmp_path, "ddp", ["--dp=replicate", "--world-size=2"], 2)
    assert len(ddp.losses) == STEPS
    flags = ["--pp=2", f"--pp-schedule={schedule}", "--dp=replicate"]
    piped = train(tmp_path, "pp_ddp", flags, 4, check=True)
    assert differences(piped, ddp) == []

    if (name, schedule) == CASES[0][:2]:
        # Negative control (once, to keep the suite short): the comparison
        # sees one step of training.
        short = train(tmp_path, "short", flags, 4, steps=STEPS - 1)
        assert any(d.startswith("parameter ") for d in differences(short, ddp))


def collective_counts(run_dir, tag: str) -> dict:
    """Per rank, how many times each collective ran per unit (trace events
    named "<kind> <label>")."""
    trace = json.loads((run_dir / f"{tag}.trace.json").read_text())["traceEvents"]
    counts = collections.defaultdict(collections.Counter)
    for e in trace:
        kind = e.get("name", "").split(" ")[0]
        if e.get("ph") == "X" and kind in ("all_gather", "reduce_scatter"):
            counts[e["pid"]][e["name"]] += 1
    return counts


@pytest.mark.parametrize("name, schedule, microbatches, extra", FSDP_CASES,
                         ids=[f"{n}-{s}-{m}mb{'-bf16' if x else ''}"
                              for n, s, m, x in FSDP_CASES])
def test_pp_x_fsdp_trains_like_fsdp(name, schedule, microbatches, extra, tmp_path):
    capture(name, 2, microbatches, tmp_path)
    fsdp = train(tmp_path, "fsdp", ["--dp=fsdp", "--world-size=2", *extra], 2)
    assert len(fsdp.losses) == STEPS
    flags = ["--pp=2", f"--pp-schedule={schedule}", "--dp=fsdp", *extra]
    # bf16 runs are checked against the f32 eager reference elsewhere
    # (test_fsdp_parity.py); here equality with FSDP is the claim.
    piped = train(tmp_path, "pp_fsdp", flags, 4, check=not extra)
    assert differences(piped, fsdp) == []

    # Every unit of every rank: one all-gather and one reduce-scatter per
    # step, whatever the microbatch count.
    counts = collective_counts(tmp_path, "pp_fsdp")
    assert sorted(counts) == [0, 1, 2, 3], counts
    def per_unit(counter, kind):
        # "all_gather fsdp.all_gather:<root>" or "all_gather layers.0".
        return {n.split(" ", 1)[1].rsplit(":", 1)[-1]: c for n, c in counter.items()
                if n.startswith(kind)}

    for rank, counter in counts.items():
        gathered = per_unit(counter, "all_gather")
        reduced = per_unit(counter, "reduce_scatter")
        assert gathered and set(gathered.values()) == {STEPS}, (rank, counter)
        assert gathered == reduced, (rank, counter)

    if (name, schedule, microbatches, extra) == FSDP_CASES[0]:
        # Negative control: one step fewer differs.
        short = train(tmp_path, "short", flags, 4, steps=STEPS - 1)
        assert any(d.startswith("parameter ") for d in differences(short, fsdp))


def test_pp_x_hsdp_trains_like_hsdp(tmp_path):
    """HSDP inside each stage: ``--pp=2 --dp=fsdp --replicate-size=2`` on 8
    ranks (mesh [pp 2, replicate 2, shard 2]; each stage's units
    reduce-scattered over "shard" and all-reduced over "replicate" once per
    step) trains the MLPModule stack (1F1B, 2 microbatches) EQUAL to HSDP 2 x
    2 without pipelining on 4 ranks: the same gathered values, the same
    accumulated sums, the same two reductions per element. Every unit: one
    all-gather and one reduce-scatter per step on every rank. It also passes
    loom-run's check against eager on the whole batch."""
    capture("stack", 4, 2, tmp_path)
    hsdp = train(tmp_path, "hsdp", ["--dp=fsdp", "--world-size=4", "--replicate-size=2"], 4)
    flags = ["--pp=2", "--pp-schedule=1F1B", "--dp=fsdp", "--replicate-size=2"]
    piped = train(tmp_path, "pp_hsdp", flags, 8, check=True)
    assert differences(piped, hsdp) == []
    counts = collective_counts(tmp_path, "pp_hsdp")
    assert sorted(counts) == list(range(8)), counts
    for rank, counter in counts.items():
        kinds = collections.Counter(n.split(" ")[0] for n in counter.elements())
        assert kinds["all_gather"] == kinds["reduce_scatter"] > 0, (rank, counter)
        assert set(counter.values()) == {STEPS}, (rank, counter)
    # Negative control: FSDP over each row's 4 data-parallel ranks (one
    # reduce-scatter of 4 values instead of two reductions of 2) already
    # differs, so the comparison sees the reduction's structure.
    flat = train(tmp_path, "pp_fsdp4", ["--pp=2", "--pp-schedule=1F1B", "--dp=fsdp"], 8)
    assert differences(flat, hsdp) != []


def test_pp_x_ddp_world_size_must_divide(tmp_path):
    capture("mlp", 2, 2, tmp_path)
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "x.loomx", "--pp=2",
                  "--dp=replicate", "--world-size=3"])
    assert result.returncode != 0
    assert "contradicts the run configuration" in result.stderr, result.stderr


def test_pp_x_hsdp_equals_pytorch_hsdp(tmp_path):
    """PP 2 x HSDP 2 x 2 on 8 ranks against PyTorch's own ``fully_shard`` on
    a (replicate 2, shard 2) mesh on 4 Gloo ranks (``--reference hsdp``, no
    pipelining): GPT (tied embedding across the stages), 1F1B, 2
    microbatches, AdamW, 3 steps, every loss and parameter bitwise equal."""
    from test_run_command import loom_run

    result = loom_run(REPO / "examples" / "gpt.py", "--make-arg", "batch=8", "--nproc", "8",
                      "--pp=2", "--dp", "fsdp", "--replicate-size=2", "--microbatches", "2",
                      "--steps", "3", "--reference", "hsdp", "--check", "--rtol", "0",
                      "--atol", "0", out=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    reference = json.loads((tmp_path / "reference.json").read_text())["reference"]
    assert reference.startswith("PyTorch fully_shard HSDP (2 x 2) on 4 Gloo ranks"), reference
