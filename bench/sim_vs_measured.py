"""loom-simulate's predicted step time vs loom-run's measured one, on this CPU.

    .venv/bin/python bench/sim_vs_measured.py [--device cpu] [--steps 60]
        [--cases mlp vit gpt gpt-wide gpt-fsdp2 gpt-fsdp4] [--json F]

For each case: capture -> loom-import -> loom-compile -> loom-run (median
step time after a tenth of the steps as warm-up; single-rank runs also
record loom-run's --trace and sum its per-instruction durations per step,
the runtime's own "compute busy" time), and loom-opt with the same
distribution pass, the optimizer and `--loom-simulate=device=<device>
comm-streams=1` (the CPU runtime has one communication stream: Gloo's
asynchronous work) on the loom-level step. Prints a markdown table of
simulated vs measured times and the ratio (simulated / measured); for the
single-rank cases also the simulation with the run's trace as measured op
times (`op-times`: the ATen ops at their medians, the optimizer modelled).

Cases: mlp, vit, gpt, gpt-wide (bench/models/gpt_wide.py, 3.4 M
parameters, where compute dominates): one rank, 1 intra-op thread; gpt-fsdpN: GPT with
FSDP (`--dp=fsdp`, default units and reshard-after-forward) on N ranks of
Gloo over loopback, 1 thread each (as bench/fsdp_vs_fsdp2.py runs them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("LOOM_BUILD_DIR", REPO / "build"))
PY = sys.executable
OPT = ["--optimizer=adamw", "--lr=0.001", "--weight-decay=0.01"]
ATTACH = "--loom-attach-optimizer=optimizer=adamw lr=0.001 weight-decay=0.01"
CASES = {
    "mlp": ("examples/mlp.py", 1, 1),
    "vit": ("examples/vit.py", 1, 1),
    "gpt": ("examples/gpt.py", 1, 1),
    "gpt-wide": ("bench/models/gpt_wide.py", 1, 1),
    "gpt-fsdp2": ("examples/gpt.py", 2, 1),
    "gpt-fsdp4": ("examples/gpt.py", 4, 1),
}


def run(cmd: list) -> str:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    if result.returncode:
        sys.exit(f"bench: {' '.join(map(str, cmd))} failed:\n{result.stderr}{result.stdout}")
    return result.stdout + result.stderr


def measure(name: str, device: str, steps: int, work: Path) -> dict:
    model, ranks, threads = CASES[name]
    work.mkdir(parents=True, exist_ok=True)
    split = ["--split", ranks] if ranks > 1 else []
    run([PY, "-m", "loom.capture", REPO / model, "--out", work, "--steps", "1",
         "--optimizer", "adamw", *split])
    run([BUILD / "bin" / "loom-import", work / "step.pt2", "-o", work / "step.mlir"])
    dp = ["--dp=fsdp", f"--world-size={ranks}"] if ranks > 1 else []
    run([BUILD / "bin" / "loom-compile", work / "step.mlir", "-o", work / "step.loomx",
         *OPT, *dp])
    trace = ["--trace", work / "trace.json"] if ranks == 1 else []
    nproc = ["--nproc", ranks] if ranks > 1 else []
    out = run([BUILD / "runtime" / "bin" / "loom-run", work / "step.loomx", *nproc,
               "--batches", work / "batches.safetensors", "--steps", steps,
               "--threads", threads, "--no-progress", *trace])
    times = [float(t) for t in re.findall(r"step\s+\d+\s+loss\s+\S+\s+time\s+(\S+) ms", out)]
    warm = times[max(1, steps // 10):]
    result = {"case": name, "ranks": ranks, "threads": threads,
              "measured_ms": statistics.median(warm), "measured_min_ms": min(warm)}
    if trace:
        events = json.loads((work / "trace.json").read_text())
        events = events["traceEvents"] if isinstance(events, dict) else events
        busy: dict[int, float] = {}
        for e in events:
            a = e.get("args", {})
            if e.get("ph") == "X" and "step" in a and "index" in a:
                busy[a["step"]] = busy.get(a["step"], 0.0) + e["dur"]
        per_step = [busy[s] for s in sorted(busy)][max(1, steps // 10):]
        result["measured_op_busy_ms"] = statistics.median(per_step) / 1e3

    passes = [f"--loom-fsdp=mesh-shape={ranks}"] if ranks > 1 else []
    sim = run([BUILD / "bin" / "loom-opt", work / "step.mlir", *passes, ATTACH,
               f"--loom-simulate=device={device} comm-streams=1 json=true "
               f"timeline={work / 'sim-trace.json'}", "-o", os.devnull])
    report = json.loads(sim[sim.index("{"):])
    result.update(simulated_ms=report["step_time"] * 1e3,
                  simulated_compute_ms=report["compute_time"] * 1e3,
                  simulated_comm_ms=report["comm_time"] * 1e3,
                  simulated_exposed_ms=report["exposed_comm_time"] * 1e3,
                  ops=report["ops"], collectives=report["collectives"])
    result["ratio"] = result["simulated_ms"] / result["measured_ms"]
    if trace:
        # The same step priced by the run's own trace (op-times): the ATen
        # ops at their measured medians; the optimizer stays modelled.
        sim = run([BUILD / "bin" / "loom-opt", work / "step.mlir", *passes, ATTACH,
                   f"--loom-simulate=device={device} comm-streams=1 json=true "
                   f"op-times={work / 'trace.json'}", "-o", os.devnull])
        measured = json.loads(sim[sim.index("{"):])
        result.update(op_times_ms=measured["step_time"] * 1e3,
                      op_times_ratio=measured["step_time"] * 1e3 / result["measured_ms"],
                      measured_ops=measured["measured_ops"])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="loom-simvs-"))
    rows = [measure(c, args.device, args.steps, work / c) for c in args.cases]
    print("| case | ranks x threads | measured ms (median / min) | loom-run op busy ms "
          "| simulated ms | sim compute / comm / exposed ms | sim / measured "
          "| sim with op-times ms (/ measured) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        busy = f"{r['measured_op_busy_ms']:.3f}" if "measured_op_busy_ms" in r else "-"
        timed = (f"{r['op_times_ms']:.3f} ({r['op_times_ratio']:.2f})" if "op_times_ms" in r
                 else "-")
        print(f"| {r['case']} | {r['ranks']} x {r['threads']} | {r['measured_ms']:.3f} / "
              f"{r['measured_min_ms']:.3f} | {busy} | {r['simulated_ms']:.3f} | "
              f"{r['simulated_compute_ms']:.3f} / {r['simulated_comm_ms']:.3f} / "
              f"{r['simulated_exposed_ms']:.3f} | {r['ratio']:.2f} | {timed} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
