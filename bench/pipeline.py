"""Loom's pipelined step vs torch.distributed.pipelining, on 2 CPU ranks over Gloo.

    .venv/bin/python bench/pipeline.py cpu [--steps 8] [--rounds 3] [--warmup 2]
        [--cases llama-GPipe stack-1F1B ...] [--loom-optimizer-impl forloop|fused] [--json F]
    .venv/bin/python bench/pipeline.py sim [...]

``sim`` is the simulated Llama-3-70B/405B comparison of the schedules with
activation checkpointing (bench/pipeline_sim.py, which says its options);
the rest of this text is about ``cpu``.

Both sides train the same model from the same initial weights on the same
batches (the capture's batches.safetensors), cut at the same module
boundary into the same stages, with the same schedule, the same number of
microbatches, the same loss (the mean of the microbatch losses, gradients
summed over microbatches and divided by M: PyTorch's scale_grads) and AdamW
(lr 1e-3, weight decay 0.01), on 2 processes with 1 ATen thread each:

- Loom: `python -m loom.capture MODEL --microbatches M` -> loom-import ->
  `loom-compile --pp=2 --pp-schedule=S --pp-boundaries=...` ->
  `loom-run --nproc 2 --threads 1 --trace`; a step's time per rank is the
  "step" event of that rank in the trace.
- PyTorch: one PipelineStage per local stage (the model's own submodules,
  grouped as Loom's boundaries group them), the schedule class S
  (ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B), n_microbatches M,
  AdamW(fused=True) (the fastest CPU AdamW), Gloo on loopback, 2 processes
  from torch.multiprocessing.spawn; each step is barrier, then perf_counter
  around zero_grad + schedule.step + optimizer.step.

A step's time is the slowest rank's; the reported time is the median over
all rounds of the steps after `--warmup`. Rounds alternate the sides (Loom,
PyTorch, then PyTorch, Loom, ...) so that load from other jobs on the machine
hits both alike. The losses of every step are compared (they should agree
to ~1e-5 relative; fused AdamW rounds differently from Loom's AdamW).
Loom's share of a step spent waiting on transfers is the trace's
`comm_wait_us` of the step; a second table splits Loom's step by trace
category (forward, backward, optimizer, frees, posting and waiting on
transfers) per rank. Compiled steps and captures are cached under
out/pipeline-bench/.

Cases: a small Llama-3-style model (bench/models/llama3.py) and PyTorch's
pipeline-test MLPModule stack (python/tests/pp_mlp_stack.py), each under
GPipe, 1F1B (2 stages) and Interleaved1F1B (4 stages, 2 per rank).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import runpy
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("LOOM_BUILD_DIR", REPO / "build"))
CACHE = REPO / "out" / "pipeline-bench"
LR, WEIGHT_DECAY = 1e-3, 0.01
PP = 2
MICROBATCHES = 4
# Stages per rank each schedule runs (Loom's --pp-stages default likewise).
SCHEDULES = {"GPipe": 1, "1F1B": 1, "Interleaved1F1B": 2}

# name -> (model file, make() arguments, container of the repeated blocks).
MODELS = {
    "llama": (REPO / "bench" / "models" / "llama3.py",
              dict(dim=256, n_layers=4, n_heads=8, n_kv_heads=4, ffn_hidden=768, vocab=1024,
                   seq=64, batch=4),
              "layers"),
    "stack": (REPO / "python" / "tests" / "pp_mlp_stack.py",
              dict(layers=8, dim=512, batch=64),
              "stack"),
}


def stage_starts(units: int, stages: int) -> list[int]:
    """The first block of every stage when `units` blocks are cut into
    `stages` contiguous groups as evenly as possible (earlier stages get the
    smaller groups: the last stage also holds the head)."""
    if not 1 <= stages <= units:
        raise ValueError(f"cannot cut {units} blocks into {stages} stages")
    return [s * units // stages for s in range(stages)]


def boundaries(container: str, units: int, stages: int) -> str:
    """loom-compile's --pp-boundaries: where each stage after the first starts."""
    return ",".join(f"{container}.{start}" for start in stage_starts(units, stages)[1:])


def stage_ranges(units: int, stages: int) -> list[tuple[int, int]]:
    starts = stage_starts(units, stages) + [units]
    return list(zip(starts[:-1], starts[1:]))


def run(cmd: list) -> str:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    if result.returncode:
        sys.exit(f"bench: {' '.join(map(str, cmd))} failed:\n{result.stderr}{result.stdout}")
    return result.stdout + result.stderr


def units_of(name: str) -> int:
    args = MODELS[name][1]
    return args["n_layers"] if name == "llama" else args["layers"]


# ----------------------------------------------------------------- Loom side

def loom_capture(name: str, impl: str) -> Path:
    """The capture and import of `name` with AdamW as `impl` (capture's
    --optimizer-impl), made once and kept under out/."""
    model, make_args, _ = MODELS[name]
    work = CACHE / (name if impl == "forloop" else f"{name}-{impl}")
    key = json.dumps([str(model), make_args, MICROBATCHES, impl, model.stat().st_mtime])
    if (work / "key").exists() and (work / "key").read_text() == key:
        return work
    work.mkdir(parents=True, exist_ok=True)
    run([sys.executable, "-m", "loom.capture", model, "--out", work, "--steps", "1",
         "--optimizer", "adamw", "--optimizer-impl", impl, "--microbatches", MICROBATCHES,
         *[a for k, v in make_args.items() for a in ("--make-arg", f"{k}={v}")]])
    run([BUILD / "bin" / "loom-import", work / "step.pt2", "-o", work / "step.mlir"])
    (work / "key").write_text(key)
    return work


def loom_compile(name: str, schedule: str, work: Path, impl: str) -> Path:
    stages = PP * SCHEDULES[schedule]
    artifact = work / f"{schedule}.loomx"
    run([BUILD / "bin" / "loom-compile", work / "step.mlir", "-o", artifact,
         "--optimizer=adamw", f"--optimizer-impl={impl}", f"--lr={LR}",
         f"--weight-decay={WEIGHT_DECAY}", f"--pp={PP}",
         f"--pp-schedule={schedule}", f"--pp-stages={stages}",
         f"--pp-boundaries={boundaries(MODELS[name][2], units_of(name), stages)}"])
    return artifact


STEP_LINE = re.compile(r"step\s+(\d+)\s+loss\s+(\S+)\s+time")


# Trace categories of a rank's step, in the order the breakdown prints them:
# stage compute, the optimizer, frees, posting sends/receives, waiting on them.
PARTS = ("forward", "backward", "optimizer", "free", "comm_issue", "comm_wait")


def breakdown(events: list, steps: range) -> list:
    """Per rank, the mean ms per step of `steps` spent in each of PARTS."""
    spans = {(e["pid"], int(e["name"].split()[1])): (e["ts"], e["ts"] + e["dur"])
             for e in events if e.get("cat") == "step" and e.get("ph") == "X"}
    total = [dict.fromkeys(PARTS, 0.0) for _ in range(PP)]
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in PARTS:
            continue
        for s in steps:
            start, end = spans[(e["pid"], s)]
            if start <= e["ts"] < end:
                total[e["pid"]][e["cat"]] += e["dur"] / 1e3 / len(steps)
                break
    return total


def loom_run(artifact: Path, work: Path, steps: int, warm: int) -> dict:
    trace = work / f"{artifact.stem}.trace.json"
    out = run([BUILD / "runtime" / "bin" / "loom-run", artifact, "--nproc", PP,
               "--batches", work / "batches.safetensors", "--steps", steps, "--threads", 1,
               "--no-progress", "--trace", trace])
    losses = [float(m.group(2)) for m in map(STEP_LINE.search, out.splitlines()) if m]
    if len(losses) != steps:
        sys.exit(f"bench: could not parse loom-run's output:\n{out}")
    times = [[0.0] * steps for _ in range(PP)]
    waits = [[0.0] * steps for _ in range(PP)]
    seen = 0
    events = json.loads(trace.read_text())["traceEvents"]
    for e in events:
        if e.get("cat") == "step" and e.get("ph") == "X":
            step = int(e["name"].split()[1])
            times[e["pid"]][step] = e["dur"] / 1e3
            waits[e["pid"]][step] = e["args"].get("comm_wait_us", 0.0) / 1e3
            seen += 1
    if seen != PP * steps:
        sys.exit(f"bench: {trace} has {seen} step events, expected {PP} x {steps}")
    return {"losses": losses, "rank_times_ms": times, "rank_wait_ms": waits,
            "breakdown_ms": breakdown(events, range(warm, steps))}


# -------------------------------------------------------------- PyTorch side

class LlamaStage(nn.Module):
    """Blocks [lo, hi) of a Llama3 model, with its embedding on the first
    stage and its final norm and output projection on the last."""

    def __init__(self, model: nn.Module, lo: int, hi: int, first: bool, last: bool):
        super().__init__()
        self.tok_embeddings = model.tok_embeddings if first else None
        self.layers = nn.ModuleList(model.layers[lo:hi])
        self.norm = model.norm if last else None
        self.output = model.output if last else None
        self.register_buffer("rope_cos", model.rope_cos, persistent=False)
        self.register_buffer("rope_sin", model.rope_sin, persistent=False)

    def forward(self, x):
        h = self.tok_embeddings(x) if self.tok_embeddings is not None else x
        t = h.shape[1]
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        for layer in self.layers:
            h = layer(h, cos, sin)
        return self.output(self.norm(h)) if self.output is not None else h


def llama_loss(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(0, 1))


def torch_stage_module(name: str, model: nn.Module, stage: int, stages: int) -> nn.Module:
    lo, hi = stage_ranges(units_of(name), stages)[stage]
    if name == "llama":
        return LlamaStage(model, lo, hi, stage == 0, stage == stages - 1)
    return nn.Sequential(*model.stack[lo:hi])


def torch_rank(rank: int, port: int, cfg: dict) -> None:
    import torch.distributed as dist
    from safetensors.torch import load_file
    from torch.distributed import pipelining

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    # torch 2.9.1's first schedule step sends an int64 stage index to each
    # neighbour into a float32 buffer, to set up NCCL communicators; Gloo
    # aborts on the size mismatch ("8 vs 4"). Gloo's pairs exist from
    # init_process_group on, so that handshake is left out.
    pipelining.stage._PipelineStageBase._get_init_p2p_neighbors_ops = lambda self: []
    dist.init_process_group("gloo", rank=rank, world_size=PP)
    try:
        name, schedule = cfg["model"], cfg["schedule"]
        model_file, make_args, _ = MODELS[name]
        torch.manual_seed(0)  # what capture does before make()
        model, _ = runpy.run_path(str(model_file))["make"](**make_args)
        saved = load_file(cfg["batches"])
        batches = [tuple(saved[f"step{i}.arg{j}"] for j in range(2))
                   for i in range(len({k.split(".")[0] for k in saved}))]
        stages = PP * SCHEDULES[schedule]
        local = list(range(rank, stages, PP))  # stage s on rank s mod pp
        modules = [torch_stage_module(name, model, s, stages) for s in local]
        # Every stage's microbatch input and output, from the whole chain on
        # microbatch 0, given to PipelineStage so that it does not infer them
        # by exchanging metadata on the first step.
        examples = [batches[0][0].tensor_split(MICROBATCHES)[0]]
        with torch.no_grad():
            for s in range(stages):
                examples.append(torch_stage_module(name, model, s, stages)(examples[-1]))
        pipe = [pipelining.PipelineStage(m, s, stages, torch.device("cpu"),
                                         input_args=(examples[s],), output_args=examples[s + 1])
                for m, s in zip(modules, local)]
        loss_fn = llama_loss if name == "llama" else F.cross_entropy
        cls = getattr(pipelining, f"Schedule{schedule}")
        sched = cls(pipe if SCHEDULES[schedule] > 1 else pipe[0], MICROBATCHES,
                    loss_fn=loss_fn, scale_grads=True)
        params = [p for m in modules for p in m.parameters()]
        opt = torch.optim.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY, fused=True)
        holds_first, holds_last = 0 in local, stages - 1 in local

        times, losses = [], []
        for i in range(cfg["steps"]):
            x, y = batches[i % len(batches)]
            dist.barrier()
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            mb_losses = []
            if holds_first:
                sched.step(x, target=y if holds_last else None,
                           losses=mb_losses if holds_last else None)
            else:
                sched.step(target=y if holds_last else None,
                           losses=mb_losses if holds_last else None)
            opt.step()
            times.append((time.perf_counter() - start) * 1e3)
            if holds_last:
                losses.append(torch.stack(mb_losses).mean().item())
        Path(f"{cfg['out']}.rank{rank}").write_text(json.dumps(
            {"times_ms": times, "losses": losses}))
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_run(name: str, schedule: str, work: Path, steps: int) -> dict:
    import torch.multiprocessing as mp
    out = work / f"torch-{schedule}.json"
    cfg = {"model": name, "schedule": schedule, "steps": steps, "out": str(out),
           "batches": str(work / "batches.safetensors")}
    mp.spawn(torch_rank, args=(free_port(), cfg), nprocs=PP, join=True)
    ranks = [json.loads(Path(f"{out}.rank{r}").read_text()) for r in range(PP)]
    return {"losses": next(r["losses"] for r in ranks if r["losses"]),
            "rank_times_ms": [r["times_ms"] for r in ranks]}


# ---------------------------------------------------------------------- main

def slowest_rank(rank_times: list) -> list:
    return [max(step) for step in zip(*rank_times)]


def bench_case(name: str, schedule: str, args) -> dict:
    work = loom_capture(name, args.loom_optimizer_impl)
    artifact = loom_compile(name, schedule, work, args.loom_optimizer_impl)
    warm = min(args.warmup, args.steps - 1)
    times = {"loom": [], "torch": []}
    waits, first = [], {}
    for r in range(args.rounds):
        for side in (["loom", "torch"] if r % 2 == 0 else ["torch", "loom"]):
            if side == "loom":
                out = loom_run(artifact, work, args.steps, warm)
                # Per step: the longest transfer wait of a rank over the step time.
                waits += [max(w) / max(t) for w, t in zip(zip(*out["rank_wait_ms"]),
                                                           zip(*out["rank_times_ms"]))][warm:]
            else:
                out = torch_run(name, schedule, work, args.steps)
            times[side] += slowest_rank(out["rank_times_ms"])[warm:]
            first.setdefault(side, out)
            if side == "loom":
                parts = out["breakdown_ms"]  # of the last round
    ms = {side: statistics.median(t) for side, t in times.items()}
    # Relative to the loss (the MLP stack's start near 46), as loom-run
    # --check compares: |a - b| / max(1, |b|).
    diffs = [abs(a - b) / max(1.0, abs(b))
             for a, b in zip(first["loom"]["losses"], first["torch"]["losses"])]
    return {"model": name, "schedule": schedule, "stages": PP * SCHEDULES[schedule],
            "boundaries": boundaries(MODELS[name][2], units_of(name), PP * SCHEDULES[schedule]),
            "median_ms": ms, "ratio": ms["loom"] / ms["torch"],
            "loom_wait_fraction": statistics.median(waits), "loom_breakdown_ms": parts,
            "max_rel_loss_diff": max(diffs), "final_loss": {
                s: first[s]["losses"][-1] for s in ("loom", "torch")},
            "losses": {s: first[s]["losses"] for s in ("loom", "torch")}, "times_ms": times}


def main() -> None:
    if sys.argv[1:2] == ["sim"]:
        # The simulated mode has its own options and no torch processes.
        sys.path.insert(0, str(REPO / "bench"))
        import pipeline_sim
        sys.exit(pipeline_sim.main(sys.argv[2:]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=["cpu", "sim"],
                        help="cpu: measured against torch.distributed.pipelining; sim: "
                             "simulated Llama-3-70B/405B (bench/pipeline_sim.py)")
    parser.add_argument("--steps", type=int, default=8, help="steps per round and side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2,
                        help="first steps of each round left out of the median")
    cases = [f"{m}-{s}" for m in MODELS for s in SCHEDULES]
    parser.add_argument("--cases", nargs="+", choices=cases, default=cases)
    parser.add_argument("--loom-optimizer-impl", choices=("forloop", "fused"), default="forloop",
                        help="Loom's AdamW: one update per parameter (forloop) or ATen's "
                             "fused kernel, as PyTorch's side runs (capture --optimizer-impl)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step is warm-up)")

    started = time.perf_counter()
    results = [bench_case(*case.split("-", 1), args) for case in args.cases]
    print(f"pp={PP}, {MICROBATCHES} microbatches, AdamW (torch: fused), 1 ATen thread per rank, "
          f"{args.rounds} interleaved rounds x {args.steps} steps (median of the steps after "
          f"{min(args.warmup, args.steps - 1)} in each round, slowest rank per step), "
          f"{os.cpu_count()} cores, torch {torch.__version__}, "
          f"{time.perf_counter() - started:.0f} s")
    print(f"{'case':24}{'stages':>7}{'Loom ms':>10}{'torch ms':>10}{'Loom/torch':>12}"
          f"{'Loom wait':>11}{'rel. diff':>11}{'final loss':>12}")
    for r in results:
        print(f"{r['model'] + ' ' + r['schedule']:24}{r['stages']:7d}"
              f"{r['median_ms']['loom']:10.2f}{r['median_ms']['torch']:10.2f}{r['ratio']:12.3f}"
              f"{r['loom_wait_fraction']:10.0%} {r['max_rel_loss_diff']:11.1e}"
              f"{r['final_loss']['loom']:12.6f}")
        if r["max_rel_loss_diff"] > 1e-5:
            print(f"  losses differ: Loom {r['losses']['loom']} vs torch {r['losses']['torch']}")
    print(f"\nLoom, ms per step by trace category (mean over the last round's timed steps)")
    print(f"{'case':30}" + "".join(f"{p:>11}" for p in PARTS))
    for r in results:
        for rank, parts in enumerate(r["loom_breakdown_ms"]):
            print(f"{r['model'] + ' ' + r['schedule'] + f' rank {rank}':30}"
                  + "".join(f"{parts[p]:11.2f}" for p in PARTS))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"pp": PP, "microbatches": MICROBATCHES,
                                         "steps": args.steps, "rounds": args.rounds,
                                         "warmup": args.warmup, "cores": os.cpu_count(),
                                         "torch": torch.__version__, "results": results},
                                        indent=2) + "\n")


if __name__ == "__main__":
    main()
