"""``--recompute-budget`` with ``--pp``: each pipeline rank's program keeps
the budget, measured, and training is bitwise that of the pipeline without
recompute.

examples/gpt.py, captured for 4 microbatches, on 2 pipeline ranks under
1F1B (one stage per rank), Interleaved1F1B and ZBVZeroBubble (two stages per
rank, cut at ``layers.0,layers.1,norm``; ZBV's first rank runs the
embedding's and the head's stages, no block, and must keep the budget as it
stands); and captured for 2 ranks of 2 microbatches, on
2 pipeline ranks of FSDP over 2 (``--dp=fsdp``, 4 ranks, 1F1B). Each rank runs its own program, with its own
peak: under 1F1B the first rank holds the activations of more microbatches
in flight. loom-sac-ilp decides per program (the blocks of one program
change no other's peak), on a stage cut pinned before it decides. For three
budgets, from the larger of the programs' peaks without recompute down to
the smallest feasible one (the largest of the smallest each program names
when asked for 1 byte), on every rank the measured peak (the CPU
allocator's, ``loom-run --trace``) is at most the budget and equals the
prediction of ``loom-compile --summary`` for that rank's program, no rank's
peak rises when the budget falls, and every loss and final parameter equals
the run without recompute (tolerance 0). A budget one byte under the
smallest feasible one is refused, naming it.
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

STEPS, PP = 3, 2
# name: (capture --split, --microbatches, compile flags)
CASES = {"1F1B": (1, 4, ["--pp-schedule=1F1B"]),
         "Interleaved1F1B": (1, 4, ["--pp-schedule=Interleaved1F1B",
                                    "--pp-boundaries=layers.0,layers.1,norm"]),
         "ZBVZeroBubble": (1, 4, ["--pp-schedule=ZBVZeroBubble",
                                  "--pp-boundaries=layers.0,layers.1,norm"]),
         "1F1B-fsdp": (2, 2, ["--pp-schedule=1F1B", "--dp=fsdp"])}
PROGRAM = re.compile(r"program '\w+' ranks \[([0-9, ]+)\]: .*?predicted peak memory (\d+) bytes")
SMALLEST = re.compile(r"program '\w+': budget .*? is infeasible: the smallest feasible budget is "
                      r".*?\((\d+) B\)")


def run(cmd: list) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    made = {}

    def capture(split: int, microbatches: int) -> Path:
        if (split, microbatches) not in made:
            out = tmp_path_factory.mktemp("gpt")
            loom_capture([REPO / "examples" / "gpt.py", "--out", out, "--steps", STEPS,
                          "--split", split, "--microbatches", microbatches])
            assert run([LOOM_IMPORT, out / "step.pt2", "-o", out / "step.mlir"]).returncode == 0
            made[(split, microbatches)] = out
        return made[(split, microbatches)]

    return capture


def compile_step(out: Path, tag: str, flags: list) -> dict[int, int]:
    """Compiles out/TAG.loomx; the predicted peak of each rank's program."""
    result = run([LOOM_COMPILE, out / "step.mlir", "-o", out / f"{tag}.loomx", "--summary",
                  *flags])
    assert result.returncode == 0, result.stderr
    peaks = {}
    for ranks, peak in PROGRAM.findall(result.stderr):
        for rank in ranks.split(","):
            peaks[int(rank)] = int(peak)
    return peaks


def train(out: Path, tag: str) -> tuple[dict, list, dict]:
    """Each rank's highest measured peak, every step's loss and the final
    parameters."""
    result = run([LOOM_RUN, out / f"{tag}.loomx", "--batches", out / "batches.safetensors",
                  "--steps", STEPS, "--no-progress", "--threads", 1,
                  "--trace", out / f"{tag}.trace.json", "--save-params",
                  out / f"{tag}.safetensors"])
    assert result.returncode == 0, result.stdout + result.stderr
    events = [e for e in json.loads((out / f"{tag}.trace.json").read_text())["traceEvents"]
              if e.get("ph") == "X" and "loss" in e.get("args", {})]
    peaks = {}
    for e in events:
        peaks[e["pid"]] = max(peaks.get(e["pid"], 0), e["args"]["peak_bytes"])
    losses = sorted({(e["name"], e["args"]["loss"]) for e in events})
    return peaks, losses, safetensors_torch.load_file(str(out / f"{tag}.safetensors"))


@pytest.mark.parametrize("schedule", list(CASES))
def test_every_rank_keeps_the_budget_bitwise(captures, schedule):
    split, microbatches, case_flags = CASES[schedule]
    gpt = captures(split, microbatches)
    flags = [f"--pp={PP}", *case_flags]
    plain_predicted = compile_step(gpt, f"{schedule}-plain", flags)
    assert sorted(plain_predicted) == list(range(PP * split))
    plain_peaks, plain_losses, plain_params = train(gpt, f"{schedule}-plain")
    assert plain_peaks == plain_predicted
    assert len(plain_losses) == STEPS

    result = run([LOOM_COMPILE, gpt / "step.mlir", "-o", gpt / "x.loomx", *flags,
                  "--recompute-budget=1B"])
    assert result.returncode != 0
    least = max(int(b) for b in SMALLEST.findall(result.stderr))
    most = max(plain_predicted.values())
    assert least < most, result.stderr

    history = []
    for budget in (most, (most + least) // 2, least):
        tag = f"{schedule}-{budget}"
        predicted = compile_step(gpt, tag, [*flags, f"--recompute-budget={budget}B"])
        peaks, losses, params = train(gpt, tag)
        assert peaks == predicted, f"budget {budget}: measured {peaks}, predicted {predicted}"
        assert max(peaks.values()) <= budget, f"budget {budget}: measured {peaks}"
        assert losses == plain_losses, f"budget {budget}"
        assert sorted(params) == sorted(plain_params) and all(
            torch.equal(params[k], plain_params[k]) for k in params), f"budget {budget}"
        history.append(peaks)
    for rank in range(PP * split):
        ranks = [peaks[rank] for peaks in history]
        assert ranks == sorted(ranks, reverse=True), (rank, history)
    assert history[-1] != plain_peaks, "the smallest budget must recompute"

    result = run([LOOM_COMPILE, gpt / "step.mlir", "-o", gpt / "x.loomx", *flags,
                  f"--recompute-budget={least - 1}B"])
    assert result.returncode != 0
    assert f"({least} B)" in result.stderr, result.stderr
