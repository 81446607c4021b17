"""Measured op times (`op-times`): a loom-run trace prices the ops it ran.

The artifact records each ATen instruction's kernel signature
(`signature`, spelled as the kernel workspace profile spells it), loom-run's
trace carries it, and the cost model of loom-simulate, loom-schedule and
loom-sac-ilp replaces the roofline of every op with the same signature by
the median duration the trace measured (the first step, a warm-up, left
out). GPT on one rank:

- every ATen instruction of the artifact has a `signature`, and every ATen
  event of the trace carries its instruction's;
- loom-simulate with the trace prices every op of the step by it: its
  compute time equals, to rounding, the sum over one step's ATen events of
  the median of their signature in the later steps, computed here
  from the trace (negative control: the roofline's compute time differs);
- under a recompute budget with made-up times in which GELU costs 20 times
  a matmul (so the ILP keeps GELU and recomputes the attention), the
  measured peak stays within the budget and equals the prediction, and
  training is bitwise the same as without recompute. The ILP used to run
  such a block's region where backward first reads what it recomputes,
  while the region runs where backward first reads the transposed weights
  it takes again: its model was 17-58 KB under the measured peak, the
  search ran out of bounds and fell back to recomputing everything (0.1 ms
  in these times, at this budget as at the smallest feasible one). Now it
  recomputes less than at the smallest budget (0.0145 against 0.0235 ms);
- the trace's optimizer events carry the update's signature, and the
  updates of the step with the optimizer attached are priced by them too;
- a trace of another step, or a file that is no trace, is an error naming
  the file (and the event), not a silent fall-back to the roofline.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_OPT, LOOM_RUN, needs_tools, predicted_peaks
from test_remat_parity import STEPS, Run, capture, differences, run
from test_sac_ilp import RECOMPUTED, SMALLEST

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_OPT, LOOM_RUN)


@pytest.fixture(scope="module")
def gpt(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpt")
    capture("gpt", 1, out)
    result = run([LOOM_COMPILE, out / "step.mlir", "-o", out / "plain.loomx", "--summary"])
    assert result.returncode == 0, result.stderr
    train(out, "plain")
    return out


def train(out: Path, tag: str) -> Run:
    result = run([LOOM_RUN, out / f"{tag}.loomx", "--batches", out / "batches.safetensors",
                  "--steps", str(STEPS), "--no-progress", "--trace", out / f"{tag}.trace.json",
                  "--save-params", out / f"{tag}.safetensors"])
    assert result.returncode == 0, result.stdout + result.stderr
    return Run(out, tag)


def aten_events(trace: Path) -> list[dict]:
    events = json.loads(trace.read_text())["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("op") == "aten"]


def simulate(step: Path, *options: str) -> dict:
    result = run([LOOM_OPT, step, "-o", os.devnull,
                  f"--loom-simulate=device=cpu json=true {' '.join(options)}"])
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    report = json.JSONDecoder().raw_decode(out[out.index("{"):])[0]
    return report


def test_trace_carries_signatures_and_prices_every_op(gpt):
    emitted = run([LOOM_COMPILE, gpt / "step.mlir", "--emit=program"])
    assert emitted.returncode == 0, emitted.stderr
    instructions = json.loads(emitted.stdout)["programs"][0]["instructions"]
    aten = [i for i in instructions if i["op"] == "aten"]
    assert aten and all(re.fullmatch(rf"{re.escape(i['kernel'])}\.{i['overload']}\(.*\)->\(.*\)",
                                     i["signature"]) for i in aten)

    events = aten_events(gpt / "plain.trace.json")
    assert len(events) == len(aten) * STEPS
    for e in events:
        inst = instructions[e["args"]["index"]]
        assert e["args"]["signature"] == inst["signature"]
        assert e["args"]["kernel"] == f"{inst['kernel']}.{inst['overload']}"

    # The median of each signature over the steps after the first,
    # summed over one step's instructions.
    durations = defaultdict(list)
    for e in events:
        if e["args"]["step"] > 0:
            durations[e["args"]["signature"]].append(e["dur"])
    count = Counter(e["args"]["signature"] for e in events
                    if e["args"]["step"] == 1)
    expected = sum(statistics.median(durations[k]) * n for k, n in count.items()) * 1e-6

    measured = simulate(gpt / "step.mlir", f"op-times={gpt / 'plain.trace.json'}")
    assert measured["measured_ops"] == measured["ops"] == sum(count.values())
    assert measured["compute_time"] == pytest.approx(expected, rel=1e-9)
    roofline = simulate(gpt / "step.mlir")
    assert roofline["measured_ops"] == 0
    assert roofline["compute_time"] != pytest.approx(expected, rel=1e-3)


def test_optimizer_updates_are_priced_by_the_trace(gpt):
    """The trace's optimizer events carry the update's signature (the
    algorithm, its settings and the parameter), and loom-simulate on the
    step with the optimizer attached prices every update by it as it prices
    the ATen ops: the compute time is the sum of the medians of one step's
    ATen and optimizer events (negative control: without the trace's
    optimizer events, the updates keep the roofline's time and it differs)."""
    trace = json.loads((gpt / "plain.trace.json").read_text())["traceEvents"]
    updates = [e for e in trace if e.get("ph") == "X" and e.get("args", {}).get("op") ==
               "optimizer"]
    assert updates and all(re.fullmatch(r"optimizer::adamw\.forloop_decay\(f32\[[0-9,]*\]\)->\(\)",
                                        e["args"]["signature"]) for e in updates)
    priced = [e for e in trace if e.get("ph") == "X" and e.get("args", {}).get("op") in
              ("aten", "optimizer")]
    durations = defaultdict(list)
    for e in priced:
        if e["args"]["step"] > 0:
            durations[e["args"]["signature"]].append(e["dur"])
    count = Counter(e["args"]["signature"] for e in priced if e["args"]["step"] == 1)
    expected = sum(statistics.median(durations[k]) * n for k, n in count.items()) * 1e-6

    def simulate_updates(times: Path) -> dict:
        result = run([LOOM_OPT, gpt / "step.mlir", "-o", os.devnull,
                      "--pass-pipeline=builtin.module(func.func(loom-attach-optimizer),"
                      f"loom-simulate{{device=cpu json=true op-times={times}}})"])
        assert result.returncode == 0, result.stderr
        out = result.stdout + result.stderr
        return json.JSONDecoder().raw_decode(out[out.index("{"):])[0]

    report = simulate_updates(gpt / "plain.trace.json")
    assert report["measured_ops"] == report["ops"] == sum(count.values())
    assert report["compute_time"] == pytest.approx(expected, rel=1e-9)

    aten_only = gpt / "aten-only.trace.json"
    aten_only.write_text(json.dumps({"traceEvents": [e for e in trace if e.get("args", {})
                                                     .get("op") != "optimizer"]}))
    report = simulate_updates(aten_only)
    assert report["measured_ops"] == report["ops"] - len(updates) // STEPS
    assert report["compute_time"] != pytest.approx(expected, rel=1e-3)


def made_up_trace(gpt: Path, path: Path) -> None:
    """A trace of the plain artifact in which GELU (and its backward) costs
    20 us, a matmul 1 us and any other kernel 0.5 us, two steps."""
    emitted = run([LOOM_COMPILE, gpt / "step.mlir", "--emit=program"])
    assert emitted.returncode == 0, emitted.stderr
    events = []
    for step in (0, 1):
        for index, inst in enumerate(json.loads(emitted.stdout)["programs"][0]["instructions"]):
            if inst["op"] != "aten":
                continue
            name = inst["kernel"].split("::")[1]
            dur = 20.0 if name.startswith("gelu") else 1.0 if "mm" in name else 0.5
            events.append({"ph": "X", "name": inst.get("name", name), "pid": 0, "tid": 1,
                           "ts": 0, "dur": dur,
                           "args": {"op": "aten", "step": step, "index": index,
                                    "kernel": f"{inst['kernel']}.{inst['overload']}",
                                    "signature": inst["signature"]}})
    path.write_text(json.dumps({"traceEvents": events}))


def test_recompute_under_measured_times_keeps_the_budget_and_trains_bitwise(gpt):
    times = gpt / "made-up.trace.json"
    made_up_trace(gpt, times)
    plain = Run(gpt, "plain")
    probe = run([LOOM_COMPILE, gpt / "step.mlir", "-o", gpt / "x.loomx",
                 "--recompute-budget=1B", f"--op-times={times}"])
    least = int(SMALLEST.search(probe.stderr).group(1))
    tightest = run([LOOM_COMPILE, gpt / "step.mlir", "-o", gpt / "least.loomx",
                    f"--recompute-budget={least}B", f"--op-times={times}", "--recompute-report"])
    assert tightest.returncode == 0, tightest.stderr
    least_ms = float(RECOMPUTED.search(tightest.stderr).group(2))

    budget = least + (plain.peak - least) // 4
    result = run([LOOM_COMPILE, gpt / "step.mlir", "-o", gpt / "measured.loomx", "--summary",
                  f"--recompute-budget={budget}B", f"--op-times={times}", "--recompute-report"])
    assert result.returncode == 0, result.stderr
    ms = float(RECOMPUTED.search(result.stderr).group(2))
    assert 0 < ms < least_ms, result.stderr
    predicted = predicted_peaks(result.stderr)[0]
    measured = train(gpt, "measured")
    assert measured.peak == predicted <= budget
    assert differences(measured, plain) == []


@pytest.mark.parametrize("content, message", [
    ("{", r"bad\.json:1:\d+: invalid JSON"),
    ('{"traceEvents": 3}', r"bad\.json: expected a Chrome trace"),
    ('{"traceEvents": [{"ph": "X", "args": {"op": "aten", "signature": "aten::mm.default()->()",'
     ' "step": 0}}]}', r"bad\.json: traceEvents\[0\]\.dur: expected a non-negative number"),
    ('{"traceEvents": [{"ph": "X", "dur": 1, "args": {"op": "aten", "kernel": '
     '"aten::mm.default", "step": 0}}]}', r"bad\.json: no ATen instruction in the trace "
                                          r"records its 'signature'"),
    ('{"traceEvents": [{"ph": "X", "dur": 1, "args": {"op": "aten", "signature": '
     '"aten::mm.default()->()", "step": 0}}]}', r"op-times: none of the \d+ ATen ops here "
                                                r"was traced in '.*bad\.json'"),
])
def test_a_trace_that_does_not_fit_is_an_error(gpt, tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    for cmd in ([LOOM_OPT, gpt / "step.mlir", "-o", os.devnull,
                 f"--loom-simulate=device=cpu op-times={bad}"],
                [LOOM_COMPILE, gpt / "step.mlir", "-o", tmp_path / "x.loomx",
                 "--recompute-budget=10MB", f"--op-times={bad}"]):
        result = run(cmd)
        assert result.returncode != 0
        assert re.search(message, result.stderr), result.stderr
        assert "Stack dump" not in result.stderr


def test_a_missing_trace_is_an_error(gpt, tmp_path):
    result = run([LOOM_OPT, gpt / "step.mlir", "-o", os.devnull,
                  f"--loom-simulate=device=cpu op-times={tmp_path / 'none.json'}"])
    assert result.returncode != 0
    assert "loom-simulate: op-times: cannot read op times" in result.stderr
