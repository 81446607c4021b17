#!/usr/bin/env python3
"""Render a Chrome trace-event JSON (loom-run --trace, loom-opt --loom-simulate timeline) as an SVG timeline.

    scripts/render_timeline.py TRACE.json -o timeline.svg [--step N] [--start MS --end MS]
        [--pid P ...] [--width PX] [--title TEXT]

One row per track (process x thread, in the trace's sort order): compute
events coloured by phase (forward, backward, optimizer), collective issues
and waits on the compute track, and collectives in flight on the comm
tracks. With ``--step N`` the window is the event named ``step N`` (of the
first rank that has it); ``--start``/``--end`` (milliseconds on the trace's
clock) narrow it further. Under the picture, per rank: the time collectives
were in flight in the window, the part of it during which the rank's compute
track was running compute (not issuing or waiting for a collective:
overlapped), and the time the compute track spent waiting for a collective
(exposed).

Pure Python (standard library only). Exit status 2 with a message for a file
that is not a trace or a step that is not in it.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

PROG = "render_timeline"

COLOURS = {
    "forward": "#4e79a7",
    "backward": "#f28e2b",
    "optimizer": "#59a14f",
    "compute": "#8cb0d3",
    "comm": "#b07aa1",
    "issue": "#9c755f",
    "wait": "#e15759",
    "step": "#bab0ac",
    "other": "#cccccc",
}
LEGEND = [("forward", "forward"), ("backward", "backward"), ("optimizer", "optimizer"),
          ("issue", "collective issue"), ("wait", "wait (exposed comm)"),
          ("comm", "collective in flight")]


class TraceError(Exception):
    pass


@dataclass
class Event:
    name: str
    ts: float  # microseconds
    dur: float
    kind: str  # a COLOURS key
    args: dict


@dataclass
class Track:
    pid: int
    tid: int
    name: str
    sort: tuple
    events: list[Event] = field(default_factory=list)

    @property
    def is_comm(self) -> bool:
        return self.name.startswith("comm") or any(e.kind == "comm" for e in self.events)

    @property
    def is_steps(self) -> bool:
        return self.name == "steps"


def classify(e: dict, track_name: str) -> str:
    cat = str(e.get("cat", ""))
    if cat == "step":
        return "step"
    if cat in ("comm_wait", "wait") or (e.get("args") or {}).get("op") == "wait":
        return "wait"
    if cat == "comm_issue":
        return "issue"
    if cat == "comm" or track_name.startswith("comm"):
        return "comm"
    phase = (e.get("args") or {}).get("phase") or cat
    if phase in ("forward", "backward", "optimizer"):
        return phase
    return "compute" if cat in ("compute", "aten") else "other"


def load(path: Path) -> list[Track]:
    try:
        root = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise TraceError(f"{path}: cannot read a JSON trace: {exc}") from exc
    events = root.get("traceEvents") if isinstance(root, dict) else root
    if not isinstance(events, list):
        raise TraceError(f"{path}: not a Chrome trace (no traceEvents list)")
    names: dict[tuple[int, int], str] = {}
    sorts: dict[tuple[int, int], int] = {}
    proc_sort: dict[int, int] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "M":
            continue
        key = (e.get("pid", 0), e.get("tid", 0))
        args = e.get("args") or {}
        if e.get("name") == "thread_name":
            names[key] = str(args.get("name", ""))
        elif e.get("name") == "thread_sort_index":
            sorts[key] = int(args.get("sort_index", 0))
        elif e.get("name") == "process_sort_index":
            proc_sort[e.get("pid", 0)] = int(args.get("sort_index", 0))
    tracks: dict[tuple[int, int], Track] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            key = (int(e.get("pid", 0)), int(e.get("tid", 0)))
            ts, dur = float(e["ts"]), float(e.get("dur", 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"{path}: malformed complete event {e!r}") from exc
        if key not in tracks:
            name = names.get(key, f"thread {key[1]}")
            sort = (proc_sort.get(key[0], key[0]), key[0], sorts.get(key, key[1]), key[1])
            tracks[key] = Track(key[0], key[1], name, sort)
        track = tracks[key]
        track.events.append(Event(str(e.get("name", "")), ts, dur, classify(e, track.name),
                                  e.get("args") or {}))
    if not tracks:
        raise TraceError(f"{path}: the trace has no complete (\"X\") events")
    return sorted(tracks.values(), key=lambda t: t.sort)


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def intersect(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if a < b:
            out.append((a, b))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


def clip(intervals, t0, t1):
    return [(max(a, t0), min(b, t1)) for a, b in intervals if b > t0 and a < t1]


@dataclass
class Summary:
    pid: int
    in_flight_us: float
    overlapped_us: float
    exposed_us: float


def summarise(tracks: list[Track], t0: float, t1: float) -> list[Summary]:
    out = []
    for pid in sorted({t.pid for t in tracks}):
        mine = [t for t in tracks if t.pid == pid and not t.is_steps]
        comm = union(clip([(e.ts, e.ts + e.dur) for t in mine if t.is_comm for e in t.events
                           if e.kind == "comm"], t0, t1))
        if not comm:
            continue
        # Compute is what the rank runs besides issuing and waiting.
        busy = union(clip([(e.ts, e.ts + e.dur) for t in mine if not t.is_comm for e in t.events
                           if e.kind not in ("wait", "issue")], t0, t1))
        waits = union(clip([(e.ts, e.ts + e.dur) for t in mine if not t.is_comm for e in t.events
                            if e.kind == "wait"], t0, t1))
        out.append(Summary(pid, length(comm), length(intersect(comm, busy)), length(waits)))
    return out


def coalesce(events: list[Event], x) -> list[list[Event]]:
    """Runs of events of one kind that no pixel separates (gap under half a
    pixel) become one bar: thousands of small kernels stay readable and the
    file small."""
    groups: list[list[Event]] = []
    end = 0.0
    for e in events:
        # Bookkeeping (frees, events) narrower than a pixel joins its neighbour.
        tiny_other = e.kind == "other" and x(e.ts + e.dur) - x(e.ts) < 0.5
        if groups and (groups[-1][0].kind == e.kind or tiny_other) and x(e.ts) - x(end) < 0.5:
            groups[-1].append(e)
        else:
            groups.append([e])
            end = e.ts + e.dur
        end = max(end, e.ts + e.dur)
    return groups


def nice_step(span_us: float, target_ticks: int = 8) -> float:
    raw = span_us / target_ticks
    scale = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1.0
    for m in (1, 2, 5, 10):
        if raw <= m * scale:
            return m * scale
    return 10 * scale


def fmt_ms(us: float) -> str:
    ms = us / 1000
    return f"{ms:.3f}".rstrip("0").rstrip(".") if ms < 10 else f"{ms:.1f}".rstrip("0").rstrip(".")


def render(tracks: list[Track], t0: float, t1: float, width: int, title: str,
           summaries: list[Summary]) -> str:
    label_w, row_h, bar_h, top = 150, 26, 18, 48
    plot_w = width - label_w - 20
    span = max(t1 - t0, 1e-9)
    rows = [t for t in tracks if any(e.ts < t1 and e.ts + e.dur > t0 for e in t.events)]
    legend_y = top + row_h * len(rows) + 34
    height = legend_y + 30 + 18 * len(summaries) + 10

    def x(t: float) -> float:
        return label_w + (min(max(t, t0), t1) - t0) / span * plot_w

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{label_w}" y="20" font-size="15" font-weight="bold">{html.escape(title)}</text>']
    step = nice_step(span)
    axis_y = top + row_h * len(rows) + 4
    k = 0
    while k * step <= span + 1e-9:  # ticks at round times from the window's start
        tx = x(t0 + k * step)
        out.append(f'<line x1="{tx:.1f}" y1="{top - 6}" x2="{tx:.1f}" y2="{axis_y}" stroke="#e6e6e6"/>')
        out.append(f'<text x="{tx:.1f}" y="{axis_y + 14}" text-anchor="middle" fill="#555">'
                   f'{fmt_ms(k * step)} ms</text>')
        k += 1
    last_pid = None
    for i, t in enumerate(rows):
        y = top + i * row_h
        if t.pid != last_pid and last_pid is not None:
            out.append(f'<line x1="0" y1="{y - 3}" x2="{width}" y2="{y - 3}" stroke="#999"/>')
        last_pid = t.pid
        out.append(f'<text x="{label_w - 8}" y="{y + bar_h - 4}" text-anchor="end">'
                   f'{html.escape(f"rank {t.pid} · {t.name}")}</text>')
        out.append(f'<rect x="{label_w}" y="{y}" width="{plot_w}" height="{bar_h}" fill="#f7f7f7"/>')
        for group in coalesce([e for e in sorted(t.events, key=lambda e: e.ts)
                               if e.ts + e.dur > t0 and e.ts < t1], x):
            first, last = group[0], group[-1]
            x0, x1 = x(first.ts), x(max(e.ts + e.dur for e in group))
            w = max(x1 - x0, 0.6)
            busy = sum(e.dur for e in group)
            tip = (f"{first.name} ({fmt_ms(first.dur)} ms)" if len(group) == 1 else
                   f"{len(group)} {first.kind} events, {first.name} .. {last.name} "
                   f"({fmt_ms(busy)} ms)")
            out.append(f'<rect x="{x0:.2f}" y="{y}" width="{w:.2f}" height="{bar_h}" '
                       f'fill="{COLOURS[first.kind]}" stroke="white" stroke-width="0.3">'
                       f'<title>{html.escape(tip)}</title></rect>')
            if t.is_comm and len(group) == 1 and x1 - x0 > 7 * len(first.name):
                out.append(f'<text x="{x0 + 3:.1f}" y="{y + bar_h - 5}" fill="white" font-size="10">'
                           f'{html.escape(first.name)}</text>')
    lx = label_w
    for key, text in LEGEND:
        out.append(f'<rect x="{lx}" y="{legend_y - 10}" width="12" height="12" fill="{COLOURS[key]}"/>')
        out.append(f'<text x="{lx + 16}" y="{legend_y}">{html.escape(text)}</text>')
        lx += 30 + 7 * len(text)
    for k, s in enumerate(summaries):
        pct = 100 * s.overlapped_us / s.in_flight_us if s.in_flight_us else 0.0
        line = (f"rank {s.pid}: collectives in flight {fmt_ms(s.in_flight_us)} ms, overlapped with "
                f"compute {fmt_ms(s.overlapped_us)} ms ({pct:.0f}%), waited (exposed) "
                f"{fmt_ms(s.exposed_us)} ms of the {fmt_ms(t1 - t0)} ms shown")
        out.append(f'<text x="{label_w}" y="{legend_y + 26 + 18 * k}" fill="#333">{html.escape(line)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True, help="SVG file to write")
    ap.add_argument("--step", type=int, help="show the window of the event named 'step N'")
    ap.add_argument("--start", type=float, help="window start, ms on the trace's clock")
    ap.add_argument("--end", type=float, help="window end, ms on the trace's clock")
    ap.add_argument("--pid", type=int, action="append", help="only these processes (ranks)")
    ap.add_argument("--width", type=int, default=1200)
    ap.add_argument("--title", help="default: the trace's file name and window")
    args = ap.parse_args(argv)
    try:
        tracks = load(args.trace)
        if args.pid:
            tracks = [t for t in tracks if t.pid in args.pid]
            if not tracks:
                raise TraceError(f"{args.trace}: no events of process(es) {args.pid}")
        t0 = min(e.ts for t in tracks for e in t.events)
        t1 = max(e.ts + e.dur for t in tracks for e in t.events)
        if args.step is not None:
            name = f"step {args.step}"
            found = [e for t in tracks if t.is_steps for e in t.events if e.name == name]
            if not found:
                raise TraceError(f"{args.trace}: no event named '{name}' on a 'steps' track")
            t0 = min(e.ts for e in found)
            t1 = max(e.ts + e.dur for e in found)
        if args.start is not None:
            t0 = max(t0, args.start * 1000)
        if args.end is not None:
            t1 = min(t1, args.end * 1000)
        if not t1 > t0:
            raise TraceError(f"empty window [{t0 / 1000:g}, {t1 / 1000:g}] ms")
    except TraceError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    title = args.title or (f"{args.trace.name}" + (f", step {args.step}" if args.step is not None else ""))
    summaries = summarise(tracks, t0, t1)
    args.out.write_text(render(tracks, t0, t1, args.width, title, summaries))
    for s in summaries:
        print(f"rank {s.pid}: in flight {s.in_flight_us / 1000:.3f} ms, overlapped "
              f"{s.overlapped_us / 1000:.3f} ms, exposed {s.exposed_us / 1000:.3f} ms")
    print(f"{PROG}: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
