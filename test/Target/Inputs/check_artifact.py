"""Checks a .loomx artifact against docs/artifact.md and docs/distributed.md
(from version 2: a mesh, sharded/split inputs, a reduced loss, collectives
and cross-stream events; from version 3: MPMD programs with their own
binding tables, and point-to-point send/recv, docs/pipeline.md) and prints a summary for FileCheck. The magic, the
versions, every object's and instruction's keys and the enumerations come
from the runtime's schema (runtime/include/loomrt/ArtifactSchema.def, parsed
by runtime/tests/loomx.py): a key the writer writes that the schema does not
declare fails here. It needs no torch (the standard library, and the
`safetensors` package, the format's reference reader, for the weights
section); it checks what a reader of the format can check without LibTorch:
the container, every field's presence and type, slot ranges, the dataflow
of slots (nothing read before it is written or after it is freed), the
optimizer instructions against the optimizer, and the weights section
against the inputs.

usage: check_artifact.py STEP.loomx [--weights-from FILE.safetensors]

With --weights-from, every tensor of the weights section must hold the
same bytes as the tensor of that name in FILE (e.g. loom-import's weights).
"""

import json
import struct
import sys
from collections import Counter
from pathlib import Path

import safetensors

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "runtime" / "tests"))
from loomx import SCHEMA  # noqa: E402

MAGIC = SCHEMA.magic
DTYPES = SCHEMA.dtypes
# The optional (version 4) optimizer keys, each with the optimizers that
# take it, as the schema declares them (LOOMX_OPTIMIZER_KEY).
OWN_KEYS: dict[str, list[str]] = {}
for _name, _keys in SCHEMA.optimizer_keys.items():
    for _key in _keys:
        OWN_KEYS.setdefault(_key, []).append(_name)
# Collective starts: the fields each takes beyond input/future/axes, as the
# schema gives them.
COLLECTIVES = {op: sorted(SCHEMA.inst_keys(op, SCHEMA.current)
                          - SCHEMA.inst_keys("wait", SCHEMA.current) - {"input", "axes"})
               for op in sorted(SCHEMA.values("Op", SCHEMA.current))
               if op.endswith("_start")}
# The order the summary lists them in.
COLLECTIVE_ORDER = ("all_gather_start", "reduce_scatter_start", "all_reduce_start",
                    "broadcast_start")
POINT_TO_POINT = ("send_start", "recv_start")


class Invalid(Exception):
    pass


def need(cond, path, message):
    if not cond:
        raise Invalid(f"{path}: {message}")


def field(obj, key, path, types):
    where = f"{path}.{key}" if path else key
    need(isinstance(obj, dict), path or "program", "expected an object")
    need(key in obj, where, "missing")
    value = obj[key]
    allowed = types if isinstance(types, tuple) else (types,)
    # bool is an int in Python; JSON keeps them apart.
    need(isinstance(value, allowed) and (bool in allowed or not isinstance(value, bool)),
         where, f"expected {' or '.join(t.__name__ for t in allowed)}, found {value!r}")
    return value


def only_keys(obj, allowed, path):
    extra = set(obj) - set(allowed)
    need(not extra, path, f"unknown fields {sorted(extra)}")


def schema_keys(obj, version, path, value):
    """Refuses keys the schema does not give `obj` in this version."""
    allowed = SCHEMA.keys(obj, version)
    extra = set(value) - allowed
    need(not extra, path or obj, f"keys {sorted(extra)} are not in the schema's {obj} "
         f"for version {version} (allowed: {sorted(allowed)})")


def check_number(v, path):
    need(isinstance(v, (int, float)) and not isinstance(v, bool) or v in ("inf", "-inf", "nan"),
         path, f"expected a number, found {v!r}")


class Checker:
    def __init__(self, program, version):
        self.p = program
        self.version = version
        self.enum = lambda name: SCHEMA.values(name, version)
        self.num_slots = 0
        self.mesh_axes = []

    def slot(self, v, path):
        need(isinstance(v, int) and not isinstance(v, bool), path, f"expected a slot, found {v!r}")
        need(0 <= v < self.num_slots, path, f"slot {v} out of range ({self.num_slots} slots)")
        return v

    def shape(self, v, path):
        need(isinstance(v, list) and all(isinstance(d, int) and d >= 0 for d in v),
             path, "expected a list of non-negative integers")
        return v

    def check(self):
        p = self.p
        v2 = self.version >= SCHEMA.key_since("Program", "mesh")
        schema_keys("Program", self.version, "", p)
        need(field(p, "format", "", str) in self.enum("Format"), "format", "expected loomx")
        need(field(p, "version", "", int) == self.version, "version",
             f"expected {self.version}, the container's")
        for key in ("producer", "source", "pipeline"):
            field(p, key, "", str)
        need(field(p, "world_size", "", int) >= 1, "world_size", "must be at least 1")
        if v2 and (p["world_size"] > 1 or "mesh" in p):
            mesh = field(p, "mesh", "", dict)
            schema_keys("Mesh", self.version, "mesh", mesh)
            shape = field(mesh, "shape", "mesh", list)
            axes = field(mesh, "axes", "mesh", list)
            need(shape and all(isinstance(d, int) and d >= 1 for d in shape), "mesh.shape",
                 "expected positive sizes")
            need(len(axes) == len(shape) and len(set(axes)) == len(axes)
                 and all(isinstance(a, str) and a for a in axes), "mesh.axes",
                 "expected one distinct name per dimension")
            size = 1
            for d in shape:
                size *= d
            need(size == p["world_size"], "world_size", f"is not the mesh's {size} ranks")
            self.mesh_axes = axes
        opt = p.get("optimizer", "missing")
        need(opt != "missing", "optimizer", "missing")
        if opt is not None:
            schema_keys("Optimizer", self.version, "optimizer", opt)
            need(field(opt, "name", "optimizer", str) in self.enum("OptimizerName"),
                 "optimizer.name", "unknown optimizer")
            for key in ("lr", "eps", "weight_decay", "momentum", "dampening"):
                check_number(field(opt, key, "optimizer", (int, float)), f"optimizer.{key}")
            betas = field(opt, "betas", "optimizer", list)
            need(len(betas) == 2 and all(0 <= b < 1 for b in betas), "optimizer.betas",
                 "expected [beta1, beta2] in [0, 1)")
            field(opt, "nesterov", "optimizer", bool)
            field(opt, "maximize", "optimizer", bool)
            for key in ("alpha", "lr_decay", "initial_accumulator_value", "momentum_decay"):
                if key in opt:
                    check_number(field(opt, key, "optimizer", (int, float)), f"optimizer.{key}")
            if "rho" in opt:
                need(isinstance(opt["rho"], (int, float)) and 0 <= opt["rho"] <= 1,
                     "optimizer.rho", "expected a number in [0, 1]")
            for key in ("etas", "step_sizes"):
                if key in opt:
                    pair = field(opt, key, "optimizer", list)
                    need(len(pair) == 2 and all(isinstance(v, (int, float)) for v in pair),
                         f"optimizer.{key}", "expected two numbers")
            for key in ("amsgrad", "centered", "decoupled_weight_decay"):
                if key in opt:
                    field(opt, key, "optimizer", bool)
            for key in OWN_KEYS:
                need(key not in opt or opt["name"] in OWN_KEYS[key], f"optimizer.{key}",
                     f"not a hyperparameter of {opt['name']}")
            need(opt.get("impl", "forloop") == "forloop" or opt["name"] in SCHEMA.fused_optimizers,
                 "optimizer.impl", f"{opt['name']} has no fused implementation")

        programs = field(p, "programs", "", list)
        table_keys = ("num_slots", "inputs", "state", "outputs")
        # Version 3: the binding tables are the top level's (SPMD) or each
        # program's own (MPMD), never both.
        self.mpmd = self.version >= SCHEMA.key_since("RankProgram", "inputs") and \
            not any(k in p for k in table_keys)
        if not self.mpmd:
            self.tables = [self.check_tables(p, "")] * max(len(programs), 1)
        else:
            self.tables = []
            for r, prog in enumerate(programs):
                need(isinstance(prog, dict), f"programs[{r}]", "expected an object")
                self.tables.append(self.check_tables(prog, f"programs[{r}]."))
        losses = sum(e["role"] == "loss" for t in self.tables[:1 if not self.mpmd else None]
                     for e in t[2])
        need(losses == 1, "outputs" if not self.mpmd else "programs",
             f"expected one loss, found {losses}")
        self.bound = self.check_shared()
        self.counts = []
        if v2:
            covered = []
            for r, prog in enumerate(programs):
                ranks = field(prog, "ranks", f"programs[{r}]", list) if "ranks" in prog \
                    else [field(prog, "rank", f"programs[{r}]", int)]
                covered += ranks
                self.check_program(prog, r, opt)
            need(sorted(covered) == list(range(p["world_size"])), "programs",
                 f"ranks {sorted(covered)} are not every rank once")
        else:
            need(len(programs) == p["world_size"], "programs", "one program per rank")
            for r, prog in enumerate(programs):
                self.check_program(prog, r, opt)
        return programs

    def check_tables(self, p, where):
        """One set of binding tables: num_slots, inputs, state, outputs."""
        v2 = self.version >= SCHEMA.key_since("Program", "mesh")
        self.num_slots = field(p, "num_slots", where.rstrip("."), int)
        need(self.num_slots >= 0, f"{where}num_slots", "must not be negative")
        inputs = field(p, "inputs", where.rstrip("."), list)
        names, batch, slots = {}, set(), set()
        for i, e in enumerate(inputs):
            path = f"{where}inputs[{i}]"
            role = field(e, "role", path, str)
            need(role in self.enum("InputRole"), f"{path}.role", f"unknown role {role!r}")
            schema_keys("Input", self.version, path, e)
            only_keys(e, ["name", "role", "slot", "dtype", "shape"] +
                      (["batch_index"] if role == "input" else []) +
                      (["split"] if v2 and role == "input" else []) +
                      (["shard"] if v2 and role == "parameter" else []), path)
            name = field(e, "name", path, str)
            need(name and name not in names, f"{path}.name", f"empty or repeated name {name!r}")
            names[name] = e
            if role == "input":
                b = field(e, "batch_index", path, int)
                need(b >= 0 and b not in batch, f"{path}.batch_index", "negative or repeated")
                batch.add(b)
            s = self.slot(field(e, "slot", path, int), f"{path}.slot")
            need(s not in slots, f"{path}.slot", f"slot {s} is bound twice")
            slots.add(s)
            need(field(e, "dtype", path, str) in DTYPES, f"{path}.dtype", "unknown dtype")
            self.shape(field(e, "shape", path, list), f"{path}.shape")
            if "split" in e:
                split = field(e, "split", path, dict)
                schema_keys("Split", self.version, f"{path}.split", split)
                self.axes(split, f"{path}.split")
                need(0 <= field(split, "dim", f"{path}.split", int) < len(e["shape"]),
                     f"{path}.split.dim", "out of range")
            if "shard" in e:
                self.shard(e, path)

        state = field(p, "state", where.rstrip("."), list)
        state_by_param = Counter()
        for i, e in enumerate(state):
            path = f"{where}state[{i}]"
            schema_keys("State", self.version, path, e)
            name = field(e, "name", path, str)
            need(name and name not in names, f"{path}.name", f"empty or repeated name {name!r}")
            names[name] = e
            param = field(e, "param", path, str)
            need(param in names and names[param].get("role") == "parameter", f"{path}.param",
                 f"{param!r} is not a parameter input")
            state_by_param[param] += 1
            s = self.slot(field(e, "slot", path, int), f"{path}.slot")
            need(s not in slots, f"{path}.slot", f"slot {s} is bound twice")
            slots.add(s)
            need(field(e, "dtype", path, str) in DTYPES, f"{path}.dtype", "unknown dtype")
            self.shape(field(e, "shape", path, list), f"{path}.shape")
            init = field(e, "init", path, str)
            need(init in self.enum("StateInit"), f"{path}.init", "unknown init")
            need(init == "zeros" or (self.p["optimizer"] or {}).get("name") == "adagrad", f"{path}.init",
                 "only Adagrad's state starts from initial_accumulator_value")
            if "shard" in e:
                self.shard(e, path)

        outputs = field(p, "outputs", where.rstrip("."), list)
        losses = 0
        for i, e in enumerate(outputs):
            path = f"{where}outputs[{i}]"
            role = field(e, "role", path, str)
            need(role in self.enum("OutputRole"), f"{path}.role", f"unknown role {role!r}")
            schema_keys("Output", self.version, path, e)
            self.slot(field(e, "slot", path, int), f"{path}.slot")
            if role == "loss":
                only_keys(e, ["role", "slot"] + (["reduce"] if v2 else []), path)
                losses += 1
                if "reduce" in e:
                    reduce = field(e, "reduce", path, dict)
                    schema_keys("Reduce", self.version, f"{path}.reduce", reduce)
                    self.axes(reduce, f"{path}.reduce")
                    need(field(reduce, "op", f"{path}.reduce", str) in self.enum("ReduceOp"),
                         f"{path}.reduce.op", "unknown reduction")
            else:
                only_keys(e, ["role", "target", "slot"], path)
                target = field(e, "target", path, str)
                want = "parameter" if role == "grad" else "buffer"
                need(names.get(target, {}).get("role") == want, f"{path}.target",
                     f"{target!r} is not a {want} input")
        return inputs, state, outputs, state_by_param, self.num_slots


    def check_shared(self):
        """A tensor the runtime keeps that several programs bind is bound
        alike; returns every such binding once, by name."""
        bound = {}
        for r, (inputs, _, _, _, _) in enumerate(self.tables):
            for i, e in enumerate(inputs):
                if e["role"] == "input":
                    continue
                key = (e["role"], e["dtype"], e["shard"]["global_shape"] if "shard" in e
                       else e["shape"])
                if e["name"] in bound:
                    other = bound[e["name"]]
                    need((other["role"], other["dtype"], other["shard"]["global_shape"]
                          if "shard" in other else other["shape"]) == key,
                         f"programs[{r}].inputs[{i}]",
                         f"binds {e['name']!r} unlike an earlier program")
                else:
                    bound[e["name"]] = e
        return list(bound.values())

    def axes(self, obj, path):
        axes = field(obj, "axes", path, list)
        need(axes and len(set(axes)) == len(axes) and all(a in self.mesh_axes for a in axes),
             f"{path}.axes", f"expected distinct axes of the mesh {self.mesh_axes}, found {axes}")
        return axes

    def group_size(self, axes):
        shape = self.p["mesh"]["shape"]
        size = 1
        for a in axes:
            size *= shape[self.mesh_axes.index(a)]
        return size

    def shard(self, e, path):
        shard = field(e, "shard", path, dict)
        where = f"{path}.shard"
        schema_keys("Shard", self.version, where, shard)
        g = self.group_size(self.axes(shard, where))
        dim = field(shard, "dim", where, int)
        full = self.shape(field(shard, "global_shape", where, list), f"{where}.global_shape")
        need(len(full) == len(e["shape"]) and 0 <= dim < len(full), where, "does not fit the shape")
        want = [(d + g - 1) // g if k == dim else d for k, d in enumerate(full)]
        need(e["shape"] == want, f"{path}.shape", f"expected the local chunk {want}")

    def arg(self, a, path, reads):
        need(isinstance(a, dict) and len(a) == 1, path, f"an ARG has exactly one key, found {a!r}")
        (kind, v), = a.items()
        where = f"{path}.{kind}"
        if kind == "tensor":
            reads.append((self.slot(v, where), where))
        elif kind in ("tensors", "optional_tensors"):
            need(isinstance(v, list), where, "expected a list")
            for j, s in enumerate(v):
                if s is None and kind == "optional_tensors":
                    continue
                reads.append((self.slot(s, f"{where}[{j}]"), f"{where}[{j}]"))
        elif kind == "none":
            need(v is True, where, "must be true")
        elif kind == "int":
            need(isinstance(v, int) and not isinstance(v, bool), where, "expected an integer")
        elif kind == "ints":
            need(isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
                 where, "expected integers")
        elif kind == "float":
            check_number(v, where)
        elif kind == "floats":
            need(isinstance(v, list), where, "expected a list")
            for j, x in enumerate(v):
                check_number(x, f"{where}[{j}]")
        elif kind == "bool":
            need(isinstance(v, bool), where, "expected a boolean")
        elif kind == "bools":
            need(isinstance(v, list) and all(isinstance(x, bool) for x in v), where, "expected booleans")
        elif kind == "string":
            need(isinstance(v, str), where, "expected a string")
        elif kind == "strings":
            need(isinstance(v, list) and all(isinstance(x, str) for x in v), where, "expected strings")
        elif kind == "dtype":
            need(v in DTYPES, where, f"unknown dtype {v!r}")
        elif kind == "device":
            need(v == "cpu" or v == "cuda" or (v.startswith("cuda:") and v[5:].isdigit()),
                 where, f"unknown device {v!r}")
        elif kind == "layout":
            need(v in self.enum("Layout"), where, f"unknown layout {v!r}")
        elif kind == "memory_format":
            need(v in self.enum("MemoryFormat"), where, f"unknown memory format {v!r}")
        else:
            raise Invalid(f"{path}: unknown ARG kind {kind!r}")
        return kind

    def check_program(self, prog, rank, opt):
        path = f"programs[{rank}]"
        inputs, state, outputs, state_by_param, self.num_slots = self.tables[rank]
        v2 = self.version >= SCHEMA.key_since("RankProgram", "ranks")
        schema_keys("RankProgram", self.version, path, prog)
        if v2:
            only_keys(prog, ["ranks" if "ranks" in prog else "rank", "streams", "instructions"]
                      + (["num_slots", "inputs", "state", "outputs"] if self.mpmd else []),
                      path)
        else:
            only_keys(prog, ["rank", "streams", "instructions"], path)
            need(field(prog, "rank", path, int) == rank, f"{path}.rank",
                 "programs are listed by rank")
        streams = field(prog, "streams", path, list)
        need(streams and all(isinstance(s, str) and s for s in streams), f"{path}.streams",
             "expected stream names")
        need(v2 or len(streams) == 1, f"{path}.streams",
             "version 1 has one stream per program")
        futures = {}     # future slot -> the start's input slot (None: a recv)
        sends = set()    # future slots of sends not waited for yet
        pinned = set()   # input slots of collectives not waited for yet
        events = set()
        live = [False] * self.num_slots
        owned = set()
        for e in inputs:
            live[e["slot"]] = True
            if e["role"] != "input":
                owned.add(e["slot"])
        for e in state:
            live[e["slot"]] = True
            owned.add(e["slot"])
        ops, arg_kinds, updated = Counter(), Counter(), set()

        def read(s, where):
            need(live[s], where, f"slot {s} is read before it is written (or after it is freed)")

        for i, inst in enumerate(field(prog, "instructions", path, list)):
            ip = f"{path}.instructions[{i}]"
            op = field(inst, "op", ip, str)
            ops[op] += 1
            need(op in self.enum("Op"), f"{ip}.op", f"unknown instruction {op!r}")
            allowed = SCHEMA.inst_keys(op, self.version)
            need(not set(inst) - allowed, ip, f"keys {sorted(set(inst) - allowed)} are not in the "
                 f"schema for {op!r} in version {self.version} (allowed: {sorted(allowed)})")
            common = ["op", "stream", "name", "module", "phase"]
            if "stream" in inst:
                need(isinstance(inst["stream"], int) and 0 <= inst["stream"] < len(streams),
                     f"{ip}.stream", "out of range")
            if "phase" in inst:
                need(inst["phase"] in self.enum("Phase"), f"{ip}.phase", "unknown phase")
            if op == "aten":
                only_keys(inst, common + ["kernel", "overload", "args", "kwargs", "results",
                                          "signature"], ip)
                if "signature" in inst:
                    want = f"{inst['kernel']}.{inst['overload']}("
                    need(isinstance(inst["signature"], str) and inst["signature"].startswith(want)
                         and ")->(" in inst["signature"], f"{ip}.signature",
                         f"not '{want}inputs)->(results)'")
                need("::" in field(inst, "kernel", ip, str), f"{ip}.kernel", "not namespace::name")
                need(field(inst, "overload", ip, str) != "", f"{ip}.overload", "empty")
                reads = []
                for j, a in enumerate(field(inst, "args", ip, list)):
                    arg_kinds[self.arg(a, f"{ip}.args[{j}]", reads)] += 1
                for k, a in inst.get("kwargs", {}).items():
                    arg_kinds[self.arg(a, f"{ip}.kwargs.{k}", reads)] += 1
                for s, where in reads:
                    read(s, where)
                written = set()
                for j, r in enumerate(field(inst, "results", ip, list)):
                    for k, s in enumerate(r if isinstance(r, list) else [r]):
                        if s is None:
                            continue
                        where = f"{ip}.results[{j}]"
                        self.slot(s, where)
                        need(s not in owned, where, f"writes slot {s}, which the runtime owns")
                        need(s not in pinned and s not in futures, where,
                             f"writes slot {s} before the wait of the collective using it")
                        need(s not in written, where, f"slot {s} receives two results")
                        written.add(s)
                        live[s] = True
            elif op == "free":
                only_keys(inst, common + ["slots"], ip)
                for j, s in enumerate(field(inst, "slots", ip, list)):
                    where = f"{ip}.slots[{j}]"
                    self.slot(s, where)
                    need(s not in owned, where, f"frees slot {s}, which the runtime keeps")
                    need(s not in pinned, where,
                         f"frees slot {s} before the wait of the collective reading it")
                    need(live[s], where, f"slot {s} holds no value to free")
                    live[s] = False
            elif op == "optimizer":
                only_keys(inst, common + ["param", "param_slot", "grad", "state"], ip)
                need(opt is not None, ip, "an optimizer instruction without an optimizer")
                param = field(inst, "param", ip, str)
                match = [e for e in inputs if e["name"] == param and e["role"] == "parameter"]
                need(match, f"{ip}.param", f"{param!r} is not a parameter input")
                need(param not in updated, f"{ip}.param", f"{param!r} is updated twice")
                updated.add(param)
                need(field(inst, "param_slot", ip, int) == match[0]["slot"], f"{ip}.param_slot",
                     "not the parameter's slot")
                read(self.slot(field(inst, "grad", ip, int), f"{ip}.grad"), f"{ip}.grad")
                st = field(inst, "state", ip, list)
                want = SCHEMA.state_names(opt)
                need(len(st) == len(want), f"{ip}.state", f"expected {len(want)} state slots {want}")
                for j, s in enumerate(st):
                    mine = [e for e in state if e["slot"] == s and e["param"] == param]
                    need(mine, f"{ip}.state[{j}]", f"slot {s} is not state of {param!r}")
            elif v2 and op in ("send_start", "recv_start"):
                send = op == "send_start"
                only_keys(inst, common + ["future", "axes", "peer", "tag"]
                          + (["input"] if send else ["dtype", "shape"]), ip)
                src = None
                if send:
                    src = self.slot(field(inst, "input", ip, int), f"{ip}.input")
                    read(src, f"{ip}.input")
                else:
                    need(field(inst, "dtype", ip, str) in DTYPES, f"{ip}.dtype", "unknown dtype")
                    self.shape(field(inst, "shape", ip, list), f"{ip}.shape")
                g = self.group_size(self.axes(inst, ip))
                peer = field(inst, "peer", ip, int)
                need(0 <= peer < g, f"{ip}.peer", f"not an index of a group of {g}")
                need(0 <= field(inst, "tag", ip, int) < 2**31, f"{ip}.tag", "out of range")
                f = self.slot(field(inst, "future", ip, int), f"{ip}.future")
                need(not live[f] and f not in futures, f"{ip}.future", f"slot {f} is in use")
                futures[f] = src
                if send:
                    pinned.add(src)
                    sends.add(f)
            elif v2 and op in COLLECTIVES:
                only_keys(inst, common + ["input", "future", "axes"] + COLLECTIVES[op], ip)
                src = self.slot(field(inst, "input", ip, int), f"{ip}.input")
                read(src, f"{ip}.input")
                self.axes(inst, ip)
                if "dim" in COLLECTIVES[op]:
                    need(field(inst, "dim", ip, int) >= 0, f"{ip}.dim", "negative")
                if "reduce" in COLLECTIVES[op]:
                    need(field(inst, "reduce", ip, str) in self.enum("ReduceOp"), f"{ip}.reduce",
                         "unknown reduction")
                if "root" in COLLECTIVES[op]:
                    need(field(inst, "root", ip, int) >= 0, f"{ip}.root", "negative")
                f = self.slot(field(inst, "future", ip, int), f"{ip}.future")
                need(not live[f] and f not in futures, f"{ip}.future", f"slot {f} is in use")
                futures[f] = src
                pinned.add(src)
            elif v2 and op == "wait":
                only_keys(inst, common + ["future", "result"], ip)
                f = self.slot(field(inst, "future", ip, int), f"{ip}.future")
                need(f in futures, f"{ip}.future", f"slot {f} holds no started collective")
                pinned.discard(futures.pop(f))
                # The wait of a send yields nothing.
                if f in sends:
                    sends.discard(f)
                    need("result" not in inst, f"{ip}.result", "the wait of a send has none")
                    continue
                r = self.slot(field(inst, "result", ip, int), f"{ip}.result")
                need(not live[r] and r not in futures, f"{ip}.result", f"slot {r} is in use")
                live[r] = True
            elif v2 and op == "record_event":
                only_keys(inst, common + ["event"], ip)
                e = field(inst, "event", ip, int)
                need(e not in events, f"{ip}.event", f"event {e} is recorded twice")
                events.add(e)
            elif v2 and op == "wait_event":
                only_keys(inst, common + ["event"], ip)
                need(field(inst, "event", ip, int) in events, f"{ip}.event",
                     "waits for an event not recorded earlier")
            else:
                raise Invalid(f"{ip}.op: unknown instruction {op!r}")
        need(not futures, path, f"collectives in slots {sorted(futures)} are never waited for")
        for j, e in enumerate(outputs):
            read(e["slot"], f"outputs[{j}].slot")
        self.counts.append((prog.get("ranks", [prog.get("rank")]), streams, ops, arg_kinds))


def read_safetensors(blob, what):
    """{name: (dtype, shape, bytes)} as the reference reader sees `blob`."""
    try:
        return {name: (t["dtype"], list(t["shape"]), bytes(t["data"]))
                for name, t in safetensors.deserialize(blob)}
    except safetensors.SafetensorError as e:
        raise Invalid(f"{what}: not a valid safetensors file: {e}")


def check_weights(blob, inputs):
    header = read_safetensors(blob, "weights")
    want = {e["name"]: e for e in inputs if e["role"] != "input"}
    need(set(header) == set(want), "weights",
         f"holds {sorted(header)} but the step binds {sorted(want)}")
    total = 0
    for name, e in want.items():
        dtype, shape, data = header[name]
        # A sharded parameter's weights are the full tensor (version 2).
        bound = e["shard"]["global_shape"] if "shard" in e else e["shape"]
        need(dtype == e["dtype"].upper() and shape == bound, f"weights.{name}",
             f"{dtype}{shape} but inputs say {e['dtype']}{bound}")
        total += len(data)
    return len(want), total


def main():
    blob = open(sys.argv[1], "rb").read()
    source = None
    try:
        if len(sys.argv) == 4 and sys.argv[2] == "--weights-from":
            source = read_safetensors(open(sys.argv[3], "rb").read(), sys.argv[3])
        need(blob[:8] == MAGIC, "container", "not a Loom artifact (bad magic)")
        version, flags, n, m = struct.unpack("<IIQQ", blob[8:32])
        need(SCHEMA.oldest <= version <= SCHEMA.current, "container",
             f"format version {version}; the schema reads {SCHEMA.oldest} to {SCHEMA.current}")
        need(flags == 0, "container", f"flags {flags}")
        need(32 + n + m == len(blob), "container",
             f"lengths {n} + {m} do not match the file size {len(blob)}")
        program = json.loads(blob[32:32 + n].decode("utf-8"))
        checker = Checker(program, version)
        programs = checker.check()
        tensors, weight_bytes = check_weights(blob[32 + n:], checker.bound)
        if source is not None:
            for name, data in read_safetensors(blob[32 + n:], "weights").items():
                need(source.get(name) == data, f"weights.{name}",
                     "differs from the tensor in " + sys.argv[3])
    except Invalid as e:
        sys.exit(f"check_artifact.py: {e}")

    print(f"container: version {version}, program {n} bytes, weights {m} bytes")
    print(f"producer: {program['producer']}")
    print(f"pipeline: {program['pipeline']}")
    if checker.mpmd:
        print(f"world_size {program['world_size']}, mpmd: {len(programs)} programs")
    else:
        print(f"world_size {program['world_size']}, num_slots {program['num_slots']}")
    if "mesh" in program:
        print(f"mesh: shape {program['mesh']['shape']} axes {program['mesh']['axes']}")
    opt = program["optimizer"]
    if opt is None:
        print("optimizer: none")
    else:
        print(f"optimizer: {opt['name']} lr={opt['lr']} betas={opt['betas']} eps={opt['eps']} "
              f"weight_decay={opt['weight_decay']} momentum={opt['momentum']} "
              f"dampening={opt['dampening']} nesterov={opt['nesterov']} maximize={opt['maximize']}"
              + "".join(f" {key}={opt[key]}" for key in SCHEMA.optimizer_keys.get(opt["name"], [])
                        if key in opt))
    # A distributed step (a mesh) says how it is spread; a single-rank one
    # has nothing to say.
    distributed = "mesh" in program

    def print_tables(prefix, inputs, state, outputs, num_slots):
        roles = Counter(e["role"] for e in inputs)
        out_roles = Counter(e["role"] for e in outputs)
        if checker.mpmd:
            print(f"{prefix}num_slots {num_slots}")
        print(f"{prefix}inputs: " + ", ".join(f"{roles[r]} {r}" for r in
                                              ("parameter", "buffer", "constant", "input")))
        if distributed:
            losses = [e.get("reduce") for e in outputs if e["role"] == "loss"]
            print(f"{prefix}distributed: {sum('split' in e for e in inputs)} split, "
                  f"{sum('shard' in e for e in inputs)} sharded parameters, "
                  f"{sum('shard' in e for e in state)} sharded state, "
                  f"loss reduce {losses[0] if losses else 'no loss'}")
        kinds = Counter(e["name"].rsplit(".", 1)[-1] for e in state)
        print(f"{prefix}state: {len(state)}" + "".join(f", {kinds[k]} {k}" for k in sorted(kinds)))
        print(f"{prefix}outputs: " + ", ".join(f"{out_roles[r]} {r}" for r in
                                               ("loss", "buffer_mutation", "grad")))

    if not checker.mpmd:
        print_tables("", *checker.tables[0][:3], checker.tables[0][4])
    for rank, (ranks, streams, ops, arg_kinds) in enumerate(checker.counts):
        if checker.mpmd:
            print(f"program {rank}: ranks {ranks}")
            inputs, state, outputs, _, num_slots = checker.tables[rank]
            print_tables(f"program {rank} ", inputs, state, outputs, num_slots)
        print(f"program {rank}: streams {streams}, {sum(ops.values())} instructions: "
              + ", ".join(f"{ops[o]} {o}" for o in ("aten", "free", "optimizer")))
        if distributed:
            print(f"program {rank} collectives: "
                  + ", ".join(f"{ops[o]} {o}" for o in (*COLLECTIVE_ORDER, "wait", "record_event",
                                                        "wait_event")))
        if checker.mpmd:
            print(f"program {rank} transfers: "
                  + ", ".join(f"{ops[o]} {o}" for o in POINT_TO_POINT))
        print(f"program {rank} args: " + ", ".join(f"{arg_kinds[k]} {k}" for k in sorted(arg_kinds)))
    print(f"weights: {tensors} tensors, {weight_bytes} bytes, match the inputs"
          + (", bytes equal the source" if source is not None else ""))
    print("ok")


if __name__ == "__main__":
    main()
