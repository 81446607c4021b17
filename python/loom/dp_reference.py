"""PyTorch's own data parallelism (DDP, FSDP2, HSDP) on N Gloo ranks, written as a capture's reference.

Trains the model of a capture (same file, seed, batches, optimizer and
steps, from its ``reference.json`` and ``run.json``) with the real
``DistributedDataParallel`` or ``fully_shard`` on ``--world`` processes
(``torch.multiprocessing`` spawn, ``init_process_group("gloo")`` with a
file store, one ATen thread per rank as loom-run uses), each rank on its
rows ``[r*B/N, (r+1)*B/N)`` of every batch, and writes the result in the
capture's layout so that ``loom-run --check`` compares Loom with it:

``OUT/reference.json``
    the capture's, with the losses replaced by PyTorch's (each step's loss
    averaged over the ranks, in float32, as loom-run reports it);
``OUT/reference.safetensors``
    the capture's final state with every parameter replaced by PyTorch's
    (gathered from FSDP's shards);
``OUT/one-step-short/``
    the same, but with the parameters one optimizer step before the end: a
    negative control that a check must reject.

Modes: ``ddp`` (``DistributedDataParallel``, default buckets), ``fsdp``
(``fully_shard`` on every ``layers.i``, then the root, the units Loom's
FSDP uses), ``hsdp`` (the same on a ``("replicate", "shard")`` mesh of
shape ``(world / shard, shard)``).

    .venv/bin/python python/tests/torch_dp_reference.py examples/gpt.py \\
        --capture DIR --out DIR/torch-fsdp --mode fsdp --world 2
"""

from __future__ import annotations

import argparse
import datetime
import faulthandler
import json
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from loom.capture import OPTIMIZERS, call_make, load_make, optimizer_kwargs  # noqa: E402
from loom.safetensors_io import load_tensors, save_tensors  # noqa: E402


def _wrap(model: torch.nn.Module, mode: str, world: int, shard: int) -> torch.nn.Module:
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = None
    if mode == "hsdp":
        mesh = init_device_mesh("cpu", (world // shard, shard), mesh_dim_names=("replicate", "shard"))
    for layer in model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def train_on_ranks(model, opt, batches, rank: int, world: int, steps: int,
                   before_step=None) -> list[float]:
    """Trains ``steps`` steps on this rank's rows ``[r*B/N, (r+1)*B/N)`` of
    each batch; returns each step's loss averaged over the ranks (float32, as
    loom-run reports it). ``before_step(step)`` runs before each step."""
    import torch.distributed as dist

    losses = []
    for step in range(steps):
        if before_step:
            before_step(step)
        batch = batches[step % len(batches)]
        rows = batch[0].shape[0] // world
        opt.zero_grad(set_to_none=True)
        loss = model(*(t[rank * rows:(rank + 1) * rows] for t in batch))
        loss.backward()
        opt.step()
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


def _rank(rank: int, world: int, store: str, out: str, mode: str, shard: int, model_file: str,
          config: dict) -> None:
    start_rank(rank, world, store)
    try:
        torch.manual_seed(config["seed"])
        program = call_make(load_make(Path(model_file)), Path(model_file))
        torch.manual_seed(config["seed"])
        model = _wrap(program.model, mode, world, shard)
        hyper = config["optimizer"]
        # foreach=False: torch.optim's single-tensor loop, which Loom's
        # runtime implements op for op.
        opt = OPTIMIZERS[hyper["name"]](model.parameters(), **optimizer_kwargs(hyper),
                                        foreach=False)
        inner = model.module if mode == "ddp" else model
        before_last = {}

        def snapshot(step: int) -> None:
            if step == config["steps"] - 1:
                before_last.update({n: _full(p) for n, p in inner.named_parameters()})

        losses = train_on_ranks(model, opt, program.batches, rank, world, config["steps"],
                                before_step=snapshot)
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


def train(model_file: Path, capture: Path, out: Path, mode: str, world: int, shard: int = 1) -> dict:
    config = json.loads((capture / "run.json").read_text())
    if config["world_size"] != world:
        raise ValueError(f"the capture is for {config['world_size']} ranks, not {world}")
    got = spawn_ranks(_rank, world, mode, shard, str(model_file.resolve()), config)
    label = f"PyTorch {mode} on {world} Gloo ranks"
    write_reference(capture, out, got["losses"], got["final"], label)
    write_reference(capture, out / "one-step-short", got["losses"], got["before_last"],
                    label + ", parameters one step before the end")
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--capture", type=Path, required=True,
                        help="the capture's directory (run.json, reference.json/.safetensors)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mode", choices=("ddp", "fsdp", "hsdp"), required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--shard", type=int, default=1, help="HSDP: ranks per shard group")
    args = parser.parse_args()
    got = train(args.model, args.capture, args.out, args.mode, args.world, args.shard)
    print(f"wrote {args.out}: {args.mode} losses {got['losses'][0]:.7f} -> {got['losses'][-1]:.7f}")


if __name__ == "__main__":
    main()
