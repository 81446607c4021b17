"""nn.SyncBatchNorm on N data-parallel ranks trains as the same model does on
one device over the whole batch: its statistics span every rank's rows
(loom-sync-batch-norm, docs/distributed.md "SyncBatchNorm").

PyTorch cannot run SyncBatchNorm on the CPU (its kernels are CUDA's), so the
reference is eager PyTorch on one device, which is what SyncBatchNorm over
all ranks computes. The sums run in another order, so the check is at
loom-run's default tolerance (1e-5), and the negative control is the same
net with plain batch norm, which each rank normalises by its own rows.
"""

from __future__ import annotations

import re

import pytest
import torch

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, needs_tools
from test_run_command import loom_run

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

MODEL = "python/tests/sync_batch_norm_model.py"
SGD = ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--steps", "3", "--check"]


@pytest.mark.parametrize("dp, nproc, extra, control", [
    ("replicate", 2, [], True),
    ("fsdp", 2, [], False),
    ("fsdp", 4, ["--replicate-size=2"], True),
    ("fsdp", 2, ["--remat=full", "--remat-modules=features"], False),
], ids=["ddp-2", "fsdp-2", "hsdp-2x2", "fsdp-2-remat"])
def test_sync_batch_norm_trains_as_one_device_on_the_whole_batch(dp, nproc, extra, control,
                                                                 tmp_path):
    """Losses, parameters and running statistics of every step within 1e-5
    of eager PyTorch on all 8 rows; plain batch norm on the same ranks is
    not (it differs from the first loss on). With the block checkpointed,
    the batch norm's outputs are saved and what follows it recomputed.
    The control (plain batch norm) runs on 2 and on 4 ranks: how the rows
    split, not how the parameters are sharded, is what it tests."""
    flags = ["--nproc", str(nproc), "--dp", dp, *SGD, *extra]
    result = loom_run(MODEL, *flags, out=tmp_path / "sync")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "PASS" in out and "MISMATCH" not in out, out
    if not control:
        return

    result = loom_run(MODEL, *flags, "--make-arg", "sync=0", out=tmp_path / "plain")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert re.search(r"step +0 +loss .* MISMATCH", out), out
    assert "buffer 'features.1.running_mean': MISMATCH" in out, out


@pytest.mark.parametrize("affine, track", [("0", "1"), ("1", "0")],
                         ids=["no-affine", "no-running-stats"])
def test_sync_batch_norm_forms(affine, track, tmp_path):
    """Without weight and bias, and without running statistics (the
    ``no_stats`` form), on 2 DDP ranks."""
    result = loom_run(MODEL, "--nproc", "2", "--dp", "replicate", *SGD, "--make-arg",
                      f"affine={affine}", "--make-arg", f"track={track}", out=tmp_path / "run")
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "PASS" in out, out


def test_one_rank_is_batch_norm_bitwise(tmp_path):
    """On one rank the marks change nothing: bitwise equal to eager."""
    result = loom_run(MODEL, *SGD, "--rtol", "0", "--atol", "0", out=tmp_path / "one")
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "PASS" in out, out


def test_capture_marks_sync_batch_norm_forwards_only():
    """Capture marks the training-mode forward of each SyncBatchNorm (not
    plain batch norm's, not backward ops), and refuses a SyncBatchNorm with
    a process group of its own."""
    from loom import capture

    import sync_batch_norm_model

    model, batches = sync_batch_norm_model.make()
    model.bn2 = torch.nn.BatchNorm1d(6)  # plain again
    ep, _ = capture.export_joint(model, batches[0])
    capture.annotate(ep, model)
    marked = {(n.meta["custom"][capture.MODULE_KEY], str(n.target)) for n in ep.graph.nodes
              if n.op == "call_function"
              and n.meta["custom"].get(capture.SYNC_BATCH_NORM_KEY)}
    assert marked == {("features.1", "aten._native_batch_norm_legit_functional.default")}, marked

    model.features[1].process_group = object()
    with pytest.raises(capture.CaptureError,
                       match="'features.1' has a process_group of its own"):
        capture.annotate(ep, model)


def test_a_data_parallel_reference_is_refused_with_advice(tmp_path):
    """PyTorch's DDP cannot train SyncBatchNorm on CPU ranks; capture says
    so before trying, and names the reference that fits."""
    result = loom_run(MODEL, "--nproc", "2", "--dp", "replicate", "--reference", "ddp",
                      "--steps", "1", "--check", out=tmp_path / "ddp")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "PyTorch runs nn.SyncBatchNorm (bn2, features.1) on GPUs only" in out, out
    assert "--reference eager" in out, out
