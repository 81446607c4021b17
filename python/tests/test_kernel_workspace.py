"""The measured kernel workspace profile: with it, the budget bounds the
measured peak of a network of convolutions too.

oneDNN's CPU convolutions hold reorders and im2col columns while they run,
which no rule of the peak-memory analysis predicts (docs/recompute.md,
"Kernel workspace"). For a small ResNet (remat_conv_model.py) on one rank
and with FSDP on two:

- without a profile the measured peak is above the prediction (the
  negative control: this is the workspace the profile is for), and a
  recompute budget between the peaks is exceeded; loom-compile warns that
  the budget does not count the convolutions' workspace, and loom-run that
  every rank's measured peak is above the budget the step was compiled for;
- ``loom-run --kernel-workspace`` on the step without recompute writes the
  profile (every rank's, merged); ``loom-compile --kernel-workspace`` then
  predicts the measured peak exactly;
- with the profile, at three budgets from the peak without recompute to
  the smallest feasible one, the measured peak is at most the budget,
  equals the prediction, does not rise when the budget falls, and training
  is bitwise that of the step without recompute (every rank's loss at every
  step, the final parameters), and loom-run warns of nothing; the smallest
  feasible budget is at most
  ``--remat=full``'s peak.
"""

from __future__ import annotations

import json

import pytest

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, needs_tools, predicted_peaks
from test_remat_parity import STEPS, Run, capture, differences, run
from test_sac_ilp import compile_step, smallest_budget

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)


def train(out, world, tag, *flags):
    result = run([LOOM_RUN, out / f"{tag}.loomx", "--nproc", str(world), "--batches",
                  out / "batches.safetensors", "--steps", str(STEPS), "--no-progress",
                  "--trace", out / f"{tag}.trace.json", "--save-params",
                  out / f"{tag}.safetensors", *flags])
    assert result.returncode == 0, result.stdout + result.stderr
    got = Run(out, tag)
    got.stderr = result.stderr
    return got


@pytest.mark.parametrize("world", [1, 2], ids=["1rank", "2ranks"])
def test_profiled_budget_bounds_the_measured_peak(world, tmp_path):
    capture("conv", world, tmp_path)
    profile = tmp_path / "workspace.json"
    unprofiled, _ = compile_step(tmp_path, world, "plain")
    plain = train(tmp_path, world, "plain", "--kernel-workspace", profile)
    assert plain.peak > unprofiled, \
        f"measured {plain.peak}, predicted {unprofiled}: the convolutions' workspace is gone"

    table = json.loads(profile.read_text())
    assert table["format"] == "loom-kernel-workspace" and table["device"] == "cpu"
    convolutions = {k: v for k, v in table["kernels"].items()
                    if k.startswith("aten::convolution")}
    assert convolutions and max(convolutions.values()) > 0, table["kernels"]
    # Every rank runs the same kernels here; the merged profile has each once.
    assert all(isinstance(v, int) and v >= 0 for v in table["kernels"].values())

    ws = f"--kernel-workspace={profile}"
    no_recompute, _ = compile_step(tmp_path, world, "profiled", ws)
    assert no_recompute == plain.peak, f"predicted {no_recompute}, measured {plain.peak}"

    least = smallest_budget(tmp_path, world, ws)
    full, _ = compile_step(tmp_path, world, "full", "--remat=full", ws)
    assert least <= full < no_recompute

    # The negative control for the contract: the same budget without the
    # profile is exceeded at run time.
    # loom-compile warns that the budget does not count the convolutions'
    # workspace, and loom-run that every rank's peak is above the budget.
    middle = (no_recompute + least) // 2
    dp = ["--dp=fsdp"] if world > 1 else []
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "blind.loomx",
                  "--summary", *dp, f"--recompute-budget={middle}B"])
    assert result.returncode == 0, result.stderr
    assert (f"warning: the memory budget ({middle} B) does not count the CPU workspace of "
            in result.stderr and "such as this 'aten::convolution" in result.stderr), result.stderr
    predicted = predicted_peaks(result.stderr)[0]
    blind = train(tmp_path, world, "blind")
    assert blind.peak > predicted, f"measured {blind.peak}, predicted {predicted}"
    for rank in range(world):
        assert f"warning: rank {rank}: the measured peak, " in blind.stderr, blind.stderr
    assert (f"B above the memory budget the step was compiled for ({middle} B): the prediction "
            "does not know some kernels' temporaries") in blind.stderr, blind.stderr

    peaks = []
    for budget in (no_recompute, middle, least):
        tag = f"budget{budget}"
        predicted, _ = compile_step(tmp_path, world, tag, f"--recompute-budget={budget}B", ws)
        got = train(tmp_path, world, tag)
        assert got.peak <= budget, f"budget {budget}: measured peak {got.peak}"
        assert "warning" not in got.stderr, got.stderr
        assert got.peak == predicted, f"budget {budget}: measured {got.peak}, predicted {predicted}"
        assert differences(got, plain) == [], f"budget {budget}"
        peaks.append(got.peak)
    assert peaks == sorted(peaks, reverse=True) and peaks[-1] < plain.peak, peaks

    # The artifact records the profile's threads; a run with others is
    # warned that its peak may differ from the prediction.
    other = table["threads"] + 1
    result = run([LOOM_RUN, tmp_path / "profiled.loomx", "--nproc", str(world), "--batches",
                  tmp_path / "batches.safetensors", "--steps", "1", "--no-progress",
                  "--threads", str(other)])
    assert result.returncode == 0, result.stderr
    assert (f"compiled with the kernel workspace measured with {table['threads']} ATen threads, "
            f"and runs with {other}") in result.stderr, result.stderr
    result = run([LOOM_RUN, tmp_path / "profiled.loomx", "--nproc", str(world), "--batches",
                  tmp_path / "batches.safetensors", "--steps", "1", "--no-progress"])
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr

