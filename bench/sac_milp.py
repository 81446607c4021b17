"""PyTorch's sac_milp on the statistics of Loom's compiled step, for bench/sac.py sim.

PyTorch plans selective activation checkpointing in two stages
(torch.distributed._tools): ``sac_milp`` picks, per module, the fraction of
its activation memory to discard under a per-rank budget in GiB, from
per-module statistics (``ilp_utils.ModStats``: parameters, gradients,
activation memory at the module's forward and backward, forward and backward
time, and the SAC trade-off curve that ``SACEstimator`` fits to the per-op
saved memory and recompute time); then ``get_optimal_checkpointing_policy_
per_module`` turns each module's ratio into a save/recompute vector over its
ops. PyTorch measures those statistics by running the model under
``MemTracker``, ``RuntimeEstimator`` and ``SACEstimator``. Here they come
from Loom's own analysis of the same step the other rows compile:

- per-op times: ``loom-simulate``'s timeline (the cost model on the device)
  of the step compiled with the FSDP pipeline and no recompute;
- per-op memory: the result types of that compiled step (bf16 activations),
  matched to the ops of the imported step by their locations (the FX node
  names, unique per op);
- the memory snapshots MemTracker takes (ACT, TEMP and GRAD bytes before and
  after each module's forward, at the peak of its backward): a liveness sweep
  over the imported step in program order, with views aliasing their base;
- the per-op SAC statistics, the greedy order and the piecewise-linear fit:
  PyTorch's own ``SACEstimator._get_sac_stats``, ``_get_greedy_order_meta``
  and ``_get_sac_tradeoff_pwlf_stats`` on metadata built from those numbers,
  and the graph by PyTorch's ``parse_module_info``.

The module tree is the model (``Transformer``, PyTorch's root name), its
``layers.N`` blocks and its other top-level modules (embedding, final norm,
output projection) as leaves; the blocks are the AC units (``ac_units``), as
Loom's ILP and ``checkpoint_wrapper`` on every block. The decision of each
checkpointed block is written onto the imported step as ``loom.ac_region``
(the block's index) and ``loom.ac_policy`` (``must_save`` for the ops the
knapsack saves, ``prefer_recompute`` for the rest, the ops SACEstimator
skips included) and compiled with ``loom-remat{mode=captured}``, the mode
that applies a ``torch.utils.checkpoint`` policy captured from PyTorch.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
import time
from collections import OrderedDict
from pathlib import Path

GIB = 2**30
DTYPE_BYTES = {"f64": 8, "f32": 4, "bf16": 2, "f16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1,
               "ui8": 1, "i1": 1, "complex<f32>": 8}
ROOT = "Transformer"

OP_LINE = re.compile(r'^    (?:(%[\w$.-]+)(?::(\d+))? = )?(?:loom\.aten "([^"]+)"|(\S+))')
LOC_DEF = re.compile(r'^(#loc\d+) = loc\("([^"]+)"')
TENSOR = re.compile(r"tensor<([^>]*)>")


class StatsError(Exception):
    """The step does not have the shape this bench expects."""


def tensor_bytes(spec: str) -> int:
    *dims, dtype = spec.split("x") if "x" in spec else [spec]
    if dtype not in DTYPE_BYTES:
        raise StatsError(f"unknown element type '{dtype}' in tensor<{spec}>")
    return math.prod(int(d) for d in dims) * DTYPE_BYTES[dtype]


class Op:
    """One op of the step function's body, as the printed IR says it."""

    __slots__ = ("line", "text", "results", "kernel", "operands", "module", "phase", "result_bytes",
                 "loc")

    def __init__(self, line: int, text: str, m: re.Match, locs: dict):
        self.line = line
        self.text = text
        name, count = m.group(1), m.group(2)
        if not name:
            self.results = []
        elif count:
            self.results = [f"{name}#{i}" for i in range(int(count))]
        else:
            self.results = [name]
        self.kernel = m.group(3) or m.group(4)
        args = text[m.end():]
        self.operands = []
        if args.startswith("("):
            self.operands = re.findall(r"%[\w$.#-]+", args[:args.index(")")])
        elif self.kernel == "return":
            self.operands = re.findall(r"%[\w$.#-]+", args.split(" : ")[0])
        mod = re.search(r'loom\.module = "([^"]*)"', text)
        self.module = mod.group(1) if mod else ""
        phase = re.search(r"loom\.phase = #loom\.phase<(\w+)>", text)
        self.phase = phase.group(1) if phase else None
        self.result_bytes = []
        if m.group(3) and self.results:
            tail = text[text.rindex(" -> ") + 4:]
            tail = tail[:tail.rindex(" loc(")] if " loc(" in tail else tail
            self.result_bytes = [tensor_bytes(t) for t in TENSOR.findall(tail)]
            if len(self.result_bytes) != len(self.results):
                raise StatsError(f"line {line}: {len(self.results)} results but "
                                 f"{len(self.result_bytes)} result types")
        loc = re.search(r"loc\((#loc\d+)\)\s*$", text)
        self.loc = locs.get(loc.group(1)) if loc else None


def parse_step(path: Path) -> tuple[list[Op], list[str], int]:
    """The ops of @step's body, the roles of its results (loom.role), and the
    bytes of its parameters."""
    lines = path.read_text().splitlines()
    locs = {}
    for text in lines:
        m = LOC_DEF.match(text)
        if m:
            locs[m.group(1)] = m.group(2)
    ops, roles, params, inside = [], [], 0, False
    for i, text in enumerate(lines, 1):
        if text.startswith("  func.func @step("):
            inside = True
            head, _, results = text.partition(") -> (")
            roles = re.findall(r"loom\.role = #loom\.role<(\w+)>", results)
            for spec, role in re.findall(r"tensor<([^>]*)> \{[^}]*?loom\.role = #loom\.role<(\w+)>",
                                         head):
                if role == "parameter":
                    params += tensor_bytes(spec)
            continue
        if not inside:
            continue
        if text.startswith("  }"):
            break
        m = OP_LINE.match(text)
        if m:
            ops.append(Op(i, text, m, locs))
    if not ops:
        raise StatsError(f"{path}: no func.func @step body")
    return ops, roles, params


# ------------------------------------------------------------------ statistics

def aten_overload(kernel: str):
    """PyTorch's OpOverload for an ATen schema name ('aten::mm.default')."""
    import torch

    name = kernel.removeprefix("aten::")
    packet, _, overload = name.partition(".")
    try:
        return getattr(getattr(torch.ops.aten, packet), overload or "default")
    except AttributeError as e:
        raise StatsError(f"'{kernel}' is not an ATen op torch knows") from e


class StepFacts:
    """Per op of the imported step: result bytes and time on the device in
    the compiled program, and the storages (a view shares its base's)."""

    def __init__(self, step: Path, compiled: Path, timeline: dict):
        import torch  # noqa: F401  (aten_overload)
        from torch.testing._internal.composite_compliance import is_view_fn

        self.ops, roles, self.param_bytes = parse_step(step)
        compiled_ops, _, _ = parse_step(compiled)
        by_loc = {}
        for op in compiled_ops:
            by_loc.setdefault(op.loc, []).append(op)
        # The simulator replays the body in order, one compute-stream event
        # per op that is not a collective start.
        events = [e for e in timeline["traceEvents"]
                  if e.get("ph") == "X" and e.get("tid") == 0 and e.get("cat") == "compute"]
        computed = [op for op in compiled_ops
                    if not op.kernel.endswith("_start") and op.kernel not in ("loom.wait", "return")]
        if len(events) != len(computed):
            raise StatsError(f"the timeline has {len(events)} compute events for "
                             f"{len(computed)} compute ops")
        seconds = {}
        for op, e in zip(computed, events):
            if op.kernel.startswith("aten::") and e["name"] != op.kernel:
                raise StatsError(f"line {op.line}: timeline event '{e['name']}' for "
                                 f"'{op.kernel}'")
            seconds[id(op)] = e["dur"] / 1e6
        self.func, self.ms, self.bytes, self.view = [], [], [], []
        self.unmatched = 0
        for op in self.ops:
            # The compiled op of the same FX node; ops the compiler added for
            # it (FSDP's casts of its inputs to the parameter dtype share its
            # location) add their time to it.
            same = by_loc.get(op.loc, []) if op.loc else []
            twins = [t for t in same if t.kernel == op.kernel]
            if len(twins) > 1:
                # FSDP's backward all-gather repeats the forward's views of a
                # parameter (its `t`) under the same names, in backward.
                twins = [t for t in twins if t.phase == op.phase]
            twin = twins[0] if len(twins) == 1 else None
            self.func.append(aten_overload(op.kernel) if op.kernel.startswith("aten::") else None)
            if twin:
                added = [t for t in same if t.kernel != op.kernel]
                seconds_ = seconds.get(id(twin), 0.0) + sum(seconds.get(id(t), 0.0) for t in added)
            else:
                seconds_ = 0.0
                self.unmatched += op.kernel.startswith("aten::")
            # Rounded to the nanosecond, so that identical blocks have
            # identical statistics despite the timeline's float sums.
            self.ms.append(round(seconds_ * 1e3, 6))
            self.bytes.append(twin.result_bytes if twin else op.result_bytes)
            kernel = op.kernel.removeprefix("aten::").split(".")[0]
            self.view.append(bool(self.func[-1] is not None and is_view_fn(self.func[-1]))
                             or kernel in ("_unsafe_view", "reshape", "split", "split_with_sizes",
                                           "unbind", "chunk"))
        self._storages(roles)

    def _storages(self, roles: list[str]) -> None:
        """Storages with their bytes, defining op, last use and kind (ACT from
        forward ops, TEMP from backward ops, GRAD for returned gradients)."""
        storage_of, self.storages = {}, []
        for pos, op in enumerate(self.ops):
            if self.view[pos] and op.operands:
                # A view of a step argument (a parameter's `t`) is not an
                # activation: MemTracker counts the parameter's storage.
                for r in op.results:
                    if op.operands[0] in storage_of:
                        storage_of[r] = storage_of[op.operands[0]]
            else:
                for r, b, declared in zip(op.results, self.bytes[pos], op.result_bytes):
                    storage_of[r] = len(self.storages)
                    kind = "ACT" if op.phase == "forward" else "TEMP"
                    self.storages.append({"bytes": b, "def": pos, "last": pos, "last_fw": pos,
                                          "kind": kind, "declared": declared})
            for v in op.operands:
                if v in storage_of:
                    s = self.storages[storage_of[v]]
                    s["last"] = max(s["last"], pos)
                    if op.phase == "forward":
                        s["last_fw"] = max(s["last_fw"], pos)
        end = len(self.ops)
        ret = self.ops[-1]
        if ret.kernel != "return":
            raise StatsError("the step body does not end with a return")
        for v, role in zip(ret.operands, roles):
            if v in storage_of:
                s = self.storages[storage_of[v]]
                s["last"] = end
                if role == "grad":
                    # In the parameters' dtype, as FSDP2 keeps them (f32
                    # with reduce-dtype f32), not the compute dtype that the
                    # compiled step's backward ops produce them in.
                    s["kind"] = "GRAD"
                    s["bytes"] = s["declared"]
        # Bytes the allocator gives each storage, as MemTracker counts them.
        for s in self.storages:
            s["bytes"] = math.ceil(s["bytes"] / 512) * 512
        # Live bytes per kind by position, from differences: a storage is live
        # while op def..last runs, and after op def..last-1 ran.
        n = end + 2
        self._during, self._after = {}, {}
        for kind in ("ACT", "TEMP", "GRAD"):
            during, after = [0] * n, [0] * n
            for s in self.storages:
                if s["kind"] == kind:
                    during[s["def"]] += s["bytes"]
                    during[s["last"] + 1] -= s["bytes"]
                    after[s["def"]] += s["bytes"]
                    after[s["last"]] -= s["bytes"]
            self._during[kind] = list(itertools.accumulate(during))
            self._after[kind] = list(itertools.accumulate(after))

    def live(self, kind: str, pos: int, during: bool = False) -> int:
        """Bytes of `kind` live after op `pos` ran (during: while it runs)."""
        return (self._during if during else self._after)[kind][pos]


def module_of(path: str) -> str:
    """The module of the tree an op belongs to: `layers.N` or the top-level one."""
    parts = path.split(".")
    if parts[0] == "layers" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def sac_stats(facts: StepFacts, positions: list[int]):
    """PyTorch's SACStats for the forward ops at `positions`, from
    SACEstimator's own reduction of per-op metadata."""
    from torch.distributed._tools.sac_estimator import (OPS_TO_ALWAYS_SKIP, SACEstimator,
                                                        _SACMetadata)

    data = []
    for pos in positions:
        func = facts.func[pos]
        view = facts.view[pos]
        data.append(_SACMetadata(func=func, time_taken=facts.ms[pos],
                                 memory_used=0 if view else
                                 sum(math.ceil(b / 512) * 512 for b in facts.bytes[pos]),
                                 curr_idx=pos, output_ids=(pos,), inplace_info=(),
                                 is_view_like=view, is_rand_op=is_random(facts.ops[pos], func)))
    estimator = SACEstimator()
    stats = estimator._get_sac_stats(data, force_store_random=False)
    kept = [pos for pos, d in zip(positions, data) if d.func not in OPS_TO_ALWAYS_SKIP]
    return estimator, stats, kept


def is_random(op: Op, func) -> bool:
    """SACEstimator's rule: the op draws random numbers (its tag), except
    flash attention, which does only with dropout. The step was captured on
    the CPU, whose flash kernel (`_for_cpu`) SACEstimator does not name; on
    the H100 it stands for the CUDA one, so the rule applies to it too."""
    import torch

    if func is None or torch.Tag.nondeterministic_seeded not in func.tags:
        return False
    if func.overloadpacket.__name__.startswith("_scaled_dot_product_flash_attention"):
        m = re.search(r"args = \[(?:#loom\.arg<\d+>, ){3}([-\d.e+]+)", op.text)
        return m is None or float(m.group(1)) != 0
    return True


def tradeoff(estimator, stats):
    import numpy as np

    np.random.seed(0)  # pwlf's fit is a randomized global search
    meta = estimator._get_greedy_order_meta(stats)
    return estimator._get_sac_tradeoff_pwlf_stats(stats, meta)


class ModuleGraph:
    """The module tree of the step with MemTracker's, RuntimeEstimator's and
    SACEstimator's statistics, as PyTorch's parse_module_info builds it."""

    def __init__(self, facts: StepFacts):
        from torch.distributed._tools.ilp_utils import parse_module_info

        t0 = time.perf_counter()
        self.facts = facts
        ops = facts.ops
        fw = {}
        bw = {}
        for pos, op in enumerate(ops):
            if op.phase not in ("forward", "backward"):
                continue
            target = fw if op.phase == "forward" else bw
            target.setdefault(ROOT, []).append(pos)
            if op.module:
                target.setdefault(module_of(op.module), []).append(pos)
        children = [m for m in fw if m != ROOT]
        children.sort(key=lambda m: fw[m][0])
        self.blocks = [m for m in children if re.fullmatch(r"layers\.\d+", m)]
        if not self.blocks:
            raise StatsError("the step has no layers.N blocks")
        pre_order = [ROOT, *(f"{ROOT}.{m}" for m in children)]
        post_order = [*(f"{ROOT}.{m}" for m in children), ROOT]
        self.block_stats, fits = {}, {}
        stats_list = []
        for m in [ROOT, *children]:
            fqn = ROOT if m == ROOT else f"{ROOT}.{m}"
            f, b = fw[m], bw.get(m, [])
            leaf = m != ROOT and m not in self.blocks
            node = self._memory(m, f, b)
            node.update(fqn=fqn, is_leaf=leaf,
                        fw_runtime_per_module=sum(facts.ms[p] for p in f),
                        bw_runtime_per_module=sum(facts.ms[p] for p in b))
            node["param_per_module"] = facts.param_bytes if m == ROOT else 0
            node["grad_per_module"] = node["param_per_module"]
            if leaf:
                node.update(sac_runtime=0, sac_memory=0, n_segments=0, slopes=[], intercepts=[],
                            breakpoints=[], tradeoff_curve=OrderedDict())
            else:
                estimator, stats, kept = sac_stats(facts, f)
                key = (tuple(stats.func_names), tuple(stats.runtimes), tuple(stats.memory))
                if key not in fits:
                    fits[key] = tradeoff(estimator, stats)
                fit = fits[key]
                node.update(sac_runtime=fit.sac_runtime, sac_memory=fit.sac_memory,
                            n_segments=fit.n_segments, slopes=fit.slopes,
                            intercepts=fit.intercepts, breakpoints=fit.fit_breaks,
                            tradeoff_curve=fit.tradeoff_curve)
                if m in self.blocks:
                    self.block_stats[fqn] = (stats, kept, f)
            stats_list.append(node)
        self.distinct_fits = len(fits)
        info = {"mod_order": {"fw_pre_order": pre_order, "bw_pre_order": list(reversed(post_order)),
                              "fw_post_order": post_order, "bw_post_order": list(reversed(pre_order))},
                "mod_stats": stats_list}
        self.graph = parse_module_info(info)
        self.seconds = time.perf_counter() - t0

    def _memory(self, m: str, f: list[int], b: list[int]) -> dict:
        """MemTracker's snapshots of module m, from the liveness sweep."""
        facts = self.facts
        start, end = f[0], f[-1]
        pre_act = facts.live("ACT", start - 1) if start else 0
        post_act = facts.live("ACT", end)
        inside = set(f)
        # The module's outputs: what later forward ops read of what it made.
        output = sum(s["bytes"] for s in facts.storages
                     if s["def"] in inside and s["kind"] == "ACT" and s["last_fw"] > end)
        inputs = sum(s["bytes"] for s in facts.storages
                     if s["def"] < start and s["last"] >= start and s["last"] <= end)
        node = {"act_total": post_act,
                "act_fw_per_module": max(0, post_act - pre_act - output),
                "input_per_module": inputs, "output_per_module": output}
        if b:
            b0, b1 = b[0], b[-1]
            pre_temp = facts.live("TEMP", b0 - 1)
            peak_pos = max(range(b0, b1 + 1), key=lambda p: facts.live("TEMP", p, during=True))
            node["act_grad_per_module"] = facts.live("TEMP", peak_pos, during=True) - pre_temp
            node["act_bw_per_module"] = facts.live("ACT", peak_pos, during=True)
            node["grad_total"] = facts.live("GRAD", b0 - 1)
        else:
            node.update(act_grad_per_module=0, act_bw_per_module=0,
                        grad_total=facts.live("GRAD", len(facts.ops) - 1))
        return node


# ------------------------------------------------------------------ decisions

def solve(graph: ModuleGraph, budget_bytes: int, world_size: int) -> dict:
    """sac_milp under `budget_bytes` per rank (in GiB, as PyTorch's test
    passes it) and the knapsack's save vector per checkpointed block."""
    import torch.distributed._tools.sac_ilp as sac_ilp

    t0 = time.perf_counter()
    ac, recompute_ms, peak = sac_ilp.sac_milp(copy.deepcopy(graph.graph), budget_bytes / GIB,
                                              world_size, ac_units=[f"{ROOT}.{b}"
                                                                    for b in graph.blocks])
    milp_s = time.perf_counter() - t0
    result = {"ac": ac, "model_recompute_ms": recompute_ms, "model_peak": peak,
              "feasible": peak != -1, "milp_s": milp_s, "policies": {}}
    if peak == -1:
        return result
    result["model_max_m"] = model_peak(graph.graph, ac, world_size)
    t0 = time.perf_counter()
    cache = {}
    knapsack_ms = 0.0
    for fqn, ratio in ac.items():
        stats, kept, positions = graph.block_stats[fqn]
        key = (tuple(stats.memory), tuple(stats.runtimes), ratio)
        if key not in cache:
            # The ratio is of the memory to discard; the knapsack's budget is
            # the fraction to keep.
            cache[key] = sac_ilp.get_optimal_checkpointing_policy_per_module(
                stats, memory_budget=min(1.0, max(0.0, 1 - ratio)))
        save = set(p for p, d in zip(kept, cache[key]) if d == 1)
        knapsack_ms += sum(t for t, d in zip(stats.runtimes, cache[key]) if d == 0)
        result["policies"][fqn] = {p: p in save for p in positions}
    result["knapsack_s"] = time.perf_counter() - t0
    result["knapsacks"] = len(cache)
    result["knapsack_recompute_ms"] = knapsack_ms
    return result


def model_peak(graph, ac: dict, world_size: int) -> int:
    """The largest m_i of sac_milp's model for the decision `ac`: its
    returned peak is max_m, which the MILP only bounds from below (any value
    up to the budget is optimal), so the model's own estimate is this."""
    discarded = {}
    for node in graph.nodes:
        ratio = ac.get(node["fqn"])
        if ratio is not None:
            discarded[node["fqn"]] = (node["sac_memory"] * ratio -
                                      (node["sac_memory"] - node["act_fw_per_module"]))
    params = graph.nodes[0]["param_per_module"]
    peak = 0
    for node in graph.nodes:
        before = graph.fw_post_order[:node["pos_fw_post_order"]]
        a = node["act_total"] + node["act_grad_per_module"] - sum(discarded.get(f, 0)
                                                                  for f in before)
        peak = max(peak, a + (params + node["grad_total"]) / world_size)
    return round(peak)


def tag(step: Path, out: Path, graph: ModuleGraph, decision: dict) -> None:
    """The step with each checkpointed block's ops tagged as a captured
    checkpoint region with the knapsack's policy."""
    lines = step.read_text().split("\n")
    ops = graph.facts.ops
    for region, (fqn, policy) in enumerate(sorted(decision["policies"].items(),
                                                  key=lambda kv: min(kv[1]))):
        for pos, saved in policy.items():
            i = ops[pos].line - 1
            what = "must_save" if saved else "prefer_recompute"
            new = lines[i].replace(
                "loom.phase = #loom.phase<forward>",
                f"loom.phase = #loom.phase<forward>, loom.ac_region = {region} : i64, "
                f"loom.ac_policy = #loom.ac_policy<{what}>", 1)
            if new == lines[i]:
                raise StatsError(f"{step}:{i + 1}: no forward phase to tag")
            lines[i] = new
    out.write_text("\n".join(lines))
