"""One artifact for either device: loom-compile --device=cuda, loom-run --device.

The GPT example (attention written with matmuls and softmax, kernels CUDA
has too) captured on the CPU compiles for cuda with FSDP on 2 ranks. On a
machine without a GPU, loom-run refuses to run it in one line naming the
device, and `--device cpu` runs the same artifact at parity with PyTorch
eager, as the CPU-compiled artifact does. (The CUDA backend's own parity
tests are runtime/tests/test_device.py, which skip without a GPU.)
"""

from __future__ import annotations

import json

import pytest
import torch

from capture_cli import loom_capture
from test_distributed_parity import (LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, OPTIMIZERS,  # noqa: F401
                                     STEPS, capture_and_import, pytestmark, run)


def test_cuda_artifact_fails_cleanly_without_gpu_and_runs_with_device_cpu(tmp_path):
    capture_and_import("gpt", 2, tmp_path)
    flags = [*OPTIMIZERS["gpt"][1], "--dp=fsdp", "--world-size=2"]
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "cuda.loomx",
                  "--device=cuda", *flags])
    assert result.returncode == 0, result.stderr
    program = run([LOOM_COMPILE, tmp_path / "step.mlir", "--emit=program", "--device=cuda", *flags])
    assert json.loads(program.stdout)["device"] == "cuda"

    common = ["--nproc", "2", "--batches", tmp_path / "batches.safetensors", "--steps", str(STEPS),
              "--check", tmp_path / "reference.json", "--no-progress"]
    if not torch.cuda.is_available():
        refused = run([LOOM_RUN, tmp_path / "cuda.loomx", *common], timeout=300)
        assert refused.returncode not in (0, -6, -11), refused.stderr  # no abort, no crash
        assert "no usable CUDA device" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr and "terminate called" not in refused.stderr

    on_cpu = run([LOOM_RUN, tmp_path / "cuda.loomx", "--device", "cpu", *common], timeout=600)
    assert on_cpu.returncode == 0, on_cpu.stdout + on_cpu.stderr
    assert "PASS" in on_cpu.stdout


def test_cpu_only_kernel_is_refused_for_cuda(tmp_path):
    """F.scaled_dot_product_attention captured on the CPU records a
    CPU-only kernel; compiling that for cuda names it."""
    model = tmp_path / "sdpa.py"
    model.write_text(
        "import torch\nimport torch.nn.functional as F\n\n"
        "class Attn(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.qkv = torch.nn.Linear(8, 24)\n\n"
        "    def forward(self, x):\n"
        "        q, k, v = self.qkv(x).view(2, 4, 3, 2, 4).permute(2, 0, 3, 1, 4)\n"
        "        return F.scaled_dot_product_attention(q, k, v, is_causal=True).sum()\n\n"
        "def make():\n"
        "    return Attn(), [(torch.randn(2, 4, 8),) for _ in range(2)]\n")
    result = loom_capture([model, "--out", tmp_path, "--steps", "2", "--optimizer", "sgd", "--lr", "0.1"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "cuda.loomx",
                  "--device=cuda"])
    assert result.returncode != 0
    assert ("kernel 'aten::_scaled_dot_product_flash_attention_for_cpu.default' runs only on "
            "the CPU") in result.stderr, result.stderr
    assert not (tmp_path / "cuda.loomx").exists()
    # The same step compiles for the CPU.
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "cpu.loomx"])
    assert result.returncode == 0, result.stderr
