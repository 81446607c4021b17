"""PyTorch's own data parallelism (DDP, FSDP2, HSDP) on N Gloo ranks, written as a capture's reference.

``python -m loom.capture FILE.py --out DIR --split N --reference ddp|fsdp|hsdp``
calls :func:`train` after the eager run; it can also run on a capture that
exists::

    PYTHONPATH=python python -m loom.dp_reference examples/gpt.py \\
        --capture DIR --out DIR/torch-fsdp --mode fsdp

It trains the model of a capture (same file, ``make()`` arguments, seed,
batches, optimizer, steps and microbatches, from its ``run.json``) with the
real ``DistributedDataParallel`` or ``fully_shard`` (with the capture's
parameter groups and learning-rate schedule) on the capture's world
size (``torch.multiprocessing`` spawn, ``init_process_group("gloo")`` with a
file store, one ATen thread per rank as loom-run uses), each rank on its rows
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
replicate_size)``, as ``loom-compile --replicate-size``). With M > 1
microbatches each rank runs M forward/backward passes per step, syncing
gradients on the last only (``no_sync`` / ``set_requires_gradient_sync``),
and divides the accumulated gradients and the loss by M, as
``loom-accumulate-gradients`` does.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import faulthandler
import json
import sys
import tempfile
from pathlib import Path

import torch

from loom.capture import call_make, load_make, make_optimizer, make_scheduler
from loom.safetensors_io import load_tensors, save_tensors

MODES = ("ddp", "fsdp", "hsdp")


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


def _wrap(model: torch.nn.Module, mode: str, world: int, replicate_size: int,
          reshard: str) -> torch.nn.Module:
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = None
    if mode == "hsdp":
        mesh = init_device_mesh("cpu", (replicate_size, world // replicate_size),
                                mesh_dim_names=("replicate", "shard"))
    after = reshard_setting(reshard)
    for block in fsdp_blocks(model):
        fully_shard(model.get_submodule(block), mesh=mesh, reshard_after_forward=after)
    fully_shard(model, mesh=mesh, reshard_after_forward=after)
    return model


def _no_sync(model: torch.nn.Module, last: bool):
    """Gradient sync on the last microbatch only, as DDP and FSDP2 say it."""
    if hasattr(model, "no_sync"):
        return contextlib.nullcontext() if last else model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):
        model.set_requires_gradient_sync(last)
    return contextlib.nullcontext()


def train_on_ranks(model, opt, batches, rank: int, world: int, steps: int,
                   before_step=None, microbatches: int = 1, scheduler=None) -> list[float]:
    """Trains ``steps`` steps on this rank's rows ``[r*B/N, (r+1)*B/N)`` of
    each batch, in ``microbatches`` equal slices of those rows; returns each
    step's loss averaged over the ranks (float32, as loom-run reports it).
    ``before_step(step)`` runs before each step; ``scheduler`` (an
    lr_scheduler) steps after each ``opt.step()``."""
    import torch.distributed as dist

    losses = []
    for step in range(steps):
        if before_step:
            before_step(step)
        batch = batches[step % len(batches)]
        rows = batch[0].shape[0] // (world * microbatches)
        opt.zero_grad(set_to_none=True)
        loss = None
        for k in range(microbatches):
            first = (rank * microbatches + k) * rows
            with _no_sync(model, k == microbatches - 1):
                part = model(*(t[first:first + rows] for t in batch))
                part.backward()
            loss = part.detach() if loss is None else loss + part.detach()
        if microbatches > 1:
            # loom-accumulate-gradients averages after summing; PyTorch
            # reduces the sum. Dividing by a power of two is exact, so the
            # two orders agree bit for bit when M is a power of two.
            loss = loss / microbatches
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.div_(microbatches)
        opt.step()
        if scheduler is not None:
            scheduler.step()
        total = loss.detach().float().clone()
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
    import torch.distributed as dist

    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()


def spawn_ranks(fn, world: int, *args):
    """Runs ``fn(rank, world, store, result, *args)`` on ``world`` spawned
    processes and returns what rank 0 saved to ``result`` (``torch.save``).
    ``fn`` calls ``start_rank(rank, world, store)`` first and ``stop_rank()``
    last. A rank that dies or passes its deadline fails the attempt; the
    second failure is raised."""
    import torch.multiprocessing as mp

    for attempt in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            result = str(Path(tmp) / "result.pt")
            try:
                mp.spawn(fn, nprocs=world, args=(world, str(Path(tmp) / "store"), result, *args))
            except mp.ProcessExitedException as exc:
                if attempt == 2:
                    raise
                print(f"spawn_ranks: attempt 1 failed ({exc}); trying once more", file=sys.stderr)
                continue
            return torch.load(result)


def _rank(rank: int, world: int, store: str, out: str, mode: str, replicate_size: int,
          reshard: str, model_file: str, make_kwargs: dict, config: dict) -> None:
    start_rank(rank, world, store)
    try:
        torch.manual_seed(config["seed"])
        program = call_make(load_make(Path(model_file)), Path(model_file), make_kwargs)
        torch.manual_seed(config["seed"])
        model = _wrap(program.model, mode, world, replicate_size, reshard)
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
                                scheduler=scheduler)
        final = {n: _full(p) for n, p in inner.named_parameters()}
        if rank == 0:
            torch.save({"losses": losses, "final": final, "before_last": before_last}, out)
    finally:
        stop_rank()


def write_reference(capture: Path, out: Path, losses: list[float],
                    params: dict[str, torch.Tensor], label: str) -> None:
    report = json.loads((capture / "reference.json").read_text())
    report.update(losses=losses, reference=label)
    state, metadata = load_tensors(capture / "reference.safetensors")
    unknown = set(params) - set(state)
    if unknown:
        raise ValueError(f"parameters missing from the capture's reference: {sorted(unknown)}")
    state.update(params)
    out.mkdir(parents=True, exist_ok=True)
    (out / "reference.json").write_text(json.dumps(report, indent=2) + "\n")
    save_tensors(out / "reference.safetensors", state, metadata)


def describe(mode: str, world: int, replicate_size: int = 1, reshard: str = "auto",
             microbatches: int = 1) -> str:
    """What made a reference, for its ``"reference"`` field and messages."""
    what = {"ddp": "DistributedDataParallel", "fsdp": "fully_shard",
            "hsdp": f"fully_shard HSDP ({replicate_size} x {world // max(replicate_size, 1)})"}
    label = f"PyTorch {what[mode]} on {world} Gloo ranks"
    if mode != "ddp":
        label += f", reshard_after_forward={reshard}"
    if microbatches > 1:
        label += f", {microbatches} microbatches"
    return label


def train(model_file: Path, capture: Path, out: Path, mode: str, replicate_size: int = 1,
          reshard: str = "auto", make_kwargs: dict | None = None) -> dict:
    """Trains the capture in ``capture`` the ``mode`` way on its world size
    and writes ``out/reference.*`` and ``out/one-step-short/`` (``out`` may
    be ``capture``: its eager reference is then replaced)."""
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
    got = spawn_ranks(_rank, world, mode, replicate_size, reshard, str(model_file.resolve()),
                      make_kwargs or {}, config)
    label = describe(mode, world, replicate_size, reshard, config["microbatches"])
    # The short one first: `out` may be the capture, whose reference.* it reads.
    write_reference(capture, out / "one-step-short", got["losses"], got["before_last"],
                    label + ", parameters one step before the end")
    write_reference(capture, out, got["losses"], got["final"], label)
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
    got = train(args.model, args.capture, args.out, args.mode, args.replicate_size,
                args.reshard_after_forward)
    print(f"wrote {args.out}: {args.mode} losses {got['losses'][0]:.7f} -> {got['losses'][-1]:.7f}")


if __name__ == "__main__":
    main()
