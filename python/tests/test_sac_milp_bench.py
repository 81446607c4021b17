"""bench/sac_milp.py: PyTorch's sac_milp on statistics of Loom's compiled step.

A small Llama (bench/models/llama3.py, 3 blocks) captured with ``--meta``,
sharded with FSDP on 2 ranks and simulated on an H100, as ``bench/sac.py
sim`` does with the 8B one. The checks:

- the module graph is the model's tree, and the statistics that do not
  depend on Loom's analysis (parameter bytes, the gradients accumulated
  before each block's backward) match the PyTorch model's own parameters;
- a decision of sac_milp at a binding budget, written onto the step and
  compiled with ``loom-remat{mode=captured}``, recomputes exactly inside the
  checkpointed blocks and never an op the knapsack saved;
- a budget no decision meets gives PyTorch's ``({}, 0, -1)`` and no policy;
- a timeline that does not match the compiled step is refused.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from build_tools import LOOM_IMPORT, LOOM_OPT, REPO, needs_tools

sys.path.insert(0, str(REPO / "bench"))
import sac_milp  # noqa: E402

pytestmark = [
    needs_tools(LOOM_IMPORT, LOOM_OPT),
    pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning"),
]

SHAPE = dict(dim=64, n_layers=3, n_heads=4, n_kv_heads=2, ffn_hidden=192, vocab=256, seq=64,
             batch=4)
RANKS = 2
PIPELINE = (f"loom-fsdp{{mesh-shape={RANKS} param-dtype=bf16 reduce-dtype=f32}},"
            "loom-prefetch{backward-prefetch=pre},"
            "func.func(loom-attach-optimizer{optimizer=adamw lr=3e-4})")


def run(*cmd) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def step(tmp_path_factory):
    work = tmp_path_factory.mktemp("sac-milp")
    cmd = [sys.executable, "-m", "loom.capture", REPO / "bench" / "models" / "llama3.py",
           "--out", work, "--meta", "--split", RANKS]
    for k, v in SHAPE.items():
        cmd += ["--make-arg", f"{k}={v}"]
    run(*cmd)
    run(LOOM_IMPORT, work / "step.pt2", "--no-weights", "-o", work / "step.mlir")
    run(LOOM_OPT, work / "step.mlir", "-o", work / "compiled.mlir", "--mlir-print-debuginfo",
        f"--pass-pipeline=builtin.module({PIPELINE},"
        f"loom-simulate{{device=h100 timeline={work / 'none.trace.json'}}})")
    return work


@pytest.fixture(scope="module")
def graph(step):
    facts = sac_milp.StepFacts(step / "step.mlir", step / "compiled.mlir",
                               json.loads((step / "none.trace.json").read_text()))
    assert facts.unmatched == 0
    return sac_milp.ModuleGraph(facts)


def torch_model():
    sys.path.insert(0, str(REPO / "bench" / "models"))
    import llama3

    args = {k: v for k, v in SHAPE.items() if k != "batch"}
    return llama3.Llama3(**args)


def test_module_tree_and_parameter_statistics(graph):
    g = graph.graph
    names = [n["fqn"] for n in g.nodes]
    assert names == ["Transformer", "Transformer.tok_embeddings",
                     *(f"Transformer.layers.{i}" for i in range(3)), "Transformer.norm",
                     "Transformer.output"]
    assert graph.blocks == ["layers.0", "layers.1", "layers.2"]
    assert [n["is_leaf"] for n in g.nodes] == [False, True, False, False, False, True, True]
    assert list(g.ad_matrix[0]) == [1] * 7
    model = torch_model()
    sizes = {name: p.numel() * 4 for name, p in model.named_parameters()}
    assert g.nodes[0]["param_per_module"] == sum(sizes.values())
    # MemTracker's grad_total: the gradients that exist when the module's
    # backward starts, i.e. of every module whose forward ran after it.
    for i in range(3):
        later = sum(b for name, b in sizes.items()
                    if not name.startswith(("tok_embeddings", *(f"layers.{j}." for j in
                                                                range(i + 1)))))
        node = g.name2node[f"Transformer.layers.{i}"]
        assert abs(node["grad_total"] - later) <= 512 * len(sizes), (i, node["grad_total"], later)
    for block in ("Transformer.layers.0", "Transformer.layers.2"):
        node = g.name2node[block]
        assert 0 < node["act_fw_per_module"] <= node["sac_memory"]
        assert node["n_segments"] >= 1 and node["sac_runtime"] > 0


def recomputed_locs(ir: str) -> dict[str, set[str]]:
    """Per loom.recompute region's module: the locations of the ops in its body."""
    locs = dict(re.findall(r'^(#loc\d+) = loc\("([^"]+)"', ir, re.M))
    regions, current = {}, None
    for line in ir.splitlines():
        m = re.search(r'loom\.recompute "([^"]+)"', line)
        if m:
            current = regions.setdefault(m.group(1), set())
            continue
        if current is not None:
            if re.match(r"^\s+}", line):
                current = None
                continue
            loc = re.search(r"loc\((#loc\d+)\)\s*$", line)
            if "loom.aten" in line and loc:
                current.add(locs.get(loc.group(1)))
    return regions


def test_decision_compiles_as_made(graph, step, tmp_path):
    no_ac = sac_milp.model_peak(graph.graph, {}, RANKS)
    decision = sac_milp.solve(graph, int(no_ac * 0.9), RANKS)
    assert decision["feasible"] and decision["policies"], decision
    tagged = tmp_path / "tagged.mlir"
    sac_milp.tag(step / "step.mlir", tagged, graph, decision)
    ir = run(LOOM_OPT, tagged, "--mlir-print-debuginfo",
             "--pass-pipeline=builtin.module(func.func(loom-remat{mode=captured}))")
    regions = recomputed_locs(ir)
    ops = graph.facts.ops
    checkpointed = {fqn.removeprefix("Transformer.") for fqn in decision["ac"]}
    assert set(regions) == checkpointed
    for fqn, policy in decision["policies"].items():
        block = fqn.removeprefix("Transformer.")
        saved = {ops[p].loc for p, keep in policy.items() if keep}
        recomputable = {ops[p].loc for p, keep in policy.items() if not keep}
        assert regions[block], block
        assert not regions[block] & saved, (block, regions[block] & saved)
        assert regions[block] <= recomputable
    # The model's peak for the decision is within the budget it was given,
    # up to sac_milp rounding the ratios it returns to 4 decimals.
    assert decision["model_max_m"] <= int(no_ac * 0.9) * (1 + 1e-3)
    assert decision["model_max_m"] < no_ac


def test_infeasible_budget_is_pytorchs_empty_answer(graph):
    decision = sac_milp.solve(graph, 1, RANKS)
    assert not decision["feasible"]
    assert decision["ac"] == {} and decision["model_recompute_ms"] == 0
    assert decision["policies"] == {}


def test_a_timeline_of_another_program_is_refused(step):
    timeline = json.loads((step / "none.trace.json").read_text())
    events = timeline["traceEvents"]
    first = next(i for i, e in enumerate(events) if e.get("cat") == "compute")
    del events[first]
    with pytest.raises(sac_milp.StatsError, match="compute events"):
        sac_milp.StepFacts(step / "step.mlir", step / "compiled.mlir", timeline)


def test_cpu_part_trains_sac_milps_decisions(tmp_path):
    """`bench/sac.py cpu`: sac_milp's decisions on the CPU cost model's
    statistics are compiled, trained beside the other variants and measured;
    the ILP is also run at the peak each reaches. Every run trains as without
    recompute and measures the peak Loom predicts; the ILP at a decision's
    peak stays within it."""
    out = tmp_path / "cpu.json"
    cmd = [sys.executable, REPO / "bench" / "sac.py", "cpu", "--points", "3", "--rounds", "1",
           "--steps", "2", "--cache", tmp_path / "cache", "--json", out]
    for k, v in SHAPE.items():
        cmd += ["--make-arg", f"{k}={v}"]
    run(*cmd)
    result = json.loads(out.read_text())
    rows = result["rows"]
    milp = [r for r in rows if r["policy"] == "sac_milp"]
    checkpointing = [b for b, s in result["sac_milp"]["solves"].items()
                     if s["feasible"] and s["ac"]]
    assert checkpointing and len(milp) == len(checkpointing)
    ilp = {r["budget"]: r for r in rows if r["policy"] == "ilp"}
    for r in rows:
        assert r["losses_equal_none"], r["policy"]
        assert r["peak"] == r["predicted"], r
    for r in milp:
        same = ilp[r["predicted"]]
        assert same["peak"] <= r["peak"]
        assert r["ilp_at_peak_over_sac_milp"] == same["recompute_ms"] / r["recompute_ms"]
