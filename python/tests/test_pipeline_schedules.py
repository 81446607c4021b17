"""Loom's pipeline schedules against PyTorch's own (`torch.distributed.pipelining`).

PyTorch's schedule classes are built as its `test/distributed/pipelining/
test_schedule.py` builds them: with stand-in stages that carry only the
pipeline geometry (stage index, number of stages, group size and rank) and no
process group, which is all a schedule needs to compute its `pipeline_order`.
For every schedule, pp in {2, 4} and 4 or 8 microbatches, `loom-pp-schedule
--json` must print exactly PyTorch's compute order (bubbles as null), and
`--lowered --json` exactly what PyTorch's lowering passes make of it
(`_add_unshard_reshard`, `_add_reduce_grad`, `_add_send_recv`, the steps of
`_PipelineScheduleRuntime._prepare_schedule_with_comms`). The cases of
PyTorch's `TestSchedulePlan` (up to 4 stages per rank, pp up to 8) are
compared the same way.

The tool must be built: a missing tool fails these tests, it never skips them.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from build_tools import BUILD

from torch.distributed.pipelining import schedules  # noqa: E402
from torch.distributed.pipelining.stage import _PipelineStageBase  # noqa: E402

TOOL = BUILD / "bin" / "loom-pp-schedule"

# name -> (PyTorch class, stages per rank it runs with)
SCHEDULES = {
    "GPipe": (schedules.ScheduleGPipe, 1),
    "1F1B": (schedules.Schedule1F1B, 1),
    "Interleaved1F1B": (schedules.ScheduleInterleaved1F1B, 2),
    "LoopedBFS": (schedules.ScheduleLoopedBFS, 2),
    "InterleavedZeroBubble": (schedules.ScheduleInterleavedZeroBubble, 2),
    "ZBVZeroBubble": (schedules.ScheduleZBVZeroBubble, 2),
    "DualPipeV": (schedules.ScheduleDualPipeV, 2),
}
V_SCHEDULES = ("ZBVZeroBubble", "DualPipeV")
GRID = [
    (name, pp, mb)
    for name in SCHEDULES
    for pp in (2, 4)
    for mb in (4, 8)
]


class StandInStage(_PipelineStageBase):
    """A stage with the pipeline geometry and nothing else (test_schedule.py's
    MockPipelineStage): no module, no process group, no communication."""

    def __init__(self, stage_index: int, num_stages: int, group_size: int,
                 group_rank: int):
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.group_size = group_size
        self.group_rank = group_rank
        self.group = None
        self.stage_index_to_group_rank = None
        self.submod = None

    def _create_grad_recv_info(self, *args, **kwargs):
        return None

    def _prepare_forward_infra(self, *args, **kwargs):
        pass

    def _prepare_backward_infra(self, *args, **kwargs):
        pass


def _loss(output, target):
    return output.sum()


def torch_schedule(name: str, pp: int, microbatches: int, per_rank: int):
    """PyTorch's schedule object for rank 0 (every rank computes the whole
    `pipeline_order`). Raises what PyTorch raises for a refused combination."""
    cls, _ = SCHEDULES[name]
    num_stages = pp * per_rank
    if name in ("GPipe", "1F1B"):
        if per_rank != 1:
            raise ValueError("single-stage schedules hold one stage per rank")
        return cls(StandInStage(0, pp, pp, 0), microbatches, loss_fn=_loss)
    # Rank 0's stages; only their number matters to the order.
    if name in V_SCHEDULES and per_rank == 2:
        stage_indices = [0, num_stages - 1]
    else:
        stage_indices = [pp * i for i in range(per_rank)]
    stages = [StandInStage(s, num_stages, pp, 0) for s in stage_indices]
    return cls(stages, microbatches, loss_fn=_loss)


def run_tool(*args: str) -> subprocess.CompletedProcess:
    if not TOOL.exists():
        pytest.fail(f"not built: {TOOL} (run `make build`); the schedule "
                    "parity tests need it", pytrace=False)
    return subprocess.run([str(TOOL), *args], capture_output=True, text=True)


def loom(name: str, pp: int, microbatches: int, per_rank: int,
         lowered: bool = False) -> dict[int, list]:
    args = [f"--schedule={name}", f"--pp={pp}",
            f"--microbatches={microbatches}", f"--stages-per-rank={per_rank}",
            "--json"]
    if lowered:
        args.append("--lowered")
    result = run_tool(*args)
    assert result.returncode == 0, result.stderr
    return {int(rank): actions for rank, actions in
            json.loads(result.stdout).items()}


def as_strings(order) -> dict[int, list]:
    return {rank: [None if a is None else str(a) for a in actions]
            for rank, actions in order.items()}


def is_reduce_grad(action) -> bool:
    return action is not None and str(action).endswith("REDUCE_GRAD")


def torch_compute_order(name: str, sched, pp: int, microbatches: int):
    """PyTorch's `pipeline_order` as Loom prints it, and the stage-to-rank
    mapping PyTorch's `_validate_schedule` infers from it.

    Newer PyTorch lists REDUCE_GRAD in the single-stage orders; Loom's
    compute order holds compute actions only and adds REDUCE_GRAD when
    lowering, so those entries are dropped here.

    1F1B's `pipeline_order` numbers the last rank's forwards from 1 (its
    warm-up is empty and the counter is bumped before its first use), which
    PyTorch's own `_validate_schedule` rejects; what
    `Schedule1F1B._step_microbatches` runs there is F0 B0 F1 B1 ... Loom
    lists that, so the comparison renumbers those forwards, after checking
    that PyTorch's list is the invalid one and the renumbered one is valid.
    """
    num_stages = sched._num_stages
    order = {rank: [a for a in actions if not is_reduce_grad(a)]
             for rank, actions in sched.pipeline_order.items()}
    try:
        mapping = schedules._validate_schedule(order, pp, num_stages,
                                               microbatches)
    except AssertionError as error:
        assert name == "1F1B", f"PyTorch's {name} order is invalid: {error}"
        assert "without first running Forward" in str(error)
        last = pp - 1
        order[last] = [
            a if a is None or a.computation_type != schedules.F else
            schedules._Action(a.stage_index, a.computation_type,
                              a.microbatch_index - 1)
            for a in order[last]
        ]
        mapping = schedules._validate_schedule(order, pp, num_stages,
                                               microbatches)
    return order, mapping


class _ReduceGradType:
    """REDUCE_GRAD for a PyTorch that predates it: prints as the newer enum
    member does and matches none of the compute kinds."""

    def __str__(self):
        return "REDUCE_GRAD"


def add_reduce_grad(actions, microbatches: int):
    if hasattr(schedules, "_add_reduce_grad") and hasattr(
            schedules._ComputationType, "REDUCE_GRAD"):
        return schedules._add_reduce_grad(actions, microbatches)
    # The rule of newer PyTorch's `_add_reduce_grad` (its test_schedule.py
    # `test_reduce_grad`): REDUCE_GRAD(s) right after the n-th B or W of s.
    # An OVERLAP_F_B counts through its sub-actions.
    kind = _ReduceGradType()
    counts: dict[int, int] = {}
    result = []
    for action in actions:
        if action is None:
            continue
        result.append(action)
        for leaf in action.sub_actions or (action,):
            if leaf.computation_type not in (schedules.B, schedules.W):
                continue
            counts[leaf.stage_index] = counts.get(leaf.stage_index, 0) + 1
            if counts[leaf.stage_index] == microbatches:
                result.append(schedules._Action(leaf.stage_index, kind,
                                                None))
    return result


def _torch_reshards_at_end() -> bool:
    probe = schedules._add_unshard_reshard(
        [schedules._Action(0, schedules.F, 0)])
    return str(probe[-1]) == "0RESHARD"


def add_unshard_reshard(actions):
    result = schedules._add_unshard_reshard(list(actions))
    if _torch_reshards_at_end():
        return result
    # PyTorch 2.9 leaves the stages unsharded at the end of the step; newer
    # releases reshard every stage still active, in set order (ascending for
    # these small stage indices).
    active: set[int] = set()
    for action in result:
        if action.computation_type == schedules.UNSHARD:
            active.add(action.stage_index)
        elif action.computation_type == schedules.RESHARD:
            active.discard(action.stage_index)
    return result + [schedules._Action(stage, schedules.RESHARD, None)
                     for stage in sorted(active)]


def split_overlaps(actions):
    """DualPipeV's OVERLAP_F_B as its forward then its backward. Loom runs the
    two one after the other, as PyTorch 2.9's `_add_send_recv` does when it
    meets one (newer releases keep the pair as one entry and add the
    transfers of both halves after it)."""
    return [leaf for action in actions
            for leaf in (action.sub_actions or (action,))]


def torch_lowered(order, mapping, microbatches: int, num_stages: int):
    per_rank = {rank: split_overlaps(add_reduce_grad(
                    add_unshard_reshard(actions), microbatches))
                for rank, actions in order.items()}
    lowered = schedules._add_send_recv(per_rank,
                                       stage_to_rank=lambda s: mapping[s],
                                       num_stages=num_stages)
    return as_strings(lowered)


def schedule_or_both_refuse(name, pp, microbatches, per_rank):
    """PyTorch's schedule, or None once both PyTorch and Loom have refused
    the combination (DualPipeV on pp=4 with 4 microbatches, say)."""
    try:
        return torch_schedule(name, pp, microbatches, per_rank)
    except ValueError:
        for extra in ([], ["--lowered"]):
            result = run_tool(f"--schedule={name}", f"--pp={pp}",
                              f"--microbatches={microbatches}",
                              f"--stages-per-rank={per_rank}", *extra)
            assert result.returncode == 1 and "error:" in result.stderr
        return None


@pytest.mark.parametrize("name,pp,microbatches", GRID)
def test_compute_order_matches_pytorch(name, pp, microbatches):
    per_rank = SCHEDULES[name][1]
    sched = schedule_or_both_refuse(name, pp, microbatches, per_rank)
    if sched is None:
        return
    order, _ = torch_compute_order(name, sched, pp, microbatches)
    assert loom(name, pp, microbatches, per_rank) == as_strings(order)


@pytest.mark.parametrize("name,pp,microbatches", GRID)
def test_lowered_schedule_matches_pytorch(name, pp, microbatches):
    per_rank = SCHEDULES[name][1]
    sched = schedule_or_both_refuse(name, pp, microbatches, per_rank)
    if sched is None:
        return
    order, mapping = torch_compute_order(name, sched, pp, microbatches)
    expected = torch_lowered(order, mapping, microbatches, sched._num_stages)
    assert loom(name, pp, microbatches, per_rank, lowered=True) == expected


@pytest.mark.parametrize("pp,microbatches", [(2, 4), (2, 8), (4, 4), (4, 8)])
def test_1f1b_is_what_pytorch_runs(pp, microbatches):
    """Each stage's compute actions, bubbles dropped, are the order of
    `Schedule1F1B._step_microbatches`: min(n, stages - s) warm-up forwards,
    then one backward and one forward while forwards remain, then the rest
    of the backwards."""
    order = loom("1F1B", pp, microbatches, 1)
    for stage in range(pp):
        warmup = min(microbatches, pp - stage)
        expected = [f"{stage}F{mb}" for mb in range(warmup)]
        for mb in range(microbatches):
            expected.append(f"{stage}B{mb}")
            if warmup + mb < microbatches:
                expected.append(f"{stage}F{warmup + mb}")
        assert [a for a in order[stage] if a is not None] == expected


# Combinations PyTorch refuses, and the message Loom gives for each.
PYTORCH_REFUSES = [
    ("GPipe", 4, 2, 1, "GPipe needs at least as many microbatches as stages "
     "(4), got 2"),
    ("1F1B", 4, 3, 1, "1F1B needs at least as many microbatches as stages "
     "(4), got 3"),
    ("Interleaved1F1B", 2, 5, 2, "Interleaved1F1B needs the microbatches (5) "
     "to be a multiple of the number of rounds, max(1, microbatches / pp) = "
     "2"),
    ("InterleavedZeroBubble", 4, 9, 2, "InterleavedZeroBubble needs the "
     "microbatches (9) to be a multiple of the number of rounds"),
    ("ZBVZeroBubble", 2, 8, 1, "ZBVZeroBubble needs exactly 2 stages per "
     "rank, got 1"),
    ("ZBVZeroBubble", 4, 8, 3, "ZBVZeroBubble needs exactly 2 stages per "
     "rank, got 3"),
    ("DualPipeV", 2, 3, 2, "DualPipeV needs at least as many microbatches as "
     "stages (4), got 3"),
    ("DualPipeV", 2, 8, 1, "DualPipeV needs exactly 2 stages per rank, got "
     "1"),
]


@pytest.mark.parametrize("name,pp,microbatches,per_rank,message",
                         PYTORCH_REFUSES)
def test_refused_where_pytorch_refuses(name, pp, microbatches, per_rank,
                                       message):
    with pytest.raises(ValueError):
        torch_schedule(name, pp, microbatches, per_rank)
    for extra in ([], ["--lowered"]):
        result = run_tool(f"--schedule={name}", f"--pp={pp}",
                          f"--microbatches={microbatches}",
                          f"--stages-per-rank={per_rank}", *extra)
        assert result.returncode == 1
        assert message in result.stderr
        assert result.stdout == ""


@pytest.mark.parametrize("name", ["Interleaved1F1B", "LoopedBFS",
                                  "InterleavedZeroBubble"])
def test_multi_stage_schedules_need_two_stages_per_rank(name):
    """PyTorch accepts one stage per rank here; Loom asks for GPipe or 1F1B
    instead, so that each schedule has one spelling."""
    result = run_tool(f"--schedule={name}", "--pp=2", "--microbatches=8",
                      "--stages-per-rank=1")
    assert result.returncode == 1
    assert f"{name} needs at least 2 stages per rank, got 1" in result.stderr


# (stages per rank, microbatches, pp) of PyTorch's test_schedule.py
# `TestSchedulePlan` (its cases with pp <= 8): odd stage counts, microbatches
# that do not divide by pp, more stages than microbatches.
SCHEDULE_PLAN_CASES = [
    (2, 2, 2), (2, 4, 4), (2, 8, 2), (2, 8, 4), (2, 8, 8), (4, 4, 4),
    (4, 8, 4), (4, 8, 8), (4, 16, 4), (4, 32, 4), (4, 64, 4), (3, 2, 2),
    (3, 8, 2), (3, 12, 4), (4, 6, 3), (4, 10, 5), (2, 3, 4), (2, 10, 4),
    (2, 15, 4),
]


@pytest.mark.parametrize("name", ["Interleaved1F1B", "LoopedBFS",
                                  "InterleavedZeroBubble", "ZBVZeroBubble",
                                  "DualPipeV"])
@pytest.mark.parametrize("per_rank,microbatches,pp", SCHEDULE_PLAN_CASES)
def test_pytorch_schedule_plan_cases(name, per_rank, microbatches, pp):
    sched = schedule_or_both_refuse(name, pp, microbatches, per_rank)
    if sched is None:
        return
    order, mapping = torch_compute_order(name, sched, pp, microbatches)
    assert loom(name, pp, microbatches, per_rank) == as_strings(order)
    expected = torch_lowered(order, mapping, microbatches, sched._num_stages)
    assert loom(name, pp, microbatches, per_rank, lowered=True) == expected
