"""Loom's FSDP step vs PyTorch's own FSDP2 (fully_shard), on N CPU ranks over Gloo.

Both train the same model on the same batches with AdamW(lr=1e-3,
weight_decay=0.01), sharded over the same world size with the same
reshard-after-forward setting; every rank trains on its 1/N row slice of
each global batch. FSDP2: `fully_shard` on each `model.layers[i]` and on the
root, Gloo on loopback, N processes from torch.multiprocessing.spawn, AdamW
with `fused=True` by default (the fastest setting that runs on CPU DTensor
shards: `--fsdp2-optimizer` picks another), and with `--compile` also FSDP2
with `torch.compile(model)`. Loom: capture --split N -> loom-import ->
loom-compile --dp=fsdp -> loom-run --nproc N. Prints, per world size, the
median step time of each and the ratio of Loom to the fastest FSDP2 setting
(below 1.0 means Loom is faster), rank 0's peak memory and the collectives
per step, after checking that the first losses agree within 1e-5.

    .venv/bin/python bench/fsdp_vs_fsdp2.py [--model examples/gpt.py]
        [--ranks 2 4] [--steps 30] [--rounds 3] [--warmup 5]
        [--reshard-after-forward auto|true|false] [--threads 1]
        [--fsdp2-optimizer fused|foreach|forloop] [--loom-optimizer-impl forloop|fused]
        [--compile] [--force-sum]
        [--json F]

Rounds: every contestant runs `--steps` steps once per round, in an order
rotated each round (Loom, FSDP2, Loom, FSDP2 ...), so that load from other
jobs on the machine hits them alike. Time: every rank times every step; a
step's time is the maximum over the ranks (the slowest rank is what the job
waits for), and the reported time is the median over all rounds of the
steps after `--warmup` (FSDP2: zero_grad + forward + backward + optimizer
step + the loss all-reduce that makes the printed loss the global one; Loom:
the step time of each rank's session, read from the `--trace` each rank
writes, which includes its own loss reduction). Memory: the largest number of
live CPU tensor bytes on rank 0 during one step, counting everything alive
(local parameter shards, buffers, optimizer state, the batch slice,
unsharded parameters, activations, gradients), measured for FSDP2 from the
c10 allocator's reports through torch.profiler(profile_memory=True) (the
reports Loom's tracker counts; see fsdp2_rank for why not
loomrt_memory_region_*), for Loom by its session tracker (the `peak`
loom-run prints for the last step, 0.01 MiB resolution). FSDP2's is given
twice: over the reports of every thread (Gloo's workers included) and over
those of the main thread only, which is what Loom's tracker counts.
Collectives: FSDP2's counted with CommDebugMode over one step (the loss
all-reduce is outside it), Loom's as loom-run reports them.
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
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("LOOM_BUILD_DIR", REPO / "build"))
LR, WEIGHT_DECAY = 1e-3, 0.01
RESHARD = {"auto": None, "true": True, "false": False}
# AdamW's implementations; all three accept FSDP2's DTensor shards on the CPU
# in torch 2.9.1 (the default there is "forloop", one parameter at a time).
FSDP2_OPTIMIZERS = {"forloop": {"foreach": False}, "foreach": {"foreach": True},
                    "fused": {"fused": True}}


def run(cmd: list) -> str:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    if result.returncode:
        sys.exit(f"bench: {' '.join(map(str, cmd))} failed:\n{result.stderr}{result.stdout}")
    return result.stdout + result.stderr


# ----------------------------------------------------------------- Loom side

def loom_compile(model: Path, ranks: int, reshard: str, work: Path,
                 impl: str = "forloop") -> Path:
    """The FSDP artifact, its AdamW as `impl` (loom-compile --optimizer-impl)."""
    run([sys.executable, "-m", "loom.capture", model, "--out", work, "--steps", "1",
         "--optimizer", "adamw", "--optimizer-impl", impl, "--split", ranks])
    run([BUILD / "bin" / "loom-import", work / "step.pt2", "-o", work / "step.mlir"])
    run([BUILD / "bin" / "loom-compile", work / "step.mlir", "-o", work / "step.loomx",
         "--optimizer=adamw", f"--lr={LR}", f"--weight-decay={WEIGHT_DECAY}",
         "--dp=fsdp", f"--world-size={ranks}", f"--reshard-after-forward={reshard}",
         f"--optimizer-impl={impl}"])
    return work / "step.loomx"


STEP_LINE = re.compile(r"step\s+(\d+)\s+loss\s+(\S+)\s+time\s+(\S+) ms\s+peak\s+(\S+) MiB.*\|(.*)$")


def rank_step_times(trace: Path, ranks: int, steps: int) -> list:
    """Every rank's step times (ms) from a merged loom-run trace: one "step"
    event per rank and step, pid = rank."""
    times = [[0.0] * steps for _ in range(ranks)]
    seen = 0
    for e in json.loads(trace.read_text())["traceEvents"]:
        if e.get("cat") == "step" and e.get("ph") == "X":
            times[e["pid"]][int(e["name"].split()[1])] = e["dur"] / 1e3
            seen += 1
    if seen != ranks * steps:
        sys.exit(f"bench: {trace} has {seen} step events, expected {ranks} x {steps}")
    return times


def loom_run(artifact: Path, work: Path, ranks: int, steps: int, threads: int,
             every_rank: bool = False) -> dict:
    """`every_rank`: also time every rank (through --trace, which times each
    instruction too: two clock reads each); "times_ms" stays rank 0's."""
    trace = work / "loom-trace.json"
    out = run([BUILD / "runtime" / "bin" / "loom-run", artifact, "--nproc", ranks,
               "--batches", work / "batches.safetensors", "--steps", steps,
               "--threads", threads, "--no-progress",
               *(["--trace", trace] if every_rank else [])])
    losses, times, peaks, comms = [], [], [], []
    for line in out.splitlines():
        m = STEP_LINE.search(line)
        if not m:
            continue
        losses.append(float(m.group(2)))
        times.append(float(m.group(3)))
        peaks.append(float(m.group(4)) * 2**20)
        comms.append({k: int(n) for k, n in re.findall(r"(\w+) (\d+) \(", m.group(5))})
    if len(losses) != steps:
        sys.exit(f"bench: could not parse loom-run's output:\n{out}")
    result = {"losses": losses, "times_ms": times, "peak_bytes": peaks[-1], "peaks": peaks,
              "comms": comms[-1]}
    if every_rank:
        result["rank_times_ms"] = rank_step_times(trace, ranks, steps)
    return result


# ---------------------------------------------------------------- FSDP2 side

def held_bytes(tensors) -> int:
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        if hasattr(t, "to_local"):
            t = t.to_local()
        storage = t.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total


def fsdp2_rank(rank: int, world: int, port: int, cfg: dict) -> None:
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.debug import CommDebugMode

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(cfg["threads"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        make = runpy.run_path(cfg["model"])["make"]
        torch.manual_seed(0)  # what capture does after importing the file
        model, batches = make()
        reshard = RESHARD[cfg["reshard"]]
        for layer in model.layers:
            fully_shard(layer, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        # What a user would write: compile the sharded model; FSDP2's hooks
        # stay eager (dynamo skips them by default), the blocks' compute is
        # compiled by Inductor.
        forward = torch.compile(model) if cfg.get("compile") else model
        if cfg["force_sum"]:
            # SUM reduce-scatter, divide after (default: FSDP2's ReduceOp.AVG).
            for m in model.modules():
                if hasattr(m, "set_force_sum_reduction_for_comms"):
                    m.set_force_sum_reduction_for_comms(True)
        opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY,
                                **FSDP2_OPTIMIZERS[cfg.get("optimizer", "forloop")])

        def local(batch):
            rows = batch[0].shape[0] // world
            return tuple(t[rank * rows:(rank + 1) * rows].contiguous() for t in batch)

        slices = [local(b) for b in batches]

        def step(i: int) -> torch.Tensor:
            opt.zero_grad(set_to_none=True)
            loss = forward(*slices[i % len(slices)])
            loss.backward()
            opt.step()
            return loss.detach()

        def reduced(loss: torch.Tensor) -> float:
            dist.all_reduce(loss)  # SUM, then / N
            return loss.item() / world

        losses, times = [], []
        for i in range(cfg["steps"]):
            start = time.perf_counter()
            losses.append(reduced(step(i)))
            times.append((time.perf_counter() - start) * 1e3)
        Path(f"{cfg['out']}.rank{rank}").write_text(json.dumps(times))
        if not cfg.get("measure", True):
            if rank == 0:
                Path(cfg["out"]).write_text(json.dumps({"losses": losses, "times_ms": times}))
            return

        # Collectives of one more (untimed: CommDebugMode slows it) step.
        with CommDebugMode() as mode:
            loss = step(cfg["steps"])
        comms = {str(k): v for k, v in mode.get_comm_counts().items()}
        reduced(loss)

        # Peak of one more step, everything alive counted. The allocator
        # reports are read through torch.profiler(profile_memory=True), the
        # same c10 reportMemoryUsage hook Loom's tracker implements: its
        # loomrt_memory_region_* cannot be used here because it installs the
        # tracker as the thread's PROFILER_STATE, and FSDP2's record_function
        # scopes read that slot as a profiler state (std::bad_array_new_length
        # or SIGSEGV in torch 2.9.1). As in Loom's tracker, a free of a block
        # allocated before the region is not subtracted.
        index = cfg["steps"] + 1
        state = [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]
        held = held_bytes([*model.parameters(), *model.buffers(), *state,
                           *slices[index % len(slices)]])
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            loss = step(index)
        reduced(loss)
        events = sorted((e.start_ns(), e.nbytes(), e.start_thread_id())
                        for e in prof.profiler.kineto_results.events()
                        if e.name() == "[memory]" and str(e.device_type()).endswith("CPU"))

        def peak_of(selected) -> int:
            live = peak = held
            for _, nbytes, _ in selected:
                live += nbytes
                peak = max(peak, live)
            return peak

        # Gloo's worker threads run each collective under the caller's
        # thread-local state, so the profiler also records what they
        # allocate, at moments that race with the main thread. Loom's
        # tracker counts only its session thread's blocks; "main thread" is
        # the comparable FSDP2 number (the thread with the most reports).
        threads = [tid for _, _, tid in events]
        main = max(set(threads), key=threads.count) if threads else 0
        if rank == 0:
            Path(cfg["out"]).write_text(json.dumps(
                {"losses": losses, "times_ms": times, "peak_bytes": peak_of(events),
                 "peak_bytes_main_thread": peak_of([e for e in events if e[2] == main]),
                 "other_thread_events": sum(1 for t in threads if t != main),
                 "comms": comms}))
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fsdp2(model: Path, ranks: int, reshard: str, steps: int, threads: int,
          force_sum: bool, work: Path, optimizer: str = "forloop", compile: bool = False,
          measure: bool = True) -> dict:
    """Runs FSDP2 on `ranks` processes. "times_ms" is rank 0's step times,
    "rank_times_ms" every rank's; `measure`: also count the collectives and
    the peak memory, each on one more (untimed) step."""
    import torch.multiprocessing as mp
    out = work / "fsdp2.json"
    cfg = {"model": str(model), "reshard": reshard, "steps": steps, "threads": threads,
           "force_sum": force_sum, "out": str(out), "optimizer": optimizer,
           "compile": compile, "measure": measure}
    mp.spawn(fsdp2_rank, args=(ranks, free_port(), cfg), nprocs=ranks, join=True)
    result = json.loads(out.read_text())
    result["rank_times_ms"] = [json.loads(Path(f"{out}.rank{r}").read_text())
                               for r in range(ranks)]
    return result


def slowest_rank(rank_times: list) -> list:
    """Per step, the time of the slowest rank."""
    return [max(step) for step in zip(*rank_times)]


def short(comms: dict) -> dict:
    """CommDebugMode keys (c10d op overloads) -> all_gather / reduce_scatter / ..."""
    result = {}
    for key, n in comms.items():
        name = str(key).split(".")[-1] if "." in str(key) else str(key)
        for kind in ("all_gather", "allgather", "reduce_scatter", "all_reduce", "allreduce",
                     "broadcast"):
            if kind in str(key).lower():
                name = {"allgather": "all_gather", "allreduce": "all_reduce"}.get(kind, kind)
                break
        result[name] = result.get(name, 0) + n
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=REPO / "examples" / "gpt.py")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--steps", type=int, default=30, help="steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5,
                        help="first steps of each round left out of the median")
    parser.add_argument("--reshard-after-forward", choices=sorted(RESHARD), default="auto")
    parser.add_argument("--threads", type=int, default=1, help="ATen threads per rank")
    parser.add_argument("--fsdp2-optimizer", choices=sorted(FSDP2_OPTIMIZERS), default="fused",
                        help="FSDP2's AdamW implementation (default: fused, the fastest)")
    parser.add_argument("--loom-optimizer-impl", choices=("forloop", "fused"), default="forloop",
                        help="Loom's AdamW: torch.optim's single-tensor loop (default) or its "
                             "fused kernels (loom-compile --optimizer-impl)")
    parser.add_argument("--compile", action="store_true",
                        help="also run FSDP2 with torch.compile(model) (compiles anew in "
                             "every round: minutes on a small machine)")
    parser.add_argument("--force-sum", action="store_true",
                        help="FSDP2 reduce-scatters with SUM and divides after "
                             "(default: its own choice, ReduceOp.AVG, which Gloo accepts)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    model = args.model.resolve()
    name = str(model.relative_to(REPO) if model.is_relative_to(REPO) else model)
    warm = min(args.warmup, args.steps - 1)
    contestants = ["loom", "fsdp2"] + (["fsdp2-compile"] if args.compile else [])

    results = []
    for ranks in args.ranks:
        work = Path(tempfile.mkdtemp(prefix=f"loom-fsdp-bench-{ranks}-"))
        artifact = loom_compile(model, ranks, args.reshard_after_forward, work,
                                args.loom_optimizer_impl)
        times = {c: [] for c in contestants}
        rank0 = {c: [] for c in contestants}
        first = {}
        for r in range(args.rounds):
            for c in contestants[r % len(contestants):] + contestants[:r % len(contestants)]:
                if c == "loom":
                    out = loom_run(artifact, work, ranks, args.steps, args.threads,
                                   every_rank=True)
                else:
                    out = fsdp2(model, ranks, args.reshard_after_forward, args.steps,
                                args.threads, args.force_sum, work, args.fsdp2_optimizer,
                                compile=c == "fsdp2-compile",
                                measure=c == "fsdp2" and c not in first)
                times[c] += slowest_rank(out["rank_times_ms"])[warm:]
                rank0[c] += out["times_ms"][warm:]
                first.setdefault(c, out)
        ref, loom = first["fsdp2"], first["loom"]
        n = min(3, args.steps)
        for c in contestants[1:]:
            diff = max(abs(a - b) for a, b in zip(first[c]["losses"][:n], loom["losses"][:n]))
            if diff > 1e-5:
                sys.exit(f"bench: losses differ on {ranks} ranks: {c} {first[c]['losses'][:n]} "
                         f"vs Loom {loom['losses'][:n]}")
        ms = {c: statistics.median(times[c]) for c in contestants}
        strongest = min(contestants[1:], key=lambda c: ms[c])
        results.append({
            "ranks": ranks, "median_ms": ms,
            "rank0_median_ms": {c: statistics.median(rank0[c]) for c in contestants},
            "strongest_peer": strongest, "time_ratio": ms["loom"] / ms[strongest],
            "fsdp2_ms": ms["fsdp2"], "loom_ms": ms["loom"],
            "fsdp2_peak_bytes": ref["peak_bytes"], "loom_peak_bytes": loom["peak_bytes"],
            "memory_ratio": loom["peak_bytes"] / ref["peak_bytes"],
            "fsdp2_peak_bytes_main_thread": ref["peak_bytes_main_thread"],
            "memory_ratio_main_thread": loom["peak_bytes"] / ref["peak_bytes_main_thread"],
            "fsdp2_other_thread_memory_events": ref["other_thread_events"],
            "loom_peak_bytes_min_max": [min(loom["peaks"]), max(loom["peaks"])],
            "fsdp2_comms": short(ref["comms"]), "fsdp2_comms_raw": ref["comms"],
            "loom_comms": loom["comms"],
            "max_loss_diff_first": max(
                abs(a - b) for a, b in zip(ref["losses"][:n], loom["losses"][:n])),
            "max_loss_diff_all": max(abs(a - b) for a, b in zip(ref["losses"], loom["losses"])),
            "fsdp2_losses": ref["losses"], "loom_losses": loom["losses"],
            "times_ms": times,
        })

    cores = os.cpu_count()
    print(f"model {name}, adamw (FSDP2: {args.fsdp2_optimizer}, Loom: "
          f"{args.loom_optimizer_impl}), reshard-after-forward "
          f"{args.reshard_after_forward}, {args.threads} ATen thread(s) per rank, "
          f"{args.rounds} interleaved rounds x {args.steps} steps (median of the steps after "
          f"{warm} in each round, slowest rank per step), {cores} cores, "
          f"torch {torch.__version__}")
    mib = 2**20
    for r in results:
        over = " (oversubscribed)" if r["ranks"] * args.threads > cores else ""
        print(f"\n{r['ranks']} ranks{over}: first losses agree within {r['max_loss_diff_first']:.1e} "
              f"(all {args.steps}: {r['max_loss_diff_all']:.1e})")
        print(f"{'step time (ms)':22}{'slowest rank':>14}{'rank 0':>10}{'Loom/this':>11}")
        for c in contestants:
            print(f"  {c:20}{r['median_ms'][c]:14.3f}{r['rank0_median_ms'][c]:10.3f}"
                  f"{r['median_ms']['loom'] / r['median_ms'][c]:11.3f}")
        print(f"  Loom / strongest peer ({r['strongest_peer']}): {r['time_ratio']:.3f}")
        print(f"{'':22}{'FSDP2':>14}{'Loom':>14}{'Loom/FSDP2':>12}")
        print(f"{'peak rank 0 (MiB)':22}{r['fsdp2_peak_bytes'] / mib:14.3f}"
              f"{r['loom_peak_bytes'] / mib:14.2f}{r['memory_ratio']:12.3f}")
        print(f"{'  FSDP2 main thread':22}{r['fsdp2_peak_bytes_main_thread'] / mib:14.3f}"
              f"{r['loom_peak_bytes'] / mib:14.2f}{r['memory_ratio_main_thread']:12.3f}")
        for kind in ("all_gather", "reduce_scatter"):
            print(f"{kind + ' / step':22}{r['fsdp2_comms'].get(kind, 0):14d}"
                  f"{r['loom_comms'].get(kind, 0):14d}")
        lo, hi = (b / mib for b in r["loom_peak_bytes_min_max"])
        print(f"  Loom peak is its last step's; over all steps {lo:.2f} to {hi:.2f} MiB")
        others = {k: v for k, v in r["fsdp2_comms"].items() if k not in ("all_gather", "reduce_scatter")}
        if others:
            print(f"  FSDP2 other collectives in the step: {others}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "model": name, "reshard_after_forward": args.reshard_after_forward,
            "threads": args.threads, "steps": args.steps, "rounds": args.rounds,
            "warmup": args.warmup, "fsdp2_optimizer": args.fsdp2_optimizer,
            "loom_optimizer_impl": args.loom_optimizer_impl, "cores": cores,
            "torch": torch.__version__, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
