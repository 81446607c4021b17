"""Overlap on CPU ranks: Loom without prefetch, Loom with FSDP2's prefetch,
Loom's scheduled step, and PyTorch FSDP2 with its default prefetching.

All train the same model on the same batches with AdamW(lr=1e-3,
weight_decay=0.01), FSDP over N Gloo ranks on loopback (default 4), each
rank on its 1/N row slice of every global batch. The Loom variants are one
capture compiled three ways:

- `no-prefetch`: `loom-compile --dp=fsdp --backward-prefetch=none`: every
  all-gather is issued right before its unit runs and waited at once;
- `fsdp2-prefetch`: `--backward-prefetch=pre` (FSDP2's default: the next
  unit's all-gather before the current unit's backward; Loom's default,
  `bounded`, issues it only as early as the step's peak allows);
- `scheduled`: `--backward-prefetch=none --schedule` (loom-schedule, from the
  no-prefetch order, with the calibrated CPU spec,
  `data/devices/cpu.json`): all-gathers prefetched, reduce-scatters
  overlapped, at most 2 collectives in flight, no memory limit;
- `scheduled-bounded`: the same with `--memory-limit` set to the compiler's
  predicted peak of `no-prefetch` (`loom-compile --summary`), so the
  scheduler may hide communication only where it costs no memory.

FSDP2: `fully_shard` on each `model.layers[i]` and the root, its default
(implicit) prefetching (bench/fsdp_vs_fsdp2.py's runner).

The variants run in interleaved rounds (round r runs every variant once, in
a rotated order) so that load on the machine hits them alike; the time of a
variant is the median over all rounds of its per-step times after
`--warmup`. For each Loom variant it also prints the simulator's prediction
on the same spec (loom-simulate on the step the compile pipeline produces
right before lowering): step time and exposed communication.

    .venv/bin/python bench/overlap.py [--model examples/gpt.py] [--ranks 4]
        [--steps 40] [--rounds 3] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fsdp_vs_fsdp2 as fb  # noqa: E402  (the FSDP2 runner and loom-run parser)

REPO = fb.REPO
BUILD = fb.BUILD
VARIANTS = {
    "no-prefetch": ["--backward-prefetch=none"],
    "fsdp2-prefetch": ["--backward-prefetch=pre"],
    "scheduled": ["--backward-prefetch=none", "--schedule"],
    "scheduled-bounded": ["--schedule"],  # + --memory-limit, set in main()
}


def compile_variant(work: Path, ranks: int, flags: list, name: str) -> tuple[Path, dict]:
    base = [BUILD / "bin" / "loom-compile", work / "step.mlir", "--optimizer=adamw",
            f"--lr={fb.LR}", f"--weight-decay={fb.WEIGHT_DECAY}", "--dp=fsdp",
            f"--world-size={ranks}", *flags]
    artifact = work / f"{name}.loomx"
    fb.run([*base, "-o", artifact])
    # The same pipeline up to lowering, then the simulator on the CPU spec.
    pipeline = fb.run([*base, "-o", os.devnull, "--print-pipeline"]).strip()
    cut = pipeline.index(",loom-lower-to-rt")
    sim_pipeline = pipeline[:cut] + ",loom-simulate{device=cpu json=true})"
    out = fb.run([BUILD / "bin" / "loom-opt", work / "step.mlir",
                  f"--pass-pipeline={sim_pipeline}", "-o", os.devnull])
    report = json.loads(out[out.index("{"):])
    return artifact, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=REPO / "examples" / "gpt.py")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="ATen threads per rank")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    model = args.model.resolve()
    name = str(model.relative_to(REPO) if model.is_relative_to(REPO) else model)
    ranks = args.ranks

    work = Path(tempfile.mkdtemp(prefix=f"loom-overlap-{ranks}-"))
    fb.run([sys.executable, "-m", "loom.capture", model, "--out", work, "--steps", "1",
            "--optimizer", "adamw", "--split", ranks])
    fb.run([BUILD / "bin" / "loom-import", work / "step.pt2", "-o", work / "step.mlir"])
    summary = fb.run([BUILD / "bin" / "loom-compile", work / "step.mlir", "-o", os.devnull,
                      "--optimizer=adamw", f"--lr={fb.LR}", f"--weight-decay={fb.WEIGHT_DECAY}",
                      "--dp=fsdp", f"--world-size={ranks}", *VARIANTS["no-prefetch"], "--summary"])
    limit = int(re.search(r"predicted peak memory (\d+) bytes", summary).group(1))
    VARIANTS["scheduled-bounded"] = ["--backward-prefetch=none", "--schedule",
                                    f"--memory-limit={limit}"]
    artifacts, sims = {}, {}
    for variant, flags in VARIANTS.items():
        artifacts[variant], sims[variant] = compile_variant(work, ranks, flags, variant)

    order = [*VARIANTS, "fsdp2"]
    times = {v: [] for v in order}
    runs = {}
    for r in range(args.rounds):
        rotated = order[r % len(order):] + order[:r % len(order)]
        for variant in rotated:
            if variant == "fsdp2":
                result = fb.fsdp2(model, ranks, "auto", args.steps, args.threads, False, work)
            else:
                result = fb.loom_run(artifacts[variant], work, ranks, args.steps, args.threads)
            w = min(args.warmup, args.steps - 1)
            times[variant] += result["times_ms"][w:]
            runs.setdefault(variant, result)

    # Every variant computes the same losses.
    ref = runs["fsdp2"]["losses"]
    for variant in VARIANTS:
        diff = max(abs(a - b) for a, b in zip(ref, runs[variant]["losses"]))
        if diff > 1e-5 * max(1.0, max(abs(x) for x in ref)):
            sys.exit(f"bench: {variant}'s losses differ from FSDP2's by {diff:.2e}")

    fsdp2_ms = statistics.median(times["fsdp2"])
    cores = os.cpu_count()
    over = " (oversubscribed)" if ranks * args.threads > cores else ""
    print(f"model {name}, FSDP on {ranks} Gloo ranks{over}, adamw, reshard-after-forward auto, "
          f"{args.threads} ATen thread(s) per rank, {args.rounds} interleaved rounds x "
          f"{args.steps} steps (median of steps after {args.warmup}), {cores} cores, "
          f"torch {torch.__version__}")
    print(f"scheduled-bounded: memory limit {limit} B (no-prefetch's predicted peak)")
    print(f"{'':18}{'measured ms':>12}{'vs FSDP2':>10}{'sim ms':>9}{'sim exposed':>13}"
          f"{'AG':>4}{'RS':>4}{'peak MiB':>10}")
    rows = []
    for variant in order:
        ms = statistics.median(times[variant])
        comms = runs[variant]["comms"]
        if variant == "fsdp2":
            comms = fb.short(comms)
        sim = sims.get(variant)
        sim_ms = f"{sim['step_time'] * 1e3:9.3f}" if sim else f"{'-':>9}"
        exposed = (f"{100 * sim['exposed_comm_time'] / sim['step_time']:12.1f}%" if sim
                   else f"{'-':>13}")
        print(f"{variant:18}{ms:12.3f}{ms / fsdp2_ms:10.3f}{sim_ms}{exposed}"
              f"{comms.get('all_gather', 0):4d}{comms.get('reduce_scatter', 0):4d}"
              f"{runs[variant]['peak_bytes'] / 2**20:10.2f}")
        rows.append({"variant": variant, "median_ms": ms, "ratio_vs_fsdp2": ms / fsdp2_ms,
                     "simulated": sim, "comms": comms,
                     "peak_bytes": runs[variant]["peak_bytes"], "times_ms": times[variant]})
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "model": name, "ranks": ranks, "threads": args.threads, "steps": args.steps,
            "rounds": args.rounds, "warmup": args.warmup, "cores": cores,
            "bounded_memory_limit": limit,
            "torch": torch.__version__, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
