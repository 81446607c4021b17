"""FSDP steps reordered by loom-schedule on N real ranks, at parity with eager:
capture --split N -> loom-compile --dp=fsdp --schedule -> loom-run --nproc N --check.

The scheduler moves all-gathers ahead of the units that use them, leaves
reduce-scatters in flight until the optimizer needs them and runs compute
ahead of ops blocked on a collective. None of that may change a number: 20
steps, losses within 1e-5 relative of eager on the whole batch and final
parameters within 1e-5 * max(1, |ref|), as test_fsdp_parity.py checks the
unscheduled step; the collectives issued every step are the compiler's and
the memory limit given to the scheduler bounds the compiler's predicted peak
and every rank's measured peak.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from test_distributed_parity import (  # noqa: F401
    LOOM_COMPILE, LOOM_RUN, OPTIMIZERS, STEPS, capture_and_import, pytestmark, run, train)
from build_tools import LOOM_OPT, predicted_peaks
from test_fsdp_parity import compile_fsdp, count, issued
from test_prefetch_parity import in_flight_at_most


def predicted_peak(tmp_path, world: int, *flags: str) -> int:
    out = subprocess.run(
        [str(LOOM_COMPILE), str(tmp_path / "step.mlir"), "-o", "/dev/null",
         *OPTIMIZERS["gpt"][1], "--dp=fsdp", f"--world-size={world}", "--summary", *flags],
        capture_output=True, text=True, check=True).stderr
    return predicted_peaks(out)[0]


@pytest.mark.parametrize("world, reshard", [(2, "true"), (4, "auto")])
def test_scheduled_fsdp_gpt_at_parity(world, reshard, tmp_path):
    capture_and_import("gpt", world, tmp_path)
    plain = compile_fsdp("gpt", tmp_path, world, f"--reshard-after-forward={reshard}",
                         "--backward-prefetch=none")
    program = compile_fsdp("gpt", tmp_path, world, f"--reshard-after-forward={reshard}",
                           "--backward-prefetch=none", "--schedule")
    gathers = count(plain, "all_gather_start")
    scatters = count(plain, "reduce_scatter_start")
    # Same collectives, reordered so that they overlap.
    assert count(program, "all_gather_start") == gathers
    assert count(program, "reduce_scatter_start") == scatters
    assert in_flight_at_most(plain) == 1
    assert in_flight_at_most(program) == 2

    result = train(tmp_path, world)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    assert issued(result.stdout, "all_gather") == [gathers] * STEPS
    assert issued(result.stdout, "reduce_scatter") == [scatters] * STEPS


def test_schedule_memory_limit_bounds_the_artifact(tmp_path):
    """A limit at the unscheduled peak: the scheduled artifact's predicted
    peak stays within it (and without a limit it is higher)."""
    world = 2
    capture_and_import("gpt", world, tmp_path)
    base = ["--reshard-after-forward=true", "--backward-prefetch=none"]
    plain = predicted_peak(tmp_path, world, *base)
    free = predicted_peak(tmp_path, world, *base, "--schedule")
    bounded = predicted_peak(tmp_path, world, *base, "--schedule", f"--memory-limit={plain}")
    assert free > plain
    assert bounded <= plain
    low = subprocess.run(
        [str(LOOM_COMPILE), str(tmp_path / "step.mlir"), "-o", "/dev/null",
         *OPTIMIZERS["gpt"][1], "--dp=fsdp", f"--world-size={world}", *base, "--schedule",
         f"--memory-limit={plain // 2}"], capture_output=True, text=True)
    assert low.returncode != 0
    assert "is below @step's peak in program order" in low.stderr


def measured_peaks(trace) -> dict[int, int]:
    """The most tensor memory each rank measured in any step (the CPU
    allocator's reports, loom-run --trace: one pid per rank)."""
    peaks: dict[int, int] = {}
    for e in json.loads(trace.read_text())["traceEvents"]:
        if e.get("ph") == "X" and "peak_bytes" in e.get("args", {}):
            peaks[e["pid"]] = max(peaks.get(e["pid"], 0), e["args"]["peak_bytes"])
    return peaks


def test_schedule_memory_limit_holds_the_measured_peak(tmp_path):
    """The limit holds for what the runtime measures, not only for the
    compiler's prediction: GPT with FSDP on 2 ranks, scheduled under a limit
    at the unscheduled step's predicted peak, measures at most the limit on
    every rank and every step, and still trains at parity with eager. (Gloo's
    reduce-scatter reduces in a private copy of its input; the runtime
    reduces in the input itself when the program frees it after the start,
    docs/runtime.md.)"""
    world = 2
    capture_and_import("gpt", world, tmp_path)
    base = ["--reshard-after-forward=true", "--backward-prefetch=none"]
    limit = predicted_peak(tmp_path, world, *base)
    compile_fsdp("gpt", tmp_path, world, *base, "--schedule", f"--memory-limit={limit}")
    trace = tmp_path / "trace.json"
    result = run([LOOM_RUN, tmp_path / "step.loomx", "--batches", tmp_path / "batches.safetensors",
                  "--steps", str(STEPS), "--check", tmp_path / "reference.json", "--no-progress",
                  "--trace", trace], timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    peaks = measured_peaks(trace)
    assert sorted(peaks) == list(range(world)), peaks
    over = {rank: peak for rank, peak in peaks.items() if peak > limit}
    assert not over, f"measured peaks {peaks} above the limit {limit} on ranks {sorted(over)}"


def test_bounds_decide_as_sweeping_every_check(tmp_path):
    """The scheduler decides most memory checks by an upper and a lower bound
    of the completion's peak and sweeps only where they cannot tell: on GPT
    with FSDP on 4 ranks, at limits from program order's peak to the
    unlimited schedule's, the order is the one sweeping every check gives,
    and both the bounds and the sweeps decide some checks."""
    world = 4
    capture_and_import("gpt", world, tmp_path)
    fsdp = ["--loom-fsdp=mesh-shape=4 reshard-after-forward=true",
            "--loom-attach-optimizer=optimizer=adamw lr=0.001"]

    def schedule(limit: str, sweep: bool) -> tuple[str, str]:
        result = run([LOOM_OPT, tmp_path / "step.mlir", *fsdp,
                      f"--loom-schedule=device=cpu memory-limit={limit} report=true "
                      f"sweep-every-check={'true' if sweep else 'false'}"])
        assert result.returncode == 0, result.stderr
        return result.stdout, result.stderr

    _, report = schedule("none", False)
    peaks = [int(p) for p in re.findall(r"peak (\d+) B", report)]
    plain, free = peaks[0], peaks[1]
    assert free > plain, report
    counts = []
    for limit in (plain, (3 * plain + free) // 4, (plain + free) // 2):
        bounded, report = schedule(str(limit), False)
        swept, sweep_report = schedule(str(limit), True)
        assert bounded == swept, f"limit {limit}: the bounds decided a check differently"
        checks = re.search(r"memory checks:  (\d+) admitted and (\d+) refused by the bounds, "
                           r"(\d+) swept", report)
        counts.append(tuple(int(c) for c in checks.groups()))
        assert re.search(r"0 admitted and 0 refused by the bounds, [1-9]\d* swept", sweep_report)
    admitted, refused, swept = (sum(c) for c in zip(*counts))
    assert admitted > 0 and refused > 0 and swept > 0, counts
