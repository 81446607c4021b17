"""Turn a capture's joint graph (step.pt2) into a single-rank .loomx.

Usage: export_to_loomx.py CAPTURE_DIR [-o OUT.loomx]

A test fixture for the runtime, not the compiler: it lets loom-run execute
the real example models (MLP, GPT, ViT) before `loom-compile` exists, so the
executor meets every operator, argument kind and multi-return the examples
use, and `loom-run --check` can compare with the capture's eager reference.
It follows docs/artifact.md independently of lib/Target: one `aten`
instruction per graph node (arguments converted by the operator's schema),
`free` after each value's last use, the optimizer from reference.json as one
`optimizer` instruction per parameter, and the weights from the archive.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.fx
from torch.export.graph_signature import InputKind, OutputKind

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loomx  # noqa: E402

MEMORY_FORMATS = {
    torch.contiguous_format: "contiguous_format",
    torch.channels_last: "channels_last",
    torch.channels_last_3d: "channels_last_3d",
    torch.preserve_format: "preserve_format",
}


class Converter:
    def __init__(self, ep: torch.export.ExportedProgram, reference: dict) -> None:
        self.ep = ep
        self.reference = reference
        self.slots: dict[str, int] = {}
        self.num_slots = 0

    def new_slot(self) -> int:
        self.num_slots += 1
        return self.num_slots - 1

    def arg(self, value: Any, type_str: str) -> dict:
        """One ARG for a schema argument of type `type_str` (its str())."""
        if value is None:
            return {"none": True}
        if isinstance(value, torch.fx.Node):
            return {"tensor": self.slots[value.name]}
        if isinstance(value, (list, tuple)):
            if "Optional[Tensor]" in type_str:
                return {"optional_tensors": [None if v is None else self.slots[v.name] for v in value]}
            if "Tensor" in type_str:
                return {"tensors": [self.slots[v.name] for v in value]}
            if "bool" in type_str:
                return {"bools": [bool(v) for v in value]}
            if "float" in type_str:
                return {"floats": [loomx.float_arg(float(v)) for v in value]}
            if "str" in type_str:
                return {"strings": list(value)}
            return {"ints": [int(v) for v in value]}
        if isinstance(value, bool):
            return {"bool": value}
        if isinstance(value, int):
            return {"int": value}
        if isinstance(value, float):
            return {"float": loomx.float_arg(value)}
        if isinstance(value, str):
            return {"string": value}
        if isinstance(value, torch.dtype):
            return {"dtype": loomx.dtype_name(value)}
        if isinstance(value, torch.device):
            return {"device": value.type}
        if isinstance(value, torch.layout):
            assert value == torch.strided, value
            return {"layout": "strided"}
        if isinstance(value, torch.memory_format):
            return {"memory_format": MEMORY_FORMATS[value]}
        raise TypeError(f"cannot convert {value!r} for {type_str}")

    def convert(self) -> tuple[dict, dict[str, torch.Tensor]]:
        ep = self.ep
        graph = ep.graph
        nodes = list(graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        output = next(n for n in nodes if n.op == "output")

        inputs, weights = [], {}
        batch_index = 0
        for node, spec in zip(placeholders, ep.graph_signature.input_specs):
            slot = self.new_slot()
            self.slots[node.name] = slot
            if spec.kind == InputKind.USER_INPUT:
                val = node.meta["val"]
                inputs.append({"name": node.name, "role": "input", "slot": slot, "batch_index": batch_index,
                               "dtype": loomx.dtype_name(val.dtype), "shape": list(val.shape)})
                batch_index += 1
                continue
            role = {InputKind.PARAMETER: "parameter", InputKind.BUFFER: "buffer",
                    InputKind.CONSTANT_TENSOR: "constant"}[spec.kind]
            t = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
            weights[spec.target] = t
            inputs.append(loomx.tensor_input(spec.target, role, slot, t))

        # Outputs by kind; the values they name stay live to the end.
        out_values = output.args[0]
        outputs, grads = [], {}
        kept = set()
        for value, spec in zip(out_values, ep.graph_signature.output_specs):
            if value is None:
                continue
            kept.add(value.name)
            if spec.kind == OutputKind.LOSS_OUTPUT:
                outputs.append({"role": "loss", "name": value.name})
            elif spec.kind == OutputKind.BUFFER_MUTATION:
                outputs.append({"role": "buffer_mutation", "target": spec.target, "name": value.name})
            elif spec.kind == OutputKind.GRADIENT_TO_PARAMETER:
                grads[spec.target] = value.name
            else:
                raise ValueError(f"unsupported output kind {spec.kind}")

        last_use: dict[str, int] = {}
        for i, node in enumerate(nodes):
            for inp in node.all_input_nodes:
                last_use[inp.name] = i

        instructions = []
        for i, node in enumerate(nodes):
            if node.op != "call_function" or node.target is operator.getitem:
                continue
            op = node.target
            schema = op._schema
            args = [self.arg(v, str(schema.arguments[k].type)) for k, v in enumerate(node.args)]
            by_name = {a.name: a for a in schema.arguments}
            kwargs = {k: self.arg(v, str(by_name[k].type)) for k, v in node.kwargs.items()}
            # Results: a slot per return (getitem users pick elements of
            # multi-returns and lists).
            getitems = {u.args[1]: u for u in node.users if u.target is operator.getitem}
            results: list[Any] = []
            if len(schema.returns) == 1 and not str(schema.returns[0].type).startswith("List"):
                slot = self.new_slot()
                self.slots[node.name] = slot
                results.append(slot)
            elif len(schema.returns) == 1:
                elems = []
                for k in range(len(node.meta["val"])):
                    if k in getitems:
                        self.slots[getitems[k].name] = self.new_slot()
                        elems.append(self.slots[getitems[k].name])
                    else:
                        elems.append(None)
                results.append(elems)
            else:
                for k in range(len(schema.returns)):
                    if k in getitems:
                        self.slots[getitems[k].name] = self.new_slot()
                        results.append(self.slots[getitems[k].name])
                    else:
                        results.append(None)
            custom = node.meta.get("custom") or {}
            inst = {"op": "aten", "kernel": f"{schema.name}", "overload": schema.overload_name or "default",
                    "args": args, "results": results, "stream": 0, "name": node.name,
                    "module": custom.get("loom.module", ""), "phase": custom.get("loom.phase", "forward")}
            if kwargs:
                inst["kwargs"] = kwargs
            instructions.append(inst)

            # Free what this node used for the last time, and results nobody
            # uses; getitem nodes stand for their element's slot.
            dead = []
            for inp in node.all_input_nodes:
                if last_use.get(inp.name) == i and inp.name not in kept and inp.name in self.slots:
                    dead.append(inp.name)
            produced = [node] if node.name in self.slots else list(getitems.values())
            for p in produced:
                if not p.users and p.name not in kept:
                    dead.append(p.name)
            if dead:
                instructions.append({"op": "free", "slots": sorted({self.slots[n] for n in dead})})

        optimizer = self.optimizer()
        state = []
        if optimizer is not None:
            k = loomx.num_state_slots(optimizer)
            for param, grad_name in grads.items():
                p_input = next(x for x in inputs if x["name"] == param)
                slots = []
                for s in range(k):
                    slot = self.new_slot()
                    state.append({"name": f"{param}.{loomx.STATE_NAMES[optimizer['name']][s]}", "param": param,
                                  "slot": slot, "dtype": p_input["dtype"], "shape": p_input["shape"], "init": "zeros"})
                    slots.append(slot)
                instructions.append({"op": "optimizer", "param": param, "param_slot": p_input["slot"],
                                     "grad": self.slots[grad_name], "state": slots, "phase": "optimizer",
                                     "name": f"optimizer.{param}"})
                instructions.append({"op": "free", "slots": [self.slots[grad_name]]})
        else:
            for param, grad_name in grads.items():
                outputs.append({"role": "grad", "target": param, "name": grad_name})

        program = {
            "format": "loomx",
            "version": 1,
            "producer": "runtime/tests/export_to_loomx.py",
            "source": "step.pt2",
            "pipeline": "",
            "world_size": 1,
            "num_slots": self.num_slots,
            "optimizer": optimizer,
            "inputs": inputs,
            "state": state,
            "outputs": [{k: v for k, v in o.items() if k != "name"} | {"slot": self.slots[o["name"]]} for o in outputs],
            "programs": [{"rank": 0, "streams": ["compute"], "instructions": instructions}],
        }
        return program, weights

    def optimizer(self) -> dict | None:
        o = self.reference.get("optimizer")
        if not o:
            return None
        if o.get("amsgrad"):
            raise ValueError("amsgrad is not in the artifact format")
        return {
            "name": o["name"],
            "lr": float(o["lr"]),
            "betas": [float(b) for b in o.get("betas", [0.9, 0.999])],
            "eps": float(o.get("eps", 1e-8)),
            "weight_decay": float(o.get("weight_decay", 0.0)),
            "momentum": float(o.get("momentum", 0.0)),
            "dampening": float(o.get("dampening", 0.0)),
            "nesterov": bool(o.get("nesterov", False)),
            "maximize": bool(o.get("maximize", False)),
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture_dir", type=Path)
    ap.add_argument("-o", "--out", type=Path)
    args = ap.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.load(str(args.capture_dir / "step.pt2"))
    reference = json.loads((args.capture_dir / "reference.json").read_text())
    program, weights = Converter(ep, reference).convert()
    loomx.write_artifact(args.out or args.capture_dir / "step.loomx", program, weights)
    return 0


if __name__ == "__main__":
    sys.exit(main())
