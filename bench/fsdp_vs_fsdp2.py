"""Loom's FSDP step vs PyTorch's own FSDP2 (fully_shard), on N CPU ranks over Gloo.

Both train the same model on the same batches with AdamW(lr=1e-3,
weight_decay=0.01), sharded over the same world size with the same
reshard-after-forward setting; every rank trains on its 1/N row slice of
each global batch. FSDP2: `fully_shard` on each `model.layers[i]` and on the
root, Gloo on loopback, N processes from torch.multiprocessing.spawn. Loom:
capture --split N -> loom-import -> loom-compile --dp=fsdp -> loom-run
--nproc N. Prints, per world size, the median step time of both and the
ratio (Loom / FSDP2; below 1.0 means Loom is faster), rank 0's peak memory
and the collectives per step of both, after checking that the first losses
agree within 1e-5.

    .venv/bin/python bench/fsdp_vs_fsdp2.py [--model examples/gpt.py]
        [--ranks 2 4] [--steps 60] [--reshard-after-forward auto|true|false]
        [--threads 1] [--force-sum] [--json F]

Time: median over the steps after `--warmup` of rank 0's wall time per step
(FSDP2: zero_grad + forward + backward + optimizer step + the loss all-reduce
that makes the printed loss the global one; Loom: the `time` loom-run
prints, which includes its own loss reduction). Memory: the largest number of
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


def run(cmd: list) -> str:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    if result.returncode:
        sys.exit(f"bench: {' '.join(map(str, cmd))} failed:\n{result.stderr}{result.stdout}")
    return result.stdout + result.stderr


# ----------------------------------------------------------------- Loom side

def loom_compile(model: Path, ranks: int, reshard: str, work: Path) -> Path:
    run([sys.executable, "-m", "loom.capture", model, "--out", work, "--steps", "1",
         "--optimizer", "adamw", "--split", ranks])
    run([BUILD / "bin" / "loom-import", work / "step.pt2", "-o", work / "step.mlir"])
    run([BUILD / "bin" / "loom-compile", work / "step.mlir", "-o", work / "step.loomx",
         "--optimizer=adamw", f"--lr={LR}", f"--weight-decay={WEIGHT_DECAY}",
         "--dp=fsdp", f"--world-size={ranks}", f"--reshard-after-forward={reshard}"])
    return work / "step.loomx"


STEP_LINE = re.compile(r"step\s+(\d+)\s+loss\s+(\S+)\s+time\s+(\S+) ms\s+peak\s+(\S+) MiB.*\|(.*)$")


def loom_run(artifact: Path, work: Path, ranks: int, steps: int, threads: int) -> dict:
    out = run([BUILD / "runtime" / "bin" / "loom-run", artifact, "--nproc", ranks,
               "--batches", work / "batches.safetensors", "--steps", steps,
               "--threads", threads, "--no-progress"])
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
    return {"losses": losses, "times_ms": times, "peak_bytes": peaks[-1], "peaks": peaks,
            "comms": comms[-1]}


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
        torch.manual_seed(0)  # what capture does before make()
        model, batches = runpy.run_path(cfg["model"])["make"]()
        reshard = RESHARD[cfg["reshard"]]
        for layer in model.layers:
            fully_shard(layer, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        if cfg["force_sum"]:
            # SUM reduce-scatter, divide after (default: FSDP2's ReduceOp.AVG).
            for m in model.modules():
                if hasattr(m, "set_force_sum_reduction_for_comms"):
                    m.set_force_sum_reduction_for_comms(True)
        opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)

        def local(batch):
            rows = batch[0].shape[0] // world
            return tuple(t[rank * rows:(rank + 1) * rows].contiguous() for t in batch)

        slices = [local(b) for b in batches]

        def step(i: int) -> torch.Tensor:
            opt.zero_grad(set_to_none=True)
            loss = model(*slices[i % len(slices)])
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
          force_sum: bool, work: Path) -> dict:
    import torch.multiprocessing as mp
    out = work / "fsdp2.json"
    cfg = {"model": str(model), "reshard": reshard, "steps": steps, "threads": threads,
           "force_sum": force_sum, "out": str(out)}
    mp.spawn(fsdp2_rank, args=(ranks, free_port(), cfg), nprocs=ranks, join=True)
    return json.loads(out.read_text())


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
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5,
                        help="first steps left out of the median")
    parser.add_argument("--reshard-after-forward", choices=sorted(RESHARD), default="auto")
    parser.add_argument("--threads", type=int, default=1, help="ATen threads per rank")
    parser.add_argument("--force-sum", action="store_true",
                        help="FSDP2 reduce-scatters with SUM and divides after "
                             "(default: its own choice, ReduceOp.AVG, which Gloo accepts)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    model = args.model.resolve()
    name = str(model.relative_to(REPO) if model.is_relative_to(REPO) else model)

    results = []
    for ranks in args.ranks:
        work = Path(tempfile.mkdtemp(prefix=f"loom-fsdp-bench-{ranks}-"))
        artifact = loom_compile(model, ranks, args.reshard_after_forward, work)
        ref = fsdp2(model, ranks, args.reshard_after_forward, args.steps, args.threads,
                    args.force_sum, work)
        loom = loom_run(artifact, work, ranks, args.steps, args.threads)
        first = min(3, args.steps)
        diff = max(abs(a - b) for a, b in zip(ref["losses"][:first], loom["losses"][:first]))
        if diff > 1e-5:
            sys.exit(f"bench: losses differ on {ranks} ranks: FSDP2 {ref['losses'][:first]} "
                     f"vs Loom {loom['losses'][:first]}")
        w = min(args.warmup, args.steps - 1)
        ref_ms = statistics.median(ref["times_ms"][w:])
        loom_ms = statistics.median(loom["times_ms"][w:])
        results.append({
            "ranks": ranks, "fsdp2_ms": ref_ms, "loom_ms": loom_ms, "time_ratio": loom_ms / ref_ms,
            "fsdp2_peak_bytes": ref["peak_bytes"], "loom_peak_bytes": loom["peak_bytes"],
            "memory_ratio": loom["peak_bytes"] / ref["peak_bytes"],
            "fsdp2_peak_bytes_main_thread": ref["peak_bytes_main_thread"],
            "memory_ratio_main_thread": loom["peak_bytes"] / ref["peak_bytes_main_thread"],
            "fsdp2_other_thread_memory_events": ref["other_thread_events"],
            "loom_peak_bytes_min_max": [min(loom["peaks"]), max(loom["peaks"])],
            "fsdp2_comms": short(ref["comms"]), "fsdp2_comms_raw": ref["comms"],
            "loom_comms": loom["comms"],
            "max_loss_diff_first": diff,
            "max_loss_diff_all": max(abs(a - b) for a, b in zip(ref["losses"], loom["losses"])),
            "fsdp2_losses": ref["losses"], "loom_losses": loom["losses"],
            "fsdp2_times_ms": ref["times_ms"], "loom_times_ms": loom["times_ms"],
        })

    cores = os.cpu_count()
    print(f"model {name}, adamw, reshard-after-forward {args.reshard_after_forward}, "
          f"{args.threads} ATen thread(s) per rank, {args.steps} steps (median of the last "
          f"{args.steps - min(args.warmup, args.steps - 1)}), {cores} cores, torch {torch.__version__}")
    mib = 2**20
    for r in results:
        over = " (oversubscribed)" if r["ranks"] * args.threads > cores else ""
        print(f"\n{r['ranks']} ranks{over}: first losses agree within {r['max_loss_diff_first']:.1e} "
              f"(all {args.steps}: {r['max_loss_diff_all']:.1e})")
        print(f"{'':22}{'FSDP2':>14}{'Loom':>14}{'Loom/FSDP2':>12}")
        print(f"{'step time (ms)':22}{r['fsdp2_ms']:14.3f}{r['loom_ms']:14.3f}{r['time_ratio']:12.3f}")
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
        args.json.write_text(json.dumps({
            "model": name, "reshard_after_forward": args.reshard_after_forward,
            "threads": args.threads, "steps": args.steps, "warmup": args.warmup, "cores": cores,
            "torch": torch.__version__, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
