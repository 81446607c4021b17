"""Hand-written format-v3 (MPMD) artifacts: a two-stage pipeline of linear layers.

Usage: make_pp_linear.py OUT_DIR [--dp 1|2] [--microbatches M] [--steps K]
                         [--fault bad-scale|bad-tag]

The model is fc1 -> relu -> fc2 -> MSE loss. Stage 0 (fc1, relu) and stage 1
(fc2, the loss) are two programs of one artifact, each with its own inputs,
state and outputs (docs/artifact.md, "Version 3: MPMD programs"). Mesh [2]
axes ["pp"], or with --dp 2 mesh [2, 2] axes ["pp", "dp"]: the batch is split
over "dp" and each stage all-reduces (avg) its gradients over ["dp"].

Each program runs the GPipe order on M microbatches of its rows: every
forward (stage 0 sends the activation, stage 1 receives it; tag m), then
every backward (stage 1 sends the activation's gradient back; tag M + m),
accumulating the gradients, divided by M before the (momentum) SGD update of
its own stage. Stage 1 reports the loss, the mean of the microbatch losses
(reduced avg over "dp").

Writes OUT_DIR/step.loomx, OUT_DIR/batches.safetensors (the global batches)
and PyTorch eager's reference on the whole batch in one process
(reference.json, reference.safetensors), which the pipelined step must
reproduce. --fault makes a broken variant for the negative controls:
bad-scale divides the gradients by M + 1 (--check must fail), bad-tag makes
stage 1 receive microbatch 0's activation under a tag nobody sends (the run
must stop with an error naming the rank, the peer, the tag and the
instruction).
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
from make_dp_linear import Builder  # noqa: E402

IN, HIDDEN, OUT, BATCH = 6, 8, 5, 8
# A tag no send of the step uses (--fault bad-tag).
STRAY_TAG = 999


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, OUT)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.fc2(torch.relu(self.fc1(x))), target)


def make_optimizer(params) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=0.01)


T = lambda s: {"tensor": s}  # noqa: E731
I = lambda n: {"int": n}  # noqa: E731


class StageBuilder(Builder):
    """Builder with point-to-point transfers over ["pp"]."""

    def __init__(self, first_free: int, module: str) -> None:
        super().__init__(first_free)
        self.module = module

    def op(self, kernel: str, overload: str, args: list, name: str, phase: str, kwargs: dict | None = None) -> int:
        return self.aten(kernel, overload, args, name, phase, kwargs, module=self.module)

    def send(self, inp: int, peer: int, tag: int, phase: str, name: str) -> int:
        """send_start; returns its future (wait it with wait_send)."""
        fut = self.slot()
        self.insts.append({"op": "send_start", "input": inp, "future": fut, "axes": ["pp"], "peer": peer, "tag": tag,
                           "stream": 0, "phase": phase, "name": name, "module": self.module})
        return fut

    def wait_send(self, fut: int, phase: str, name: str) -> None:
        self.insts.append({"op": "wait", "future": fut, "stream": 0, "phase": phase, "name": name})

    def recv(self, peer: int, tag: int, shape: list, phase: str, name: str) -> int:
        """recv_start and its wait; returns the received tensor's slot."""
        fut, res = self.slot(), self.slot()
        self.insts += [
            {"op": "recv_start", "future": fut, "axes": ["pp"], "peer": peer, "tag": tag, "dtype": "f32",
             "shape": shape, "stream": 0, "phase": phase, "name": name, "module": self.module},
            {"op": "wait", "future": fut, "result": res, "stream": 0, "phase": phase, "name": name + "_wait"},
        ]
        return res

    def all_reduce(self, inp: int, name: str) -> int:
        fut, res = self.slot(), self.slot()
        self.insts += [
            {"op": "all_reduce_start", "input": inp, "future": fut, "axes": ["dp"], "reduce": "avg", "stream": 0,
             "phase": "backward", "name": name, "module": self.module},
            {"op": "wait", "future": fut, "result": res, "stream": 0, "phase": "backward", "name": name + "_wait"},
        ]
        return res


def tables(params: list[tuple[str, torch.Tensor]], batch_inputs: list[tuple[str, int, list]], dp: int,
           optimizer: dict) -> tuple[list, list, dict, int]:
    """inputs, state, {param: state slots} and the first free slot of a
    stage binding `params` and the batch elements `batch_inputs`."""
    inputs = [loomx.tensor_input(name, "parameter", k, t) for k, (name, t) in enumerate(params)]
    for name, index, shape in batch_inputs:
        e = {"name": name, "role": "input", "batch_index": index, "slot": len(inputs), "dtype": "f32",
             "shape": shape}
        if dp > 1:
            e["split"] = {"axes": ["dp"], "dim": 0}
        inputs.append(e)
    state, state_slots, next_slot = [], {}, len(inputs)
    for name, t in params:
        state_slots[name] = []
        for s in range(loomx.num_state_slots(optimizer)):
            state.append({"name": f"{name}.{loomx.SCHEMA.state_names(optimizer)[s]}", "param": name,
                          "slot": next_slot, "dtype": "f32", "shape": list(t.shape), "init": loomx.state_init(optimizer)})
            state_slots[name].append(next_slot)
            next_slot += 1
    return inputs, state, state_slots, next_slot


def finish_grads(B: StageBuilder, grads: dict, scale: float, dp: int) -> dict:
    """Divides the accumulated gradients by the microbatch count (PyTorch's
    scale_grads) and, under DP, averages them over ["dp"]."""
    out = {}
    for name, g in grads.items():
        g = B.op("aten::div", "Scalar", [T(g), {"float": scale}], f"scale_{name}", "backward")
        if dp > 1:
            g = B.all_reduce(g, f"all_reduce_{name}")
        out[name] = g
    return out


def optimize(B: StageBuilder, inputs: list, state_slots: dict, grads: dict) -> None:
    for entry in inputs:
        if entry["role"] != "parameter":
            continue
        name = entry["name"]
        B.insts.append({"op": "optimizer", "param": name, "param_slot": entry["slot"], "grad": grads[name],
                        "state": state_slots[name], "phase": "optimizer", "name": f"opt_{name}", "stream": 0})


def accumulate(B: StageBuilder, acc: dict, name: str, g: int) -> None:
    acc[name] = g if name not in acc else B.op("aten::add", "Tensor", [T(acc[name]), T(g)], f"acc_{name}",
                                               "backward")


def stage0(model: Model, M: int, dp: int, optimizer: dict, scale: float) -> dict:
    local = BATCH // dp
    rows = local // M
    params = [("fc1.weight", model.fc1.weight), ("fc1.bias", model.fc1.bias)]
    inputs, state, state_slots, first = tables(params, [("x", 0, [local, IN])], dp, optimizer)
    B = StageBuilder(first, "fc1")
    W, b, x = 0, 1, 2
    wt = B.op("aten::t", "default", [T(W)], "t", "forward")
    xs, hs, sends = [], [], []
    for m in range(M):
        xm = B.op("aten::slice", "Tensor", [T(x), I(0), I(m * rows), I((m + 1) * rows)], f"slice_x_{m}", "forward")
        a = B.op("aten::addmm", "default", [T(b), T(xm), T(wt)], f"addmm_{m}", "forward")
        h = B.op("aten::relu", "default", [T(a)], f"relu_{m}", "forward")
        B.insts.append({"op": "free", "slots": [a], "stream": 0})
        # The activation goes to stage 1; the send reads h until its wait.
        sends.append(B.send(h, 1, m, "forward", f"send_act_{m}"))
        xs.append(xm)
        hs.append(h)
    for m, fut in enumerate(sends):
        B.wait_send(fut, "forward", f"send_act_{m}_wait")
    grads = {}
    for m in range(M):
        gh = B.recv(1, M + m, [rows, HIDDEN], "backward", f"recv_grad_{m}")
        ga = B.op("aten::threshold_backward", "default", [T(gh), T(hs[m]), {"float": 0.0}],
                  f"threshold_backward_{m}", "backward")
        gat = B.op("aten::t", "default", [T(ga)], f"t_ga_{m}", "backward")
        accumulate(B, grads, "fc1.weight", B.op("aten::mm", "default", [T(gat), T(xs[m])], f"mm_{m}", "backward"))
        accumulate(B, grads, "fc1.bias", B.op("aten::sum", "dim_IntList", [T(ga), {"ints": [0]}], f"sum_{m}",
                                             "backward", kwargs={"keepdim": {"bool": False}}))
        B.insts.append({"op": "free", "slots": [gh, ga, gat, hs[m], xs[m]], "stream": 0})
    optimize(B, inputs, state_slots, finish_grads(B, grads, scale, dp))
    return {"num_slots": B.next, "inputs": inputs, "state": state, "outputs": [],
            "streams": ["compute"], "instructions": B.insts}


def stage1(model: Model, M: int, dp: int, optimizer: dict, scale: float, fault: str | None) -> dict:
    local = BATCH // dp
    rows = local // M
    params = [("fc2.weight", model.fc2.weight), ("fc2.bias", model.fc2.bias)]
    inputs, state, state_slots, first = tables(params, [("target", 1, [local, OUT])], dp, optimizer)
    B = StageBuilder(first, "fc2")
    W, b, target = 0, 1, 2
    wt = B.op("aten::t", "default", [T(W)], "t", "forward")
    hs, ys, ts, losses = [], [], [], []
    for m in range(M):
        tag = STRAY_TAG if fault == "bad-tag" and m == 0 else m
        h = B.recv(0, tag, [rows, HIDDEN], "forward", f"recv_act_{m}")
        y = B.op("aten::addmm", "default", [T(b), T(h), T(wt)], f"addmm_{m}", "forward")
        tm = B.op("aten::slice", "Tensor", [T(target), I(0), I(m * rows), I((m + 1) * rows)], f"slice_target_{m}",
                  "forward")
        losses.append(B.op("aten::mse_loss", "default", [T(y), T(tm), I(1)], f"mse_loss_{m}", "forward"))
        hs.append(h)
        ys.append(y)
        ts.append(tm)
    total = losses[0]
    for m in range(1, M):
        total = B.op("aten::add", "Tensor", [T(total), T(losses[m])], f"add_loss_{m}", "forward")
    loss = B.op("aten::div", "Scalar", [T(total), {"float": float(M)}], "mean_loss", "forward")
    grads, sends = {}, []
    for m in range(M):
        ones = B.op("aten::ones_like", "default", [T(losses[m])], f"ones_like_{m}", "backward")
        gy = B.op("aten::mse_loss_backward", "default", [T(ones), T(ys[m]), T(ts[m]), I(1)],
                  f"mse_loss_backward_{m}", "backward")
        gh = B.op("aten::mm", "default", [T(gy), T(W)], f"mm_gh_{m}", "backward")
        sends.append((B.send(gh, 0, M + m, "backward", f"send_grad_{m}"), gh))
        gyt = B.op("aten::t", "default", [T(gy)], f"t_gy_{m}", "backward")
        accumulate(B, grads, "fc2.weight", B.op("aten::mm", "default", [T(gyt), T(hs[m])], f"mm_{m}", "backward"))
        accumulate(B, grads, "fc2.bias", B.op("aten::sum", "dim_IntList", [T(gy), {"ints": [0]}], f"sum_{m}",
                                             "backward", kwargs={"keepdim": {"bool": False}}))
        B.insts.append({"op": "free", "slots": [ones, gy, gyt, hs[m], ys[m], ts[m]], "stream": 0})
    for m, (fut, gh) in enumerate(sends):
        B.wait_send(fut, "backward", f"send_grad_{m}_wait")
        B.insts.append({"op": "free", "slots": [gh], "stream": 0})
    optimize(B, inputs, state_slots, finish_grads(B, grads, scale, dp))
    out = {"role": "loss", "slot": loss}
    if dp > 1:
        out["reduce"] = {"axes": ["dp"], "op": "avg"}
    return {"num_slots": B.next, "inputs": inputs, "state": state, "outputs": [out],
            "streams": ["compute"], "instructions": B.insts}


def program(model: Model, M: int, dp: int, optimizer: dict, fault: str | None) -> dict:
    scale = float(M + 1 if fault == "bad-scale" else M)
    # Rank = pp * dp_size + dp (row-major over ["pp", "dp"]).
    stages = [stage0(model, M, dp, optimizer, scale), stage1(model, M, dp, optimizer, scale, fault)]
    programs = [{"ranks": [s * dp + d for d in range(dp)], **stage} for s, stage in enumerate(stages)]
    mesh = {"shape": [2, dp], "axes": ["pp", "dp"]} if dp > 1 else {"shape": [2], "axes": ["pp"]}
    return {
        "format": "loomx",
        "version": loomx.VERSION,
        "producer": "runtime/tests/make_pp_linear.py",
        "source": "hand-written",
        "pipeline": f"pp2-dp{dp}-gpipe-m{M}",
        "world_size": 2 * dp,
        "mesh": mesh,
        "optimizer": optimizer,
        "programs": programs,
    }


def main(argv: list[str] | None = None) -> int:
    """Also called in-process by the tests (one torch import for many artifacts)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--dp", type=int, choices=[1, 2], default=1)
    ap.add_argument("--microbatches", type=int, choices=[1, 2, 4], default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--fault", choices=["bad-scale", "bad-tag"])
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    torch.manual_seed(0)
    model = Model()
    batches = [(torch.randn(BATCH, IN), torch.randn(BATCH, OUT)) for _ in range(3)]
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt_json = loomx.optimizer_json(make_optimizer(copy.deepcopy(model).parameters()))
    loomx.write_artifact(os.path.join(args.out, "step.loomx"),
                         program(model, args.microbatches, args.dp, opt_json, args.fault), initial)
    loomx.save_batches(os.path.join(args.out, "batches.safetensors"), batches)
    loomx.train_reference(args.out, model, make_optimizer(model.parameters()), batches, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
