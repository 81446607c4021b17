"""The runtime measures the peak the compiler predicts for FSDP steps, with
the default backward prefetch too.

GPT captured for N ranks, compiled with --dp=fsdp (loom-compile --summary
gives the predicted peak: PeakMemory over the loomrt program) and run by
loom-run --nproc N --trace: every rank's peak_bytes (the CPU allocator's
reports) in every step must be exactly the prediction. With the default
backward prefetch (pre) the next unit's all-gather is issued before the
current unit's gradients are reduced and waited for much later; the runtime
holds the buffer it gathers into from the start, so the prediction must
count it from there (it once counted it from the wait only and measured one
unit's gathered parameters, 50304 bytes, above the prediction). FSDP unpacks
a gathered buffer with a split whose pieces are views (the buffer lives until
the last piece is freed) and reshapes that copy (on one rank, where the
pieces are contiguous, the reshapes are views); a rank holds its slice of
the batch. Under bf16 mixed precision the attention kernel's logsumexp stays
float32 (the step once typed it bf16 and measured 512 bytes above the
prediction on 4 ranks). Each of these, mispredicted, shows on 1 or 4 ranks or without
resharding after forward.

The default backward prefetch (bounded) must also hold no more than PyTorch's
FSDP2 at its default settings on the same model and ranks: FSDP2's peak is
measured as bench/fsdp_vs_fsdp2.py measures it (torch.profiler's allocator
reports on rank 0's main thread over one step), Loom's is the runtime's.
"""

from __future__ import annotations

import importlib
import json
import sys

import pytest

from build_tools import predicted_peaks
from test_distributed_parity import (  # noqa: F401
    LOOM_COMPILE, LOOM_RUN, MODELS, OPTIMIZERS, REPO, capture_and_import, pytestmark, run)

STEPS = 3


def measured_peaks(trace) -> dict[int, list[int]]:
    """Each rank's peak_bytes per step (loom-run --trace: one pid per rank)."""
    peaks: dict[int, list[int]] = {}
    for e in json.loads(trace.read_text())["traceEvents"]:
        if e.get("ph") == "X" and "peak_bytes" in e.get("args", {}):
            peaks.setdefault(e["pid"], []).append(e["args"]["peak_bytes"])
    return peaks


@pytest.mark.parametrize("world, flags", [
    (1, []),
    (2, []),
    (2, ["--backward-prefetch=none"]),
    (2, ["--backward-prefetch=pre"]),
    (2, ["--reshard-after-forward=false"]),
    (4, []),
    (4, ["--backward-prefetch=pre"]),
    (4, ["--reshard-after-forward=false"]),
    (4, ["--param-dtype=bf16", "--reduce-dtype=f32"]),
])
def test_measured_peak_is_the_predicted_one(world, flags, tmp_path):
    capture_and_import("gpt", world, tmp_path)
    artifact = tmp_path / "step.loomx"
    compiled = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", artifact, *OPTIMIZERS["gpt"][1],
                    "--dp=fsdp", f"--world-size={world}", "--summary", *flags])
    assert compiled.returncode == 0, compiled.stderr
    predicted = predicted_peaks(compiled.stderr)
    # FSDP gives every rank the same program.
    assert len(set(predicted)) == 1, compiled.stderr
    trace = tmp_path / "trace.json"
    result = run([LOOM_RUN, artifact, "--nproc", str(world), "--batches",
                  tmp_path / "batches.safetensors", "--steps", str(STEPS), "--no-progress",
                  "--trace", trace], timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    peaks = measured_peaks(trace)
    assert sorted(peaks) == list(range(world)), peaks
    want = {rank: [predicted[0]] * STEPS for rank in range(world)}
    assert peaks == want, f"measured {peaks}, predicted {predicted[0]}"



def compile_gpt(world: int, flags: list, tmp_path) -> tuple:
    """GPT captured for `world` ranks and compiled with `flags`: the artifact
    and its predicted peak (loom-compile --summary)."""
    capture_and_import("gpt", world, tmp_path)
    artifact = tmp_path / "step.loomx"
    compiled = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", artifact, *OPTIMIZERS["gpt"][1],
                    "--dp=fsdp", f"--world-size={world}", "--summary", *flags])
    assert compiled.returncode == 0, compiled.stderr
    return artifact, predicted_peaks(compiled.stderr)[0]


@pytest.mark.parametrize("world", [2, 4])
def test_default_peak_is_at_most_fsdp2s(world, tmp_path):
    # The bench's FSDP2 runner, imported by name (and on the path while its
    # ranks start, which import it again to find their entry point).
    (tmp_path / "fsdp2").mkdir()
    sys.path.insert(0, str(REPO / "bench"))
    try:
        bench = importlib.import_module("fsdp_vs_fsdp2")
        fsdp2 = bench.fsdp2(MODELS["gpt"], world, "auto", steps=1, threads=1, force_sum=False,
                            work=tmp_path / "fsdp2",
                            optimizer="fused")["peak_bytes_main_thread"]
    finally:
        sys.path.remove(str(REPO / "bench"))
    artifact, _ = compile_gpt(world, [], tmp_path / "bounded")
    trace = tmp_path / "trace.json"
    result = run([LOOM_RUN, artifact, "--nproc", str(world), "--batches",
                  tmp_path / "bounded" / "batches.safetensors", "--steps", "1",
                  "--no-progress", "--trace", trace], timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    loom = measured_peaks(trace)[0][0]
    assert loom <= fsdp2, f"Loom {loom} B, FSDP2 {fsdp2} B on {world} ranks"
    # The control: FSDP2's placement (pre, whose prediction the runtime
    # measures exactly, test above) holds the next unit's gathered buffer
    # across the current unit's backward, and more at the peak. It is not
    # compared with FSDP2's peak: that moves by about one unit's gathered
    # parameters from run to run (docs/bench/fsdp-vs-fsdp2.md), more than
    # pre's distance from it.
    _, pre = compile_gpt(world, ["--backward-prefetch=pre"], tmp_path / "pre")
    assert pre > loom, f"pre {pre} B, bounded {loom} B on {world} ranks"
