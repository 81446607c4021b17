"""scripts/render_timeline.py: SVG timelines of Chrome traces, with overlap numbers checked by hand.

The hand-made trace has one rank with a compute track and a comm track:

    compute: fwd [0, 10)  issue [10, 12)  fwd [12, 30)  wait [30, 40)  bwd [40, 60)
    comm:    all_gather [11, 40)

so the collective is in flight 29 us, of which compute (not the issue or the
wait) runs during [12, 30): 18 us overlapped; the wait exposes 10 us.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "render_timeline.py"
SVG = "{http://www.w3.org/2000/svg}"


def meta(pid, tid, name):
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def x(name, ts, dur, tid, cat, pid=0, **args):
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "cat": cat,
            "args": args}


def trace(pid=0, offset=0.0):
    return [
        meta(pid, 0, "steps"), meta(pid, 1, "compute"), meta(pid, 2, "comm"),
        x("step 0", offset + 0, 60, 0, "step", pid),
        x("mm", offset + 0, 10, 1, "forward", pid, phase="forward"),
        x("all_gather_start", offset + 10, 2, 1, "comm_issue", pid, op="all_gather_start"),
        x("mm_1", offset + 12, 18, 1, "forward", pid, phase="forward"),
        x("wait", offset + 30, 10, 1, "comm_wait", pid, op="wait"),
        x("mm_2", offset + 40, 20, 1, "backward", pid, phase="backward"),
        x("all_gather layers.0", offset + 11, 29, 2, "comm", pid, kind="all_gather"),
        x("step 1", offset + 100, 10, 0, "step", pid),
        x("mm", offset + 100, 10, 1, "forward", pid, phase="forward"),
    ]


def render(tmp_path: Path, events, *extra: str):
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"traceEvents": events}))
    out = tmp_path / "t.svg"
    r = subprocess.run([sys.executable, str(SCRIPT), str(src), "-o", str(out), *extra],
                       capture_output=True, text=True)
    return r, out


def rects(svg: Path) -> list[ET.Element]:
    root = ET.parse(svg).getroot()  # well-formed XML
    assert root.tag == f"{SVG}svg"
    return [r for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]


def test_overlap_numbers_and_picture(tmp_path: Path) -> None:
    r, out = render(tmp_path, trace(), "--step", "0")
    assert r.returncode == 0, r.stderr
    assert "rank 0: in flight 0.029 ms, overlapped 0.018 ms, exposed 0.010 ms" in r.stdout
    events = rects(out)
    # The step, five compute-track events and the collective; step 1 is outside the window.
    titles = sorted(e.find(f"{SVG}title").text for e in events)
    assert titles == sorted(["step 0 (0.06 ms)", "mm (0.01 ms)", "all_gather_start (0.002 ms)",
                             "mm_1 (0.018 ms)", "wait (0.01 ms)", "mm_2 (0.02 ms)",
                             "all_gather layers.0 (0.029 ms)"])
    colours = {e.find(f"{SVG}title").text.split(" (")[0]: e.get("fill") for e in events}
    assert colours["wait"] != colours["mm"] != colours["mm_2"] != colours["all_gather layers.0"]
    # The collective spans [11, 40) of the 60 us window: its bar starts at
    # 11/60 of the plot and is 29/60 of it wide.
    bar = next(e for e in events if e.find(f"{SVG}title").text.startswith("all_gather layers.0"))
    step = next(e for e in events if e.find(f"{SVG}title").text.startswith("step 0"))
    plot_x, plot_w = float(step.get("x")), float(step.get("width"))
    assert abs((float(bar.get("x")) - plot_x) / plot_w - 11 / 60) < 1e-3
    assert abs(float(bar.get("width")) / plot_w - 29 / 60) < 1e-3
    text = out.read_text()
    for label in ("rank 0 · steps", "rank 0 · compute", "rank 0 · comm",
                  "overlapped with compute 0.018 ms (62%)"):
        assert label in text
    # Time axis: round ticks from the window's start (10 us apart over 60 us).
    ticks = [t.text for t in ET.parse(out).getroot().iter(f"{SVG}text") if t.text.endswith(" ms")
             and t.get("text-anchor") == "middle"]
    assert ticks == ["0 ms", "0.01 ms", "0.02 ms", "0.03 ms", "0.04 ms", "0.05 ms", "0.06 ms"]


def test_ranks_and_windows(tmp_path: Path) -> None:
    events = trace(0) + trace(1, offset=5.0) + [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "rank 1"}}]
    r, out = render(tmp_path, events, "--start", "0", "--end", "0.035")
    assert r.returncode == 0, r.stderr
    # Rank 1 is shifted by 5 us: its collective runs [16, 45), cut at 35.
    assert "rank 0: in flight 0.024 ms, overlapped 0.018 ms, exposed 0.005 ms" in r.stdout
    assert "rank 1: in flight 0.019 ms, overlapped 0.018 ms, exposed 0.000 ms" in r.stdout
    r, out = render(tmp_path, events, "--pid", "1", "--step", "0")
    assert r.returncode == 0, r.stderr
    assert "rank 0" not in r.stdout and "rank 1: in flight 0.029 ms" in r.stdout


def test_errors(tmp_path: Path) -> None:
    r, _ = render(tmp_path, trace(), "--step", "7")
    assert r.returncode == 2 and "no event named 'step 7' on a 'steps' track" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"events": []}')
    r = subprocess.run([sys.executable, str(SCRIPT), str(bad), "-o", str(tmp_path / "x.svg")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "not a Chrome trace" in r.stderr
    r, _ = render(tmp_path, [meta(0, 0, "steps")])
    assert r.returncode == 2 and "no complete" in r.stderr


def test_adjacent_small_events_coalesce(tmp_path: Path) -> None:
    # 200 back-to-back 1 us forward kernels, a wait, then 1 backward kernel.
    events = [meta(0, 1, "compute")]
    events += [x(f"k{i}", i, 1, 1, "forward", phase="forward") for i in range(200)]
    events += [x("wait", 200, 100, 1, "comm_wait", op="wait"), x("b", 300, 100, 1, "backward", phase="backward")]
    r, out = render(tmp_path, events)
    assert r.returncode == 0, r.stderr
    titles = [e.find(f"{SVG}title").text for e in rects(out)]
    assert titles == ["200 forward events, k0 .. k199 (0.2 ms)", "wait (0.1 ms)", "b (0.1 ms)"]
