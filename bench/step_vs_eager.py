"""Loom's compiled training step vs PyTorch (eager, fused optimizer, torch.compile), in one process.

All run the same model, batches and optimizer on the CPU with the same ATen
(Loom's runtime links the LibTorch of the PyTorch it runs next to) and the
same thread count. The PyTorch peers:

- `eager`: the model as written, `torch.optim.<Opt>` with its CPU default
  (the for-loop implementation: one parameter at a time);
- `eager-fused`: the same with `fused=True` (one fused kernel per step for
  all parameters);
- `compiled-fused`: `torch.compile(model)` (forward and backward compiled by
  Inductor) with the fused optimizer, what a user after speed would write.

Prints per-step time and peak tensor memory of each, the ratio of Loom to
each (below 1.0 means Loom is better) and to the strongest peer, plus Loom's
predicted peak from the compiler's liveness analysis. `--profile` also
splits the timed steps of each into forward, backward and optimizer time,
the median of each part (Loom's from a `loom-run --trace` of the same
artifact for as many steps: its instructions by phase, plus the
interpreter's time between instructions).

    .venv/bin/python bench/step_vs_eager.py [--model examples/gpt.py]
        [--optimizer adamw] [--loom-optimizer-impl forloop|fused] [--steps 40] [--repeats 5] [--threads N]
        [--peers eager eager-fused compiled-fused] [--profile] [--json F]

Time: the median, over `repeats` rounds of `steps` steps, of the time of
one step (a median of single steps, not of block means: on a shared
machine a process can be descheduled for whole seconds, and one such gap
would swamp a block's mean); every contestant runs one block per round, in
an order rotated each round, so that machine noise hits all alike. The
fastest step of each is printed too. Memory: the
largest number of live CPU tensor bytes during one step, counting
everything alive (parameters, buffers, optimizer state, the batch,
activations, gradients), measured for all by the same allocator hook
(loomrt_memory_region_*).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("LOOM_BUILD_DIR", REPO / "build"))
# What each optimizer's fused implementation is called in torch.optim.
OPTIMIZERS = {
    "sgd": (torch.optim.SGD, {"lr": 0.01, "momentum": 0.9}, ["--lr=0.01", "--momentum=0.9"]),
    "adam": (torch.optim.Adam, {"lr": 1e-3}, ["--lr=0.001"]),
    "adamw": (torch.optim.AdamW, {"lr": 1e-3, "weight_decay": 0.01},
              ["--lr=0.001", "--weight-decay=0.01"]),
}


def run(cmd: list) -> str:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    if result.returncode:
        sys.exit(f"bench: {' '.join(map(str, cmd))} failed:\n{result.stderr}")
    return result.stderr


def compile_step(model: Path, optimizer: str, work: Path,
                 impl: str = "forloop") -> tuple[Path, int]:
    """capture -> import -> compile (the runtime's optimizer as `impl`);
    returns the artifact and the predicted peak bytes."""
    capture_flags = ["--optimizer", optimizer, "--optimizer-impl", impl]
    if optimizer == "sgd":
        capture_flags += ["--lr", "0.01", "--momentum", "0.9"]
    run([sys.executable, "-m", "loom.capture", model, "--out", work, "--steps", "1",
         *capture_flags])
    run([BUILD / "bin" / "loom-import", work / "step.pt2", "-o", work / "step.mlir"])
    summary = run([BUILD / "bin" / "loom-compile", work / "step.mlir", "-o",
                   work / "step.loomx", f"--optimizer={optimizer}",
                   *OPTIMIZERS[optimizer][2], f"--optimizer-impl={impl}", "--summary"])
    predicted = int(summary.split("predicted peak memory ")[1].split(" bytes")[0])
    return work / "step.loomx", predicted


class Runtime:
    """The few C API calls the benchmark needs (runtime/include/loomrt/loomrt.h)."""

    def __init__(self, library: Path):
        lib = ctypes.CDLL(str(library))
        i64, dbl, vp, cp = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p, ctypes.c_char_p
        lib.loomrt_last_error.restype = cp
        lib.loomrt_session_create.argtypes = [cp, ctypes.POINTER(vp)]
        lib.loomrt_session_destroy.argtypes = [vp]
        lib.loomrt_session_set_batches.argtypes = [vp, cp, ctypes.POINTER(i64)]
        lib.loomrt_session_step_index.argtypes = [vp, i64, ctypes.POINTER(dbl)]
        lib.loomrt_session_last_peak_bytes.argtypes = [vp]
        lib.loomrt_session_last_peak_bytes.restype = i64
        lib.loomrt_memory_region_begin.argtypes = [i64]
        lib.loomrt_memory_region_end.argtypes = [ctypes.POINTER(i64)]
        lib.loomrt_set_num_threads.argtypes = [ctypes.c_int]
        self.lib = lib

    def check(self, status: int) -> None:
        if status:
            sys.exit(f"bench: loomrt: {self.lib.loomrt_last_error().decode()}")

    def session(self, artifact: Path, batches: Path) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        self.check(self.lib.loomrt_session_create(str(artifact).encode(), ctypes.byref(handle)))
        self.check(self.lib.loomrt_session_set_batches(handle, str(batches).encode(), None))
        return handle

    def step(self, handle, index: int) -> float:
        loss = ctypes.c_double()
        self.check(self.lib.loomrt_session_step_index(handle, index, ctypes.byref(loss)))
        return loss.value

    def measure(self, held: int, fn) -> int:
        self.check(self.lib.loomrt_memory_region_begin(held))
        try:
            fn()
        finally:
            peak = ctypes.c_int64()
            self.check(self.lib.loomrt_memory_region_end(ctypes.byref(peak)))
        return peak.value


def phase_times(trace: Path) -> dict:
    """Per step, ms of Loom's instructions by phase (forward, backward,
    optimizer, free, ...) in a one-rank loom-run trace, and of the rest of
    the step: the interpreter's own time between instructions."""
    steps = {}
    for e in json.loads(trace.read_text())["traceEvents"]:
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "step":
            steps.setdefault(int(e["name"].split()[1]), {})["step"] = e["dur"] / 1e3
        elif e.get("tid") == 1:
            phases = steps.setdefault(e["args"]["step"], {})
            phases[e["cat"]] = phases.get(e["cat"], 0.0) + e["dur"] / 1e3
    for phases in steps.values():
        phases["between instructions"] = phases["step"] - sum(
            v for k, v in phases.items() if k != "step")
    return {k: [p[k] for p in steps.values()] for k in next(iter(steps.values()))}


def held_bytes(tensors) -> int:
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        storage = t.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total


PEERS = ("eager", "eager-fused", "compiled-fused")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=REPO / "examples" / "gpt.py")
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adamw")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS))
    parser.add_argument("--profile", action="store_true",
                        help="also split the timed steps of each into forward/backward/"
                             "optimizer (medians), Loom's from a traced run as long")
    parser.add_argument("--loom-optimizer-impl", choices=("forloop", "fused"), default="forloop",
                        help="Loom's optimizer: torch.optim's single-tensor loop (default) or "
                             "its fused kernels (loom-compile --optimizer-impl)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="loom-bench-"))
    artifact, predicted = compile_step(args.model.resolve(), args.optimizer, work,
                                       args.loom_optimizer_impl)
    rt = Runtime(BUILD / "runtime" / "lib" / "libloomrt.so")
    torch.set_num_threads(args.threads)
    rt.check(rt.lib.loomrt_set_num_threads(args.threads))
    cls, hyper, _ = OPTIMIZERS[args.optimizer]
    make = runpy.run_path(str(args.model))["make"]

    class Peer:
        """One PyTorch contestant: its own model (same initial weights and
        batches as capture's: seed 0 before make()) and optimizer."""

        def __init__(self, name: str):
            torch.manual_seed(0)
            self.model, self.batches = make()
            params = [p for p in self.model.parameters() if p.requires_grad]
            self.opt = cls(params, **hyper, **({"fused": True} if "fused" in name else {}))
            self.forward = torch.compile(self.model) if name.startswith("compiled") \
                else self.model
            self.split = {"forward": [], "backward": [], "optimizer": [], "step": []}

        def step(self, i: int, split: bool = False) -> float:
            t0 = time.perf_counter()
            self.opt.zero_grad(set_to_none=True)
            loss = self.forward(*self.batches[i % len(self.batches)])
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            self.opt.step()
            value = loss.item()
            if split:
                t3 = time.perf_counter()
                for k, dt in (("forward", t1 - t0), ("backward", t2 - t1),
                              ("optimizer", t3 - t2), ("step", t3 - t0)):
                    self.split[k].append(dt * 1e3)
            return value

    peers = {name: Peer(name) for name in args.peers}
    session = rt.session(artifact, work / "batches.safetensors")
    # With --profile the timed steps also record their parts (three clock
    # reads a step), so the split comes from the same interleaved rounds.
    steppers = {name: (lambda i, peer=peer: peer.step(i, split=args.profile))
                for name, peer in peers.items()}
    steppers["loom"] = lambda i: rt.step(session, i)

    # Same computation. Eager with the optimizer Loom runs (the default
    # loop, or fused=True for --loom-optimizer-impl fused) runs the same
    # kernels as Loom in the same order: the losses are bitwise equal (see
    # docs/runtime.md). The other optimizer and Inductor's kernels round
    # differently, so they only agree closely.
    twin = "eager-fused" if args.loom_optimizer_impl == "fused" else "eager"
    losses = {name: [fn(i) for i in range(3)] for name, fn in steppers.items()}
    for peer in peers.values():
        peer.split = {k: [] for k in peer.split}
    for name, got in losses.items():
        exact = name == twin
        diff = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(got, losses["loom"]))
        if (exact and got != losses["loom"]) or diff > 1e-4:
            sys.exit(f"bench: losses differ: {name} {got} vs Loom {losses['loom']}")

    order = ["loom", *args.peers]
    times = {name: [] for name in order}
    step = 3
    for r in range(args.repeats):
        for name in order[r % len(order):] + order[:r % len(order)]:
            fn = steppers[name]
            for k in range(args.steps):
                start = time.perf_counter()
                fn(step + k)
                times[name].append((time.perf_counter() - start) * 1e3)
        step += args.steps

    # Peak memory of one step, everything alive counted, same hook for all
    # but the compiled model: the hook installs its tracker as the thread's
    # profiler state, which the compiled autograd function's
    # record_function reads as one (std::bad_array_new_length in torch
    # 2.9.1), so its peak is not measured.
    index = step
    peaks = {}
    for name, peer in peers.items():
        if name.startswith("compiled"):
            peer.step(index)
            continue
        batch = peer.batches[index % len(peer.batches)]
        state = [t for s in peer.opt.state.values() for t in s.values() if torch.is_tensor(t)]
        held = held_bytes([*peer.model.parameters(), *peer.model.buffers(), *state, *batch])
        peaks[name] = rt.measure(held, lambda: peer.step(index))
    rt.step(session, index)
    peaks["loom"] = rt.lib.loomrt_session_last_peak_bytes(session)
    rt.lib.loomrt_session_destroy(session)

    split = {}
    if args.profile:
        n = args.steps * args.repeats
        for name, peer in peers.items():
            split[name] = peer.split
        trace = work / "trace.json"
        run([BUILD / "runtime" / "bin" / "loom-run", artifact, "--batches",
             work / "batches.safetensors", "--steps", n, "--threads", args.threads,
             "--no-progress", "--trace", trace])
        split["loom"] = phase_times(trace)
        # Medians per part (each part's own median: they need not add up).
        split = {name: {k: statistics.median(v) for k, v in parts.items()}
                 for name, parts in split.items()}

    ms = {name: statistics.median(times[name]) for name in order}
    fastest = {name: min(times[name]) for name in order}
    strongest = min(args.peers, key=lambda name: ms[name])
    result = {
        "model": str(args.model.relative_to(REPO) if args.model.is_relative_to(REPO) else args.model),
        "optimizer": args.optimizer, "loom_optimizer_impl": args.loom_optimizer_impl,
        "threads": args.threads, "steps": args.steps,
        "repeats": args.repeats, "torch": torch.__version__,
        "ms": ms, "peak_bytes": peaks, "loom_predicted_peak_bytes": predicted,
        "strongest_peer": strongest, "time_ratio_vs_strongest": ms["loom"] / ms[strongest],
        "fastest_ms": fastest, "ms_steps": times, "profile_ms": split,
    }
    kib = 1024
    print(f"model {result['model']}, {args.optimizer} (Loom {args.loom_optimizer_impl}), "
          f"{args.threads} threads, "
          f"{args.repeats} rounds x {args.steps} steps each, torch {torch.__version__}")
    print(f"{'':16}{'step ms':>10}{'Loom/this':>11}{'fastest':>10}{'peak KiB':>12}{'Loom/this':>11}")
    for name in order:
        peak = (f"{peaks[name] / kib:12.1f}{peaks['loom'] / peaks[name]:11.3f}"
                if name in peaks else f"{'-':>12}{'-':>11}")
        print(f"{name:16}{ms[name]:10.3f}{ms['loom'] / ms[name]:11.3f}{fastest[name]:10.3f}{peak}")
    print(f"Loom / strongest peer ({strongest}): {ms['loom'] / ms[strongest]:.3f}")
    print(f"Loom predicted peak (compiler liveness): {predicted / kib:.1f} KiB "
          f"({predicted / peaks['loom']:.3f} of measured)")
    for name, parts in split.items():
        print(f"where {name}'s step goes (ms): "
              + ", ".join(f"{k} {v:.3f}" for k, v in parts.items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
