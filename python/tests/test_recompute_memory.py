"""The runtime measures the peak the compiler predicts for steps with recompute
regions, and recomputing changes no number.

The hand-computed steps of test/Analysis/peak-memory-recompute.mlir (a
two-block step without and with layers.0 checkpointed, and a step whose peak
is reached inside a region) are compiled with SGD and run by loom-run on one
rank with the same weights and batches. Each artifact's measured peak (the
runtime's allocator accounting, in its trace) equals loom-compile's
prediction, which the lit test checks by hand: 3204, 2692 (512 bytes less:
the activation checkpointing stops keeping) and 1608 bytes. The plain and
checkpointed steps end with bitwise equal parameters.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import torch
from safetensors.torch import load_file, save_file

from build_tools import LOOM_COMPILE, LOOM_OPT, LOOM_RUN, REPO, needs_tools, predicted_peaks

pytestmark = needs_tools(LOOM_OPT, LOOM_COMPILE, LOOM_RUN)

LIT_FILE = REPO / "test" / "Analysis" / "peak-memory-recompute.mlir"
# The lit test's numbers (persistent + activations).
PEAKS = {"plain": 3204, "remat": 2692, "transient": 1608}
STEPS = 3


def split_steps() -> dict[str, str]:
    """The lit file's `//--- NAME.mlir` parts."""
    parts = re.split(r"^//--- (\w+)\.mlir$", LIT_FILE.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def make_artifact(name: str, text: str, tmp_path):
    """The step with weights (seeded by name, the same for every step that
    has it) and batches, compiled with SGD; returns (artifact, batches,
    predicted peak)."""
    out = tmp_path / name
    out.mkdir()
    (out / "src.mlir").write_text(text)
    flat = subprocess.run([str(LOOM_OPT), str(out / "src.mlir")], capture_output=True,
                          text=True, check=True).stdout
    flat = flat.replace(
        "module {", 'module attributes {loom.weights = "step.weights.safetensors"} {', 1)
    (out / "step.mlir").write_text(flat)
    args = re.findall(r'%\w+: tensor<((?:\d+x)*)f32> \{loom\.name = "([^"]+)", '
                      r'loom\.role = #loom\.role<(parameter|input)>', flat)
    weights, batches = {}, {}
    for dims, arg, role in args:
        shape = [int(d) for d in dims.split("x") if d]
        if role == "parameter":
            gen = torch.Generator().manual_seed(sum(map(ord, arg)))
            weights[arg] = torch.randn(shape, generator=gen) * 0.5
        else:
            gen = torch.Generator().manual_seed(7)
            for s in range(STEPS):
                batches[f"step{s}.arg0"] = torch.randn(shape, generator=gen)
    save_file(weights, str(out / "step.weights.safetensors"))
    save_file(batches, str(out / "batches.safetensors"),
              metadata={"num_steps": str(STEPS), "num_args": "1"})
    summary = subprocess.run(
        [str(LOOM_COMPILE), str(out / "step.mlir"), "--optimizer=sgd", "--summary",
         "-o", str(out / "step.loomx")], capture_output=True, text=True, check=True).stderr
    predicted = predicted_peaks(summary)[0]
    return out / "step.loomx", out / "batches.safetensors", predicted


def run(artifact, batches):
    """Runs the artifact; returns (measured peak, final parameters)."""
    trace = artifact.parent / "trace.json"
    params = artifact.parent / "params.safetensors"
    result = subprocess.run(
        [str(LOOM_RUN), str(artifact), "--batches", str(batches), "--no-progress",
         "--trace", str(trace), "--save-params", str(params)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    peak = max(e["args"]["peak_bytes"] for e in events
               if e.get("ph") == "X" and "peak_bytes" in e.get("args", {}))
    return peak, load_file(str(params))


def test_measured_peak_is_the_predicted_one(tmp_path):
    steps = split_steps()
    assert set(steps) == set(PEAKS)
    finals = {}
    for name, text in steps.items():
        artifact, batches, predicted = make_artifact(name, text, tmp_path)
        assert predicted == PEAKS[name], name
        measured, finals[name] = run(artifact, batches)
        assert measured == predicted, name
    # Checkpointing layers.0 keeps one [16, 8] f32 activation less.
    assert PEAKS["plain"] - PEAKS["remat"] == 16 * 8 * 4
    plain, remat = finals["plain"], finals["remat"]
    assert plain.keys() == remat.keys()
    for key in plain:
        assert torch.equal(plain[key], remat[key]), key
    # The runs trained: the parameters moved.
    gen = torch.Generator().manual_seed(sum(map(ord, "layers.0.a.weight")))
    assert not torch.equal(plain["layers.0.a.weight"],
                           torch.randn(plain["layers.0.a.weight"].shape, generator=gen) * 0.5)
