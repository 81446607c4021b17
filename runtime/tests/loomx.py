"""The .loomx schema for Python, and hand-written .loomx artifacts.

`SCHEMA` is runtime/include/loomrt/ArtifactSchema.def parsed (standard
library only, so test/Target/Inputs/check_artifact.py uses it without
torch): the magic, the current and oldest versions, the keys of every object
and instruction and the spellings of every enumeration, as the runtime's
reader and the compiler's writer see them.

The rest writes artifacts from Python for the runtime's tests, which
hand-build small steps with it independently of the compiler's writer, so
the runtime is checked against the specification text rather than against
the compiler (torch and safetensors are imported when used).
"""

from __future__ import annotations

import ast
import json
import math
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "include" / "loomrt" / "ArtifactSchema.def"


@dataclass
class Schema:
    """ArtifactSchema.def: see its header for what each macro declares."""

    magic: bytes = b""
    versions: dict = field(default_factory=dict)
    header_bytes: int = 0
    # object -> [(key, since)]
    fields: dict = field(default_factory=dict)
    # [(key, since, ops or None for every op)]
    inst_fields: list = field(default_factory=list)
    # enum -> {spelling: since}
    enums: dict = field(default_factory=dict)
    # spelling -> bytes
    dtypes: dict = field(default_factory=dict)
    # optimizer name -> [(state, key that must be set or "")]
    optimizer_states: dict = field(default_factory=dict)
    # name -> the optional keys (version 4) that optimizer takes.
    optimizer_keys: dict = field(default_factory=dict)
    # The optimizers with a fused=True kernel (`impl` may be "fused").
    fused_optimizers: list = field(default_factory=list)

    @property
    def current(self) -> int:
        return self.versions["Current"]

    @property
    def oldest(self) -> int:
        return self.versions["Oldest"]

    def keys(self, obj: str, version: int) -> set[str]:
        """The keys object `obj` ("Program", "Input", ...) may carry."""
        return {k for k, since in self.fields[obj] if since <= version}

    def key_since(self, obj: str, key: str) -> int | None:
        return next((since for k, since in self.fields[obj] if k == key), None)

    def inst_keys(self, op: str, version: int) -> set[str]:
        """The keys an instruction with this `op` may carry."""
        return {k for k, since, ops in self.inst_fields if since <= version and (ops is None or op in ops)}

    def state_names(self, optimizer: Mapping[str, Any]) -> list[str]:
        """The per-parameter state tensors an artifact's optimizer object
        keeps, in order (a key it lacks counts as unset)."""
        return [state for state, when in self.optimizer_states[optimizer["name"]]
                if not when or optimizer.get(when)]

    def values(self, enum: str, version: int) -> set[str]:
        """The spellings of enumeration `enum` ("Op", "ReduceOp", ...)."""
        return {v for v, since in self.enums[enum].items() if since <= version}


_CALL = re.compile(r"^(LOOMX_\w+)\((.*)\)\s*$")


def _args(text: str) -> list:
    # Arguments are identifiers, integers or string literals without commas.
    out = []
    for a in (x.strip() for x in text.split(",")):
        if a.startswith('"'):
            out.append(ast.literal_eval(a))
        elif re.fullmatch(r"-?\d+", a):
            out.append(int(a))
        else:
            out.append(a)
    return out


def load_schema(path: Path = SCHEMA_PATH) -> Schema:
    s = Schema()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("//", 1)[0].strip()
        m = _CALL.match(line)
        if not m or line.startswith("#"):
            continue
        macro, a = m.group(1), _args(m.group(2))
        if macro == "LOOMX_MAGIC":
            s.magic = a[0].encode("latin-1")
        elif macro == "LOOMX_VERSION":
            s.versions[a[0]] = a[1]
        elif macro == "LOOMX_HEADER_BYTES":
            s.header_bytes = a[0]
        elif macro == "LOOMX_FIELD":
            s.fields.setdefault(a[0], []).append((a[2], a[3]))
        elif macro == "LOOMX_INST_FIELD":
            s.inst_fields.append((a[1], a[2], None if a[3] == "*" else set(a[3].split())))
        elif macro == "LOOMX_ENUM":
            s.enums.setdefault(a[0], {})[a[2]] = a[3]
        elif macro == "LOOMX_DTYPE":
            s.dtypes[a[1]] = a[2]
        elif macro == "LOOMX_OPTIMIZER_STATE":
            s.optimizer_states.setdefault(a[0], []).append((a[1], a[2]))
        elif macro == "LOOMX_OPTIMIZER_KEY":
            s.optimizer_keys.setdefault(a[0], []).append(a[1])
        elif macro == "LOOMX_OPTIMIZER_FUSED":
            s.fused_optimizers.append(a[0])
        else:
            raise ValueError(f"{path}:{n}: unknown schema macro {macro}")
    if len(s.magic) != 8 or {"Current", "Oldest"} - set(s.versions):
        raise ValueError(f"{path}: no 8-byte LOOMX_MAGIC or no Current/Oldest LOOMX_VERSION")
    return s


SCHEMA = load_schema()
MAGIC = SCHEMA.magic
VERSION = SCHEMA.current
OLDEST_VERSION = SCHEMA.oldest


def _torch_dtypes() -> dict:
    import torch

    return {
        torch.float32: "f32",
        torch.float64: "f64",
        torch.float16: "f16",
        torch.bfloat16: "bf16",
        torch.int64: "i64",
        torch.int32: "i32",
        torch.int16: "i16",
        torch.int8: "i8",
        torch.uint8: "u8",
        torch.bool: "bool",
        torch.complex64: "c64",
        torch.complex128: "c128",
    }


def dtype_name(dtype) -> str:
    name = _torch_dtypes()[dtype]
    assert name in SCHEMA.dtypes, name
    return name


def float_arg(x: float) -> Any:
    """A JSON float; non-finite values are the strings the spec names."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def program_json(program: Mapping[str, Any]) -> bytes:
    # allow_nan=False: a stray NaN must fail here, not produce invalid JSON.
    return json.dumps(program, allow_nan=False, indent=1).encode("utf-8")


def weights_bytes(weights: Mapping[str, Any]) -> bytes:
    from safetensors.torch import save as safetensors_save

    return safetensors_save({k: v.detach().contiguous().clone() for k, v in weights.items()})


def artifact_bytes(
    program: Mapping[str, Any] | bytes,
    weights: Mapping[str, Any] | bytes,
    *,
    version: int = VERSION,
    flags: int = 0,
    magic: bytes = MAGIC,
) -> bytes:
    prog = program if isinstance(program, bytes) else program_json(program)
    w = weights if isinstance(weights, bytes) else weights_bytes(weights)
    return magic + struct.pack("<IIQQ", version, flags, len(prog), len(w)) + prog + w


def write_artifact(path, program, weights, **kwargs) -> None:
    with open(path, "wb") as f:
        f.write(artifact_bytes(program, weights, **kwargs))


TABLE_KEYS = ("num_slots", "inputs", "state", "outputs")


class InvalidArtifact(ValueError):
    """An artifact the runtime would refuse; the message starts with the
    JSON path, as the runtime's do."""


def read_artifact(path) -> tuple[dict, bytes]:
    """The program JSON and the weights section's bytes of a .loomx file,
    after the container checks (magic, version range, lengths)."""
    data = Path(path).read_bytes()
    if data[:8] != MAGIC:
        raise InvalidArtifact(f"{path}: not a Loom artifact (no magic)")
    if len(data) < 32:
        raise InvalidArtifact(f"{path}: truncated header")
    version, flags, plen, wlen = struct.unpack("<IIQQ", data[8:32])
    if not OLDEST_VERSION <= version <= VERSION or flags:
        raise InvalidArtifact(f"{path}: version {version} flags {flags}; this reads {OLDEST_VERSION} to {VERSION}")
    if 32 + plen + wlen != len(data):
        raise InvalidArtifact(f"{path}: the header declares {plen} + {wlen} bytes, the file has {len(data) - 32}")
    program = json.loads(data[32:32 + plen])
    if program.get("version") != version:
        raise InvalidArtifact(f"{path}: version: the program says {program.get('version')}, the header {version}")
    return program, data[32 + plen:]


def is_mpmd(program: Mapping[str, Any]) -> bool:
    """Whether the programs hold their own tables (version 3 MPMD)."""
    return not any(k in program for k in TABLE_KEYS)


def program_tables(program: Mapping[str, Any], index: int) -> dict:
    """num_slots, inputs, state, outputs of programs[index]: its own (MPMD)
    or the top level's (SPMD), as the runtime binds them."""
    src = program["programs"][index] if is_mpmd(program) else program
    return {k: src[k] for k in TABLE_KEYS}


def mesh_group(mesh: Mapping[str, Any], axes: list, rank: int) -> list[int]:
    """The ranks sharing `rank`'s coordinates on the mesh axes not in `axes`,
    row-major (docs/distributed.md): a collective's or transfer's group."""
    shape, names = mesh["shape"], mesh["axes"]
    coord, r = [0] * len(shape), rank
    for i in reversed(range(len(shape))):
        coord[i], r = r % shape[i], r // shape[i]
    free = sorted(names.index(a) for a in axes)
    count = math.prod(shape[i] for i in free)
    out = []
    for k in range(count):
        c, rest = list(coord), k
        for i in reversed(free):
            c[i], rest = rest % shape[i], rest // shape[i]
        rid = 0
        for i in range(len(shape)):
            rid = rid * shape[i] + c[i]
        out.append(rid)
    return out


def validate_programs(program: Mapping[str, Any]) -> None:
    """The version 3 rules of docs/artifact.md the runtime checks across
    programs: keys by version, tables either at the top level or in every
    program, every mesh rank in exactly one program, one loss among the
    programs, shared tensors bound alike, send/recv peers inside their group
    and the wait of a send without a result. Raises InvalidArtifact."""
    version = program["version"]

    def need(cond, path, message):
        if not cond:
            raise InvalidArtifact(f"{path}: {message}")

    for key in program:
        need(key in SCHEMA.keys("Program", version), key, f"unknown field for version {version}")
    programs = program["programs"]
    for i, p in enumerate(programs):
        for key in p:
            need(key in SCHEMA.keys("RankProgram", version), f"programs[{i}].{key}",
                 f"'{key}' needs format version {SCHEMA.key_since('RankProgram', key)}"
                 if SCHEMA.key_since("RankProgram", key) else "unknown field")
    top = [k for k in TABLE_KEYS if k in program]
    if top:
        for i, p in enumerate(programs):
            for k in TABLE_KEYS:
                need(k not in p, f"programs[{i}].{k}", f"the top level has `{top[0]}` (SPMD or MPMD, not both)")
        need(len(top) == len(TABLE_KEYS), "programs", f"the top level has {top} but not all of {list(TABLE_KEYS)}")
    else:
        for i, p in enumerate(programs):
            for k in TABLE_KEYS:
                need(k in p, f"programs[{i}].{k}", "missing (MPMD: every program has its own tables)")
    world, mesh = program["world_size"], program.get("mesh")
    runs = {}
    for i, p in enumerate(programs):
        for r in p.get("ranks", [p.get("rank")]):
            need(r not in runs, f"programs[{i}].ranks", f"rank {r} also runs programs[{runs.get(r)}]")
            runs[r] = i
    need(sorted(runs) == list(range(world)), "programs", f"ranks {sorted(runs)} for world_size {world}")
    losses = [i for i in range(len(programs))
              for o in program_tables(program, i)["outputs"] if o["role"] == "loss"]
    need(len(losses) == (len(programs) if top else 1) and len(set(losses)) == len(losses), "programs",
         f"loss outputs in programs {losses} (exactly one program has it)")
    bound = {}
    for i in range(len(programs)):
        for k, e in enumerate(program_tables(program, i)["inputs"]):
            if e["role"] == "input":
                continue
            sig = (e["role"], e["dtype"], e.get("shard", {}).get("global_shape", e["shape"]))
            where = bound.setdefault(e["name"], (i, k, sig))
            need(where[2] == sig, f"programs[{i}].inputs[{k}]",
                 f"'{e['name']}' bound as {sig}, programs[{where[0]}] binds it as {where[2]}")
    for i, p in enumerate(programs):
        sends = set()
        for j, inst in enumerate(p["instructions"]):
            path = f"programs[{i}].instructions[{j}]"
            op = inst["op"]
            need(op in SCHEMA.values("Op", version), f"{path}.op", f"unknown instruction '{op}' in version {version}")
            for key in inst:
                need(key in SCHEMA.inst_keys(op, version), f"{path}.{key}", "unknown field")
            if op in ("send_start", "recv_start"):
                for r in p.get("ranks", [p.get("rank")]):
                    g = mesh_group(mesh, inst["axes"], r)
                    need(0 <= inst["peer"] < len(g) and g[inst["peer"]] != r, f"{path}.peer",
                         f"peer {inst['peer']} is not another member of rank {r}'s group {g}")
                need(0 <= inst["tag"] < 2**31, f"{path}.tag", f"tag {inst['tag']} out of range")
                if op == "send_start":
                    sends.add(inst["future"])
            elif op == "wait":
                send = inst["future"] in sends
                sends.discard(inst["future"])
                need(send != ("result" in inst), f"{path}.result",
                     "the wait of a send has no result" if send else "missing")


def tensor_input(name: str, role: str, slot: int, t, batch_index: int | None = None) -> dict:
    entry = {"name": name, "role": role, "slot": slot, "dtype": dtype_name(t.dtype), "shape": list(t.shape)}
    if batch_index is not None:
        entry["batch_index"] = batch_index
    return entry


def optimizer_json(opt) -> dict:
    """The artifact's optimizer object for a torch.optim optimizer: the keys
    every optimizer object carries, then the optional keys its algorithm
    takes (LOOMX_OPTIMIZER_KEY)."""
    import torch

    g = opt.param_groups[0]
    name = {torch.optim.SGD: "sgd", torch.optim.Adam: "adam", torch.optim.AdamW: "adamw",
            torch.optim.RMSprop: "rmsprop", torch.optim.Adagrad: "adagrad", torch.optim.Adadelta: "adadelta",
            torch.optim.NAdam: "nadam", torch.optim.Adamax: "adamax", torch.optim.RAdam: "radam",
            torch.optim.Rprop: "rprop", torch.optim.ASGD: "asgd"}[type(opt)]
    return {
        "name": name,
        "lr": float(g["lr"]),
        "betas": [float(b) for b in g.get("betas", (0.9, 0.999))],
        "eps": float(g.get("eps", 1e-8)),
        "weight_decay": float(g.get("weight_decay", 0.0)),
        "momentum": float(g.get("momentum", 0.0)),
        "dampening": float(g.get("dampening", 0.0)),
        "nesterov": bool(g.get("nesterov", False)),
        "maximize": bool(g["maximize"]),
        **{key: g[key] if isinstance(g[key], bool)
           else [float(v) for v in g[key]] if isinstance(g[key], (tuple, list)) else float(g[key])
           for key in SCHEMA.optimizer_keys.get(name, [])},
    }


def num_state_slots(optimizer: Mapping[str, Any]) -> int:
    return len(SCHEMA.state_names(optimizer))


def state_init(optimizer: Mapping[str, Any]) -> str:
    """The `init` of the optimizer's state entries."""
    return "initial_accumulator_value" if optimizer["name"] == "adagrad" else "zeros"



def save_batches(path, batches: list[tuple]) -> None:
    """batches.safetensors in the capture's layout."""
    from safetensors.torch import save as safetensors_save

    tensors = {f"step{i}.arg{j}": t.contiguous().clone() for i, b in enumerate(batches) for j, t in enumerate(b)}
    data = safetensors_save(tensors, metadata={"num_steps": str(len(batches)), "num_args": str(len(batches[0]))})
    with open(path, "wb") as f:
        f.write(data)


def save_reference(directory, losses: list[float], final: Mapping[str, Any], tied: Mapping[str, str] | None = None,
                   extra: Mapping[str, object] | None = None) -> None:
    """reference.json (plus `extra` keys) and reference.safetensors in the
    capture's layout."""
    import os

    from safetensors.torch import save as safetensors_save

    with open(os.path.join(directory, "reference.json"), "w") as f:
        json.dump({"losses": losses, "tied_parameters": dict(tied or {}), **dict(extra or {})}, f, indent=2)
    data = safetensors_save({k: v.detach().contiguous().clone() for k, v in final.items()})
    with open(os.path.join(directory, "reference.safetensors"), "wb") as f:
        f.write(data)


def train_reference(directory, model, optimizer, batches, steps: int, extra: Mapping[str, object] | None = None) -> None:
    """Trains `model` eagerly for `steps` steps (batch s mod len) and saves
    the losses and final state as the reference loom-run --check reads."""
    losses = []
    for s in range(steps):
        optimizer.zero_grad()
        loss = model(*batches[s % len(batches)])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # From host memory when the reference trained on a GPU (on the CPU,
    # .cpu() is the tensor itself, so tied tensors stay tied).
    final = {k: v.cpu() for k, v in model.state_dict().items()}
    save_reference(directory, losses, final, extra=extra)
