"""Where the tests find Loom's built tools, and what happens when one is missing.

Run by hand (``pytest python/tests/...``) a test whose tool is not built
skips. Under ``make test`` (ctest sets ``LOOM_BUILD_DIR``) the build is part
of the promise, so a missing tool fails every test that needs it, naming the
tool: a suite that silently skips its parity tests would pass without
checking anything.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("LOOM_BUILD_DIR", REPO / "build"))
LOOM_IMPORT = BUILD / "bin" / "loom-import"
LOOM_OPT = BUILD / "bin" / "loom-opt"
LOOM_COMPILE = BUILD / "bin" / "loom-compile"
LOOM_RUN = BUILD / "runtime" / "bin" / "loom-run"

MISSING_MARK = "loom_missing_tools"


def tools_required() -> bool:
    """True under `make test`, where a missing tool is a failure."""
    return "LOOM_BUILD_DIR" in os.environ


def missing_tools_message(*tools: Path, problem: str | None = None) -> str | None:
    missing = [str(t) for t in tools if not Path(t).exists()]
    if missing:
        return f"not built: {', '.join(missing)} (run `make build`)"
    return problem


def needs_tools(*tools: Path, problem: str | None = None) -> pytest.MarkDecorator:
    """A module or test mark: skip (by hand) or fail (under `make test`)
    when one of `tools` does not exist or `problem` says why they cannot
    be used."""
    message = missing_tools_message(*tools, problem=problem)
    if message is None:
        return pytest.mark.skipif(False, reason="the tools are built")
    if tools_required():
        return getattr(pytest.mark, MISSING_MARK)(message)
    return pytest.mark.skip(reason=message)


def require_tools(*tools: Path) -> None:
    """The same inside a fixture or a test."""
    message = missing_tools_message(*tools)
    if message is None:
        return
    if tools_required():
        pytest.fail(f"{message}; make test needs every tool", pytrace=False)
    pytest.skip(message)


PREDICTED_PEAK = re.compile(r"predicted peak memory (\d+) bytes")


def predicted_peaks(summary: str) -> list[int]:
    """Every per-rank peak a ``--summary`` (loom-compile) or ``loom-stats``
    (loom-opt) printed, in order: one per program, all equal under SPMD."""
    return [int(p) for p in PREDICTED_PEAK.findall(summary)]
