"""Recompute under a memory budget: Loom's whole-step ILP, full AC, the op-level policy, none, sac_milp.

For a Llama-style step (bench/models/llama3.py) the bench sweeps per-rank
memory budgets from the peak without recompute down to the smallest
feasible one, and compiles the step five ways:

- ``ilp``: ``loom-sac-ilp{budget=B}`` (``loom-compile --recompute-budget``),
  one run per budget of the sweep;
- ``full``: ``loom-remat{mode=full}`` (``--remat=full``: every block
  checkpointed, as ``checkpoint_wrapper`` on each ``layers.N``);
- ``selective``: ``loom-remat{mode=selective}`` (``--remat=selective``: save
  matmul and attention outputs, recompute the rest; torchtitan's op-level
  SAC policy);
- ``ilp-layers`` (``sim``): the same ILP on the layers alone
  (``modules=layers.0,...``), leaving the modules around them (the final
  norm, the output projection, the embedding) saved, as the ILP did by
  default before 2026-11-30;
- ``none``: no recompute;
- ``sac_milp``: PyTorch's own ``sac_milp`` and per-module knapsack on
  statistics of this step from Loom's analysis (bench/sac_milp.py), the
  decision compiled with ``loom-remat{mode=captured}``, at each budget of
  the sweep; in ``sim`` with the ILP also run at the peak that decision
  reaches (equal peak), in ``cpu`` on the CPU cost model's op times and
  trained with the other variants.

``full``, ``selective`` and ``none`` do not depend on the budget and are
shown once, with their peaks. The smallest feasible budget is the one
loom-sac-ilp names when asked for 1 byte ("the smallest feasible budget is
... (N B)"). The sweep is ``--points`` budgets evenly spaced from the
no-recompute peak down to that minimum, plus the peaks of ``selective`` and
``full`` (to compare at equal peak) and ``--budgets`` (default 80GB, an
H100's memory, for ``sim``).

Two parts, one subcommand each:

``sim``: Llama-3-8B (torchtitan's 8B flavor), captured with ``--meta``
(batch 16 ``--split 8``: local batch 2 of 8192 tokens), FSDP on 8 ranks with
bf16 parameters and f32 gradient reduction, FSDP2's backward prefetch,
AdamW lr 3e-4, simulated on an H100 (``loom-simulate{device=h100}``). Per
variant: simulated step time, recompute time, predicted peak, tokens/s/GPU
next to torchtitan's GraphTrainer figure, and the wall time of the whole
plan (``loom-opt --mlir-timing``: loom-sac-ilp, FSDP, prefetch, optimizer,
simulate; the loom-sac-ilp pass is the ILP's solve time, including the
liveness measurements on copies of the step it makes around the solve):

    .venv/bin/python bench/sac.py sim [--points 5] [--budgets 80GB]
        [--n-layers 32] [--json F]

``cpu``: a small Llama with real weights, trained by ``loom-run`` on this
machine's CPU: per variant the measured peak (``--trace``'s per-step
``peak_bytes``, the runtime allocator's high-water mark), the measured step
time and the measured recompute time (the durations of the backward
instructions that repeat a forward instruction of the same step: the
inlined recompute regions), with the variants run interleaved (A B C ... A B
C ..., rotated each round) and the median over ``--steps`` steps (after the
first) x ``--rounds`` rounds. Every ILP run's measured peak is checked
against its budget, and every variant's losses against ``none``'s (bit for
bit):

    .venv/bin/python bench/sac.py cpu [--ranks 1] [--points 3] [--steps 6]
        [--rounds 3] [--threads 1] [--op-times] [--make-arg KEY=VALUE ...]
        [--json F]

With ``--op-times`` the step without recompute is run once first, and its
trace prices the ops of the ILP (``loom-compile --op-times``) and of
``sac_milp``'s statistics (``loom-simulate{op-times=...}``) instead of the
CPU cost model.

Captures are cached under ``--cache`` (default out/bench-sac), keyed by the
shape, and redone when the model or the capture code changes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("LOOM_BUILD_DIR", REPO / "build"))
MODEL = REPO / "bench" / "models" / "llama3.py"
# pytorch/torchtitan pull request 3429 ("[graph_trainer] Add full recompute
# memory policy"): Llama3 8B on 8 H100s, FSDP8 + TP1, GraphTrainer's default
# memory policy: 7,890 TPS at 52.44 GiB (its "full" policy: 7,006 at 32.07).
TORCHTITAN_TPS = 7890.0
SMALLEST = re.compile(r"the smallest feasible budget is .*?\((\d+) B\)")
REPORT = re.compile(r"loom-sac-ilp: budget .*?: predicted peak .*?\((\d+) B\); recompute (\d+) of "
                    r"(\d+) forward ops \(([\d.]+) ms on [^;]*; (\d+) must be saved\); (\d+) "
                    r"distinct of (\d+) blocks(?:; (\d+) block policies)?"
                    r"(?:; peak at '([^']*)' in (?:module '([^']*)'|the root module))?")
# Each distinct block's trade-off curve, and where the blocks sit on it, as
# (bytes kept from forward to backward, ms recomputed).
CURVE = re.compile(r"loom-sac-ilp: block '([^']*)' \((\d+) alike\): \d+ corners? "
                   r"\(bytes kept, ms recomputed\):(.*)")
CHOICES = re.compile(r"loom-sac-ilp: block '([^']*)': blocks x \(bytes kept, ms recomputed\):(.*)")
PAIR = re.compile(r"\((\d+), ([\d.]+)\)")
COUNTED_PAIR = re.compile(r"(\d+) x \((\d+), ([\d.]+)\)")
PREDICTED = re.compile(r"predicted peak memory (\d+) bytes")
TIMING = re.compile(r"^\s+([\d.]+) \(\s*[\d.]+%\)\s+(\S.*?)\s*$")
# About 1 s a step on one core of this machine (AMD EPYC).
SMALL_LLAMA = dict(dim=256, n_layers=4, n_heads=8, n_kv_heads=2, ffn_hidden=768, vocab=4096,
                   seq=256, batch=8)


class Failed(Exception):
    """A compiler command exited non-zero; carries its stderr."""


def run(cmd: list) -> tuple[str, float]:
    """Runs cmd; returns stdout + stderr and the wall time. Raises Failed."""
    t0 = time.perf_counter()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    elapsed = time.perf_counter() - t0
    if r.returncode:
        raise Failed(f"{' '.join(map(str, cmd))}\n{r.stderr}{r.stdout}")
    return r.stdout + r.stderr, elapsed


def must(cmd: list) -> tuple[str, float]:
    try:
        return run(cmd)
    except Failed as e:
        sys.exit(f"sac: command failed: {e}")


def gb(n: float) -> str:
    return f"{n / 1e9:.2f}"


def capture_key(make_args: dict, flags: list) -> tuple[str, str]:
    """The cache folder's name for a capture and the digest of what made it."""
    key = "-".join([*(f"{k}{v}" for k, v in sorted(make_args.items())),
                    *(f.lstrip("-") for f in flags)])
    h = hashlib.sha256()
    for p in (MODEL, REPO / "python" / "loom" / "capture.py"):
        h.update(p.read_bytes())
    h.update(repr((sorted(make_args.items()), flags)).encode())
    return key, h.hexdigest()[:16]


def capture(cache: Path, make_args: dict, flags: list) -> Path:
    """The captured and imported step for make_args, from the cache when current."""
    key, digest = capture_key(make_args, flags)
    work = cache / key
    stamp, mlir = work / "source.sha", work / "step.mlir"
    if mlir.exists() and stamp.exists() and stamp.read_text() == digest:
        return work
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "loom.capture", MODEL, "--out", work, *flags]
    for k, v in make_args.items():
        cmd += ["--make-arg", f"{k}={v}"]
    print(f"capturing {key} ...", flush=True)
    must(cmd)
    meta = "--meta" in flags
    must([BUILD / "bin" / "loom-import", work / "step.pt2", *(["--no-weights"] if meta else []),
          "-o", mlir])
    stamp.write_text(digest)
    return work


def sweep(top: int, least: int, points: int, extra: list[int]) -> list[int]:
    """points budgets evenly spaced from top down to least, plus extra ones in
    that range, largest first."""
    budgets = {top - (top - least) * i // max(1, points - 1) for i in range(points)}
    budgets |= {b for b in extra if least <= b <= top}
    return sorted(budgets, reverse=True)


def parse_bytes(text: str) -> int:
    m = re.fullmatch(r"([\d.]+)\s*(B|KB|MB|GB|KiB|MiB|GiB)?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"'{text}' is not a byte count such as 80GB or 76.5GiB")
    scale = {None: 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 2**10, "MiB": 2**20,
             "GiB": 2**30}[m.group(2)]
    return int(float(m.group(1)) * scale)


# ------------------------------------------------------------------ simulated

def sim_pipeline(args) -> str:
    return (f"loom-fsdp{{mesh-shape={args.split} param-dtype=bf16 reduce-dtype=f32}},"
            f"loom-prefetch{{backward-prefetch=pre}},func.func(loom-attach-optimizer{{optimizer=adamw lr={args.lr}}})")


def simulate(args, mlir: Path, prefix: str, suffix: str = "") -> dict:
    """loom-opt with `prefix`, the FSDP pipeline, `suffix` and loom-simulate:
    the simulator's JSON, the report of loom-sac-ilp if any, pass and wall
    times. Exits if the command fails."""
    try:
        return simulate_or_fail(args, mlir, prefix, suffix)
    except Failed as e:
        sys.exit(f"sac: command failed: {e}")


def simulate_or_fail(args, mlir: Path, prefix: str, suffix: str = "") -> dict:
    """simulate's, raising Failed if the command fails."""
    p = sim_pipeline(args)
    pipeline = (f"builtin.module({prefix}{p}{suffix},"
                f"loom-simulate{{device={args.device} json=true}})")
    out, wall = run([BUILD / "bin" / "loom-opt", mlir, "-o", os.devnull, "--mlir-timing",
                     f"--pass-pipeline={pipeline}"])
    report, _ = json.JSONDecoder().raw_decode(out[out.index("{"):])
    passes = {}
    for line in out[out.index("Execution time report"):].splitlines():
        m = TIMING.match(line)
        if m:
            passes[m.group(2)] = float(m.group(1))
    report["pass_seconds"] = passes
    report["wall_seconds"] = wall
    report["ilp"] = parse_ilp_report(out)
    return report


def parse_ilp_report(out: str) -> dict | None:
    """loom-sac-ilp's report (report=true) in `out`: the decision, and each
    distinct block's curve and where its blocks sit, as [bytes, ms]."""
    m = REPORT.search(out)
    if not m:
        return None
    return {"predicted_peak": int(m.group(1)), "recomputed_ops": int(m.group(2)),
            "forward_ops": int(m.group(3)), "model_recompute_ms": float(m.group(4)),
            "must_save": int(m.group(5)), "distinct_blocks": int(m.group(6)),
            "blocks": int(m.group(7)),
            "block_policies": int(m.group(8)) if m.group(8) else None,
            "peak_op": m.group(9), "peak_module": m.group(10) or "",
            "curves": {c.group(1): {"alike": int(c.group(2)),
                                    "corners": [[int(b), float(t)] for b, t in
                                                PAIR.findall(c.group(3))]}
                       for c in CURVE.finditer(out)},
            "choices": {c.group(1): [[int(n), int(b), float(t)] for n, b, t in
                                     COUNTED_PAIR.findall(c.group(2))]
                        for c in CHOICES.finditer(out)}}


def smallest_budget(probe, what: str) -> int:
    """The smallest feasible budget, which the ILP names when `probe` asks
    it for 1 byte ("the smallest feasible budget is ... (N B)")."""
    try:
        probe()
    except Failed as e:
        m = SMALLEST.search(str(e))
        if m:
            return int(m.group(1))
        sys.exit(f"sac: {what} at 1 B failed without naming the smallest budget: {e}")
    sys.exit(f"sac: {what} accepted a budget of 1 byte")


def smallest_sim(args, mlir: Path) -> int:
    p = sim_pipeline(args)
    return smallest_budget(lambda: run(
        [BUILD / "bin" / "loom-opt", mlir, "-o", os.devnull,
         f"--pass-pipeline=builtin.module(loom-sac-ilp{{budget=1B device={args.device} "
         f"pipeline={p}}})"]), "loom-sac-ilp")


def main_sim(args) -> None:
    shape = {"n_layers": args.n_layers, "batch": args.batch, "seq": args.seq}
    work = capture(args.cache, shape, ["--meta", "--split", str(args.split)])
    mlir = work / "step.mlir"
    tokens = args.batch // args.split * args.seq
    rows = []

    def row(policy: str, budget, r: dict) -> dict:
        ps = r["pass_seconds"]
        out = {"policy": policy, "budget": budget, "peak": r["memory"]["peak_bytes"],
               "step_s": r["step_time"], "recompute_s": r["recompute_time"],
               "exposed_comm_s": r["exposed_comm_time"],
               "tokens_per_s_per_gpu": tokens / r["step_time"], "ilp_s": ps.get("LoomSacIlp"),
               "schedule_s": ps.get("LoomSchedule"),
               "plan_s": ps.get("Total"), "wall_s": r["wall_seconds"], "pass_seconds": ps,
               "ilp": r.get("ilp"), "live_at_peak": r["memory"].get("live_at_peak")}
        rows.append(out)
        return out

    fixed = {name: row(name, None, simulate(args, mlir, prefix)) for name, prefix in
             (("none", ""), ("full", "func.func(loom-remat{mode=full}),"),
              ("selective", "func.func(loom-remat{mode=selective}),"))}
    least = smallest_sim(args, mlir)
    top = fixed["none"]["peak"]
    extra = [fixed["selective"]["peak"], fixed["full"]["peak"], *args.budgets]
    budgets = sweep(top, least, args.points, extra)
    p = sim_pipeline(args)
    for b in budgets:
        prefix = f"loom-sac-ilp{{budget={b}B device={args.device} report=true pipeline={p}}},"
        row("ilp", b, simulate(args, mlir, prefix))
        # The same decision, then loom-schedule under the same budget (as
        # loom-compile --recompute-budget=B --schedule does).
        row("ilp+sched", b, simulate(
            args, mlir, prefix, f",loom-schedule{{device={args.device} memory-limit={b}}}"))
    # The layers alone: the modules around them (the final norm, the output
    # projection, the embedding) left saved.
    layers = ",".join(f"layers.{i}" for i in range(args.n_layers))
    for b in budgets:
        try:
            row("ilp-layers", b, simulate_or_fail(
                args, mlir, f"loom-sac-ilp{{budget={b}B device={args.device} report=true "
                            f"modules={layers} pipeline={p}}},"))
        except Failed as e:
            m = SMALLEST.search(str(e))
            if not m:
                sys.exit(f"sac: command failed: {e}")
            print(f"layers only: {gb(b)} GB is below the least the layers alone reach, "
                  f"{gb(int(m.group(1)))} GB")
    milp = sac_milp_rows(args, work, budgets, row)

    print(f"Llama-3-8B-shaped step, {args.n_layers} layers, local batch {args.batch // args.split} x "
          f"seq {args.seq} = {tokens} tokens per GPU; FSDP on {args.split} ranks (bf16 params, f32 "
          f"reduce, FSDP2's backward prefetch), AdamW lr {args.lr}; simulated on {args.device}")
    print(f"no-recompute peak {gb(top)} GB; smallest feasible budget {gb(least)} GB ({least} B)")
    none_step = fixed["none"]["step_s"]
    print(f"{'policy':>9} {'budget GB':>9} {'peak GB':>8} {'step ms':>8} {'recomp ms':>9} "
          f"{'vs none':>7} {'tok/s/GPU':>9} {'vs 7890':>7} {'ILP s':>6} {'sched s':>7} {'plan s':>6} "
          f"{'ops':>9}")
    for r in rows:
        ilp = r["ilp"]
        ops = f"{ilp['recomputed_ops']}/{ilp['forward_ops']}" if ilp else "-"
        print(f"{r['policy']:>9} {gb(r['budget']) if r['budget'] else '-':>9} {gb(r['peak']):>8} "
              f"{1e3 * r['step_s']:8.1f} {1e3 * r['recompute_s']:9.1f} "
              f"{r['step_s'] / none_step:7.3f} {r['tokens_per_s_per_gpu']:9.0f} "
              f"{r['tokens_per_s_per_gpu'] / TORCHTITAN_TPS:6.2f}x "
              f"{r['ilp_s'] if r['ilp_s'] is not None else 0:6.2f} "
              f"{r['schedule_s'] if r['schedule_s'] is not None else 0:7.2f} {r['plan_s']:6.2f} "
              f"{ops:>9}")
    for r in rows:
        if r["policy"].startswith("ilp") and r["peak"] > r["budget"]:
            print(f"ILP at {gb(r['budget'])} GB: predicted peak {gb(r['peak'])} GB "
                  "EXCEEDS the budget")
    targets(rows, fixed, "simulated")
    print_sac_milp(rows, milp)
    curve_bounds(rows, fixed)
    live_at_full_peak(fixed["full"])
    layers_only(rows, fixed)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"part": "sim", "shape": shape, "split": args.split,
                                         "least": least, "rows": rows, "sac_milp": milp},
                                        indent=2, default=str) + "\n")


def sac_milp_statistics(work: Path, passes: str, device: str, op_times: Path | None = None):
    """sac_milp's module graph of work/step.mlir (bench/sac_milp.py), from the
    step compiled by `passes` (no recompute) and simulated on `device` (with
    the trace `op_times`' measured op times when given), and the record of
    how it was made, with an empty "solves" to fill."""
    import sac_milp

    compiled, timeline = work / "compiled.mlir", work / "none.trace.json"
    measured = f" op-times={op_times}" if op_times else ""
    must([BUILD / "bin" / "loom-opt", work / "step.mlir", "-o", compiled, "--mlir-print-debuginfo",
          f"--pass-pipeline=builtin.module({passes},"
          f"loom-simulate{{device={device} timeline={timeline}{measured}}})"])
    facts = sac_milp.StepFacts(work / "step.mlir", compiled, json.loads(timeline.read_text()))
    graph = sac_milp.ModuleGraph(facts)
    info = {"stats_s": graph.seconds, "distinct_fits": graph.distinct_fits,
            "unmatched_ops": facts.unmatched, "nodes": len(graph.graph.nodes), "solves": {}}
    return graph, info


def print_statistics(milp: dict) -> None:
    print(f"sac_milp: statistics of {milp['nodes']} modules in {milp['stats_s']:.1f} s "
          f"({milp['distinct_fits']} distinct trade-off fits)")


def sac_milp_rows(args, work: Path, budgets: list[int], row) -> dict:
    """PyTorch's sac_milp at each budget, on statistics of the step compiled
    without recompute (bench/sac_milp.py), its decision compiled with
    loom-remat{mode=captured} and simulated like the other rows."""
    import sac_milp

    graph, info = sac_milp_statistics(work, sim_pipeline(args), args.device)
    for b in budgets:
        d = sac_milp.solve(graph, b, args.split)
        solve = {k: v for k, v in d.items() if k != "policies"}
        info["solves"][b] = solve
        if not d["feasible"]:
            continue
        if not d["ac"]:
            # Nothing checkpointed: the step as it is (loom-remat's captured
            # mode rejects a step without regions).
            r = row("sac_milp", b, simulate(args, work / "step.mlir", ""))
        else:
            tagged = work / f"sac_milp{b}.mlir"
            sac_milp.tag(work / "step.mlir", tagged, graph, d)
            r = row("sac_milp", b, simulate(args, tagged, "func.func(loom-remat{mode=captured}),"))
            tagged.unlink()
        r["sac_milp"] = solve
        # The ILP at the peak sac_milp's decision reaches: equal memory.
        if d["ac"] and r["peak"] != b:
            prefix = (f"loom-sac-ilp{{budget={r['peak']}B device={args.device} report=true "
                      f"pipeline={sim_pipeline(args)}}},")
            try:
                same = simulate(args, work / "step.mlir", prefix)
            except SystemExit as e:
                print(f"sac: the ILP at sac_milp's peak {r['peak']} B failed: {e}")
                continue
            r["ilp_at_peak"] = {"budget": r["peak"], "peak": same["memory"]["peak_bytes"],
                                "recompute_s": same["recompute_time"],
                                "step_s": same["step_time"]}
    return info


def by_budget(rows: list, policy: str) -> dict:
    """`policy`'s rows by their budget."""
    return {r["budget"]: r for r in rows if r["policy"] == policy}


def print_sac_milp(rows: list, milp: dict) -> None:
    """sac_milp's own predictions against the simulation of its decisions,
    and the issue's target against the ILP at each budget."""
    print_statistics(milp)
    print(f"{'budget GB':>9} {'AC blocks':>9} {'discard':>11} {'pred GB':>8} {'sim GB':>8} "
          f"{'sim/pred':>8} {'<=budget':>8} {'pred ms':>8} {'knap ms':>8} {'sim ms':>8} "
          f"{'ILP ms':>8} {'ILP/milp':>8} {'<=0.8':>5} {'ILP@peak':>8} {'ratio':>6} "
          f"{'MILP s':>6}")
    ilp, milp_rows = by_budget(rows, "ilp"), by_budget(rows, "sac_milp")
    for b, solve in milp["solves"].items():
        if not solve["feasible"]:
            print(f"{gb(b):>9} sac_milp: infeasible ({{}}, 0, -1)")
            continue
        r = milp_rows[b]
        ratios = sorted(solve["ac"].values())
        spread = f"{ratios[0]:.2f}-{ratios[-1]:.2f}" if ratios else "-"
        i = ilp.get(b)
        ratio = i["recompute_s"] / r["recompute_s"] if i and r["recompute_s"] else None
        r["ilp_over_sac_milp"] = ratio
        same = r.get("ilp_at_peak")
        same_ratio = same["recompute_s"] / r["recompute_s"] if same and r["recompute_s"] else None
        r["ilp_at_peak_over_sac_milp"] = same_ratio
        print(f"{gb(b):>9} {len(ratios):>9} {spread:>11} {gb(solve['model_max_m']):>8} "
              f"{gb(r['peak']):>8} {r['peak'] / solve['model_max_m']:8.3f} "
              f"{'yes' if r['peak'] <= b else 'NO':>8} {solve['model_recompute_ms']:8.1f} "
              f"{solve['knapsack_recompute_ms']:8.1f} {1e3 * r['recompute_s']:8.1f} "
              f"{1e3 * i['recompute_s'] if i else float('nan'):8.1f} "
              f"{ratio if ratio is not None else float('nan'):8.3f} "
              f"{'-' if ratio is None else 'yes' if ratio <= 0.8 else 'no':>5} "
              f"{1e3 * same['recompute_s'] if same else float('nan'):8.1f} "
              f"{same_ratio if same_ratio is not None else float('nan'):6.3f} "
              f"{solve['milp_s']:6.2f}")


def live_at_full_peak(full: dict) -> None:
    """What is live at full AC's peak (loom-simulate's live_at_peak, the
    layers' groups summed as layers.*): the groups of over 100 MB and the
    rest summed."""
    merged: dict[str, int] = {}
    for g in full.get("live_at_peak") or []:
        name = re.sub(r"^layers\.\d+", "layers.*", g["group"])
        merged[name] = merged.get(name, 0) + g["bytes"]
    groups = [{"group": k, "bytes": v} for k, v in
              sorted(merged.items(), key=lambda kv: -kv[1])]
    big = [g for g in groups if g["bytes"] > 1e8]
    rest = sum(g["bytes"] for g in groups) - sum(g["bytes"] for g in big)
    print("peak: live at full AC's peak: " +
          "; ".join(f"{g['group']} {g['bytes'] / 1e9:.2f} GB" for g in big) +
          f"; {len(groups) - len(big)} more {rest / 1e9:.2f} GB")


def layers_only(rows: list, fixed: dict) -> None:
    """The ILP on the layers alone (ilp-layers) against the whole step's
    (ilp), per budget, and against sac_milp; at full AC's peak, its step
    against full AC's."""
    ilp, milp = by_budget(rows, "ilp"), by_budget(rows, "sac_milp")
    full = fixed["full"]
    for r in rows:
        if r["policy"] != "ilp-layers":
            continue
        b = r["budget"]
        line = (f"layers only: at {gb(b)} GB the ILP on the layers alone recomputes "
                f"{1e3 * r['recompute_s']:.1f} ms (the whole step's {1e3 * ilp[b]['recompute_s']:.1f}), "
                f"peak {gb(r['peak'])} GB")
        if b in milp and milp[b]["recompute_s"]:
            line += f", {r['recompute_s'] / milp[b]['recompute_s']:.3f}x sac_milp's"
        if b == full["peak"]:
            line += (f"; step {1e3 * r['step_s']:.1f} ms for full AC's {1e3 * full['step_s']:.1f} "
                     f"(+{100 * (full['step_s'] / r['step_s'] - 1):.1f}%)")
        print(line)


def on_curve(corners: list, kept: float) -> float:
    """The trade-off curve's recompute time (ms) at `kept` bytes: between two
    corners of the lower hull, on the segment joining them; past the ends,
    the end's."""
    pts = sorted(corners)
    if kept <= pts[0][0]:
        return pts[0][1]
    for (b0, t0), (b1, t1) in zip(pts, pts[1:]):
        if kept <= b1:
            return t0 + (t1 - t0) * (kept - b0) / (b1 - b0)
    return pts[-1][1]


def curve_bounds(rows: list, fixed: dict) -> None:
    """What the blocks' trade-off curve (loom-sac-ilp's report) says no plan
    can beat, for a step of identical blocks (the distinct block with the
    most copies) and a few modules around them (docs/bench/sac.md, "Reading
    the numbers"). Where the peak is at a point every block's kept bytes are
    alive at (after the last block's forward, before the first region), a
    plan within the budget keeps at most what the ILP's decision keeps plus
    the budget's slack; the modules around the blocks can give up at most
    what they keep beyond their own lean ends, and recompute at least
    nothing; and, the curve being convex, n blocks keeping K bytes recompute
    at least n times the curve at K / n. At full AC's peak, freeing each
    block's lean keep too (only regions across blocks could) and spending it
    at the curve's rate bounds the gain over full AC; a second line adds
    what the modules around the blocks free at their lean ends, less their
    cost there."""
    curve = others = None
    for r in rows:
        ilp = r.get("ilp") if r["policy"] == "ilp" else None
        if not ilp or not ilp.get("curves"):
            continue
        name = max(ilp["curves"], key=lambda c: ilp["curves"][c]["alike"])
        curve = ilp["curves"][name]
        others = {c: v for c, v in ilp["curves"].items() if c != name}
        n, corners = curve["alike"], curve["corners"]
        kept = sum(k * b for k, b, _ in ilp["choices"][name])
        spare = sum(k * b - k * min(others[c]["corners"])[0]
                    for c in others for k, b, _ in ilp["choices"].get(c, []))
        most = kept + spare + max(r["budget"] - r["peak"], 0)
        least = n * on_curve(corners, most / n)
        r["curve_least_recompute_ms"] = least
        milp = [m for m in rows if m["policy"] == "sac_milp" and m["budget"] == r["budget"]
                and m["recompute_s"]]
        versus = (f"; {least / (1e3 * milp[0]['recompute_s']):.3f}x sac_milp's "
                  f"{1e3 * milp[0]['recompute_s']:.1f}" if milp else "")
        print(f"curve: at {gb(r['budget'])} GB the {n} blocks keep {kept / 2**20:,.0f} MiB where "
              f"the step peaks ('{ilp['peak_op']}'); a plan keeping at most "
              f"{most / 2**20:,.0f} MiB there recomputes at least {least:.1f} ms (the ILP "
              f"{1e3 * r['recompute_s']:.1f}{versus})")
    # The curves are the same in every row (traced once per step).
    if curve and "full" in fixed:
        n, lean = curve["alike"], min(curve["corners"])
        full = fixed["full"]["step_s"] * 1e3

        def bound(freed: float, cost: float, what: str) -> None:
            gain = n * (lean[1] - on_curve(curve["corners"], lean[0] + freed / n)) - cost
            print(f"curve: full AC at its peak, with {what} freed for nothing and spent on the "
                  f"curve: at most {gain:.1f} ms less recompute, step {full - gain:.1f} ms for "
                  f"{full:.1f} (+{100 * (full / (full - gain) - 1):.2f}% tokens/s/GPU)")

        bound(n * lean[0], 0, f"each block's lean keep ({lean[0]:,} B)")
        if others:
            freed = sum(v["alike"] * (max(v["corners"])[0] - min(v["corners"])[0])
                        for v in others.values())
            cost = sum(v["alike"] * min(v["corners"])[1] for v in others.values())
            bound(n * lean[0] + freed, cost,
                  f"each block's lean keep and what {', '.join(others)} keep beyond their lean "
                  f"ends ({freed:,} B, for {cost:.2f} ms)")


def targets(rows: list, fixed: dict, how: str, size=gb, unit="GB") -> None:
    """The issue's equal-peak comparisons, from the ILP rows budgeted at the
    fixed policies' peaks."""
    key = "step_s" if how == "simulated" else "step_ms"
    for name in ("selective", "full"):
        same = [r for r in rows if r["policy"] == "ilp" and r["budget"] == fixed[name]["peak"]]
        if not same:
            continue
        r = same[0]
        print(f"{how}: ILP at {name}'s peak ({size(r['budget'])} {unit}): step "
              f"{r[key] / fixed[name][key]:.3f}x {name}'s "
              f"({(fixed[name][key] / r[key] - 1) * 100:+.1f}% faster), peak {size(r['peak'])} {unit}")


# ------------------------------------------------------------------ measured

def cpu_dp_flags(args) -> list:
    return ["--dp=fsdp", f"--world-size={args.ranks}"] if args.ranks > 1 else []


def compile_cpu(args, work: Path, tag: str, flags: list, step: Path | None = None) -> dict:
    out, wall = run([BUILD / "bin" / "loom-compile", step or work / "step.mlir",
                     "-o", work / f"{tag}.loomx", "--summary", *cpu_dp_flags(args), *flags])
    result = {"artifact": work / f"{tag}.loomx", "predicted": int(PREDICTED.search(out).group(1)),
              "compile_s": wall}
    ilp = parse_ilp_report(out)
    if ilp:
        result["ilp"] = {k: ilp[k] for k in ("recomputed_ops", "forward_ops",
                                             "model_recompute_ms", "distinct_blocks", "blocks")}
    return result


def compile_ilp_cpu(args, work: Path, budget: int) -> dict:
    """The step compiled with loom-sac-ilp under `budget` bytes."""
    measured = [f"--op-times={args.profile}"] if args.profile else []
    return dict(compile_cpu(args, work, f"ilp{budget}",
                            [f"--recompute-budget={budget}B", "--recompute-report", *measured]),
                budget=budget)


def cpu_sac_milp(args, work: Path, budgets: list[int], variants: dict) -> dict:
    """PyTorch's sac_milp at each budget on the CPU step's statistics: per-op
    times from loom-simulate{device=cpu}, the cost model loom-sac-ilp prices
    the CPU step with, on the step as loom-compile builds it before lowering
    (bench/sac_milp.py). Each decision that checkpoints something is compiled
    as a captured checkpoint policy (--remat=captured) and joins `variants`;
    one that checkpoints nothing is `none`."""
    import sac_milp

    step = work / "step.mlir"
    text, _ = must([BUILD / "bin" / "loom-compile", "--print-pipeline", *cpu_dp_flags(args), step])
    pipeline = text.strip()
    if not pipeline.startswith("builtin.module(") or ",loom-lower-to-rt" not in pipeline:
        raise SystemExit(f"sac: unexpected loom-compile pipeline: {pipeline}")
    distribute = pipeline[len("builtin.module("):pipeline.index(",loom-lower-to-rt")]
    graph, info = sac_milp_statistics(work, distribute, "cpu", args.profile)
    for b in budgets:
        d = sac_milp.solve(graph, b, args.ranks)
        info["solves"][b] = {k: v for k, v in d.items() if k != "policies"}
        if not d["feasible"] or not d["ac"]:
            continue
        tagged = work / f"sac_milp{b}.mlir"
        sac_milp.tag(step, tagged, graph, d)
        compiled = compile_cpu(args, work, f"sac_milp{b}", ["--remat=captured"], tagged)
        variants[f"sac_milp@{b}"] = dict(compiled, budget=b)
        # The ILP at the peak that decision reaches (Loom's prediction, which
        # the runtime measures exactly): equal memory.
        peak = compiled["predicted"]
        if f"ilp@{peak}" not in variants:
            variants[f"ilp@{peak}"] = compile_ilp_cpu(args, work, peak)
    return info


def print_cpu_sac_milp(rows: list, milp: dict) -> None:
    """sac_milp's decisions measured against the ILP's at equal budget and
    at the peak each reaches."""
    print_statistics(milp)
    print(f"{'budget MB':>9} {'AC blocks':>9} {'pred MB':>8} {'meas MB':>8} {'<=budget':>8} "
          f"{'knap ms':>8} {'meas ms':>8} {'ILP ms':>8} {'ILP/milp':>8} {'<=0.8':>5} "
          f"{'ILP@peak':>8} {'ratio':>6}")
    ilp, measured = by_budget(rows, "ilp"), by_budget(rows, "sac_milp")
    for b, solve in milp["solves"].items():
        if not solve["feasible"]:
            print(f"{b / 1e6:9.2f} sac_milp: infeasible ({{}}, 0, -1)")
            continue
        if not solve["ac"]:
            print(f"{b / 1e6:9.2f} sac_milp: nothing checkpointed (none's row)")
            continue
        r, i = measured[b], ilp.get(b)
        ratio = i["recompute_ms"] / r["recompute_ms"] if i and r["recompute_ms"] else None
        r["ilp_over_sac_milp"] = ratio
        same = ilp.get(r["predicted"])
        same_ratio = same["recompute_ms"] / r["recompute_ms"] if same and r["recompute_ms"] \
            else None
        r["ilp_at_peak_over_sac_milp"] = same_ratio
        print(f"{b / 1e6:9.2f} {len(solve['ac']):>9} {solve['model_max_m'] / 1e6:8.2f} "
              f"{r['peak'] / 1e6:8.2f} {'yes' if r['peak'] <= b else 'NO':>8} "
              f"{solve['knapsack_recompute_ms']:8.1f} {r['recompute_ms']:8.1f} "
              f"{i['recompute_ms'] if i else float('nan'):8.1f} "
              f"{ratio if ratio is not None else float('nan'):8.3f} "
              f"{'-' if ratio is None else 'yes' if ratio <= 0.8 else 'no':>5} "
              f"{same['recompute_ms'] if same else float('nan'):8.1f} "
              f"{same_ratio if same_ratio is not None else float('nan'):6.3f}")


def smallest_cpu(args, work: Path) -> int:
    return smallest_budget(lambda: compile_cpu(args, work, "probe", ["--recompute-budget=1B"]),
                           "loom-compile")


def train(args, work: Path, tag: str, artifact: Path) -> dict:
    """One loom-run of --steps steps: per step (after the first) the step
    time, the peak and the recompute time, from rank 0's trace; the highest
    peak over every rank and step; the losses."""
    trace = work / f"{tag}.trace.json"
    must([BUILD / "runtime" / "bin" / "loom-run", artifact, "--nproc", args.ranks, "--batches",
          work / "batches.safetensors", "--steps", args.steps, "--threads", args.threads,
          "--no-progress", "--trace", trace])
    events = json.loads(trace.read_text())["traceEvents"]
    steps = [e for e in events if e.get("ph") == "X" and "loss" in e.get("args", {})]
    forward = {(e["pid"], e["args"]["step"], e["name"]) for e in events
               if e.get("ph") == "X" and e.get("cat") == "forward"}
    recompute = {}
    for e in events:
        # FSDP's backward all-gather repeats the forward one's unpacking
        # instructions under the same names; that is not recompute.
        if e.get("ph") == "X" and e.get("cat") == "backward" and \
                not e["name"].startswith("fsdp.") and \
                (e["pid"], e["args"]["step"], e["name"]) in forward:
            k = (e["pid"], e["args"]["step"])
            recompute[k] = recompute.get(k, 0.0) + e["dur"]
    rank0 = sorted((e for e in steps if e["pid"] == min(s["pid"] for s in steps)),
                   key=lambda e: e["ts"])[1:]
    return {"times_ms": [e["dur"] / 1e3 for e in rank0],
            "recompute_ms": [recompute.get((e["pid"], int(e["name"].split()[-1])), 0.0) / 1e3
                             for e in rank0],
            "peak": max(e["args"]["peak_bytes"] for e in steps),
            "losses": sorted((e["pid"], e["name"], e["args"]["loss"]) for e in steps)}


def main_cpu(args) -> None:
    shape = dict(SMALL_LLAMA)
    for kv in args.make_arg:
        k, _, v = kv.partition("=")
        shape[k] = int(v)
    flags = ["--steps", "1", "--split", str(args.ranks)]
    work = capture(args.cache, shape, flags)
    variants = {name: compile_cpu(args, work, name, [f"--remat={name}"] if name != "none" else [])
                for name in ("none", "full", "selective")}
    # With --op-times both planners price ops by what a run of the step
    # without recompute measured (loom-run's trace), not by the roofline.
    args.profile = None
    if args.op_times:
        train(args, work, "profile", variants["none"]["artifact"])
        args.profile = work / "profile.trace.json"
    least = smallest_cpu(args, work)
    top = variants["none"]["predicted"]
    budgets = sweep(top, least, args.points,
                    [variants["selective"]["predicted"], variants["full"]["predicted"]])
    for b in budgets:
        variants[f"ilp@{b}"] = compile_ilp_cpu(args, work, b)
    milp = cpu_sac_milp(args, work, budgets, variants)

    # The fixed policies, then each budgeted one from the largest budget down.
    budgeted = sorted((v for v in variants if "@" in v),
                      key=lambda v: (v.split("@")[0] != "ilp", -variants[v]["budget"]))
    order = [v for v in variants if "@" not in v] + budgeted
    runs = {v: {"times_ms": [], "recompute_ms": [], "peak": 0, "losses": None} for v in order}
    for r in range(args.rounds):
        rotated = order[r % len(order):] + order[:r % len(order)]
        for v in rotated:
            got = train(args, work, v.replace("@", ""), variants[v]["artifact"])
            runs[v]["times_ms"] += got["times_ms"]
            runs[v]["recompute_ms"] += got["recompute_ms"]
            runs[v]["peak"] = max(runs[v]["peak"], got["peak"])
            runs[v]["losses"] = runs[v]["losses"] or got["losses"]

    print(f"small Llama {shape}, {args.ranks} rank(s){' (FSDP)' if args.ranks > 1 else ''}, AdamW; "
          f"{args.rounds} interleaved rounds x {args.steps - 1} steps (after the first), "
          f"{args.threads} ATen thread(s) per rank, {os.cpu_count()} cores")
    print(f"no-recompute peak {top} B; smallest feasible budget {least} B; op times: "
          f"{'measured (' + str(args.profile) + ')' if args.profile else 'the CPU cost model'}")
    none_ms = statistics.median(runs["none"]["times_ms"])
    print(f"{'policy':>9} {'budget MB':>9} {'pred MB':>8} {'meas MB':>8} {'<=budget':>8} "
          f"{'step ms':>8} {'vs none':>7} {'recomp ms':>9} {'compile s':>9} {'ops':>9} "
          f"{'losses':>7}")
    rows, fixed = [], {}
    for v in order:
        c, m = variants[v], runs[v]
        step = statistics.median(m["times_ms"])
        budget = c.get("budget")
        ok = "-" if budget is None else ("yes" if m["peak"] <= budget else "NO")
        same = "same" if m["losses"] == runs["none"]["losses"] else "DIFFER"
        ilp = c.get("ilp")
        ops = f"{ilp['recomputed_ops']}/{ilp['forward_ops']}" if ilp else "-"
        shown = f"{budget / 1e6:.2f}" if budget else "-"
        print(f"{v.split('@')[0]:>9} {shown:>9} {c['predicted'] / 1e6:8.2f} "
              f"{m['peak'] / 1e6:8.2f} {ok:>8} {step:8.1f} {step / none_ms:7.3f} "
              f"{statistics.median(m['recompute_ms']):9.1f} {c['compile_s']:9.2f} {ops:>9} {same:>7}")
        row = {"policy": v.split("@")[0], "budget": budget, "predicted": c["predicted"],
               "peak": m["peak"], "within_budget": None if budget is None else m["peak"] <= budget,
               "step_ms": step, "recompute_ms": statistics.median(m["recompute_ms"]),
               "compile_s": c["compile_s"], "ilp": ilp, "losses_equal_none": same == "same",
               "times_ms": m["times_ms"]}
        rows.append(row)
        if budget is None:
            fixed[v] = row
    # Equal-peak comparisons are made at the measured peaks of the fixed policies.
    for name in ("selective", "full"):
        fixed[name] = dict(fixed[name], peak=variants[name]["predicted"])
    targets(rows, fixed, "measured", lambda n: f"{n / 1e6:.2f}", "MB")
    print_cpu_sac_milp(rows, milp)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"part": "cpu", "shape": shape, "ranks": args.ranks,
                                         "op_times": "measured" if args.profile else "model",
                                         "least": least, "rows": rows, "sac_milp": milp},
                                        indent=2) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="part", required=True)
    s = sub.add_parser("sim", help="Llama-3-8B, FSDP on 8 simulated H100s")
    s.add_argument("--n-layers", type=int, default=32)
    s.add_argument("--batch", type=int, default=16, help="global batch (default 16)")
    s.add_argument("--split", type=int, default=8, help="FSDP ranks (default 8: local batch 2)")
    s.add_argument("--seq", type=int, default=8192)
    s.add_argument("--device", default="h100")
    s.add_argument("--lr", type=float, default=3e-4)
    s.add_argument("--budgets", type=parse_bytes, nargs="*", default=[80 * 10**9],
                   help="budgets to add to the sweep (default 80GB)")
    s.add_argument("--points", type=int, default=5,
                   help="budgets evenly spaced from the no-recompute peak to the minimum")
    c = sub.add_parser("cpu", help="a small Llama trained by loom-run on this CPU")
    c.add_argument("--ranks", type=int, default=1)
    c.add_argument("--make-arg", action="append", default=[], metavar="KEY=VALUE",
                   help=f"change the small Llama's shape (default {SMALL_LLAMA})")
    c.add_argument("--points", type=int, default=5,
                   help="budgets evenly spaced from the no-recompute peak to the minimum")
    c.add_argument("--steps", type=int, default=6, help="steps per run; the first is not timed")
    c.add_argument("--rounds", type=int, default=3)
    c.add_argument("--threads", type=int, default=1, help="ATen threads per rank")
    c.add_argument("--op-times", action="store_true",
                   help="price ops for the ILP and sac_milp by a loom-run trace of the step "
                        "without recompute (op-times) instead of the CPU cost model")
    for p in (s, c):
        p.add_argument("--cache", type=Path, default=REPO / "out" / "bench-sac")
        p.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    if args.part == "sim":
        if args.batch % args.split:
            ap.error(f"--batch {args.batch} is not divisible by --split {args.split}")
        main_sim(args)
    else:
        if args.steps < 2:
            ap.error("--steps must be at least 2 (the first step is not timed)")
        main_cpu(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
