"""Loom's compiled training step vs PyTorch eager, side by side in one process.

Both run the same model, batches and optimizer on the CPU with the same ATen
(Loom's runtime links the LibTorch of the PyTorch it runs next to) and the
same thread count. Prints per-step time and peak tensor memory of each and
their ratios (Loom / eager; below 1.0 means Loom is better), plus Loom's
predicted peak from the compiler's liveness analysis.

    .venv/bin/python bench/step_vs_eager.py [--model examples/gpt.py]
        [--optimizer adamw] [--steps 40] [--repeats 5] [--threads N] [--json F]

Time: median over `repeats` blocks of `steps` steps each, blocks alternating
between the two so that machine noise hits both alike. Memory: the largest
number of live CPU tensor bytes during one step, counting everything alive
(parameters, buffers, optimizer state, the batch, activations, gradients),
measured for both by the same allocator hook (loomrt_memory_region_*).
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


def compile_step(model: Path, optimizer: str, work: Path) -> tuple[Path, int]:
    """capture -> import -> compile; returns the artifact and the predicted
    peak bytes."""
    capture_flags = ["--optimizer", optimizer]
    if optimizer == "sgd":
        capture_flags += ["--lr", "0.01", "--momentum", "0.9"]
    run([sys.executable, "-m", "loom.capture", model, "--out", work, "--steps", "1",
         *capture_flags])
    run([BUILD / "bin" / "loom-import", work / "step.pt2", "-o", work / "step.mlir"])
    summary = run([BUILD / "bin" / "loom-compile", work / "step.mlir", "-o",
                   work / "step.loomx", f"--optimizer={optimizer}",
                   *OPTIMIZERS[optimizer][2], "--summary"])
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=REPO / "examples" / "gpt.py")
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adamw")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="loom-bench-"))
    artifact, predicted = compile_step(args.model.resolve(), args.optimizer, work)
    rt = Runtime(BUILD / "runtime" / "lib" / "libloomrt.so")
    torch.set_num_threads(args.threads)
    rt.check(rt.lib.loomrt_set_num_threads(args.threads))

    torch.manual_seed(0)  # what capture does before make()
    model, batches = runpy.run_path(str(args.model))["make"]()
    cls, hyper, _ = OPTIMIZERS[args.optimizer]
    opt = cls([p for p in model.parameters() if p.requires_grad], **hyper)
    session = rt.session(artifact, work / "batches.safetensors")

    def eager_step(i: int) -> float:
        opt.zero_grad(set_to_none=True)
        loss = model(*batches[i % len(batches)])
        loss.backward()
        opt.step()
        return loss.item()

    # Same computation: the first losses agree (bitwise, see docs/runtime.md).
    eager_losses = [eager_step(i) for i in range(3)]
    loom_losses = [rt.step(session, i) for i in range(3)]
    if eager_losses != loom_losses:
        sys.exit(f"bench: losses differ: eager {eager_losses} vs Loom {loom_losses}")

    times = {"eager": [], "loom": []}
    step = 3
    for _ in range(args.repeats):
        for name, fn in (("eager", eager_step), ("loom", lambda i: rt.step(session, i))):
            start = time.perf_counter()
            for k in range(args.steps):
                fn(step + k)
            times[name].append((time.perf_counter() - start) / args.steps * 1e3)
        step += args.steps

    # Peak memory of one step, everything alive counted, same hook for both.
    index = step
    batch = batches[index % len(batches)]
    state = [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]
    held = held_bytes([*model.parameters(), *model.buffers(), *state, *batch])
    eager_peak = rt.measure(held, lambda: eager_step(index))
    rt.step(session, index)
    loom_peak = rt.lib.loomrt_session_last_peak_bytes(session)
    rt.lib.loomrt_session_destroy(session)

    eager_ms, loom_ms = statistics.median(times["eager"]), statistics.median(times["loom"])
    result = {
        "model": str(args.model.relative_to(REPO) if args.model.is_relative_to(REPO) else args.model),
        "optimizer": args.optimizer, "threads": args.threads, "steps": args.steps,
        "repeats": args.repeats, "torch": torch.__version__,
        "eager_ms": eager_ms, "loom_ms": loom_ms, "time_ratio": loom_ms / eager_ms,
        "eager_peak_bytes": eager_peak, "loom_peak_bytes": loom_peak,
        "loom_predicted_peak_bytes": predicted, "memory_ratio": loom_peak / eager_peak,
        "eager_ms_blocks": times["eager"], "loom_ms_blocks": times["loom"],
    }
    kib = 1024
    print(f"model {result['model']}, {args.optimizer}, {args.threads} threads, "
          f"{args.repeats} x {args.steps} steps each, torch {torch.__version__}")
    print(f"{'':18}{'PyTorch eager':>16}{'Loom':>16}{'Loom/eager':>12}")
    print(f"{'step time (ms)':18}{eager_ms:16.3f}{loom_ms:16.3f}{loom_ms / eager_ms:12.3f}")
    print(f"{'peak memory (KiB)':18}{eager_peak / kib:16.1f}{loom_peak / kib:16.1f}"
          f"{loom_peak / eager_peak:12.3f}")
    print(f"Loom predicted peak (compiler liveness): {predicted / kib:.1f} KiB "
          f"({predicted / loom_peak:.3f} of measured)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
