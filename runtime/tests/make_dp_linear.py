"""Hand-written format-v2 (multi-rank) artifacts for a linear layer + MSE loss.

Usage: make_dp_linear.py OUT_DIR --mode ddp|fsdp|hsdp [--nproc N] [--steps K]
(--nproc: default 2, 4 for hsdp)

Writes OUT_DIR/step.loomx, OUT_DIR/batches.safetensors (the global batches)
and PyTorch eager's reference on the whole batch in one process
(reference.json with "split": N, reference.safetensors). Every rank runs
one SPMD program on its slice of the batch (docs/distributed.md):

- ddp: replicated parameters; the gradients are all-reduced (avg) over
  ["shard"] before SGD (momentum).
- fsdp: parameters and AdamW state sharded on dim 0 over ["shard"], with
  padding when OUT is not divisible by N; all-gathered (then the padding
  sliced off) before use; the gradients padded and reduce-scattered (avg);
  the optimizer updates the shards.
- hsdp: mesh (2, N/2) ["replicate", "shard"]: as fsdp on "shard", and the
  reduce-scattered gradients all-reduced (avg) over "replicate"; the batch
  is split over both axes.

Streams are ["compute", "comm"]: collectives and their waits on comm, with
record_event/wait_event between the producer, the start, the wait and the
consumer, as the compiler's lowering places them.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loomx  # noqa: E402

IN, OUT, BATCH = 6, 5, 8


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(IN, OUT)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.fc(x), target)


def make_optimizer(mode: str, params, name: str | None = None) -> torch.optim.Optimizer:
    if (name or ("sgd" if mode == "ddp" else "adamw")) == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=0.01)
    if name == "nadam":
        # Its per-parameter mu_product, a scalar beside the step count, is
        # what the NAdam checkpoint test restores.
        return torch.optim.NAdam(params, lr=0.01, weight_decay=0.1, momentum_decay=0.01,
                                 decoupled_weight_decay=True)
    if name == "asgd":
        # Its per-parameter eta and mu, scalars beside the step count, are
        # what the ASGD checkpoint test restores; averaging from step 3.
        return torch.optim.ASGD(params, lr=0.05, lambd=0.1, t0=1, weight_decay=0.01)
    return torch.optim.AdamW(params, lr=0.01, weight_decay=0.1)


class Builder:
    """Appends instructions and hands out slots."""

    def __init__(self, first_free: int) -> None:
        self.next = first_free
        self.insts: list[dict] = []
        self.events = 0

    def slot(self) -> int:
        s = self.next
        self.next += 1
        return s

    def aten(self, kernel: str, overload: str, args: list, name: str, phase: str, kwargs: dict | None = None,
             module: str = "fc") -> int:
        out = self.slot()
        inst = {"op": "aten", "kernel": kernel, "overload": overload, "args": args, "results": [out],
                "stream": 0, "name": name, "module": module, "phase": phase}
        if kwargs:
            inst["kwargs"] = kwargs
        self.insts.append(inst)
        return out

    def collective(self, op: str, inp: int, phase: str, name: str, **attrs) -> int:
        """A start on comm after an event from compute, its wait, and an event
        back to compute; returns the result slot."""
        ev = self.events
        self.events += 2
        fut, res = self.slot(), self.slot()
        self.insts += [
            {"op": "record_event", "event": ev, "stream": 0},
            {"op": "wait_event", "event": ev, "stream": 1},
            {"op": op, "input": inp, "future": fut, **attrs, "stream": 1, "phase": phase, "name": name, "module": "fc"},
            {"op": "wait", "future": fut, "result": res, "stream": 1, "phase": phase, "name": name + "_wait"},
            {"op": "record_event", "event": ev + 1, "stream": 1},
            {"op": "wait_event", "event": ev + 1, "stream": 0},
        ]
        return res


def program(mode: str, nproc: int, optimizer: dict, model: Model) -> dict:
    T = lambda s: {"tensor": s}  # noqa: E731
    if mode == "hsdp":
        assert nproc >= 4 and nproc % 2 == 0, "hsdp's mesh is (2, nproc / 2)"
        mesh = {"shape": [2, nproc // 2], "axes": ["replicate", "shard"]}
        shard_axes, batch_axes = ["shard"], ["replicate", "shard"]
        g_shard = nproc // 2
    else:
        mesh = {"shape": [nproc], "axes": ["shard"]}
        shard_axes = batch_axes = ["shard"]
        g_shard = nproc
    world = nproc
    local_batch = BATCH // world
    sharded = mode in ("fsdp", "hsdp")
    chunk = -(-OUT // g_shard)

    def param_entry(name, slot, shape):
        local = [chunk, *shape[1:]] if sharded else list(shape)
        e = {"name": name, "role": "parameter", "slot": slot, "dtype": "f32", "shape": local}
        if sharded:
            e["shard"] = {"axes": shard_axes, "dim": 0, "global_shape": list(shape)}
        return e

    W, b = model.fc.weight, model.fc.bias
    inputs = [
        param_entry("fc.weight", 0, W.shape),
        param_entry("fc.bias", 1, b.shape),
        {"name": "x", "role": "input", "batch_index": 0, "slot": 2, "dtype": "f32", "shape": [local_batch, IN],
         "split": {"axes": batch_axes, "dim": 0}},
        {"name": "target", "role": "input", "batch_index": 1, "slot": 3, "dtype": "f32", "shape": [local_batch, OUT],
         "split": {"axes": batch_axes, "dim": 0}},
    ]
    k = loomx.num_state_slots(optimizer)
    state = []
    state_slots = {}
    next_slot = 4
    for entry in inputs[:2]:
        state_slots[entry["name"]] = []
        for s in range(k):
            st = {"name": f"{entry['name']}.{loomx.SCHEMA.state_names(optimizer)[s]}", "param": entry["name"],
                  "slot": next_slot, "dtype": "f32", "shape": entry["shape"], "init": loomx.state_init(optimizer)}
            if sharded:
                st["shard"] = entry["shard"]
            state.append(st)
            state_slots[entry["name"]].append(next_slot)
            next_slot += 1

    B = Builder(next_slot)
    fwd, bwd = "forward", "backward"
    w, bias = 0, 1
    if sharded:
        # Unshard: gather the padded parameter, then drop the padding.
        wg = B.collective("all_gather_start", 0, fwd, "all_gather_w", axes=shard_axes, dim=0)
        bg = B.collective("all_gather_start", 1, fwd, "all_gather_b", axes=shard_axes, dim=0)
        w = B.aten("aten::slice", "Tensor", [T(wg), {"int": 0}, {"int": 0}, {"int": OUT}], "slice_w", fwd)
        bias = B.aten("aten::slice", "Tensor", [T(bg), {"int": 0}, {"int": 0}, {"int": OUT}], "slice_b", fwd)
        B.insts.append({"op": "free", "slots": [wg, bg], "stream": 0})
    wt = B.aten("aten::t", "default", [T(w)], "t", fwd)
    y = B.aten("aten::addmm", "default", [T(bias), T(2), T(wt)], "addmm", fwd)
    loss = B.aten("aten::mse_loss", "default", [T(y), T(3), {"int": 1}], "mse_loss", fwd)
    ones = B.aten("aten::ones_like", "default", [T(loss)], "ones_like", bwd)
    gy = B.aten("aten::mse_loss_backward", "default", [T(ones), T(y), T(3), {"int": 1}], "mse_loss_backward", bwd)
    gyt = B.aten("aten::t", "default", [T(gy)], "t_1", bwd)
    gw = B.aten("aten::mm", "default", [T(gyt), T(2)], "mm", bwd)
    gb = B.aten("aten::sum", "dim_IntList", [T(gy), {"ints": [0]}], "sum", bwd, kwargs={"keepdim": {"bool": False}})
    B.insts.append({"op": "free", "slots": [wt, y, ones, gy, gyt], "stream": 0})
    if sharded:
        pad = chunk * g_shard - OUT
        gwp = B.aten("aten::constant_pad_nd", "default", [T(gw), {"ints": [0, 0, 0, pad]}], "pad_gw", bwd)
        gbp = B.aten("aten::constant_pad_nd", "default", [T(gb), {"ints": [0, pad]}], "pad_gb", bwd)
        gw_s = B.collective("reduce_scatter_start", gwp, bwd, "reduce_scatter_w", axes=shard_axes, dim=0, reduce="avg")
        gb_s = B.collective("reduce_scatter_start", gbp, bwd, "reduce_scatter_b", axes=shard_axes, dim=0, reduce="avg")
        B.insts.append({"op": "free", "slots": [gwp, gbp, w, bias], "stream": 0})
        if mode == "hsdp":
            gw_s = B.collective("all_reduce_start", gw_s, bwd, "all_reduce_w", axes=["replicate"], reduce="avg")
            gb_s = B.collective("all_reduce_start", gb_s, bwd, "all_reduce_b", axes=["replicate"], reduce="avg")
        grads = {"fc.weight": gw_s, "fc.bias": gb_s}
    else:
        gw_r = B.collective("all_reduce_start", gw, bwd, "all_reduce_w", axes=["shard"], reduce="avg")
        gb_r = B.collective("all_reduce_start", gb, bwd, "all_reduce_b", axes=["shard"], reduce="avg")
        grads = {"fc.weight": gw_r, "fc.bias": gb_r}
    for slot, name in ((0, "fc.weight"), (1, "fc.bias")):
        B.insts.append({"op": "optimizer", "param": name, "param_slot": slot, "grad": grads[name],
                        "state": state_slots[name], "phase": "optimizer", "name": f"opt_{name}", "stream": 0})
    return {
        "format": "loomx",
        "version": loomx.VERSION,
        "producer": "runtime/tests/make_dp_linear.py",
        "source": "hand-written",
        "pipeline": mode,
        "world_size": world,
        "mesh": mesh,
        "num_slots": B.next,
        "optimizer": optimizer,
        "inputs": inputs,
        "state": state,
        "outputs": [{"role": "loss", "slot": loss, "reduce": {"axes": batch_axes, "op": "avg"}}],
        "programs": [{"ranks": list(range(world)), "streams": ["compute", "comm"], "instructions": B.insts}],
    }


def seeded() -> tuple[Model, list[tuple[torch.Tensor, torch.Tensor]], dict[str, torch.Tensor]]:
    """The model, its three batches and a copy of its initial weights, from
    seed 0: every artifact this file writes starts from these."""
    torch.manual_seed(0)
    model = Model()
    batches = [(torch.randn(BATCH, IN), torch.randn(BATCH, OUT)) for _ in range(3)]
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return model, batches, initial


def write_layouts(root, layouts: dict[str, tuple[str, int]], optimizer: str = "adamw",
                  reference: tuple[str, int] | None = None) -> dict[str, str]:
    """Writes root/NAME/step.loomx and batches.safetensors for each layout
    NAME -> (mode, nproc) of one model (seeded()'s weights and batches, the
    same `optimizer` everywhere), so runs of different layouts continue each
    other's checkpoints; with `reference` = (NAME, steps), PyTorch eager's
    reference of that many steps goes to root/NAME. Returns NAME -> dir."""
    model, batches, initial = seeded()
    opt_json = loomx.optimizer_json(make_optimizer("fsdp", copy.deepcopy(model).parameters(), optimizer))
    dirs = {}
    for name, (mode, nproc) in layouts.items():
        d = dirs[name] = os.path.join(str(root), name)
        os.makedirs(d, exist_ok=True)
        loomx.write_artifact(os.path.join(d, "step.loomx"), program(mode, nproc, opt_json, model), initial)
        loomx.save_batches(os.path.join(d, "batches.safetensors"), batches)
    if reference:
        name, steps = reference
        loomx.train_reference(dirs[name], model, make_optimizer("fsdp", model.parameters(), optimizer), batches,
                              steps, extra={"split": layouts[name][1]})
    return dirs


def main(argv: list[str] | None = None) -> int:
    """Also called in-process by the tests (one torch import for many artifacts)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--mode", choices=["ddp", "fsdp", "hsdp"], required=True)
    ap.add_argument("--nproc", type=int, default=None)
    ap.add_argument("--steps", type=int, default=5)
    # The checkpoint tests reshard one model's AdamW state from FSDP to DDP.
    ap.add_argument("--optimizer", choices=["sgd", "adamw", "nadam", "asgd"], default=None,
                    help="default: SGD (momentum) for ddp, AdamW otherwise")
    args = ap.parse_args(argv)
    if args.nproc is None:
        args.nproc = 4 if args.mode == "hsdp" else 2
    os.makedirs(args.out, exist_ok=True)

    model, batches, initial = seeded()
    opt_json = loomx.optimizer_json(make_optimizer(args.mode, copy.deepcopy(model).parameters(), args.optimizer))
    loomx.write_artifact(os.path.join(args.out, "step.loomx"), program(args.mode, args.nproc, opt_json, model),
                         initial)
    loomx.save_batches(os.path.join(args.out, "batches.safetensors"), batches)

    loomx.train_reference(args.out, model, make_optimizer(args.mode, model.parameters(), args.optimizer), batches, args.steps,
                          extra={"split": args.nproc})
    return 0


if __name__ == "__main__":
    sys.exit(main())
