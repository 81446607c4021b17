"""loom-run end to end on hand-written artifacts (run by ctest, LOOM_RUN set).

make_linear.py writes a linear + MSE artifact and PyTorch eager's losses and
final parameters for it; loom-run --check must reproduce them within its
tolerances (rtol 1e-5 on losses, 1e-5 * max(1, |ref|) on tensors, or those
given with --rtol/--atol), and must fail, with exit status 1, when the
reference is perturbed beyond them.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import loomx  # noqa: E402

LOOM_RUN = os.environ.get("LOOM_RUN", "")
STEP_LINE = re.compile(
    r"^step +(\d+)  loss (\d+\.\d{7})  time \d+\.\d\d ms  peak \d+\.\d\d MiB"
    r"(  ref (\d+\.\d{7})  rel \S+  (ok|MISMATCH))?$"
)

pytestmark = pytest.mark.skipif(not LOOM_RUN, reason="LOOM_RUN is not set (ctest sets it)")


def make_linear(out: Path, optimizer: str = "sgd", steps: int = 6) -> Path:
    # In this process: a subprocess per test would import torch again.
    import make_linear as generator

    assert generator.main([str(out), "--optimizer", optimizer, "--steps", str(steps)]) == 0
    return out


def loom_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LOOM_RUN, *args], capture_output=True, text=True, timeout=300)


def run_check(d: Path, *extra: str) -> subprocess.CompletedProcess:
    return loom_run(
        str(d / "step.loomx"), "--batches", str(d / "batches.safetensors"), "--check", str(d / "reference.json"), *extra
    )


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_linear_matches_eager(tmp_path: Path, optimizer: str) -> None:
    d = make_linear(tmp_path, optimizer)
    trace = tmp_path / "trace.json"
    r = run_check(d, "--trace", str(trace))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    steps = [STEP_LINE.match(line) for line in lines[:6]]
    assert all(steps), lines
    assert [int(m.group(1)) for m in steps] == list(range(6))
    assert all(m.group(5) == "ok" for m in steps)
    assert lines[-1] == "PASS"
    assert any(line.startswith("check: tensors 3/3 within") for line in lines)

    events = json.loads(trace.read_text())["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == 6 * (12 + 1)  # 12 instructions and the step
    addmm = [e for e in complete if e["name"] == "addmm"]
    assert len(addmm) == 6
    assert addmm[0]["args"] == {"step": 0, "index": 1, "op": "aten", "kernel": "aten::addmm.default", "module": "fc", "phase": "forward"}
    assert all(e["dur"] >= 0 for e in complete)


def test_loss_mismatch_fails(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    ref = json.loads((d / "reference.json").read_text())
    ref["losses"][2] *= 1.001
    (d / "reference.json").write_text(json.dumps(ref))
    r = run_check(d)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[2].endswith("MISMATCH")
    assert lines[-1] == "FAIL: 1 loss mismatches, 0 tensor mismatches"


def test_parameter_mismatch_fails(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    ref = load_file(str(d / "reference.safetensors"))
    ref["fc.bias"][1] += 1e-3
    save_file(ref, str(d / "reference.safetensors"))
    r = run_check(d)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"^check: parameter 'fc\.bias': MISMATCH max \|a-b\|/max\(1,\|b\|\) = 1\.000e-03 "
                     r"\(max \|a-b\| = 1\.000e-03\): 1 of 3 elements beyond max\(1e-05, 1e-05\*\|ref\|\)", r.stdout, re.M), r.stdout
    assert "worst parameter 'fc.bias'" in r.stdout
    assert r.stdout.splitlines()[-1] == "FAIL: 0 loss mismatches, 1 tensor mismatches"


def perturb_reference(d: Path, rel: float) -> None:
    """Scale every reference loss and the reference fc.weight by (1 + rel)."""
    ref = json.loads((d / "reference.json").read_text())
    ref["losses"] = [loss * (1 + rel) for loss in ref["losses"]]
    (d / "reference.json").write_text(json.dumps(ref))
    tensors = load_file(str(d / "reference.safetensors"))
    tensors["fc.weight"] = (tensors["fc.weight"].double() * (1 + rel)).float()
    save_file(tensors, str(d / "reference.safetensors"))


def test_rtol_and_atol_set_the_check_tolerances(tmp_path: Path) -> None:
    """A reference off by 1e-4 relative: the default rtol 1e-5 fails every
    loss and fc.weight, --rtol 1e-3 passes, --rtol 1e-5 --atol 1 passes
    (the losses are below 10), --rtol 1e-6 reports its own tolerance."""
    d = make_linear(tmp_path)
    perturb_reference(d, 1e-4)

    r = run_check(d)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "FAIL: 6 loss mismatches, 1 tensor mismatches"

    r = run_check(d, "--rtol", "1e-6")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "check: losses  0/6 within rtol 1e-06 " in r.stdout
    assert re.search(r"^check: parameter 'fc\.weight': MISMATCH .*: \d+ of 18 elements beyond "
                     r"max\(1e-06, 1e-06\*\|ref\|\); worst \|a-b\| = \S+ where \|ref\| = \S+ allows \S+$",
                     r.stdout, re.M), r.stdout
    assert "check: tensors 2/3 within max(1e-06, 1e-06*|ref|)" in r.stdout

    r = run_check(d, "--rtol", "1e-3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check: losses  6/6 within rtol 0.001 " in r.stdout
    assert "check: tensors 3/3 within max(0.001, 0.001*|ref|)" in r.stdout
    assert r.stdout.splitlines()[-1] == "PASS"

    r = run_check(d, "--atol", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check: losses  6/6 within rtol 1e-05 atol 1 " in r.stdout
    assert "check: tensors 3/3 within max(1, 1e-05*|ref|)" in r.stdout

    # Exact comparison: the unperturbed run is bitwise equal to eager.
    d2 = make_linear(tmp_path / "exact")
    r = run_check(d2, "--rtol", "0", "--atol", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check: tensors 3/3 within max(0, 0*|ref|)" in r.stdout


def test_tolerance_usage_errors(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    r = run_check(d, "--rtol", "-1")
    assert r.returncode == 2 and "--rtol expects a finite number >= 0, found '-1'" in r.stderr
    r = run_check(d, "--atol", "nan")
    assert r.returncode == 2 and "--atol expects a finite number >= 0, found 'nan'" in r.stderr
    r = loom_run(str(d / "step.loomx"), "--batches", str(d / "batches.safetensors"), "--rtol", "1e-3")
    assert r.returncode == 2 and "--rtol and --atol apply to --check; no --check given" in r.stderr


def test_missing_reference_tensor_fails(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    ref = load_file(str(d / "reference.safetensors"))
    del ref["calls"]
    save_file(ref, str(d / "reference.safetensors"))
    r = run_check(d)
    assert r.returncode == 1
    assert "check: buffer 'calls': not in " in r.stdout


def test_fewer_steps_checks_losses_only(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    r = run_check(d, "--steps", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check: losses  3/3 within rtol 1e-05" in r.stdout
    assert "check: tensors not compared" in r.stdout
    assert r.stdout.splitlines()[-1] == "PASS"


def test_more_steps_than_reference(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    r = run_check(d, "--steps", "7")
    assert r.returncode == 2
    assert "has 6 losses; cannot check 7 steps" in r.stderr


def test_without_check_runs_the_batches(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    r = loom_run(str(d / "step.loomx"), "--batches", str(d / "batches.safetensors"), "--threads", "1", "--no-progress")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3  # one per batch in the file
    assert all(STEP_LINE.match(line) for line in lines)
    assert "2 parameters" in r.stderr and "optimizer sgd, 1 threads" in r.stderr


def test_save_params_then_resume_from_them(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    saved = tmp_path / "params.safetensors"
    r = loom_run(str(d / "step.loomx"), "--batches", str(d / "batches.safetensors"), "--steps", "6", "--save-params", str(saved))
    assert r.returncode == 0, r.stderr
    final = load_file(str(saved))
    ref = load_file(str(d / "reference.safetensors"))
    assert set(final) == {"fc.weight", "fc.bias", "calls"}
    assert torch.allclose(final["fc.weight"], ref["fc.weight"], rtol=0, atol=1e-6)
    r2 = loom_run(str(d / "step.loomx"), "--batches", str(d / "batches.safetensors"), "--steps", "1", "--weights", str(saved))
    assert r2.returncode == 0, r2.stderr


def test_memory_report(tmp_path: Path) -> None:
    """--memory-report: a JSON line per step with the kernel's RSS next to
    the runtime's tracked tensor bytes (test_load.py checks them over long
    multi-rank runs); a path it cannot write is an error naming it."""
    d = make_linear(tmp_path)
    args = [str(d / "step.loomx"), "--batches", str(d / "batches.safetensors"), "--steps", "4", "--no-progress"]
    r = loom_run(*args, "--memory-report", str(tmp_path / "m.jsonl"))
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [(row["rank"], row["step"], row["checkpoint"]) for row in rows] == [(0, s, False) for s in range(4)]
    losses = [float(STEP_LINE.match(line).group(2)) for line in r.stdout.splitlines()]
    for row, loss in zip(rows, losses):
        assert f"{row['loss']:.7f}" == f"{loss:.7f}"
        # A process with LibTorch loaded holds tens of MiB; VmHWM >= VmRSS.
        assert 10 << 20 < row["rss_bytes"] <= row["hwm_bytes"], row
        assert 0 < row["tracked_end_bytes"] <= row["tracked_peak_bytes"] < row["rss_bytes"], row
    r = loom_run(*args, "--memory-report", str(tmp_path / "missing" / "m.jsonl"))
    assert r.returncode == 2
    assert str(tmp_path / "missing" / "m.jsonl") + ": cannot write the memory report: No such file" in r.stderr


def write_linear_program(d: Path, mutate) -> Path:
    """make_linear's artifact with its program JSON changed by `mutate`."""
    data = (d / "step.loomx").read_bytes()
    version, flags, n, m = struct.unpack("<IIQQ", data[8:32])
    program = json.loads(data[32 : 32 + n])
    mutate(program)
    out = d / "changed.loomx"
    out.write_bytes(loomx.artifact_bytes(program, data[32 + n :]))
    return out


def test_unknown_kernel_is_refused_at_load(tmp_path: Path) -> None:
    d = make_linear(tmp_path)

    def mutate(p):
        p["programs"][0]["instructions"][1]["kernel"] = "aten::nope"

    r = loom_run(str(write_linear_program(d, mutate)), "--batches", str(d / "batches.safetensors"))
    assert r.returncode == 2
    assert r.stdout == ""
    assert "loom-run: error: " in r.stderr
    assert "programs[0].instructions[1] (in 'addmm'): unknown kernel aten::nope.default" in r.stderr


def test_slot_out_of_range_is_refused(tmp_path: Path) -> None:
    d = make_linear(tmp_path)

    def mutate(p):
        p["programs"][0]["instructions"][1]["args"][1] = {"tensor": 912}

    r = loom_run(str(write_linear_program(d, mutate)), "--batches", str(d / "batches.safetensors"))
    assert r.returncode == 2
    assert "programs[0].instructions[1].args[1] (in 'addmm'): slot 912 out of range" in r.stderr


def test_not_an_artifact(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    r = loom_run(str(d / "batches.safetensors"), "--batches", str(d / "batches.safetensors"))
    assert r.returncode == 2
    assert "not a Loom artifact" in r.stderr


def test_usage_errors(tmp_path: Path) -> None:
    r = loom_run()
    assert r.returncode == 2 and "usage: loom-run" in r.stderr
    r = loom_run("x.loomx", "--batches", "b", "--steps", "0")
    assert r.returncode == 2 and "--steps expects an integer >= 1, found '0'" in r.stderr
    r = loom_run("x.loomx", "--batches", "b", "--seed", "1.5")
    assert r.returncode == 2 and "--seed expects an integer" in r.stderr and "'1.5'" in r.stderr
    r = loom_run("x.loomx", "--batches", "b", "--frobnicate")
    assert r.returncode == 2 and "unknown option '--frobnicate'" in r.stderr
    r = loom_run("--help")
    assert r.returncode == 0 and "--check FILE" in r.stdout
