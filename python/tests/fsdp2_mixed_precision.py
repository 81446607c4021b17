"""An eager reference for FSDP2 with MixedPrecisionPolicy(param_dtype, reduce_dtype=f32).

What ``fully_shard(..., mp_policy=MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=float32))`` computes on N ranks, emulated on one process:

- the sharded parameters stay float32 (the optimizer's master copy); each
  step every rank all-gathers them cast to ``param_dtype`` (a cast of the
  shard equals a cast of the full tensor), so forward and backward run on
  ``param_dtype`` copies of the parameters;
- ``cast_forward_inputs`` (the default) casts the root's floating forward
  inputs to ``param_dtype``; integer inputs (token ids, labels) stay as
  they are, and buffers are not cast;
- rank r trains on rows ``[r*B/N, (r+1)*B/N)`` of the global batch; its loss
  (computed in ``param_dtype``, as the model's forward returns it) and its
  gradients (in ``param_dtype``) are its own;
- the gradients are cast to ``reduce_dtype`` (float32) before the
  reduce-scatter, which averages them over the ranks (Gloo: a sum, then a
  division by N);
- AdamW (torch.optim's single-tensor loop) updates the float32 shards.

The loss Loom reports is the ranks' losses, each cast back to float32,
averaged; the same is recorded here. The result is written as a capture's
reference (``reference.json`` with the losses and the capture's tied
aliases, ``reference.safetensors`` with the final float32 parameters and
buffers), so ``loom-run --check`` can compare with it.

    .venv/bin/python python/tests/fsdp2_mixed_precision.py \
        examples/gpt.py --capture DIR --out DIR/fsdp2-bf16 --world 2 [--fsdp2]

With ``--fsdp2`` it then also trains with the real ``fully_shard`` (every
``layers.i`` and the root, that policy, AdamW) on ``--world`` Gloo
processes, one ATen thread each, and exits 1 unless FSDP2's losses and
final parameters equal the emulation's bitwise (they do for examples/gpt.py
and examples/vit.py on 2 ranks with torch 2.9.1).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from loom.capture import make_seeded  # noqa: E402
from loom.safetensors_io import save_tensors  # noqa: E402
from loom.dp_reference import spawn_ranks, start_rank, stop_rank, train_on_ranks  # noqa: E402


def rank_slice(batch: tuple[torch.Tensor, ...], rank: int, world: int,
               param_dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Rank's rows of every batch tensor, floating ones cast as cast_forward_inputs does."""
    out = []
    for t in batch:
        rows = t.shape[0] // world
        part = t[rank * rows:(rank + 1) * rows]
        out.append(part.to(param_dtype) if part.is_floating_point() else part)
    return tuple(out)


def emulate(model_file: Path, capture_dir: Path, out: Path, world: int,
            param_dtype: torch.dtype = torch.bfloat16) -> dict:
    """Trains as FSDP2 with mixed precision would and writes the reference into ``out``."""
    captured = json.loads((capture_dir / "reference.json").read_text())
    hyper = captured["optimizer"]
    if hyper["name"] != "adamw":
        raise ValueError(f"only AdamW is emulated, the capture used {hyper['name']}")
    steps = captured["steps"]

    # One ATen thread, as every loom-run rank uses: some CPU kernels (the
    # LayerNorm backward's weight and bias gradients) split their reductions
    # by thread, so the thread count changes their rounding.
    torch.set_num_threads(1)
    # The capture's model and batches: same seed, same determinism settings.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_default_dtype(torch.float32)
    program = make_seeded(model_file.resolve(), captured["seed"])
    master = program.model
    initial = sum(p.detach().double().sum().item() for p in master.parameters())
    if initial != captured["initial_param_checksum"]:
        raise ValueError(f"the model's initial weights differ from the capture's ({initial} vs "
                         f"{captured['initial_param_checksum']})")
    torch.manual_seed(captured["seed"])

    # The param_dtype copy: deepcopy keeps tied weights tied (one Parameter
    # object), and only the parameters are cast: FSDP2 leaves buffers as
    # they are.
    low = copy.deepcopy(master)
    with torch.no_grad():
        for p in low.parameters():
            p.data = p.data.to(param_dtype)
    master_params = [p for _, p in master.named_parameters()]
    low_params = [p for _, p in low.named_parameters()]
    opt = torch.optim.AdamW(master_params, lr=hyper["lr"], betas=tuple(hyper["betas"]),
                            eps=hyper["eps"], weight_decay=hyper["weight_decay"],
                            amsgrad=hyper["amsgrad"], maximize=hyper["maximize"], foreach=False)

    losses = []
    for step in range(steps):
        batch = program.batches[step % len(program.batches)]
        with torch.no_grad():
            for lp, mp in zip(low_params, master_params):
                lp.copy_(mp)  # the all-gathered param_dtype copy
        summed = [torch.zeros_like(p) for p in master_params]
        loss_sum = torch.zeros((), dtype=torch.float32)
        for rank in range(world):
            for lp in low_params:
                lp.grad = None
            loss = low(*rank_slice(batch, rank, world, param_dtype))
            loss.backward()
            loss_sum += loss.detach().float()
            for s, lp in zip(summed, low_params):
                s += lp.grad.float()  # cast to reduce_dtype, then summed
        for mp, s in zip(master_params, summed):
            mp.grad = s / world
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append((loss_sum / world).item())

    out.mkdir(parents=True, exist_ok=True)
    final = {name: p.detach() for name, p in master.named_parameters()}
    final.update({name: b.detach() for name, b in master.named_buffers()})
    save_tensors(out / "reference.safetensors", final, {"steps": steps})
    report = {
        "model": str(model_file),
        "reference": f"FSDP2 MixedPrecisionPolicy(param_dtype={param_dtype}, "
                     f"reduce_dtype=torch.float32) on {world} ranks, emulated",
        "optimizer": hyper,
        "steps": steps,
        "seed": captured["seed"],
        "losses": losses,
        "tied_parameters": captured["tied_parameters"],
        "split": world,
        "microbatches": 1,
    }
    (out / "reference.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def _fsdp2_rank(rank: int, world: int, store: str, out: str, model_file: str, hyper: dict,
                steps: int, seed: int) -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    start_rank(rank, world, store)
    try:
        program = make_seeded(Path(model_file), seed)
        model = program.model
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.layers:
            fully_shard(layer, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        opt = torch.optim.AdamW(model.parameters(), lr=hyper["lr"], betas=tuple(hyper["betas"]),
                                eps=hyper["eps"], weight_decay=hyper["weight_decay"], foreach=False)
        losses = train_on_ranks(model, opt, program.batches, rank, world, steps)
        params = {n: p.full_tensor().detach().clone() for n, p in model.named_parameters()}
        if rank == 0:
            torch.save({"losses": losses, "params": params}, out)
    finally:
        stop_rank()


def compare_with_fsdp2(model_file: Path, reference: Path, world: int) -> bool:
    """Trains with the real fully_shard and compares with ``reference`` (emulated)."""
    from safetensors.torch import load_file

    report = json.loads((reference / "reference.json").read_text())
    got = spawn_ranks(_fsdp2_rank, world, str(model_file.resolve()), report["optimizer"],
                      report["steps"], report["seed"])
    want = load_file(str(reference / "reference.safetensors"))
    loss_diff = max(abs(a - b) for a, b in zip(got["losses"], report["losses"]))
    param_diff = max((got["params"][n].double() - want[n].double()).abs().max().item()
                     for n in got["params"])
    print(f"real FSDP2 vs emulation: max |loss diff| {loss_diff:.3e}, "
          f"max |param diff| {param_diff:.3e}")
    return loss_diff == 0 and param_diff == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--capture", type=Path, required=True,
                        help="the capture's directory (reference.json: seed, steps, optimizer)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--fsdp2", action="store_true",
                        help="also train with the real fully_shard and require bitwise equality")
    args = parser.parse_args()
    report = emulate(args.model, args.capture, args.out, args.world)
    print(f"wrote {args.out}: losses {report['losses'][0]:.6f} -> {report['losses'][-1]:.6f}")
    if args.fsdp2 and not compare_with_fsdp2(args.model, args.out, args.world):
        sys.exit(1)


if __name__ == "__main__":
    main()
