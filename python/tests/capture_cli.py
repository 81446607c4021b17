"""``python -m loom.capture ARGS`` for the tests, in the test's own process.

A capture in a subprocess spends seconds importing torch before it starts;
the suite captures a hundred times. ``loom_capture`` calls capture's own
``main`` here instead (as test_capture.py always has), with its output
collected and its exit status returned like ``subprocess.run``'s. torch's
intra-op thread count is the process's default during the capture (the
eager reference must run as ``python -m loom.capture`` would: bitwise tests
compare loom-run, at its default thread count, with it) and is restored
after. A capture whose reference is PyTorch's own DDP / fully_shard
(``--reference`` other than eager) runs here too: its Gloo ranks fork from
loom.dp_reference's forkserver, a fresh process started once per test
process (the first such capture pays for it), never from this one.
"""

from __future__ import annotations

import contextlib
import io
import subprocess

import torch

# torch's default, read before any test can change it.
DEFAULT_THREADS = torch.get_num_threads()


def loom_capture(argv: list) -> subprocess.CompletedProcess:
    """``python -m loom.capture *argv``: returncode, stdout, stderr."""
    argv = [str(a) for a in argv]
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
