"""How often repeated loom-run processes of one step disagree on a loaded machine.

Runs `loom-run` on DIR/step.loomx `--runs` times, `--parallel` processes at
once (more processes than cores, so the scheduler interleaves each
process's intra-op threads differently from run to run), and prints every
distinct sequence of losses (each to the last digit, from
`--memory-report`) with the number of runs that gave it. A step whose
kernels are deterministic prints one line.

    .venv/bin/python bench/repeat_runs.py DIR [--runs 400] [--parallel 8]
        [--steps 3] [--threads N] [--env NAME=VALUE ...]

DIR holds a capture (`batches.safetensors`) and its compiled `step.loomx`.
docs/status.md records what it measured (oneMKL's vector math first-call
race, runtime/lib/VectorMath.h).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOOM_RUN = Path(os.environ.get("LOOM_BUILD_DIR", REPO / "build")) / "runtime" / "bin" / "loom-run"


def start(directory: Path, report: Path, args: argparse.Namespace, env: dict) -> subprocess.Popen:
    cmd = [str(LOOM_RUN), str(directory / "step.loomx"), "--batches",
           str(directory / "batches.safetensors"), "--steps", str(args.steps), "--no-progress",
           "--memory-report", str(report)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def losses(report: Path) -> tuple[str, ...]:
    return tuple(repr(json.loads(line)["loss"]) for line in report.read_text().splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="loom-run --threads (default: its own)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    env = dict(os.environ, **dict(item.split("=", 1) for item in args.env))
    counts: collections.Counter = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        reports = [Path(tmp) / f"{i}.jsonl" for i in range(args.runs)]
        for first in range(0, args.runs, args.parallel):
            batch = reports[first:first + args.parallel]
            procs = [start(args.directory, report, args, env) for report in batch]
            for proc, report in zip(procs, batch):
                _, err = proc.communicate()
                if proc.returncode != 0:
                    sys.exit(f"loom-run failed ({proc.returncode}): {err}")
                counts[losses(report)] += 1
    print(f"{args.runs} runs of {args.directory / 'step.loomx'}, {args.parallel} at once on "
          f"{os.cpu_count()} cores, {args.steps} steps each: {len(counts)} distinct loss sequences")
    for sequence, n in counts.most_common():
        print(f"{n:6d}  {' '.join(sequence)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
