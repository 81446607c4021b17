"""``python -m loom.capture ARGS`` for the tests, in the test's own process.

A capture in a subprocess spends seconds importing torch before it starts;
the suite captures a hundred times. ``loom_capture`` calls capture's own
``main`` here instead (as test_capture.py always has), with its output
collected and its exit status returned like ``subprocess.run``'s. torch's
intra-op thread count is the process's default during the capture (the
eager reference must run as ``python -m loom.capture`` would: bitwise tests
compare loom-run, at its default thread count, with it) and is restored
after. A capture whose reference is PyTorch's own DDP / fully_shard
(``--reference`` other than eager) spawns Gloo ranks and runs as a
subprocess, isolated from this one.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
# torch's default, read before any test can change it.
DEFAULT_THREADS = torch.get_num_threads()


def _distributed_reference(argv: list[str]) -> bool:
    for i, a in enumerate(argv):
        if a == "--reference" and i + 1 < len(argv) and argv[i + 1] != "eager":
            return True
        if a.startswith("--reference=") and a != "--reference=eager":
            return True
    return False


def loom_capture(argv: list) -> subprocess.CompletedProcess:
    """``python -m loom.capture *argv``: returncode, stdout, stderr."""
    argv = [str(a) for a in argv]
    if _distributed_reference(argv):
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        return subprocess.run([sys.executable, "-m", "loom.capture", *argv], capture_output=True,
                              text=True, env=env, timeout=900)
    from loom import capture

    out, err = io.StringIO(), io.StringIO()
    threads = torch.get_num_threads()
    torch.set_num_threads(DEFAULT_THREADS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = capture.main(argv)
            except SystemExit as exc:  # argparse's usage errors
                code = exc.code
    finally:
        torch.set_num_threads(threads)
    return subprocess.CompletedProcess(["loom.capture", *argv], code, out.getvalue(), err.getvalue())
