"""bench/sac.py's bound from loom-sac-ilp's trade-off curve
(docs/bench/sac.md, "Reading the numbers"), on a report by hand.

Four identical blocks whose curve has corners (100 B, 10 ms), (300 B,
4 ms) and (700 B, 0 ms); the decision puts two blocks at each of the first
two (800 B kept, 28 ms) and peaks 200 B under its budget. A plan within the
budget keeps at most 1,000 B at the peak, 250 B a block, where the curve is
at 10 - 6 * 150 / 200 = 5.5 ms: at least 22 ms. Full AC (every block at the
lean end, 10 ms) with each block's 100 B freed and spent on the curve
(200 B: 7 ms) saves at most 4 * 3 = 12 ms: a 100 ms step becomes 88 ms.

With a module around the blocks too ('norm', one copy, corners (300 B,
0 ms) and (100 B, 2 ms)), saved whole (300 B): it can give up 200 B, so a
plan keeps at most 1,200 B in the blocks, 300 B each, where the curve is at
4 ms: at least 16 ms. At full AC's peak its 200 B join the blocks' 400 B:
150 B more each, from 100 to 250 B, where the curve is at 5.5 ms, saving
4 * 4.5 = 18 ms, less the norm's 2 ms at its lean end: 16 ms, a 100 ms
step becomes 84 ms.
"""

from __future__ import annotations

import sys

import pytest

from build_tools import REPO

sys.path.insert(0, str(REPO / "bench"))
import sac  # noqa: E402

REPORT = """\
loom-sac-ilp: budget 1.17 KiB (1200 B): predicted peak 1000 B (1000 B); recompute 4 of 12 forward ops (28.0000 ms on H100 SXM5 80GB; 0 must be saved); 1 distinct of 4 blocks; 2 block policies; peak at 'aten::_log_softmax_backward_data' in the root module
loom-sac-ilp: block 'layers.0' (4 alike): 3 corners (bytes kept, ms recomputed): (700, 0.0000) (300, 4.0000) (100, 10.0000)
loom-sac-ilp: block 'layers.0': blocks x (bytes kept, ms recomputed): 2 x (100, 10.0000) 2 x (300, 4.0000)
"""


def test_report_parses():
    ilp = sac.parse_ilp_report(REPORT)
    assert ilp["predicted_peak"] == 1000 and ilp["model_recompute_ms"] == 28.0
    assert ilp["peak_op"] == "aten::_log_softmax_backward_data"
    assert ilp["curves"] == {"layers.0": {"alike": 4, "corners": [[700, 0.0], [300, 4.0],
                                                                  [100, 10.0]]}}
    assert ilp["choices"] == {"layers.0": [[2, 100, 10.0], [2, 300, 4.0]]}


def test_curve_is_the_hull_between_corners():
    corners = [[700, 0.0], [300, 4.0], [100, 10.0]]
    assert sac.on_curve(corners, 250) == pytest.approx(5.5)
    assert sac.on_curve(corners, 500) == pytest.approx(2.0)
    assert sac.on_curve(corners, 50) == 10.0  # below the lean end: the lean end
    assert sac.on_curve(corners, 900) == 0.0


def bounds(report: str, capsys) -> tuple[dict, str]:
    """curve_bounds of one ILP row (budget 1200 B, peak 1000 B, 28 ms) with
    `report`, beside a full AC step of 100 ms: the row and what it printed."""
    rows = [{"policy": "ilp", "budget": 1200, "peak": 1000, "recompute_s": 0.028,
             "ilp": sac.parse_ilp_report(report)}]
    sac.curve_bounds(rows, {"full": {"step_s": 0.1}})
    return rows[0], capsys.readouterr().out


def test_bounds_by_hand(capsys):
    row, out = bounds(REPORT, capsys)
    assert row["curve_least_recompute_ms"] == pytest.approx(22.0)
    assert "recomputes at least 22.0 ms (the ILP 28.0)" in out
    assert "at most 12.0 ms less recompute, step 88.0 ms for 100.0 (+13.64%" in out


NORM = """\
loom-sac-ilp: block 'norm' (1 alike): 2 corners (bytes kept, ms recomputed): (300, 0.0000) (100, 2.0000)
loom-sac-ilp: block 'norm': blocks x (bytes kept, ms recomputed): 1 x (300, 0.0000)
"""


def test_bounds_with_a_module_around_the_blocks(capsys):
    row, out = bounds(REPORT + NORM, capsys)
    assert row["curve_least_recompute_ms"] == pytest.approx(16.0)
    assert "at most 12.0 ms less recompute, step 88.0 ms" in out
    assert "and what norm keep beyond their lean ends (200 B, for 2.00 ms)" in out
    assert "at most 16.0 ms less recompute, step 84.0 ms for 100.0 (+19.05%" in out
