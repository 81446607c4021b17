"""Simulated Llama-3-70B and 405B pipelined training steps on H100s: 1F1B, Interleaved1F1B and the zero-bubble schedules with activation checkpointing.

    .venv/bin/python bench/pipeline.py sim [--flavors 70B 405B] [--schedules ...]
        [--remat full selective ilp] [--budget GB] [--pp 70B=8 405B=16] [--microbatches-per-rank 2]
        [--n-layers N] [--seq 8192] [--dp 8] [--dp-mode fsdp|replicate] [--device h100]
        [--timeline DIR] [--json FILE] [--cache out/bench-pipeline-sim]

(``bench/pipeline.py sim`` runs this file.) All without weights:

1. capture bench/models/llama3.py with a torchtitan flavor's shape
   (``FLAVORS``: 70B is dim 8192, 80 layers, 64 heads, 8 KV heads, FFN 28672;
   405B is dim 16384, 126 layers, 128 heads, 8 KV heads, FFN 53248) for one
   microbatch of one sequence of ``--seq`` tokens, with ``loom.capture
   --meta``; cached under ``--cache`` by shape, redone when the model or the
   capture code changes;
2. ``loom-import --no-weights``; with FSDP (the default) the step stays fp32
   and FSDP's mixed precision (``param-dtype=bf16 reduce-dtype=f32``, as
   torchtitan trains these models) casts the gathered parameters, so the
   compute and the stage-to-stage transfers are bf16; without FSDP
   (``--dp 1`` or ``--dp-mode replicate``) nothing would cast, and an fp32
   step would be priced at the H100's fp32 peak, 13x slower than bf16, so
   the step is retyped to bf16 throughout (pure bf16 training);
3. per activation-checkpointing mode and schedule, one ``loom-opt`` run:
   ``loom-remat{mode=R}`` (every ``layers.N`` block, as torchtitan's
   ``activation_checkpoint.mode``; ``ilp`` is ``loom-sac-ilp{budget=B}``
   instead, deciding each pipeline rank's blocks under ``--budget``, as
   ``loom-compile --recompute-budget --pp`` does), ``loom-pipeline-split{stages=P*V}``
   (V = 1 stage per rank for 1F1B, 2 for the others; the cut balances the
   stages' FLOPs; ``split-backward`` for the zero-bubble schedules and
   DualPipeV), ``loom-pipeline-schedule{schedule=S pp=P microbatches=M}``
   (M = ``--microbatches-per-rank`` x P, torchtitan's local batch of one
   sequence per microbatch), data parallelism inside each stage
   (``loom-fsdp{mesh=pp shard-axes=dp}`` over ``--dp`` ranks, one 8-GPU node
   per pipeline rank by default), ``loom-attach-optimizer`` (AdamW) and
   ``loom-simulate{device=h100 json=true}`` on the MPMD steps.

Prints per (flavor, remat, schedule) the simulated step time, its bubble
fraction, the peak memory of the fullest rank, tokens/s/GPU (M x seq / (P x
step): each of the dp pipelines runs M sequences a step on its P GPUs),
the ratio of each schedule's throughput to Interleaved1F1B's under the same
remat mode and the busiest rank's compute and recompute time; then, for the
rank that finishes last, where its step goes: compute (recompute
included), waiting for activations and gradients (the bubble) and exposed
FSDP/DDP collectives. ``--n-layers`` simulates a shallower model of the
same width (a quick check).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path

import llama3_sim

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("LOOM_BUILD_DIR", REPO / "build"))
MODEL = REPO / "bench" / "models" / "llama3.py"
VOCAB = 128256

# Stages per rank each schedule runs.
SCHEDULES = {"1F1B": 1, "Interleaved1F1B": 2, "InterleavedZeroBubble": 2, "ZBVZeroBubble": 2,
             "DualPipeV": 2}
SPLIT_BACKWARD = {"InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"}
BASELINE = "Interleaved1F1B"
# Pipeline ranks per flavor: 70B on one 8-GPU node, 405B on two.
DEFAULT_PP = {"70B": 8, "405B": 16}
F32 = re.compile(r"(?<=[x<, ])f32(?=[>\],])")


INFEASIBLE = re.compile(r"program '(\w+)': budget .* is infeasible: the smallest feasible budget "
                        r"is .*?\((\d+) B\)")


class Infeasible(Exception):
    """loom-sac-ilp found the budget infeasible: (program, smallest bytes) per
    program that misses it."""


def run(cmd: list, what: str) -> tuple[str, float]:
    t0 = time.perf_counter()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    if r.returncode and INFEASIBLE.search(r.stderr):
        raise Infeasible([(m.group(1), int(m.group(2))) for m in INFEASIBLE.finditer(r.stderr)])
    if r.returncode:
        sys.exit(f"pipeline sim: {what} failed: {' '.join(map(str, cmd))}\n{r.stderr}{r.stdout}")
    return r.stdout + r.stderr, time.perf_counter() - t0


def flavor_shape(flavor: str, n_layers: int | None, seq: int) -> dict:
    shape = dict(runpy.run_path(str(MODEL))["FLAVORS"][flavor])
    if n_layers:
        shape["n_layers"] = n_layers
    shape.update(vocab=VOCAB, seq=seq, batch=1)
    return shape


def to_bf16(text: str) -> str:
    """Every f32 tensor type and dtype argument of the imported step as bf16."""
    return F32.sub("bf16", text)


def capture(cache: Path, shape: dict) -> tuple[Path, float | None]:
    """The folder holding the weightless step of `shape`, fp32 (step.mlir)
    and retyped to bf16 (step.bf16.mlir), from the cache when current, and
    the capture's seconds (None when cached). The capture is
    bench/llama3_sim.py's."""
    work, elapsed = llama3_sim.capture(cache, shape)
    mlir = work / "step.bf16.mlir"
    if elapsed is not None or not mlir.exists():
        run([BUILD / "bin" / "loom-import", work / "step.pt2", "--no-weights", "-o",
             work / "step.mlir"], "loom-import")
        mlir.write_text(to_bf16((work / "step.mlir").read_text()))
    return work, elapsed


def pass_pipeline(schedule: str, remat: str, pp: int, microbatches: int, dp: int,
                  dp_mode: str, device: str, nodes: int, timeline: Path | None,
                  budget: int | None = None) -> str:
    stages = pp * SCHEDULES[schedule]
    passes = []
    if remat not in ("none", "ilp"):
        passes.append(f"func.func(loom-remat{{mode={remat}}})")
    split = f"stages={stages}" + (" split-backward=true" if schedule in SPLIT_BACKWARD else "")
    passes.append(f"loom-pipeline-split{{{split}}}")
    passes.append(f"loom-pipeline-schedule{{schedule={schedule} pp={pp} "
                  f"microbatches={microbatches} dp={dp}}}")
    if dp > 1 and dp_mode == "replicate":
        passes.append(f"loom-replicate{{mesh=pp mesh-shape={pp},{dp} axes=pp,dp "
                      f"reduce-axes=dp}}")
    if dp > 1 and dp_mode == "fsdp":
        # What loom-compile --pp --dp=fsdp runs: each rank's stages sharded
        # over the "dp" axis of the schedule's [pp, dp] mesh.
        passes.append("loom-fsdp{mesh=pp shard-axes=dp reshard-after-backward=false "
                      "param-dtype=bf16 reduce-dtype=f32}")
        passes.append("loom-prefetch")
    passes.append("func.func(loom-attach-optimizer{optimizer=adamw lr=3.0e-04})")
    if remat == "ilp":
        # What loom-compile --recompute-budget --pp runs: the ILP decides each
        # pipeline rank's blocks against that rank's program, which it
        # measures by running the rest of the pipeline on a copy.
        passes.insert(0, f"loom-sac-ilp{{budget={budget}B device={device} nodes={nodes} "
                         f"pipeline={','.join(passes)}}}")
    sim = f"device={device} nodes={nodes} json=true"
    if timeline:
        sim += f" timeline={timeline}"
    passes.append(f"loom-simulate{{{sim}}}")
    return "builtin.module(" + ",".join(passes) + ")"


def exposed(program: dict, kinds) -> float:
    """Seconds the program's compute stream waited on collectives of `kinds`."""
    return sum(c["exposed"] for k, c in program["collectives_by_kind"].items() if kinds(k))


def mixed_precision(args) -> bool:
    """Whether FSDP casts the fp32 step to bf16 (else it is retyped)."""
    return args.dp > 1 and args.dp_mode == "fsdp"


def simulate(work: Path, args, flavor: str, schedule: str, remat: str) -> dict:
    mlir = work / ("step.mlir" if mixed_precision(args) else "step.bf16.mlir")
    pp = args.pp[flavor]
    microbatches = args.microbatches_per_rank * pp
    world = pp * args.dp
    nodes = max(1, world // 8)
    timeline = None
    if args.timeline:
        args.timeline.mkdir(parents=True, exist_ok=True)
        timeline = args.timeline / f"{flavor}-{remat}-{schedule}.trace.json"
    pipeline = pass_pipeline(schedule, remat, pp, microbatches, args.dp, args.dp_mode,
                             args.device, nodes, timeline, args.budget)
    out, seconds = run([BUILD / "bin" / "loom-opt", mlir, "-o", os.devnull,
                        f"--pass-pipeline={pipeline}"], f"{flavor} {remat} {schedule}")
    report, _ = json.JSONDecoder().raw_decode(out[out.index("{"):])
    step = report["step_time"]
    programs = report["programs"]
    slowest = max(programs, key=lambda p: p["compute_time"])
    return {
        "flavor": flavor, "remat": remat, "schedule": schedule, "pp": pp, "dp": args.dp,
        "stages": pp * SCHEDULES[schedule], "microbatches": microbatches, "seq": args.seq,
        "nodes": report["nodes"], "step_s": step, "bubble_fraction": report["bubble_fraction"],
        "tokens_per_s_per_gpu": microbatches * args.seq / (pp * step),
        "peak_bytes": max(p["memory"]["peak_bytes"] for p in programs),
        "busiest_rank_compute_s": slowest["compute_time"],
        "busiest_rank_recompute_s": slowest["recompute_time"],
        "ranks": [{"function": p["function"], "step_s": p["step_time"],
                   "compute_s": p["compute_time"], "recompute_s": p["recompute_time"],
                   "idle_s": p["idle_time"], "peak_bytes": p["memory"]["peak_bytes"],
                   "transfer_wait_s": exposed(p, lambda k: k == "send_recv"),
                   "dp_exposed_s": exposed(p, lambda k: k != "send_recv")}
                  for p in programs],
        "pipeline": pipeline, "simulate_seconds": seconds,
        "budget_bytes": args.budget if remat == "ilp" else None,
    }


def parse_pp(items: list[str]) -> dict:
    pp = dict(DEFAULT_PP)
    for item in items:
        flavor, _, value = item.partition("=")
        if flavor not in DEFAULT_PP or not value.isdigit() or int(value) < 2:
            raise argparse.ArgumentTypeError(f"--pp expects FLAVOR=P with P >= 2, got '{item}'")
        pp[flavor] = int(value)
    return pp


def table(results: list) -> str:
    base = {(r["flavor"], r["remat"]): r for r in results if r["schedule"] == BASELINE}
    lines = [f"{'flavor':>6} {'remat':>9} {'schedule':>22} {'stages':>6} {'M':>3} "
             f"{'step s':>8} {'bubble':>7} {'peak GiB':>9} {'tok/s/GPU':>10} "
             f"{'vs ' + BASELINE:>19} {'busiest rank: compute s':>24} {'of it recompute':>16}"]
    for r in results:
        b = base.get((r["flavor"], r["remat"]))
        ratio = f"{r['tokens_per_s_per_gpu'] / b['tokens_per_s_per_gpu']:.3f}x" if b else "-"
        lines.append(
            f"{r['flavor']:>6} {r['remat']:>9} {r['schedule']:>22} {r['stages']:>6} "
            f"{r['microbatches']:>3} {r['step_s']:>8.3f} {r['bubble_fraction']:>6.1%} "
            f"{r['peak_bytes'] / 2**30:>9.1f} {r['tokens_per_s_per_gpu']:>10.0f} {ratio:>19} "
            f"{r['busiest_rank_compute_s']:>24.3f} {r['busiest_rank_recompute_s']:>16.3f}")
    return "\n".join(lines)


def time_table(results: list) -> str:
    """Where each schedule's step goes on its critical rank (the one that
    finishes last: its step is exactly compute + p2p wait + dp collectives)
    and, over all ranks, the mean wait for transfers."""
    lines = [f"{'flavor':>6} {'remat':>9} {'schedule':>22} {'critical':>9} {'compute':>8} "
             f"{'recomp.':>8} {'p2p wait':>9} {'dp coll.':>9} {'mean p2p wait':>14}"]
    for r in results:
        c = max(r["ranks"], key=lambda k: k["step_s"])
        mean_wait = sum(k["transfer_wait_s"] for k in r["ranks"]) / len(r["ranks"])
        lines.append(f"{r['flavor']:>6} {r['remat']:>9} {r['schedule']:>22} "
                     f"{c['function']:>9} {c['compute_s']:>8.3f} {c['recompute_s']:>8.3f} "
                     f"{c['transfer_wait_s']:>9.3f} {c['dp_exposed_s']:>9.3f} "
                     f"{mean_wait:>14.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench/pipeline.py sim",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--flavors", nargs="+", choices=sorted(DEFAULT_PP), default=["70B", "405B"])
    ap.add_argument("--schedules", nargs="+", choices=list(SCHEDULES), default=list(SCHEDULES))
    ap.add_argument("--remat", nargs="+", choices=["none", "full", "selective", "ilp"],
                    default=["full"], help="activation checkpointing modes (default: full; "
                    "ilp: loom-sac-ilp under --budget)")
    ap.add_argument("--budget", type=float, metavar="GB",
                    help="with --remat ilp: the per-rank budget in GB (10^9 bytes)")
    ap.add_argument("--pp", nargs="*", default=[], metavar="FLAVOR=P",
                    help="pipeline ranks per flavor (default 70B=8 405B=16)")
    ap.add_argument("--microbatches-per-rank", type=int, default=2,
                    help="microbatches per pipeline rank (default 2: M = 2 x pp)")
    ap.add_argument("--n-layers", type=int, help="fewer layers than the flavor (quick check)")
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--dp", type=int, default=8,
                    help="data-parallel ranks per stage (default 8: one node per stage)")
    ap.add_argument("--dp-mode", choices=["fsdp", "replicate"], default="fsdp",
                    help="data parallelism inside each stage when --dp > 1 (default fsdp)")
    ap.add_argument("--device", default="h100")
    ap.add_argument("--timeline", type=Path, help="write the simulated Chrome traces here")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--cache", type=Path, default=REPO / "out" / "bench-pipeline-sim")
    args = ap.parse_args(argv)
    try:
        args.pp = parse_pp(args.pp)
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    if args.microbatches_per_rank < 1 or args.dp < 1:
        ap.error("--microbatches-per-rank and --dp must be at least 1")
    if ("ilp" in args.remat) != (args.budget is not None):
        ap.error("--remat ilp and --budget go together")
    if args.budget is not None:
        args.budget = int(args.budget * 1e9)

    started = time.perf_counter()
    results, captures, infeasible = [], {}, []
    for flavor in args.flavors:
        shape = flavor_shape(flavor, args.n_layers, args.seq)
        work, capture_s = capture(args.cache, shape)
        captures[flavor] = {"shape": shape, "capture_seconds": capture_s}
        print(f"Llama-3-{flavor}-shaped step: {shape['n_layers']} layers, dim {shape['dim']}, "
              f"one microbatch = 1 x {args.seq} tokens, "
              f"{'FSDP bf16/f32 mixed precision' if mixed_precision(args) else 'pure bf16'}; "
              f"pp={args.pp[flavor]} "
              f"dp={args.dp}, M={args.microbatches_per_rank * args.pp[flavor]}; capture "
              f"{'cached' if capture_s is None else f'{capture_s:.0f} s'}", flush=True)
        for remat in args.remat:
            for schedule in args.schedules:
                try:
                    r = simulate(work, args, flavor, schedule, remat)
                except Infeasible as e:
                    smallest = max(b for _, b in e.args[0])
                    print(f"  {remat:>9} {schedule:>22}: budget {args.budget / 2**30:.2f} GiB "
                          f"infeasible: the smallest feasible is {smallest / 2**30:.2f} GiB "
                          f"({', '.join(f'{p} {b} B' for p, b in e.args[0])})", flush=True)
                    infeasible.append({"flavor": flavor, "remat": remat, "schedule": schedule,
                                       "budget_bytes": args.budget,
                                       "smallest_feasible": dict(e.args[0])})
                    continue
                print(f"  {remat:>9} {schedule:>22}: step {r['step_s']:.3f} s, bubble "
                      f"{r['bubble_fraction']:.1%} ({r['simulate_seconds']:.0f} s)", flush=True)
                results.append(r)
    print(f"\ndevice {args.device}, AdamW, {time.perf_counter() - started:.0f} s")
    print(table(results))
    print("\nseconds per step on the critical rank (compute includes recompute; p2p wait: "
          "waiting for activations/gradients, the bubble; dp coll.: exposed FSDP/DDP "
          "collectives)")
    print(time_table(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"captures": captures, "results": results,
                                         "infeasible": infeasible}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
