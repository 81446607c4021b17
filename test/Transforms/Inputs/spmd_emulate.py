"""Checks a distributed step numerically against the step it came from.

Runs the original single-device step (as loom-opt prints it) once per
data-parallel rank on that rank's batch, and the distributed step (the
output of loom-fsdp) on all ranks of its mesh in lockstep, emulating the
collectives in one process with ATen ops. Each rank's loss must equal the
original step's loss on its batch, and each rank's gradient results must be
its shard (as `loom.shard` says) of the gradient averaged over the
data-parallel ranks, which is what FSDP2 and DDP produce. Recompute regions
run their body where they stand, as the lowering inlines them.

usage: spmd_emulate.py ORIGINAL.mlir DISTRIBUTED.mlir [--weights W.safetensors]
       [--int-high N] [--atol A] [--divide-factor F]
Both files must be in loom-opt's default (custom) form.
"""

import argparse
import math
import re
import struct
import sys

import torch

DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16,
          "f16": torch.float16, "i64": torch.int64, "i32": torch.int32,
          "i1": torch.bool, "i8": torch.int8, "ui8": torch.uint8}


class Parser:
    """The attribute syntax loom.aten uses: lists, dicts, operand refs,
    numbers, booleans, unit, strings and element types."""

    def __init__(self, text):
        self.s = text
        self.i = 0

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \n\t":
            self.i += 1

    def peek(self, tok):
        self.ws()
        return self.s.startswith(tok, self.i)

    def eat(self, tok):
        if not self.peek(tok):
            raise ValueError(f"expected {tok!r} at {self.s[self.i:self.i+40]!r}")
        self.i += len(tok)

    def value(self):
        self.ws()
        if self.peek("["):
            self.eat("[")
            out = []
            while not self.peek("]"):
                out.append(self.value())
                if self.peek(","):
                    self.eat(",")
            self.eat("]")
            return out
        if self.peek("{"):
            self.eat("{")
            out = {}
            while not self.peek("}"):
                m = re.compile(r"[\w.]+").match(self.s, self.i)
                key = m.group(0)
                self.i = m.end()
                if self.peek("="):
                    self.eat("=")
                    out[key] = self.value()
                else:
                    out[key] = True
                if self.peek(","):
                    self.eat(",")
            self.eat("}")
            return out
        if self.peek('"'):
            m = re.compile(r'"((?:[^"\\]|\\.)*)"').match(self.s, self.i)
            self.i = m.end()
            return m.group(1)
        m = re.compile(r"#loom\.arg<(\d+)>").match(self.s, self.i)
        if m:
            self.i = m.end()
            return ("arg", int(m.group(1)))
        m = re.compile(r"#[\w.]+<[^>]*>").match(self.s, self.i)
        if m:
            self.i = m.end()
            return m.group(0)
        m = re.compile(r"0x[0-9A-Fa-f]+").match(self.s, self.i)
        if m:
            self.i = m.end()
            self.skip_type()
            return struct.unpack(">d", int(m.group(0), 16).to_bytes(8, "big"))[0]
        m = re.compile(r"-?\d+\.\d*(e[+-]?\d+)?|-?\d+e[+-]?\d+").match(self.s, self.i)
        if m:
            self.i = m.end()
            self.skip_type()
            return float(m.group(0))
        m = re.compile(r"-?\d+").match(self.s, self.i)
        if m:
            self.i = m.end()
            self.skip_type()
            return int(m.group(0))
        m = re.compile(r"\w+").match(self.s, self.i)
        self.i = m.end()
        word = m.group(0)
        if word in ("true", "false"):
            return word == "true"
        if word == "unit":
            return None
        if word in DTYPES:
            return DTYPES[word]
        raise ValueError(f"unknown attribute value {word!r}")

    def skip_type(self):
        m = re.compile(r"\s*:\s*[if]\d+").match(self.s, self.i)
        if m:
            self.i = m.end()


def tensor_type(text):
    m = re.fullmatch(r"tensor<((?:\d+x)*)(\w+)>", text.strip())
    shape = [int(d) for d in m.group(1).split("x") if d]
    return shape, DTYPES[m.group(2)]


def split_top(text, sep=","):
    """Splits at `sep` outside brackets, braces, angles and quotes."""
    out, depth, cur, quote = [], 0, "", False
    for ch in text:
        if ch == '"':
            quote = not quote
        if not quote:
            if ch in "[{(<":
                depth += 1
            elif ch in "]})>":
                depth -= 1
            elif ch == sep and depth == 0:
                out.append(cur)
                cur = ""
                continue
        cur += ch
    if cur.strip():
        out.append(cur)
    return out


class Step:
    def __init__(self, path):
        text = open(path).read()
        self.meshes = {}
        for m in re.finditer(r"loom\.mesh @(\w+) shape \[([\d, ]*)\] axes \[([^\]]*)\]", text):
            self.meshes[m.group(1)] = (
                [int(x) for x in m.group(2).split(",")],
                [a.strip().strip('"') for a in m.group(3).split(",")])
        m = re.search(r"func\.func @\w+\((.*?)\) -> \((.*?)\) attributes", text, re.S)
        self.args = []
        for a in split_top(m.group(1)):
            name, rest = a.split(":", 1)
            t, _, attrs = rest.strip().partition(" ")
            self.args.append((name.strip(), tensor_type(t), Parser(attrs).value()))
        self.results = []
        for r in split_top(m.group(2)):
            t, _, attrs = r.strip().partition(" ")
            self.results.append((tensor_type(t), Parser(attrs).value()))
        body = text[text.index("{", m.end()) + 1:]
        # Recompute regions keep their block header and yield.
        self.ops = [l.strip() for l in body.splitlines()
                    if l.strip().startswith(("%", "return", "^bb", "loom.yield"))]


def to_arg(v, operands):
    if isinstance(v, tuple) and v[0] == "arg":
        return operands[v[1]]
    if isinstance(v, list):
        return [to_arg(x, operands) for x in v]
    if isinstance(v, str):
        if v.startswith("torch."):
            return getattr(torch, v[len("torch."):])
        if v in ("cpu", "cuda"):
            return torch.device(v)
    return v


def groups(shape, axes, names):
    """For each rank: (its group's ranks in order, its index in the group)."""
    coords = [list(c) for c in __import__("itertools").product(*[range(s) for s in shape])]
    idx = [names.index(a) for a in axes]
    out = []
    for c in coords:
        members = [r for r, d in enumerate(coords)
                   if all(d[k] == c[k] for k in range(len(shape)) if k not in idx)]
        out.append((members, members.index(coords.index(c))))
    return out


def names_before_colon(text):
    return [n.strip() for n in text.split(":")[0].split(",") if n.strip()]


def run(step, inputs_per_rank, nranks):
    envs = [dict(zip([a[0] for a in step.args], inputs)) for inputs in inputs_per_rank]
    op_re = re.compile(r"(%[\w#]+)(?::(\d+))? = (.*)")
    lines = iter(step.ops)
    for line in lines:
        if line.startswith("return"):
            names = names_before_colon(line[len("return"):])
            return [[env[n] for n in names] for env in envs]
        m = op_re.match(line)
        res, count, rest = m.group(1), m.group(2), m.group(3)
        if rest.startswith("loom.recompute"):
            # The body runs where the region stands, in its own name scope
            # (the region is isolated), on the region's inputs.
            inputs = names_before_colon(
                re.match(r'loom\.recompute "[^"]*" \(([^)]*)\)', rest).group(1))
            header = next(lines)
            params = [p.split(":")[0].strip()
                      for p in split_top(header[header.index("(") + 1:header.rindex(")")])]
            body = []
            for inner in lines:
                if inner.startswith("loom.yield"):
                    break
                body.append(inner)
            yielded = names_before_colon(inner[len("loom.yield"):])
            scopes = [{p: env[i] for p, i in zip(params, inputs)} for env in envs]
            run_ops(step, body, scopes, nranks)
            for env, scope in zip(envs, scopes):
                values = [scope[n] for n in yielded]
                if count is None:
                    env[res], = values
                else:
                    for i, v in enumerate(values):
                        env[f"{res}#{i}"] = v
            continue
        run_ops(step, [line], envs, nranks)
    raise ValueError("no return")


def run_ops(step, lines, envs, nranks):
    op_re = re.compile(r"(%[\w#]+)(?::(\d+))? = (.*)")
    for line in lines:
        m = op_re.match(line)
        res, count, rest = m.group(1), m.group(2), m.group(3)
        if rest.startswith("loom.aten"):
            km = re.match(r'loom\.aten "([\w:.]+)"\(([^)]*)\) (\{.*\}) : ', rest)
            kernel, opnds, attrs = km.group(1), km.group(2), Parser(km.group(3)).value()
            ns, name = kernel.split("::")
            op_name, _, overload = name.partition(".")
            fn = getattr(getattr(getattr(torch.ops, ns), op_name), overload or "default")
            names = [o.strip() for o in opnds.split(",") if o.strip()]
            for env in envs:
                operands = [env[n] for n in names]
                args = [to_arg(v, operands) for v in attrs.get("args", [])]
                kwargs = {k: to_arg(v, operands) for k, v in attrs.get("kwargs", {}).items()}
                out = fn(*args, **kwargs)
                if count is None:
                    env[res] = out
                else:
                    flat = []
                    rets = attrs.get("returns")
                    if rets is not None and len(rets) == 1:
                        outs = [out]
                    else:
                        outs = list(out) if isinstance(out, (tuple, list)) else [out]
                    if rets is None:
                        flat = outs
                    else:
                        flat = [None] * int(count)
                        for r, o in zip(rets, outs):
                            if r is None:
                                continue
                            for i, t in zip(r if isinstance(r, list) else [r],
                                            o if isinstance(r, list) else [o]):
                                flat[i] = t
                    for i, t in enumerate(flat):
                        env[f"{res}#{i}"] = t
            continue
        if rest.startswith("loom.wait"):
            src = rest.split()[1]
            for env in envs:
                env[res] = env[src]
            continue
        cm = re.match(r"loom\.(\w+)_start (%[\w#]+) on @(\w+) axes \[([^\]]*)\](?: dim (\d+))?(?: reduce <(\w+)>)?", rest)
        kind, src, mesh, axes = cm.group(1), cm.group(2), cm.group(3), cm.group(4)
        dim = int(cm.group(5) or 0)
        reduce = cm.group(6)
        shape, names = step.meshes[mesh]
        axes = [a.strip().strip('"') for a in axes.split(",")]
        g = groups(shape, axes, names)
        vals = [env[src] for env in envs]
        outs = []
        for r in range(nranks):
            members, index = g[r]
            if kind == "all_gather":
                outs.append(torch.cat([vals[m] for m in members], dim))
                continue
            if kind == "all_slice":
                outs.append(vals[r].chunk(len(members), dim)[index].clone())
                continue
            total = sum(vals[m] for m in members)
            if reduce == "avg":
                total = total / len(members)
            if kind == "reduce_scatter":
                total = total.chunk(len(members), dim)[index]
            outs.append(total)
        for env, o in zip(envs, outs):
            env[res] = o


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("original")
    ap.add_argument("distributed")
    ap.add_argument("--weights")
    ap.add_argument("--int-high", type=int, default=2)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--divide-factor", type=float, default=0,
                    help="gradient-divide-factor given to loom-fsdp (0: the "
                         "data-parallel size)")
    opts = ap.parse_args()
    torch.manual_seed(0)
    orig, dist = Step(opts.original), Step(opts.distributed)
    (mesh_shape, mesh_axes), = dist.meshes.values()
    nranks = math.prod(mesh_shape)
    saved = {}
    if opts.weights:
        from safetensors.torch import load_file
        saved = load_file(opts.weights)

    def make(shape, dtype):
        if dtype.is_floating_point:
            return torch.randn(shape, dtype=dtype) * 0.5
        if dtype == torch.bool:
            return torch.rand(shape) < 0.5
        return torch.randint(0, opts.int_high, shape, dtype=dtype)

    state = {}
    for name, (shape, dtype), attrs in orig.args:
        if attrs["loom.role"] != "#loom.role<input>":
            key = attrs["loom.name"]
            state[key] = saved[key] if key in saved else make(shape, dtype)
    # Every rank gets its own batch; data-parallel ranks are all ranks.
    batches = [{attrs["loom.name"]: make(shape, dtype)
                for name, (shape, dtype), attrs in orig.args
                if attrs["loom.role"] == "#loom.role<input>"} for _ in range(nranks)]

    def value(attrs, batch):
        key = attrs["loom.name"]
        return batch[key] if attrs["loom.role"] == "#loom.role<input>" else state[key]

    ref = run(orig, [[value(a, b) for _, _, a in orig.args] for b in batches], nranks)

    def shard_of(full, attrs, rank):
        spec = attrs.get("loom.shard")
        if spec is None:
            return full
        axes = re.search(r"axes = \[([^\]]*)\]", spec).group(1)
        axes = [a.strip().strip('"') for a in axes.split(",")]
        members, index = groups(mesh_shape, axes, mesh_axes)[rank]
        n = len(members)
        # Shard(d): chunk `index` of dim d, padded on dim 0 only.
        dim = int(re.search(r"dim = (\d+)", spec).group(1))
        rows = full.shape[dim]
        per = -(-rows // n)
        if dim == 0:
            pad = [0, 0] * (full.dim() - 1) + [0, per * n - rows]
            full = torch.nn.functional.pad(full, pad)
        return full.narrow(dim, index * per, per).contiguous()

    inputs = [[shard_of(value(a, batches[r]), a, r) for _, _, a in dist.args]
              for r in range(nranks)]
    out = run(dist, inputs, nranks)
    arg_attrs = {a["loom.name"]: a for _, _, a in dist.args if "loom.name" in a}
    failures = 0
    for i, ((shape, dtype), attrs) in enumerate(dist.results):
        role = attrs["loom.role"]
        for r in range(nranks):
            got = out[r][i]
            if role == "#loom.role<grad>":
                target = attrs["loom.target"]
                mean = sum(ref[q][i] for q in range(nranks)) / (
                    opts.divide_factor or nranks)
                want = shard_of(mean, arg_attrs[target], r)
            else:
                want = ref[r][i]
            if got.shape != want.shape or not torch.allclose(
                    got.float(), want.float(), atol=opts.atol, rtol=1e-4):
                failures += 1
                err = (got.float() - want.float()).abs().max().item() \
                    if got.shape == want.shape else "shape"
                print(f"rank {r} result #{i} ({role} {attrs.get('loom.target', '')}): "
                      f"mismatch, max error {err}")
    if failures:
        sys.exit(1)
    print(f"ok: {len(dist.results)} results on {nranks} ranks match")


if __name__ == "__main__":
    main()
