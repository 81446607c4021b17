"""PyTorch's own data parallelism (DDP, FSDP2, HSDP) on N Gloo ranks, written as a capture's reference.

``python -m loom.capture FILE.py --out DIR --split N --reference ddp|fsdp|hsdp|replicate``
calls :func:`train` after the eager run; it can also run on a capture that
exists::

    PYTHONPATH=python python -m loom.dp_reference examples/gpt.py \\
        --capture DIR --out DIR/torch-fsdp --mode fsdp

It trains the model of a capture (same file, ``make()`` arguments, seed,
batches, optimizer, steps and microbatches, from its ``run.json``) with the
real ``DistributedDataParallel`` or ``fully_shard`` (with the capture's
parameter groups and learning-rate schedule) on the capture's world
size (``torch.multiprocessing`` processes forked from a server that
imported torch once, ``init_process_group("gloo")`` with a file store, one
ATen thread per rank as loom-run uses), each rank on its rows
``[r*B/N, (r+1)*B/N)`` of every batch, and writes the result in the
capture's layout so that ``loom-run --check`` compares Loom with it:

``OUT/reference.json``
    the capture's, with the losses replaced by PyTorch's (each step's loss
    averaged over the ranks, in float32, as loom-run reports it) and
    ``"reference"`` saying which run made them;
``OUT/reference.safetensors``
    the capture's final state with every parameter replaced by PyTorch's
    (gathered from FSDP's shards);
``OUT/one-step-short/``
    the same, but with the parameters one optimizer step before the end: a
    negative control that a check must reject.

Modes: ``ddp`` (``DistributedDataParallel``, default buckets), ``fsdp``
(``fully_shard`` on every block of :func:`repeated_blocks`, then the root:
the units Loom's FSDP takes by default), ``hsdp`` (the same on a
``("replicate", "shard")`` mesh of shape ``(replicate_size, world /
replicate_size)``, as ``loom-compile --replicate-size``), ``replicate``
(FSDP2-based ``replicate`` on the same blocks, then the root: see
:func:`wrap_replicate`). With M > 1
microbatches each rank runs M forward/backward passes per step, syncing
gradients on the last only (``no_sync`` / ``set_requires_gradient_sync``),
and divides the accumulated gradients and the loss by M, as
``loom-accumulate-gradients`` does.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import faulthandler
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import torch

from loom import policy_casts
from loom.capture import make_optimizer, make_scheduler, make_seeded, slice_rows
from loom.options import COMM_HOOKS, REFERENCE_MODES, clip_gradients
from loom.safetensors_io import load_tensors, save_tensors

MODES = REFERENCE_MODES


def repeated_blocks(names: list[str]) -> list[str]:
    """The model's repeated blocks, the units ``loom-fsdp`` takes by default
    (``loom::getRepeatedBlocks`` in lib/Dialect/Loom/IR/OpClassification.cpp,
    the same rule): the blocks of the container with the most numbered
    children (every container tied at the most), from each name's outermost
    numbered component that is not its last."""
    containers: dict[str, list[str]] = {}
    seen: set[str] = set()
    for name in names:
        parts = name.split(".")
        for i, part in enumerate(parts[:-1]):
            if part.isdigit():
                block = ".".join(parts[: i + 1])
                if block not in seen:
                    seen.add(block)
                    containers.setdefault(".".join(parts[:i]), []).append(block)
                break
    most = max((len(blocks) for blocks in containers.values()), default=0)
    return [b for blocks in containers.values() if len(blocks) == most for b in blocks]


def fsdp_blocks(model: torch.nn.Module) -> list[str]:
    """The modules ``fully_shard`` wraps before the root: the model's own
    ``fsdp_units`` list where it has one (a model whose units are not
    repeated blocks: PyTorch's multi-forward test shards ``inner``, which a
    Loom compile names with ``--units``), else its repeated blocks."""
    units = getattr(model, "fsdp_units", None)
    if units is not None:
        return list(units)
    return repeated_blocks([n for n, _ in model.named_parameters()])


def reshard_setting(text: str):
    """loom-compile's ``--reshard-after-forward`` as ``fully_shard`` takes it."""
    named = {"auto": None, "true": True, "false": False}
    if text in named:
        return named[text]
    if text.isdigit() and int(text) > 1:
        return int(text)
    raise ValueError(f"reshard-after-forward must be auto, true, false or an integer > 1, "
                     f"got '{text}'")


@dataclasses.dataclass
class ModuleSettings:
    """FSDP2's per-module knobs, as a user's training loop sets them on its
    ``fully_shard`` modules; the counterpart of loom-compile's ``--units``,
    ``--unit-settings`` and ``--shard-dims``, written the PyTorch way so a
    test states both sides. A module is named by its path (``""``: the
    root; ``"*"``: every ``fully_shard`` module, units then root).

    ``units``: the modules to ``fully_shard`` before the root (default:
    :func:`fsdp_blocks`). ``reshard_after_forward``: that module's
    ``fully_shard(reshard_after_forward=...)``, overriding the global one.
    ``per_microbatch``: module -> ``{setter: when}`` in order, later entries
    overriding earlier ones, the setter one of ``requires_gradient_sync``,
    ``requires_all_reduce``, ``reshard_after_backward`` and ``when``
    ``"last"`` (``set_X(is_last_microbatch, recurse=False)``), ``"always"``
    or ``"never"``; given, it replaces the default (``set_requires_gradient_sync``
    on the last microbatch, recursively). ``no_unshard_in_backward``:
    modules given ``set_unshard_in_backward(False)``.
    ``shard_largest_dim``: ``shard_placement_fn`` returning ``Shard`` of
    each parameter's largest dim (its first, on a tie)."""

    units: list[str] | None = None
    reshard_after_forward: dict[str, str] = dataclasses.field(default_factory=dict)
    per_microbatch: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    no_unshard_in_backward: list[str] = dataclasses.field(default_factory=list)
    shard_largest_dim: bool = False

    SETTERS = ("requires_gradient_sync", "requires_all_reduce", "reshard_after_backward")
    WHEN = ("last", "always", "never")

    def check(self) -> None:
        for module, setters in self.per_microbatch.items():
            for setter, when in setters.items():
                if setter not in self.SETTERS or when not in self.WHEN:
                    raise ValueError(f"per_microbatch[{module!r}]: {setter}={when}: the setter "
                                     f"must be one of {self.SETTERS}, when one of {self.WHEN}")
        for text in self.reshard_after_forward.values():
            reshard_setting(text)


def _largest_dim(param: torch.Tensor):
    from torch.distributed.tensor import Shard

    sizes = list(param.shape)
    return Shard(sizes.index(max(sizes))) if sizes else Shard(0)


def _modules(model: torch.nn.Module, units: list[str], name: str) -> list[torch.nn.Module]:
    """The ``fully_shard`` modules ``name`` means (see ModuleSettings)."""
    if name == "*":
        return [model.get_submodule(u) for u in units] + [model]
    return [model.get_submodule(name)]


def apply_microbatch_flags(model: torch.nn.Module, settings: ModuleSettings, units: list[str],
                           last: bool) -> None:
    """``settings.per_microbatch`` for one microbatch (FSDP2's setters);
    ``units``: the modules ``_wrap`` sharded before the root."""
    for name, setters in settings.per_microbatch.items():
        for setter, when in setters.items():
            value = last if when == "last" else when == "always"
            for module in _modules(model, units, name):
                getattr(module, f"set_{setter}")(value, recurse=False)


def _units(model: torch.nn.Module, settings: ModuleSettings | None) -> list[str]:
    if settings is not None and settings.units is not None:
        return list(settings.units)
    return fsdp_blocks(model)


def check_units_share_nothing(model: torch.nn.Module, units: list[str]) -> None:
    """fully_shard (and FSDP2's replicate), applied to ``units`` in order,
    manages each parameter under a unit but not under a unit applied before
    it (a nested block), and a parameter two units would both manage (an
    ALBERT-style layer reused by sibling blocks) fails inside PyTorch with
    "FSDP requires named DeviceMesh dims for ND parallelism". Say which
    parameter and units instead."""
    owner: dict[int, str] = {}
    applied: set[int] = set()
    for unit in units:
        root = model.get_submodule(unit)
        stack, seen = [(root, unit)], set()
        while stack:
            module, path = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            for name, param in module.named_parameters(recurse=False):
                first = owner.setdefault(id(param), unit)
                if first != unit:
                    raise ValueError(
                        f"parameter '{path}.{name}' is shared by the units '{first}' and "
                        f"'{unit}'; PyTorch's fully_shard cannot put one parameter in two "
                        "units, so there is no PyTorch reference for this model with these "
                        "units")
            stack.extend((child, f"{path}.{name}" if path else name)
                         for name, child in module.named_children()
                         if id(child) not in applied)
        applied.add(id(root))


def wrap_replicate(model: torch.nn.Module, world: int) -> torch.nn.Module:
    """PyTorch's FSDP2-based ``replicate``
    (``torch.distributed._composable.replicate_with_fsdp``) on every block of
    :func:`repeated_blocks`, then the root, as test_replicate_training.py
    applies it and as ``loom-compile --dp=replicate --grouping=units`` groups
    the all-reduces: one parameter group per call, parameters whole on every
    rank, one all-reduce (AVG) per group per synced backward.

    The mesh is the one the installed PyTorch asks for: 2.9 builds its
    parameter groups on a 2-D ``(replicate, shard)`` mesh with a shard
    dimension of size 1 (its ``replicate_mesh()`` default; the reduce-scatter
    it issues there spans one rank), newer releases on a 1-D
    ``("replicate",)`` mesh and reject any other."""
    from torch.distributed._composable import replicate_with_fsdp
    from torch.distributed.device_mesh import init_device_mesh

    if hasattr(replicate_with_fsdp, "replicate_mesh"):
        mesh = init_device_mesh("cpu", (world, 1), mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("replicate",))
    blocks = repeated_blocks([n for n, _ in model.named_parameters()])
    check_units_share_nothing(model, blocks)
    for block in blocks:
        replicate_with_fsdp.replicate(model.get_submodule(block), device_mesh=mesh)
    replicate_with_fsdp.replicate(model, device_mesh=mesh)
    return model


def mp_policy(precision: tuple[str | None, str | None] | None):
    """fully_shard's ``MixedPrecisionPolicy(param_dtype, reduce_dtype)`` of
    loom-compile's (param-dtype, reduce-dtype) names (None for neither)."""
    if not precision or not any(precision):
        return None
    from torch.distributed.fsdp import MixedPrecisionPolicy

    param, reduce = precision
    return MixedPrecisionPolicy(param_dtype=policy_casts.DTYPES[param] if param else None,
                                reduce_dtype=policy_casts.DTYPES[reduce] if reduce else None)


def _wrap(model: torch.nn.Module, mode: str, world: int, replicate_size: int,
          reshard: str, settings: ModuleSettings | None = None,
          unused: bool = False,
          precision: tuple[str | None, str | None] | None = None,
          broadcast_buffers: bool = False, comm_hook: str = "allreduce") -> torch.nn.Module:
    """``unused``: some parameters receive no gradient (DDP must be told;
    fully_shard and replicate find them on their own). ``precision``:
    fully_shard's mixed precision, as (param-dtype, reduce-dtype).
    ``broadcast_buffers``: DDP's, as loom-compile's --broadcast-buffers;
    ``comm_hook``: loom-compile's --comm-hook, as the DDP communication
    hook registered."""
    if mode == "replicate":
        return wrap_replicate(model, world)
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        # Buffers stay each rank's own (batch norm's running statistics of its
        # rows), as loom-replicate keeps them by default; DDP's default
        # (loom-compile --broadcast-buffers=true) overwrites them with rank
        # 0's before forward.
        ddp = DistributedDataParallel(model, find_unused_parameters=unused,
                                      broadcast_buffers=broadcast_buffers)
        if COMM_HOOKS[comm_hook]:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            ddp.register_comm_hook(None, getattr(default_hooks, COMM_HOOKS[comm_hook]))
        return ddp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = None
    if mode == "hsdp":
        mesh = init_device_mesh("cpu", (replicate_size, world // replicate_size),
                                mesh_dim_names=("replicate", "shard"))
    settings = settings or ModuleSettings()
    units = _units(model, settings)
    check_units_share_nothing(model, units)
    placement = {"shard_placement_fn": _largest_dim} if settings.shard_largest_dim else {}
    policy = mp_policy(precision)
    if policy is not None:
        placement["mp_policy"] = policy
    for path in [*units, ""]:
        after = reshard_setting(settings.reshard_after_forward.get(path, reshard))
        fully_shard(model.get_submodule(path), mesh=mesh, reshard_after_forward=after,
                    **placement)
    for name in settings.no_unshard_in_backward:
        for module in _modules(model, units, name):
            module.set_unshard_in_backward(False)
    return model


def _no_sync(model: torch.nn.Module, last: bool):
    """Gradient sync on the last microbatch only, as DDP and FSDP2 say it."""
    if hasattr(model, "no_sync"):
        return contextlib.nullcontext() if last else model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):
        model.set_requires_gradient_sync(last)
    return contextlib.nullcontext()


def train_on_ranks(model, opt, batches, rank: int, world: int, steps: int,
                   before_step=None, microbatches: int = 1, scheduler=None,
                   settings: ModuleSettings | None = None,
                   batch_dims: list[int] | None = None,
                   clip: dict | None = None, scale_loss: bool = False) -> list[float]:
    """Trains ``steps`` steps on this rank's rows ``[r*B/N, (r+1)*B/N)`` of
    each batch tensor (B that tensor's own batch dim, ``batch_dims`` or 0,
    as capture and loom-run slice it), in ``microbatches`` equal slices of
    those rows; returns each
    step's loss averaged over the ranks (float32, as loom-run reports it).
    ``before_step(step)`` runs before each step; ``scheduler`` (an
    lr_scheduler) steps after each ``opt.step()``; ``settings`` with
    per-microbatch flags replaces syncing on the last microbatch only;
    ``clip`` (run.json's ``clip_grad_norm``) clips the gradients before each
    update, across the shards and ranks (clip_grad_norm_ on DTensors).
    ``scale_loss``: each microbatch's loss is divided by M before its
    backward (the usual ``loss / accumulation_steps``), so the reduction
    sees the mean; otherwise the reduced sum is divided after. The two
    agree bit for bit for M a power of two when the reduction is linear;
    a compress hook's 16-bit cast is not (it rounds small values)."""
    import torch.distributed as dist

    losses = []
    flagged = settings is not None and bool(settings.per_microbatch)
    units = _units(model, settings) if flagged else []
    for step in range(steps):
        if before_step:
            before_step(step)
        batch = batches[step % len(batches)]
        dims = batch_dims or [0] * len(batch)
        opt.zero_grad(set_to_none=True)
        loss = None
        for k in range(microbatches):
            slot = rank * microbatches + k
            last = k == microbatches - 1
            if flagged:
                apply_microbatch_flags(model, settings, units, last)
                sync = contextlib.nullcontext()
            else:
                sync = _no_sync(model, last)
            with sync:
                part = model(*(t if d is None else slice_rows(t, d, slot, world * microbatches)
                               for t, d in zip(batch, dims)))
                (part / microbatches if scale_loss else part).backward()
            loss = part.detach() if loss is None else loss + part.detach()
        if microbatches > 1 and scale_loss:
            loss = loss / microbatches
        elif microbatches > 1:
            # loom-accumulate-gradients averages after summing; PyTorch
            # reduces the sum. Dividing by a power of two is exact, so the
            # two orders agree bit for bit when M is a power of two.
            loss = loss / microbatches
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.div_(microbatches)
        clip_gradients(model.parameters(), clip)
        opt.step()
        if scheduler is not None:
            scheduler.step()
        # A bf16/f16 loss is averaged in float32, as loom-run reports it.
        total = loss.detach().clone()
        if total.dtype in (torch.bfloat16, torch.float16):
            total = total.float()
        dist.all_reduce(total)
        losses.append((total / world).item())
    return losses


def _full(p: torch.Tensor) -> torch.Tensor:
    full = p.full_tensor() if hasattr(p, "full_tensor") else p
    return full.detach().clone()


# A rank trains in seconds; one still running after this long is stuck (a
# CI run once saw the DDP reference hang past the test's 10 minutes with
# every collective bounded). It prints every thread's Python stack and
# exits, so the failure says where, and spawn_ranks() tries once more.
RANK_DEADLINE_S = 240


def start_rank(rank: int, world: int, store: str) -> None:
    """Joins the Gloo group of ``spawn_ranks`` with the settings of a
    capture (one ATen thread, deterministic kernels, float32)."""
    import torch.distributed as dist

    faulthandler.dump_traceback_later(RANK_DEADLINE_S, exit=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_default_dtype(torch.float32)
    # A file store: no port to choose, so no other job on the machine can
    # take it between choosing and binding; collectives are bounded.
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))


def stop_rank() -> None:
    """Ends a rank, from the ``finally`` of its function. After a success
    every rank waits for the others and the process ends there, without
    tearing the group down: ``~ProcessGroupGloo`` (run by
    ``destroy_process_group`` or at the interpreter's exit) can deadlock
    with DDP, holding the GIL while it waits for the group's lock, which a
    Gloo thread holds while it waits for the GIL to run a future's callback
    (a fresh clone's DDP reference hung so, with rank 0's result already
    saved; gdb showed both threads). Rank 0 saves the result before this,
    so nothing is lost. After a failure the group is destroyed and the
    deadline stays armed, so the exception, or the deadline, ends it."""
    import torch.distributed as dist

    if sys.exc_info()[0] is not None:
        dist.destroy_process_group()
        return
    dist.barrier()
    faulthandler.cancel_dump_traceback_later()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class ReferenceFailed(ValueError):
    """A rank of the reference raised: PyTorch's run refused the model."""


def _rank_error(report: str) -> str:
    """'rank R: Type: message' from torch.multiprocessing's report of a rank's
    exception (its traceback, the exception's own lines last)."""
    rank = re.search(r"Process (\d+) terminated with the following error", report)
    lines = [line for line in report.splitlines() if line.strip()]
    # The exception's first line: the last line that starts at column 0
    # after the traceback's indented frames.
    last = next((line for line in reversed(lines) if not line.startswith(" ")), "")
    where = f"rank {rank.group(1)}: " if rank else ""
    return f"PyTorch's run failed on {where}{last.strip()}"


def spawn_ranks(fn, world: int, *args):
    """Runs ``fn(rank, world, store, result, *args)`` on ``world`` spawned
    processes and returns what rank 0 saved to ``result`` (``torch.save``).
    ``fn`` calls ``start_rank(rank, world, store)`` first and ``stop_rank()``
    last. A rank that dies or passes its deadline fails the attempt; the
    second failure is raised."""
    import torch.multiprocessing as mp

    # The ranks fork from one server process that imported torch once
    # (spawning imports it in every rank); the server has run nothing, so
    # forking it is safe.
    mp.set_forkserver_preload(["torch", "loom.dp_reference"])
    for attempt in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            result = str(Path(tmp) / "result.pt")
            try:
                mp.start_processes(fn, nprocs=world, start_method="forkserver",
                                   args=(world, str(Path(tmp) / "store"), result, *args))
            except mp.ProcessRaisedException as exc:
                # PyTorch refused the model (an exception, not a death):
                # trying again would refuse it again.
                raise ReferenceFailed(_rank_error(str(exc))) from exc
            except mp.ProcessExitedException as exc:
                if attempt == 2:
                    raise
                print(f"spawn_ranks: attempt 1 failed ({exc}); trying once more", file=sys.stderr)
                continue
            return torch.load(result)


def _rank(rank: int, world: int, store: str, out: str, mode: str, replicate_size: int,
          reshard: str, model_file: str, make_kwargs: dict, config: dict,
          settings: ModuleSettings | None,
          precision: tuple[str | None, str | None] | None = None,
          broadcast_buffers: bool = False, comm_hook: str = "allreduce") -> None:
    start_rank(rank, world, store)
    try:
        program = make_seeded(Path(model_file), config["seed"], make_kwargs)
        torch.manual_seed(config["seed"])
        model = _wrap(program.model, mode, world, replicate_size, reshard, settings,
                      bool(config.get("unused_parameters")), precision, broadcast_buffers,
                      comm_hook)
        inner = model.module if mode == "ddp" else model
        # foreach=False: torch.optim's single-tensor loop, which Loom's
        # runtime implements op for op. Groups and schedule as the capture
        # recorded them.
        opt = make_optimizer(inner, config["optimizer"], config.get("param_groups"),
                             foreach=False)
        scheduler = make_scheduler(opt, config.get("lr_schedule"))
        before_last = {}

        def snapshot(step: int) -> None:
            if step == config["steps"] - 1:
                before_last.update({n: _full(p) for n, p in inner.named_parameters()})

        losses = train_on_ranks(model, opt, program.batches, rank, world, config["steps"],
                                before_step=snapshot, microbatches=config["microbatches"],
                                scheduler=scheduler, settings=settings,
                                batch_dims=config.get("batch_dims"),
                                clip=config.get("clip_grad_norm"),
                                # A compress hook reduces the mean, as a
                                # loop that scales its loss does.
                                scale_loss=comm_hook != "allreduce")
        final = {n: _full(p) for n, p in inner.named_parameters()}
        # Buffers are each rank's own (batch norm's running statistics of
        # its rows); rank 0 keeps every rank's.
        buffers = [None] * world
        torch.distributed.all_gather_object(
            buffers, {n: b.detach().clone() for n, b in inner.named_buffers()})
        if rank == 0:
            torch.save({"losses": losses, "final": final, "before_last": before_last,
                        "buffers": buffers}, out)
    finally:
        stop_rank()


def write_reference(capture: Path, out: Path, losses: list[float],
                    params: dict[str, torch.Tensor], label: str,
                    buffers: list[dict[str, torch.Tensor]] | None = None) -> None:
    """``buffers``: every rank's buffers. One all ranks agree on replaces
    the capture's; one they do not (batch norm's running statistics, each
    of its rank's rows) is written once per rank as ``NAME@rankR``, which
    ``loom-run --check`` compares rank R's with."""
    report = json.loads((capture / "reference.json").read_text())
    report.update(losses=losses, reference=label)
    state, metadata = load_tensors(capture / "reference.safetensors")
    unknown = set(params) - set(state)
    if unknown:
        raise ValueError(f"parameters missing from the capture's reference: {sorted(unknown)}")
    state.update(params)
    for name in sorted(buffers[0] if buffers else {}):
        if name not in state:
            continue  # not saved (a non-persistent buffer)
        values = [rank_buffers[name] for rank_buffers in buffers]
        if all(torch.equal(v, values[0]) for v in values):
            state[name] = values[0]
            continue
        del state[name]
        for rank, value in enumerate(values):
            state[f"{name}@rank{rank}"] = value
    out.mkdir(parents=True, exist_ok=True)
    (out / "reference.json").write_text(json.dumps(report, indent=2) + "\n")
    save_tensors(out / "reference.safetensors", state, metadata)


def describe(mode: str, world: int, replicate_size: int = 1, reshard: str = "auto",
             microbatches: int = 1,
             precision: tuple[str | None, str | None] | None = None,
             broadcast_buffers: bool = False, comm_hook: str = "allreduce") -> str:
    """What made a reference, for its ``"reference"`` field and messages."""
    hook = f", {COMM_HOOKS[comm_hook]}" if COMM_HOOKS[comm_hook] else ""
    what = {"ddp": f"DistributedDataParallel (broadcast_buffers={broadcast_buffers}{hook})",
            "fsdp": "fully_shard",
            "hsdp": f"fully_shard HSDP ({replicate_size} x {world // max(replicate_size, 1)})",
            "replicate": "replicate (FSDP2-based)"}
    label = f"PyTorch {what[mode]} on {world} Gloo ranks"
    if mode in ("fsdp", "hsdp"):
        label += f", reshard_after_forward={reshard}"
        if precision and any(precision):
            label += (f", MixedPrecisionPolicy(param_dtype={precision[0] or 'None'}, "
                      f"reduce_dtype={precision[1] or 'None'})")
    if microbatches > 1:
        label += f", {microbatches} microbatches"
    return label


def train(model_file: Path, capture: Path, out: Path, mode: str, replicate_size: int = 1,
          reshard: str = "auto", make_kwargs: dict | None = None,
          settings: ModuleSettings | None = None,
          precision: tuple[str | None, str | None] | None = None,
          broadcast_buffers: bool = False, comm_hook: str = "allreduce") -> dict:
    """Trains the capture in ``capture`` the ``mode`` way on its world size
    and writes ``out/reference.*`` and ``out/one-step-short/`` (``out`` may
    be ``capture``: its eager reference is then replaced). ``settings``:
    per-module FSDP2 knobs (fsdp and hsdp only); ``precision``:
    fully_shard's mixed precision as loom-compile's (param-dtype,
    reduce-dtype) (fsdp and hsdp only); ``broadcast_buffers`` and
    ``comm_hook``: DDP's (ddp only)."""
    config = json.loads((capture / "run.json").read_text())
    world = config["world_size"]
    if mode not in MODES:
        raise ValueError(f"the reference mode must be one of {', '.join(MODES)}, not '{mode}'")
    if world < 2:
        raise ValueError(f"a {mode} reference needs a capture for 2 or more ranks (--split), "
                         f"this one is for {world}")
    if mode == "hsdp" and (replicate_size < 2 or world % replicate_size):
        raise ValueError(f"hsdp needs a replicate size > 1 that divides the {world} ranks, "
                         f"got {replicate_size}")
    if mode != "hsdp":
        replicate_size = 1
    reshard_setting(reshard)
    if precision and any(precision) and mode not in ("fsdp", "hsdp"):
        raise ValueError(f"mixed precision is fully_shard's; {mode} takes none")
    if broadcast_buffers and mode != "ddp":
        raise ValueError(f"broadcast_buffers is DDP's; {mode} keeps each rank's buffers")
    if comm_hook not in COMM_HOOKS:
        raise ValueError(f"comm_hook must be one of {', '.join(COMM_HOOKS)}, not '{comm_hook}'")
    if comm_hook != "allreduce" and mode != "ddp":
        raise ValueError(f"a communication hook is DDP's; {mode} takes none")
    if settings is not None:
        if mode not in ("fsdp", "hsdp"):
            raise ValueError(f"per-module settings are fully_shard's; {mode} takes none")
        settings.check()
    got = spawn_ranks(_rank, world, mode, replicate_size, reshard, str(model_file.resolve()),
                      make_kwargs or {}, config, settings, precision, broadcast_buffers,
                      comm_hook)
    label = describe(mode, world, replicate_size, reshard, config["microbatches"], precision,
                     broadcast_buffers, comm_hook)
    if settings is not None:
        label += f", per-module settings {settings}"
    # The short one first: `out` may be the capture, whose reference.* it reads.
    write_reference(capture, out / "one-step-short", got["losses"], got["before_last"],
                    label + ", parameters one step before the end", got["buffers"])
    write_reference(capture, out, got["losses"], got["final"], label, got["buffers"])
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--capture", type=Path, required=True,
                        help="the capture's directory (run.json, reference.json/.safetensors)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--replicate-size", type=int, default=2,
                        help="hsdp: replicas (the mesh is R x world/R; default 2)")
    parser.add_argument("--reshard-after-forward", default="auto",
                        help="fsdp/hsdp: auto, true, false or an integer (default auto)")
    args = parser.parse_args()
    try:
        got = train(args.model, args.capture, args.out, args.mode, args.replicate_size,
                    args.reshard_after_forward)
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    print(f"wrote {args.out}: {args.mode} losses {got['losses'][0]:.7f} -> {got['losses'][-1]:.7f}")


if __name__ == "__main__":
    main()
