"""PyTorch's training loop with ``clip_grad_norm_`` on 1 or N Gloo ranks, as a capture's reference.

Trains the model of a capture (same file, seed, batches, optimizer and
steps, from its ``run.json``) as a user's loop does,

    loss.backward(); clip_grad_norm_(model.parameters(), max_norm, norm_type); opt.step()

single-device (``--mode eager``, the whole batch on one rank), with
``DistributedDataParallel`` (``ddp``) or with ``fully_shard`` on every
``layers.i`` then the root (``fsdp``, or ``hsdp`` on a ``("replicate",
"shard")`` mesh of ``--replicate-size`` x world/R; the norm of DTensor
gradients is completed across the shards by PyTorch). ``--max-norm 0`` trains without
clipping: the negative control a check of a clipped Loom run must reject.
The output is loom.dp_reference's layout (``reference.json`` and
``reference.safetensors``), for ``loom-run --check``.

    .venv/bin/python python/tests/clip_reference.py python/tests/clip_mlp.py \\
        --capture DIR --out DIR/torch --mode fsdp --world 2 --max-norm 1
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loom.capture import OPTIMIZERS, make_seeded, optimizer_kwargs  # noqa: E402
from loom.dp_reference import (  # noqa: E402
    _full, _wrap, spawn_ranks, start_rank, stop_rank, write_reference)


def _rank(rank: int, world: int, store: str, out: str, mode: str, model_file: str,
          config: dict, max_norm: float, norm_type: float, replicate_size: int) -> None:
    import torch.distributed as dist

    start_rank(rank, world, store)
    try:
        program = make_seeded(Path(model_file), config["seed"])
        model = program.model if mode == "eager" else _wrap(program.model, mode, world,
                                                                    replicate_size, "auto")
        inner = model.module if mode == "ddp" else model
        hyper = config["optimizer"]
        opt = OPTIMIZERS[hyper["name"]](model.parameters(), **optimizer_kwargs(hyper),
                                        foreach=False)
        losses, norms = [], []
        for step in range(config["steps"]):
            batch = program.batches[step % len(program.batches)]
            rows = batch[0].shape[0] // world
            opt.zero_grad(set_to_none=True)
            loss = model(*(t[rank * rows:(rank + 1) * rows] for t in batch))
            loss.backward()
            if max_norm > 0:
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type)
                norms.append(float(_full(norm)))
            opt.step()
            total = loss.detach().float().clone()
            dist.all_reduce(total)
            losses.append((total / world).item())
        # Gathering FSDP's shards is a collective: every rank takes part.
        final = {n: _full(p) for n, p in inner.named_parameters()}
        if rank == 0:
            torch.save({"losses": losses, "final": final, "norms": norms}, out)
    finally:
        stop_rank()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--capture", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mode", choices=("eager", "ddp", "fsdp", "hsdp"), required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--max-norm", type=float, required=True, help="0: no clipping")
    parser.add_argument("--norm-type", type=float, default=2.0)
    parser.add_argument("--replicate-size", type=int, default=2,
                        help="hsdp: replicas (the mesh is R x world/R; default 2)")
    args = parser.parse_args()
    config = json.loads((args.capture / "run.json").read_text())
    got = spawn_ranks(_rank, args.world, args.mode, str(args.model.resolve()), config,
                      args.max_norm, args.norm_type, args.replicate_size)
    label = f"PyTorch {args.mode} on {args.world} Gloo ranks, clip_grad_norm_({args.max_norm})"
    write_reference(args.capture, args.out, got["losses"], got["final"], label)
    (args.out / "norms.json").write_text(json.dumps(got["norms"]) + "\n")
    print(f"wrote {args.out}: losses {got['losses'][0]:.7f} -> {got['losses'][-1]:.7f}, "
          f"norms {got['norms'][:1]} -> {got['norms'][-1:]}")


if __name__ == "__main__":
    main()
