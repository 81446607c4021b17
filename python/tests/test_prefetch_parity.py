"""FSDP with prefetching and bucketing on N real ranks, at parity with eager:
capture --split N -> loom-compile --dp=fsdp --forward-prefetch/--backward-prefetch/
--bucket-bytes -> loom-run --nproc N --check.

Prefetching moves all-gather starts earlier, so several collectives are in
flight at once (the runtime issues them on Gloo's threads and blocks only at
each wait); bucketing merges consecutive units' collectives into one. Neither
may change a number: 20 steps, the averaged losses within 1e-5 relative of
eager on the whole batch and the final parameters (gathered from their
shards) within 1e-5 * max(1, |ref|), as test_fsdp_parity.py checks plain
FSDP. The collectives the runtime issued every step must be the compiler's.
"""

from __future__ import annotations

import pytest

from test_distributed_parity import STEPS, capture_and_import, pytestmark, train  # noqa: F401
from test_fsdp_parity import compile_fsdp, count, issued


def in_flight_at_most(program: dict) -> int:
    """The largest number of collectives started and not yet waited."""
    live, most = set(), 0
    for inst in program["programs"][0]["instructions"]:
        if inst["op"].endswith("_start"):
            live.add(inst["future"])
            most = max(most, len(live))
        elif inst["op"] == "wait":
            live.discard(inst["future"])
    return most


# GPT (examples/gpt.py): units layers.0 and layers.1 (about 50 KB each
# unsharded) and the root (tok, pos, norm, head tied to tok: about 10 KB).
# 70000-byte buckets take the root with one layer but never two layers.
@pytest.mark.parametrize("world, flags, gathers, scatters", [
    # reshard true, forward prefetch 2, backward pre (FSDP2's default):
    # all-gathers [root, l0] + l1 forward, [root, l1] + l0 backward;
    # reduce-scatters l1 + [l0, root].
    (2, ["--reshard-after-forward=true", "--forward-prefetch=2", "--backward-prefetch=pre",
         "--bucket-bytes=70000"], 4, 2),
    # reshard auto, forward prefetch 1, backward post, no buckets: 3 forward
    # and 2 backward all-gathers, one reduce-scatter per unit.
    (2, ["--forward-prefetch=1", "--backward-prefetch=post"], 5, 3),
    # Explicit lists (set_modules_to_forward_prefetch /
    # set_modules_to_backward_prefetch), reshard true: 3 forward and 3
    # backward all-gathers, one reduce-scatter per unit.
    (2, ["--reshard-after-forward=true", "--forward-targets=layers.0:layers.1",
         "--backward-targets=layers.1:layers.0"], 6, 3),
    # The same buckets on 4 ranks (reshard auto, backward pre).
    (4, ["--forward-prefetch=1", "--bucket-bytes=70000"], 4, 2),
])
def test_fsdp_prefetch_bucket_gpt_at_parity(world, flags, gathers, scatters, tmp_path):
    capture_and_import("gpt", world, tmp_path)
    program = compile_fsdp("gpt", tmp_path, world, *flags)
    assert count(program, "all_gather_start") == gathers
    assert count(program, "reduce_scatter_start") == scatters
    # Prefetching really overlaps: a second collective starts before the
    # first one's wait.
    assert in_flight_at_most(program) >= 2

    result = train(tmp_path, world)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    assert issued(result.stdout, "all_gather") == [gathers] * STEPS
    assert issued(result.stdout, "reduce_scatter") == [scatters] * STEPS
