"""Simulated Llama-3-8B FSDP training steps on 8 and 64 H100s, next to torchtitan's published throughput.

    .venv/bin/python bench/llama3_sim.py [--n-layers 32] [--batch 1] [--seq 8192]
        [--worlds 8 64] [--device h100] [--extra-passes PIPELINE] [--timeline DIR]
        [--json FILE] [--cache out/bench-llama3]

Pipeline, all without weights (an 8 B-parameter model is never materialised):

1. capture bench/models/llama3.py (torchtitan's 8B flavor, module names and
   shapes) with ``loom.capture --meta`` (fake tensors) for one rank's batch
   (``--batch`` sequences of ``--seq`` tokens); cached under ``--cache`` by
   shape, redone when the model or the capture code changes;
2. ``loom-import --no-weights``;
3. per world size W: ``loom-opt --loom-fsdp="mesh-shape=W param-dtype=bf16
   reduce-dtype=f32"`` (units: every ``layers.N`` plus the root, reshard after
   forward except the root: torchtitan's ``fully_shard`` per block and on the
   model with bf16 parameters and fp32 gradient reduction), then
   ``--extra-passes`` if given, then three variants, each simulated with
   ``--loom-simulate="device=h100 nodes=W/8"`` after
   ``--loom-attach-optimizer`` (AdamW, torchtitan's lr 3e-4): ``none`` (no
   prefetch), ``fsdp2`` (``--loom-prefetch=backward-prefetch=pre``: FSDP2's
   default backward prefetch) and ``scheduled`` (``--loom-schedule`` on the same device model
   under ``--memory-limit``, default 80GB).

Prints per world size the simulated step time, its compute, communication and
exposed-communication parts, tokens/s/GPU (batch x seq / step time) and its
ratio to torchtitan's 6,667 tokens/s/GPU (docs/performance.md of
pytorch/torchtitan, Table 1: Llama 3.1 8B, FSDP + torch.compile, bf16, 8 H100,
local batch 2, selective activation checkpointing), and the time each stage
of the compiler took. ``--n-layers`` below 32 simulates a shallower model (a
quick check; the full depth captures in about 20 s and compiles in about a
second, so the results use it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("LOOM_BUILD_DIR", REPO / "build"))
MODEL = REPO / "bench" / "models" / "llama3.py"
TORCHTITAN_TPS = 6667.0  # tokens/s/GPU, Llama 3.1 8B, FSDP + torch.compile, 8x H100
FULL_LAYERS = 32


class Infeasible(Exception):
    """loom-schedule refused: the step's program-order peak exceeds the limit."""


def run(cmd: list, what: str) -> tuple[str, float]:
    t0 = time.perf_counter()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    elapsed = time.perf_counter() - t0
    if r.returncode and "is below @" in r.stderr and "peak in program order" in r.stderr:
        raise Infeasible(r.stderr.strip().splitlines()[0])
    if r.returncode:
        sys.exit(f"llama3_sim: {what} failed: {' '.join(map(str, cmd))}\n{r.stderr}{r.stdout}")
    return r.stdout + r.stderr, elapsed


def source_digest() -> str:
    h = hashlib.sha256()
    for p in (MODEL, REPO / "python" / "loom" / "capture.py"):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def capture(cache: Path, shape: dict) -> tuple[Path, float | None]:
    """The folder holding the weightless step.pt2 for `shape`, from the
    cache when it is current, and the capture's seconds (None when cached).
    Also bench/pipeline_sim.py's capture."""
    key = "-".join(f"{k}{v}" for k, v in sorted(shape.items()))
    work = cache / key
    pt2, stamp = work / "step.pt2", work / "source.sha"
    digest = source_digest()
    if pt2.exists() and stamp.exists() and stamp.read_text() == digest:
        return work, None
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "loom.capture", MODEL, "--meta", "--out", work]
    for k, v in shape.items():
        cmd += ["--make-arg", f"{k}={v}"]
    _, elapsed = run(cmd, "capture")
    stamp.write_text(digest)
    return work, elapsed


VARIANTS = ("none", "fsdp2", "scheduled")
VARIANT_TITLES = {
    "none": "no prefetch: each all-gather right before its unit, each reduce-scatter waited at once",
    "fsdp2": "FSDP2's default prefetch (loom-prefetch: next unit's all-gather before the current backward)",
    "scheduled": "loom-schedule (latency hiding under the 80 GB memory limit, 2 collectives in flight)",
}


def fsdp(args, mlir: Path, world: int, work: Path) -> tuple[Path, float]:
    if world % 8 and world > 8:
        sys.exit(f"llama3_sim: world size {world} does not fill whole 8-GPU nodes")
    fsdp_mlir = work / f"fsdp{world}.mlir"
    _, fsdp_s = run([BUILD / "bin" / "loom-opt", mlir, "-o", fsdp_mlir,
                     f"--loom-fsdp=mesh-shape={world} param-dtype=bf16 reduce-dtype=f32"],
                    f"loom-fsdp on {world} ranks")
    return fsdp_mlir, fsdp_s


def simulate(args, fsdp_mlir: Path, world: int, work: Path, variant: str) -> dict:
    nodes = max(1, world // 8)
    sim = f"device={args.device} nodes={nodes} json=true"
    if args.timeline:
        args.timeline.mkdir(parents=True, exist_ok=True)
        sim += f" timeline={args.timeline / f'llama3-{world}-{variant}.trace.json'}"
    passes = [f"--loom-attach-optimizer=optimizer=adamw lr={args.lr}"]
    if variant == "fsdp2":
        passes.insert(0, "--loom-prefetch=backward-prefetch=pre")
    if variant == "scheduled":
        passes.append(f"--loom-schedule=device={args.device} nodes={nodes} "
                      f"memory-limit={args.memory_limit}")
    passes.append(f"--loom-simulate={sim}")
    if args.extra_passes:
        # --pass-pipeline cannot be mixed with pass flags: run it on its own.
        out_mlir = work / f"fsdp{world}.extra.mlir"
        run([BUILD / "bin" / "loom-opt", fsdp_mlir, "-o", out_mlir,
             f"--pass-pipeline=builtin.module({args.extra_passes})"],
            f"--extra-passes on {world} ranks")
        fsdp_mlir = out_mlir
    out, sim_s = run([BUILD / "bin" / "loom-opt", fsdp_mlir, "-o", os.devnull, *passes],
                     f"{variant} on {world} ranks")
    start = out.index("{")
    report, _ = json.JSONDecoder().raw_decode(out[start:])
    report["simulate_seconds"] = sim_s
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-layers", type=int, default=FULL_LAYERS)
    ap.add_argument("--batch", type=int, default=1, help="sequences per rank (default 1, llama3_8b.toml)")
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--worlds", type=int, nargs="+", default=[8, 64])
    ap.add_argument("--device", default="h100")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--extra-passes", help="pass pipeline to run after loom-fsdp (before every variant)")
    ap.add_argument("--memory-limit", default="80GB",
                    help="loom-schedule's per-GPU memory limit (default 80GB, an H100's HBM)")
    ap.add_argument("--timeline", type=Path, help="write the simulated Chrome traces into this folder")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--cache", type=Path, default=REPO / "out" / "bench-llama3")
    args = ap.parse_args(argv)
    if not 1 <= args.n_layers <= FULL_LAYERS:
        ap.error(f"--n-layers must be in 1..{FULL_LAYERS}")

    shape = {"n_layers": args.n_layers, "batch": args.batch, "seq": args.seq}
    work, capture_s = capture(args.cache, shape)
    mlir = work / "step.mlir"
    _, import_s = run([BUILD / "bin" / "loom-import", work / "step.pt2", "--no-weights", "-o", mlir],
                      "loom-import")
    ops = sum(1 for line in mlir.read_text().splitlines() if "loom.aten" in line)
    tokens = args.batch * args.seq
    print(f"Llama-3-8B-shaped step: {args.n_layers} layers, batch {args.batch} x seq {args.seq} "
          f"= {tokens} tokens per GPU, {ops} ops; device {args.device}")
    print(f"capture --meta: {'cached' if capture_s is None else f'{capture_s:.1f} s'}, "
          f"loom-import --no-weights: {import_s:.2f} s")
    header = (f"{'variant':>10} {'GPUs':>5} {'nodes':>5} {'step ms':>9} {'compute':>9} {'comm':>9} "
              f"{'exposed':>9} {'exp %':>6} {'tok/s/GPU':>10} {'vs 6667':>8} {'peak GiB':>9} "
              f"{'sim s':>6}")
    results = []
    for world in args.worlds:
        fsdp_mlir, fsdp_s = fsdp(args, mlir, world, work)
        for variant in VARIANTS:
            try:
                r = simulate(args, fsdp_mlir, world, work, variant)
            except Infeasible as e:
                print(f"{variant} on {world} GPUs: does not fit: {e.args[0].split('error: ')[-1]}")
                continue
            step = r["step_time"]
            results.append({
                "variant": variant, "world_size": world, "nodes": r["nodes"],
                "layers": args.n_layers, "batch": args.batch, "seq": args.seq, "step_s": step,
                "compute_s": r["compute_time"], "comm_s": r["comm_time"],
                "exposed_comm_s": r["exposed_comm_time"],
                "exposed_pct": 100 * r["exposed_comm_time"] / step,
                "tokens_per_s_per_gpu": tokens / step,
                "vs_torchtitan": tokens / step / TORCHTITAN_TPS,
                "peak_bytes": r["memory"]["peak_bytes"],
                "fsdp_seconds": fsdp_s, "simulate_seconds": r["simulate_seconds"],
            })
    for variant in VARIANTS:
        print(f"{variant}: {VARIANT_TITLES[variant]}")
    print(header)
    for row in results:
        print(f"{row['variant']:>10} {row['world_size']:>5} {row['nodes']:>5} "
              f"{1e3 * row['step_s']:>9.1f} "
              f"{1e3 * row['compute_s']:>9.1f} {1e3 * row['comm_s']:>9.1f} "
              f"{1e3 * row['exposed_comm_s']:>9.1f} {row['exposed_pct']:>5.1f}% "
              f"{row['tokens_per_s_per_gpu']:>10.0f} {row['vs_torchtitan']:>7.2f}x "
              f"{row['peak_bytes'] / 2**30:>9.1f} {row['simulate_seconds']:>6.2f}")
    if args.n_layers < FULL_LAYERS or args.seq != 8192:
        print(f"note: {args.n_layers} layers x seq {args.seq} is not the 8B step; "
              "the ratio to 6,667 is not a comparison")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"import_seconds": import_s, "capture_seconds": capture_s,
                                         "ops": ops, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
