"""Pipelined training with activation checkpointing trains bit for bit like without it.

examples/gpt.py, captured for 4 microbatches, is compiled for 2 pipeline
ranks with ``--remat=full`` and without, under one schedule of each kind:
1F1B (one stage per rank), Interleaved1F1B (two stages per rank) and
ZBVZeroBubble (two stages per rank, each backward split into its
input-gradient part I and weight-gradient part W). Recompute re-runs the
same forward kernels on the same saved inputs, so every loss and every
final parameter after 3 AdamW steps must be EQUAL (tolerance 0), with one
ATen thread per rank. The recompute must really happen, once per block and
microbatch: the program with it holds the 2 blocks' 2 LayerNorms once more
per microbatch (for ZBV: in I only, W reuses I's recomputed values). A
run one step short differs, so the comparison can fail.

GPT has 2 blocks; the 4-stage schedules cut it at
``layers.0,layers.1,norm`` (embeddings | block 0 | block 1 | norm and the
tied head).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools
from capture_cli import loom_capture

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

STEPS, MICROBATCHES, PP = 3, 4, 2
FOUR_STAGES = ["--pp-boundaries=layers.0,layers.1,norm"]
SCHEDULES = {"1F1B": [], "Interleaved1F1B": FOUR_STAGES, "ZBVZeroBubble": FOUR_STAGES}
# LayerNorms of the step per microbatch: ln1 and ln2 of 2 blocks, and the
# final norm (not checkpointed).
BLOCK_NORMS, ALL_NORMS = 4, 5


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300,
                            **kwargs)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def gpt(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpt")
    loom_capture([REPO / "examples" / "gpt.py", "--out", out,
         "--steps", STEPS, "--microbatches", MICROBATCHES])
    run([LOOM_IMPORT, out / "step.pt2", "-o", out / "step.mlir"])
    return out


def layer_norms(out: Path, flags: list) -> int:
    """How many LayerNorm instructions the compiled programs hold."""
    program = out / "program.json"
    run([LOOM_COMPILE, out / "step.mlir", "-o", program, "--emit=program", *flags])
    return len(re.findall(r'"kernel":"aten::native_layer_norm(\.default)?"', program.read_text()))


def train(out: Path, tag: str, flags: list, steps: int = STEPS) -> tuple[list, dict]:
    """The loss of every step (from the trace) and the final parameters."""
    artifact = out / f"{tag}.loomx"
    run([LOOM_COMPILE, out / "step.mlir", "-o", artifact, *flags])
    run([LOOM_RUN, artifact, "--nproc", PP, "--batches", out / "batches.safetensors",
         "--steps", steps, "--no-progress", "--threads", 1, "--trace", out / f"{tag}.trace.json",
         "--save-params", out / f"{tag}.safetensors"])
    events = json.loads((out / f"{tag}.trace.json").read_text())["traceEvents"]
    losses = sorted({(e["name"], e["args"]["loss"]) for e in events
                     if e.get("ph") == "X" and "loss" in e.get("args", {})})
    return losses, safetensors_torch.load_file(str(out / f"{tag}.safetensors"))


def equal(a: tuple[list, dict], b: tuple[list, dict]) -> bool:
    return a[0] == b[0] and sorted(a[1]) == sorted(b[1]) and all(
        torch.equal(a[1][k], b[1][k]) for k in a[1])


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_pipeline_remat_trains_like_without(gpt, schedule):
    flags = [f"--pp={PP}", f"--pp-schedule={schedule}", *SCHEDULES[schedule]]
    assert (layer_norms(gpt, [*flags, "--remat=full"])
            == layer_norms(gpt, flags) + BLOCK_NORMS * MICROBATCHES
            == (ALL_NORMS + BLOCK_NORMS) * MICROBATCHES)
    plain = train(gpt, f"{schedule}-none", flags)
    assert len(plain[0]) == STEPS
    remat = train(gpt, f"{schedule}-full", [*flags, "--remat=full"])
    assert equal(remat, plain), (remat[0], plain[0])
    if schedule == "1F1B":  # negative control, once: the comparison sees one step
        short = train(gpt, "short", [*flags, "--remat=full"], steps=STEPS - 1)
        assert not equal(short, plain)
