"""Measure this CPU and write its device spec for loom-simulate.

    .venv/bin/python bench/calibrate_cpu.py [--out data/devices/cpu.json]
        [--threads N] [--ranks-per-node 8]

Measures, with `--threads` intra-op threads (default 1: on a shared 2-core
machine two OpenMP threads make median step times 30x worse than one):

- peak_flops: `torch.mm` of 1024x1024 matrices in fp32, bf16 and fp16
  (best of several runs); the CPU has no tf32, so tf32 = fp32;
- memory_bandwidth: `Tensor.copy_` of a 256 MiB buffer (read + write bytes
  over time, best of several runs);
- the link (Gloo over loopback, 2 processes): the latency from an 8-byte
  `all_gather` and the bandwidth from a 16 MiB one, fitted to the ring
  formula loom-simulate uses for 2 ranks, T = alpha + S/2 / beta with S the
  gathered bytes; the same numbers serve as intra- and inter-node link
  (there is one machine);
- op_overhead / view_overhead: the time loom-run takes per op on a chain of
  tiny elementwise ops (bench/models/op_chain.py, captured, compiled and
  run here): the median step time divided by the number of kernel ops,
  with each view counted at the ratio of the median view to the median
  kernel instruction in loom-run's trace.

Efficiencies are 1: the numbers are what was achieved, not datasheet peaks.
The `source` field records the command, the date and the machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("LOOM_BUILD_DIR", REPO / "build"))


def best_time(fn, repeats: int, inner: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - start) / inner)
    return best


def matmul_flops(dtype: torch.dtype, n: int = 1024) -> float:
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    t = best_time(lambda: torch.mm(a, b), repeats=5, inner=3)
    return 2 * n**3 / t


def memory_bandwidth(mib: int = 256) -> float:
    x = torch.ones(mib * 2**20 // 4)
    y = torch.empty_like(x)
    t = best_time(lambda: y.copy_(x), repeats=5, inner=2)
    return 2 * x.numel() * 4 / t


def gloo_rank(rank: int, world: int, port: int, result_path: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    out = {}
    for name, numel, iters in (("small", 2, 200), ("large", 4 * 2**20 // world, 10)):
        x = torch.ones(numel)
        outs = [torch.empty_like(x) for _ in range(world)]
        for _ in range(3):
            dist.all_gather(outs, x)
        times = []
        for _ in range(iters):
            dist.barrier()
            start = time.perf_counter()
            dist.all_gather(outs, x)
            times.append(time.perf_counter() - start)
        out[name] = {"bytes": numel * 4 * world, "seconds": statistics.median(times)}
    if rank == 0:
        Path(result_path).write_text(json.dumps(out))
    dist.destroy_process_group()


def gloo_link(world: int = 2) -> dict:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    mp.spawn(gloo_rank, args=(world, port, path), nprocs=world, join=True)
    m = json.loads(Path(path).read_text())
    os.unlink(path)
    # Ring all-gather over p ranks: (p-1) alpha + (p-1)/p * S / beta.
    p = world
    alpha = m["small"]["seconds"] / (p - 1)
    transfer = m["large"]["seconds"] - (p - 1) * alpha
    beta = (p - 1) / p * m["large"]["bytes"] / transfer
    return {"latency": alpha, "bandwidth": beta, "measured": m}


def run(cmd: list) -> str:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    if result.returncode:
        sys.exit(f"calibrate: {' '.join(map(str, cmd))} failed:\n{result.stderr}{result.stdout}")
    return result.stdout + result.stderr


def simulated_units(step_mlir: Path, work: Path, op: float, view: float) -> float:
    """loom-simulate's compute time for a spec where only the overheads
    cost anything: the number of overhead units of the step."""
    spec = {
        "name": "units", "source": "calibration helper",
        "peak_flops": {"fp32": 1e30, "tf32": 1e30, "bf16": 1e30, "fp16": 1e30},
        "memory_bandwidth": 1e30,
        "intra_node": {"bandwidth": 1e30, "latency": 0},
        "inter_node": {"bandwidth": 1e30, "latency": 0},
        "devices_per_node": 1, "efficiency": {"compute": 1, "memory": 1, "link": 1},
        "op_overhead": op, "view_overhead": view}
    path = work / "units.json"
    path.write_text(json.dumps(spec))
    out = run([BUILD / "bin" / "loom-opt", step_mlir,
               "--loom-attach-optimizer=optimizer=sgd lr=0.01",
               f"--loom-simulate=device={path} json=true", "-o", os.devnull])
    return json.loads(out[out.index("{"):])["compute_time"]


def op_overheads(threads: int, steps: int = 200) -> dict:
    work = Path(tempfile.mkdtemp(prefix="loom-calibrate-"))
    run([sys.executable, "-m", "loom.capture", REPO / "bench" / "models" / "op_chain.py",
         "--out", work, "--steps", "1", "--optimizer", "sgd", "--lr", "0.01"])
    run([BUILD / "bin" / "loom-import", work / "step.pt2", "-o", work / "step.mlir"])
    run([BUILD / "bin" / "loom-compile", work / "step.mlir", "-o", work / "step.loomx",
         "--optimizer=sgd", "--lr=0.01"])
    out = run([BUILD / "runtime" / "bin" / "loom-run", work / "step.loomx",
               "--batches", work / "batches.safetensors", "--steps", steps,
               "--threads", threads, "--no-progress", "--trace", work / "trace.json"])
    times = [float(t) * 1e-3 for t in re.findall(r"time\s+(\S+) ms", out)][steps // 10:]
    step = statistics.median(times)
    trace = json.loads((work / "trace.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    from_view, from_kernel = [], []
    views = {"view", "_unsafe_view", "permute", "t", "transpose", "expand", "alias",
             "slice", "select", "unsqueeze", "squeeze", "detach", "as_strided"}
    for e in events:
        kernel = e.get("args", {}).get("kernel")
        if e.get("ph") != "X" or not kernel:
            continue
        name = kernel.split("::")[1].split(".")[0]
        (from_view if name in views else from_kernel).append(e["dur"])
    ratio = statistics.median(from_view) / statistics.median(from_kernel) if from_view else 0
    kernels = simulated_units(work / "step.mlir", work, 1.0, 0.0)
    nviews = simulated_units(work / "step.mlir", work, 0.0, 1.0)
    op = step / (kernels + ratio * nviews)
    return {"op_overhead": op, "view_overhead": op * ratio, "step_seconds": step,
            "kernel_ops": kernels, "view_ops": nviews, "view_ratio": ratio}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "data" / "devices" / "cpu.json")
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op threads (default 1: see docs/simulator.md)")
    parser.add_argument("--ranks-per-node", type=int, default=8,
                        help="ranks loom-simulate may place on this machine (default 8)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    flops = {name: matmul_flops(dtype) for name, dtype in
             (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16))}
    bandwidth = memory_bandwidth()
    link = gloo_link()
    overhead = op_overheads(args.threads)
    for k, v in [*flops.items(), ("memory B/s", bandwidth),
                 ("gloo latency s", link["latency"]), ("gloo B/s", link["bandwidth"]),
                 *overhead.items()]:
        print(f"  {k:16} {v:.4g}")

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    date = datetime.date.today().isoformat()
    cmd = "bench/calibrate_cpu.py " + " ".join(sys.argv[1:])
    spec = {
        "name": f"CPU ({cpu}, {os.cpu_count()} cores, {args.threads} threads)",
        "source": (
            f"measured on this machine on {date} by `.venv/bin/python {cmd.strip()}` "
            f"(torch {torch.__version__}, {args.threads} intra-op threads): peak_flops = best "
            f"torch.mm 1024^3 per dtype (tf32 = fp32, CPUs have none); memory_bandwidth = "
            f"copy_ of 256 MiB (read+write bytes); links = Gloo all_gather over loopback on 2 "
            f"processes fitted to the ring formula (8 B: latency, 16 MiB: bandwidth), the same "
            f"for intra- and inter-node; op_overhead/view_overhead = loom-run's median step "
            f"time on bench/models/op_chain.py per op (views weighted by their trace duration "
            f"ratio); efficiencies 1 (achieved numbers)."),
        "peak_flops": {"fp32": flops["fp32"], "tf32": flops["fp32"],
                       "bf16": flops["bf16"], "fp16": flops["fp16"]},
        "memory_bandwidth": bandwidth,
        "intra_node": {"bandwidth": link["bandwidth"], "latency": link["latency"]},
        "inter_node": {"bandwidth": link["bandwidth"], "latency": link["latency"]},
        "devices_per_node": args.ranks_per_node,
        "efficiency": {"compute": 1, "memory": 1, "link": 1},
        "op_overhead": overhead["op_overhead"],
        "view_overhead": overhead["view_overhead"],
    }

    def rounded(v):
        if isinstance(v, float):
            return float(f"{v:.4g}")
        if isinstance(v, dict):
            return {k: rounded(x) for k, x in v.items()}
        return v

    args.out.write_text(json.dumps(rounded(spec), indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
