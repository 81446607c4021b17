"""What the tests read from loom-run's output: the collectives each step issued."""

from __future__ import annotations

import re


def issued(stdout: str, kind: str) -> list[int]:
    """The count of `kind` collectives (e.g. "all_gather") loom-run reports
    on each step line, 0 where the line names none."""
    counts = []
    for line in stdout.splitlines():
        if line.startswith("step"):
            m = re.search(kind + r" (\d+)", line)
            counts.append(int(m.group(1)) if m else 0)
    return counts
