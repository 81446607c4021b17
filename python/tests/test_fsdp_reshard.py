"""FSDP resharding beyond true/false, at parity on real ranks:
capture --split N -> loom-compile --dp=fsdp -> loom-run --nproc N --check
(20 steps, losses and final parameters within 1e-5 of eager on the whole
batch, as test_fsdp_parity.py).

- Gradient accumulation with the parameters kept unsharded between
  microbatches (FSDP2's set_requires_gradient_sync(is_last) +
  set_reshard_after_backward(is_last)): one all-gather per unit per step
  and one reduce-scatter per unit (test_fully_shard_training.py::
  TestFullyShardGradientAccumulation).
- reshard-after-forward=k: after the forward all-gather over the N shard
  ranks each rank keeps 1/k of every unit, the backward all-gather runs
  within k contiguous ranks, the reduce-scatter over all N.
"""

from __future__ import annotations

import pytest

from test_distributed_parity import STEPS, capture_and_import, pytestmark, train  # noqa: F401
from test_fsdp_parity import compile_fsdp, count, issued

# GPT: units layers.0, layers.1 and the root.
UNITS = 3


@pytest.mark.parametrize("world, batch", [(2, None), (4, 8)])
def test_fsdp_gradient_accumulation_keeps_parameters_unsharded(world, batch, tmp_path):
    """2 microbatches on 2 ranks (and on 4, with 8-row batches): the first
    microbatch's all-gathers serve both, one reduce-scatter per unit on the
    accumulated gradients."""
    capture_and_import("gpt", world, tmp_path, microbatches=2, batch=batch)
    program = compile_fsdp("gpt", tmp_path, world, "--microbatches=2",
                           "--reshard-after-forward=false",
                           "--reshard-after-backward=false")
    assert count(program, "all_gather_start") == UNITS
    assert count(program, "reduce_scatter_start") == UNITS
    result = train(tmp_path, world)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    assert issued(result.stdout, "all_gather") == [UNITS] * STEPS
    assert issued(result.stdout, "reduce_scatter") == [UNITS] * STEPS


def test_fsdp_reshard_after_forward_to_pairs_at_parity(tmp_path):
    """4 ranks, reshard-after-forward=2: forward all-gathers over the 4
    shard ranks, each rank keeps half of every unit after forward, backward
    all-gathers within pairs of consecutive ranks (FSDP2's
    mesh.view(-1, 2)), reduce-scatters over all 4. Every unit reshards (an
    int is not auto): 3 + 3 all-gathers per step, as raf True."""
    capture_and_import("gpt", 4, tmp_path)
    program = compile_fsdp("gpt", tmp_path, 4, "--reshard-after-forward=2")
    assert program["mesh"] == {"shape": [2, 2], "axes": ["shard_outer", "shard_inner"]}
    instructions = program["programs"][0]["instructions"]
    gathers = [i["axes"] for i in instructions if i["op"] == "all_gather_start"]
    assert gathers == [["shard_outer", "shard_inner"]] * UNITS + [["shard_inner"]] * UNITS
    slices = [i for i in instructions if i["op"] == "all_slice_start"]
    assert [s["axes"] for s in slices] == [["shard_inner"]] * UNITS
    scatters = [i["axes"] for i in instructions if i["op"] == "reduce_scatter_start"]
    assert scatters == [["shard_outer", "shard_inner"]] * UNITS

    result = train(tmp_path, 4)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    assert issued(result.stdout, "all_gather") == [2 * UNITS] * STEPS
    assert issued(result.stdout, "reduce_scatter") == [UNITS] * STEPS
    assert issued(result.stdout, "all_slice") == [UNITS] * STEPS
