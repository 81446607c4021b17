"""loom-run's device choice (run by ctest, LOOM_RUN set): the artifact's
`device` key, the --device override, and the CUDA backend.

Without a GPU (or with a runtime built against a LibTorch without CUDA),
running on cuda must end with exit status 2 and one line naming the device,
never a crash; a cuda artifact still runs on the CPU with --device cpu.
With a GPU, the linear step runs on cuda and matches PyTorch eager trained
on the same GPU (make_linear.py --device cuda), within rtol 1e-5 on losses
and 1e-5 * max(1, |ref|) on parameters, the CPU test's tolerances: the same
ATen CUDA kernels run in both, in the same order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_loom_run import write_linear_program  # noqa: E402

LOOM_RUN = os.environ.get("LOOM_RUN", "")

pytestmark = pytest.mark.skipif(not LOOM_RUN, reason="LOOM_RUN is not set (ctest sets it)")

HAS_CUDA = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device (torch.cuda.is_available() is False)")
needs_no_gpu = pytest.mark.skipif(HAS_CUDA, reason="a CUDA device is present: the GPU tests run instead")


def make_linear(out: Path, device: str = "cpu", optimizer: str = "adam") -> Path:
    import make_linear as generator

    assert generator.main([str(out), "--optimizer", optimizer, "--device", device]) == 0
    return out


def set_device(name):
    def mutate(p):
        p["device"] = name

    return mutate


def loom_run(artifact: Path, d: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [LOOM_RUN, str(artifact), "--batches", str(d / "batches.safetensors"), "--no-progress", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def assert_one_line_cuda_error(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("loom-run: error: device cuda: "), r.stderr


@needs_no_gpu
def test_device_flag_cuda_fails_in_one_line(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    assert_one_line_cuda_error(loom_run(d / "step.loomx", d, "--device", "cuda"))


@needs_no_gpu
def test_cuda_artifact_fails_in_one_line(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    assert_one_line_cuda_error(loom_run(write_linear_program(d, set_device("cuda")), d))


def test_device_cpu_overrides_a_cuda_artifact(tmp_path: Path) -> None:
    # The reference is CPU eager; the artifact says cuda, the flag wins.
    d = make_linear(tmp_path)
    artifact = write_linear_program(d, set_device("cuda"))
    r = loom_run(artifact, d, "--device", "cpu", "--check", str(d / "reference.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout


def test_explicit_cpu_artifact_runs_as_before(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    plain = loom_run(d / "step.loomx", d, "--check", str(d / "reference.json"))
    explicit = loom_run(write_linear_program(d, set_device("cpu")), d, "--check", str(d / "reference.json"))
    assert plain.returncode == 0 and explicit.returncode == 0, plain.stderr + explicit.stderr
    losses = [line.split("  time")[0] for line in plain.stdout.splitlines() if line.startswith("step")]
    assert losses and losses == [line.split("  time")[0] for line in explicit.stdout.splitlines() if line.startswith("step")]


def test_unknown_device_key_is_a_located_error(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    r = loom_run(write_linear_program(d, set_device("tpu")), d)
    assert r.returncode == 2
    assert "device: unknown device 'tpu' (expected cpu or cuda)" in r.stderr


def test_device_flag_usage_error(tmp_path: Path) -> None:
    d = make_linear(tmp_path)
    r = loom_run(d / "step.loomx", d, "--device", "gpu")
    assert r.returncode == 2
    assert "--device expects cpu or cuda, found 'gpu'" in r.stderr


@needs_gpu
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_cuda_matches_eager_on_cuda(tmp_path: Path, optimizer: str) -> None:
    d = make_linear(tmp_path, device="cuda", optimizer=optimizer)
    r = loom_run(d / "step.loomx", d, "--check", str(d / "reference.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout


@needs_gpu
def test_cuda_peak_is_reported(tmp_path: Path) -> None:
    d = make_linear(tmp_path, device="cuda")
    report = tmp_path / "memory.jsonl"
    r = loom_run(d / "step.loomx", d, "--memory-report", str(report))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert lines and all(line["tracked_peak_bytes"] > 0 for line in lines)


@needs_gpu
@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_cuda_one_rank_mesh_runs_collectives_over_nccl(tmp_path: Path, mode: str) -> None:
    # One GPU is enough for the stream/event path: a one-rank mesh still
    # issues every all-gather/reduce-scatter/all-reduce through NCCL on its
    # kind's stream, with the events and releases of a real step.
    import make_dp_linear

    assert make_dp_linear.main([str(tmp_path), "--mode", mode, "--nproc", "1"]) == 0
    r = loom_run(tmp_path / "step.loomx", tmp_path, "--device", "cuda",
                 "--check", str(tmp_path / "reference.json"), "--rtol", "1e-4")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout
    assert ("all_gather" if mode == "fsdp" else "all_reduce") in r.stdout


needs_two_gpus = pytest.mark.skipif(
    not HAS_CUDA or torch.cuda.device_count() < 2, reason="fewer than 2 CUDA devices"
)


@needs_two_gpus
@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_cuda_two_ranks_over_nccl_match_eager(tmp_path: Path, mode: str) -> None:
    # make_dp_linear's reference is single-process CPU eager on the whole
    # batch; the ranks run cuBLAS kernels and NCCL reductions, so the
    # comparison is to 1e-4 relative, not bitwise.
    import make_dp_linear

    assert make_dp_linear.main([str(tmp_path), "--mode", mode, "--nproc", "2"]) == 0
    r = loom_run(tmp_path / "step.loomx", tmp_path, "--device", "cuda", "--timeout", "60",
                 "--check", str(tmp_path / "reference.json"), "--rtol", "1e-4")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout
