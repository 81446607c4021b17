"""loom-sac against PyTorch's own SAC solvers, on the same statistics.

Two formulations (lib/Analysis/SacSolvers.cpp):

- the per-op knapsack: the seven budgets of PyTorch's
  ``test_get_optimial_checkpointing_policy_per_module`` must give exactly its
  seven vectors, through loom-sac and through PyTorch's
  ``get_optimal_checkpointing_policy_per_module``;
- the module-level MILP: ``loom-sac --mode=milp`` and PyTorch's ``sac_milp``
  run on one module graph for budgets that do not bind, that bind, and that
  no choice meets, over several world sizes; they must agree on feasibility,
  on what is checkpointed and by how much (discard ratios within 0.05), and on
  the recomputation time (within 1%).

The statistics are PyTorch's own: the test model of ``test_sac_ilp.py``
(PyTorch's test ``Transformer``, imported from ``torch.testing._internal``,
with 4 layers, dim 768, 12 heads, vocabulary 8192, sequence
1024, batch 8, Adam) goes through ``MemTracker``, ``RuntimeEstimator`` and
``SACEstimator`` under ``FakeTensorMode`` on the CPU, then ``aggregate_stats``
and ``parse_module_info``, as ``TestSACILP`` does on a GPU. Two things differ
from a GPU run: the roofline asks CUDA for the device's peak FLOP/s and
bandwidth, so the test answers with an H100's (data/devices/h100.json); and
the CPU's attention has no flash kernel, so its probabilities are saved and
the no-AC peak is about 7.6 GB instead of the 2.58 GB PyTorch's test measures
on a GPU. Budgets are therefore set relative to this graph's own peak.

Both solvers stop at a relative gap of 1e-4 here, not PyTorch's 0.05: at
0.05 CBC may stop at any solution within 5% of the bound, and PuLP's CBC
binary and Debian's library (different versions, different search paths)
then legitimately stop at different ones.

The four blocks have the same statistics (to the pwlf fit's noise), so
"checkpoint layers.0" and "checkpoint layers.2" cost the same and either
solver may pick either: on PyTorch's graph the AC modules are compared by
their place in a block (``layers.*.attention``), with the ratios of each kind
matched in order. A second graph breaks the tie (block i's recomputation
costs 1 + 0.1 i times as much, as if later blocks were slower), and there
the sets must be the same modules. A perturbed graph fed only to loom-sac
must make the comparison fail.
"""

from __future__ import annotations

import copy
import json
import math
import re
import subprocess
from pathlib import Path

import pytest

from build_tools import BUILD, REPO, needs_tools

LOOM_SAC = BUILD / "bin" / "loom-sac"
pytestmark = [
    needs_tools(LOOM_SAC),
    # PuLP 3.3 warns about its 4.0 API on every call torch's sac_ilp makes.
    pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning"),
]

# PuLP and pwlf come with requirements.txt: without them the comparison is
# not made, which must fail rather than skip.
import pulp  # noqa: E402,F401
import pwlf  # noqa: E402,F401
import torch  # noqa: E402
from torch.testing._internal.distributed._tensor.common_dtensor import (  # noqa: E402
    ModelArgs,
    Transformer,
)

GIB = 2**30
GAP = 1e-4


def loom_sac(path: Path, *args: str) -> dict:
    proc = subprocess.run([str(LOOM_SAC), *args, str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# --- the per-op knapsack ---------------------------------------------------

# PyTorch's test_get_optimial_checkpointing_policy_per_module.
KNAPSACK_STATS = {
    "func_names": ["aten.copy_", "aten.add", "aten.div", "aten.mm", "aten.native_dropout",
                   "aten.linear", "aten.t", "aten.relu_"],
    "runtimes": [5, 5, 8, 15, 15, 9, 1, 5],
    "memory": [0, 100, 100, 120, 0, 100, 0, 0],
    "view_like_ops": [6],
    "rand_ops": [4],
    "saved_autograd_ops": [],
    "inplace_ops": [[0, 0], [7, 5]],
    "force_store_random": False,
}
KNAPSACK_CASES = [
    (0, [1, 0, 0, 0, 1, 0, 0, 0]),
    (100 / 420, [1, 0, 0, 0, 1, 1, 0, 1]),
    (120 / 420, [1, 0, 0, 1, 1, 0, 0, 0]),
    (200 / 420, [1, 0, 1, 0, 1, 1, 0, 1]),
    (220 / 420, [1, 0, 0, 1, 1, 1, 0, 1]),
    (320 / 420, [1, 0, 1, 1, 1, 1, 0, 1]),
    (420 / 420, [1, 1, 1, 1, 1, 1, 0, 1]),
]


@pytest.mark.parametrize("budget,expected", KNAPSACK_CASES)
def test_knapsack_gives_pytorchs_vectors(tmp_path, budget, expected):
    from torch.distributed._tools.sac_estimator import SACStats
    from torch.distributed._tools.sac_ilp import get_optimal_checkpointing_policy_per_module

    path = tmp_path / "stats.json"
    path.write_text(json.dumps(KNAPSACK_STATS))
    assert loom_sac(path, "--mode=knapsack", f"--budget={budget!r}")["decisions"] == expected
    stats = dict(KNAPSACK_STATS, inplace_ops=[tuple(p) for p in KNAPSACK_STATS["inplace_ops"]])
    assert get_optimal_checkpointing_policy_per_module(SACStats(**stats), budget) == expected


def test_knapsack_rejects_a_budget_outside_0_1(tmp_path):
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(KNAPSACK_STATS))
    proc = subprocess.run([str(LOOM_SAC), "--mode=knapsack", "--budget=1.5", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "between 0 and 1" in proc.stderr


def test_malformed_statistics_are_located(tmp_path):
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(dict(KNAPSACK_STATS, memory=[0, 100, "x"])))
    proc = subprocess.run([str(LOOM_SAC), "--mode=knapsack", "--budget=0.5", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "sac_stats.memory[2]" in proc.stderr, proc.stderr
    path.write_text('{"nodes": [\n  {"fqn": "M",}\n]}')
    proc = subprocess.run([str(LOOM_SAC), "--mode=milp", "--budget=1", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "[2:" in proc.stderr, proc.stderr


# --- the module-level MILP -------------------------------------------------

def pytorch_module_graph():
    """TestSACILP's statistics pipeline, on the CPU under FakeTensorMode."""
    import numpy as np
    import torch.distributed._tools.runtime_estimator as runtime_estimator_module
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.ilp_utils import aggregate_stats, parse_module_info
    from torch.distributed._tools.mem_tracker import MemTracker, _ModState
    from torch.distributed._tools.runtime_estimator import RuntimeEstimator
    from torch.distributed._tools.sac_estimator import SACEstimator

    h100 = json.loads((REPO / "data" / "devices" / "h100.json").read_text())
    tflops = {torch.float32: h100["peak_flops"]["fp32"], torch.bfloat16: h100["peak_flops"]["bf16"],
              torch.float16: h100["peak_flops"]["fp16"]}
    with pytest.MonkeyPatch.context() as mp:
        # The roofline's only CUDA queries: is there a device, its peak
        # (inductor's get_device_tflops, in TFLOP/s) and its bandwidth (GB/s).
        mp.setattr(torch.cuda, "is_available", lambda: True)
        mp.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
        mp.setattr(runtime_estimator_module, "get_device_tflops", lambda dtype: tflops[dtype] / 1e12)
        mp.setattr(runtime_estimator_module, "get_gpu_dram_gbps",
                   lambda: h100["memory_bandwidth"] / 1e9)
        # pwlf fits the trade-off curves with a randomized global search.
        np.random.seed(0)
        torch.manual_seed(0)
        with FakeTensorMode():
            model = Transformer(ModelArgs(n_layers=4, n_heads=12, vocab_size=8192,
                                          max_seq_len=1024, dim=768, dropout_p=0.1))
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=True)
            inp = torch.randint(0, 8192, (8, 1024))
            mem_tracker = MemTracker()
            mem_tracker.track_external(model, optimizer)
            with mem_tracker as mt:
                for step in range(2):
                    model(inp).sum().backward()
                    if step == 1:
                        last_snapshot = mt.get_tracker_snapshot("current")
                    optimizer.step()
                    optimizer.zero_grad()
                    if step == 0:
                        mt.reset_mod_stats()
            # TestSACILP's fix-up for modules whose post-backward hook never
            # fires (their inputs do not require grad).
            for stats in mem_tracker.memory_tracking.values():
                if _ModState.POST_BW not in stats.snapshots:
                    stats.snapshots.setdefault(_ModState.POST_BW, []).append(last_snapshot)
            runtime_estimator = RuntimeEstimator()
            model(inp).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            with runtime_estimator(estimate_mode_type="operator-level-cost-model"):
                model(inp).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
            sac_estimator = SACEstimator()
            with sac_estimator(estimate_mode_type="operator-level-cost-model"):
                loss = model(inp).sum()
            loss.backward()
            info = aggregate_stats(model, mem_tracker, runtime_estimator, sac_estimator,
                                   torch.device("cpu"))
    return parse_module_info(info)


# The Node fields loom-sac reads or checks; tradeoff_curve (float keys) is
# the raw curve behind the fit and neither solver uses it.
NODE_FIELDS = [
    "fqn", "param_per_module", "grad_per_module", "grad_total", "act_fw_per_module",
    "act_bw_per_module", "act_grad_per_module", "act_total", "input_per_module",
    "output_per_module", "fw_runtime_per_module", "bw_runtime_per_module", "is_leaf",
    "sac_runtime", "sac_memory", "n_segments", "slopes", "intercepts", "breakpoints", "index",
    "pos_fw_post_order",
]


def graph_json(graph) -> dict:
    def plain(value):
        if hasattr(value, "tolist"):
            return value.tolist()
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    return {
        "nodes": [{k: plain(node[k]) for k in NODE_FIELDS} for node in graph.nodes],
        "fw_post_order": list(graph.fw_post_order),
        "ad_matrix": plain(graph.ad_matrix),
    }


@pytest.fixture(scope="module")
def pytorch_graph():
    return pytorch_module_graph()


@pytest.fixture(scope="module")
def tie_broken_graph(pytorch_graph):
    graph = copy.deepcopy(pytorch_graph)
    for node in graph.nodes:
        block = re.match(r"Transformer\.layers\.(\d+)", node["fqn"])
        if block:
            node["sac_runtime"] *= 1 + 0.1 * int(block.group(1))
    return graph


def no_ac_peak_gib(graph, world_size: int) -> float:
    """The largest m_i with nothing discarded: the budget where AC starts."""
    params = graph.nodes[0]["param_per_module"]
    return max(n["act_total"] + n["act_grad_per_module"] + (params + n["grad_total"]) / world_size
               for n in graph.nodes) / GIB


def run_pytorch(graph, budget: float, world_size: int):
    import torch.distributed._tools.sac_ilp as sac_ilp

    solver = sac_ilp.PULP_CBC_CMD
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sac_ilp, "PULP_CBC_CMD", lambda **kw: solver(**dict(kw, gapRel=GAP)))
        # sac_milp overwrites sac_memory in place when it distrusts it.
        return sac_ilp.sac_milp(copy.deepcopy(graph), budget, world_size)


def run_loom(path: Path, budget: float, world_size: int):
    out = loom_sac(path, "--mode=milp", f"--budget={budget!r}", f"--world-size={world_size}",
                   f"--gap={GAP!r}")
    return out["ac_decisions"], out["recomputation_time"], out["peak_memory"]


def role(fqn: str) -> str:
    return re.sub(r"layers\.\d+", "layers.*", fqn)


def disagreement(torch_result, loom_result, budget: float, by_role: bool) -> str | None:
    """Why the two results differ, or None when they agree."""
    (t_ac, t_time, t_peak), (l_ac, l_time, l_peak) = torch_result, loom_result
    if (t_peak == -1) != (l_peak == -1):
        return f"feasibility: torch peak {t_peak}, loom peak {l_peak}"
    if t_peak == -1:
        return None if not t_ac and not l_ac and t_time == l_time == 0 else "infeasible with output"
    for name, peak in (("torch", t_peak), ("loom", l_peak)):
        if peak > budget * GIB * (1 + 1e-6):
            return f"{name} peak {peak} B is over the budget {budget} GiB"
    if not math.isclose(t_time, l_time, rel_tol=0.01, abs_tol=0.02):
        return f"recomputation time: torch {t_time} ms, loom {l_time} ms"
    key = role if by_role else (lambda fqn: fqn)

    def grouped(ac):
        groups: dict[str, list[float]] = {}
        for fqn, ratio in ac.items():
            groups.setdefault(key(fqn), []).append(ratio)
        return {k: sorted(v) for k, v in groups.items()}

    t_groups, l_groups = grouped(t_ac), grouped(l_ac)
    if {k: len(v) for k, v in t_groups.items()} != {k: len(v) for k, v in l_groups.items()}:
        return f"AC modules: torch {sorted(t_ac)}, loom {sorted(l_ac)}"
    for k, ratios in t_groups.items():
        if any(abs(a - b) > 0.05 for a, b in zip(ratios, l_groups[k])):
            return f"discard ratios of {k}: torch {ratios}, loom {l_groups[k]}"
    return None


# Fractions of the no-AC peak: not binding, binding at several depths, and
# below what discarding everything reaches.
BUDGET_FRACTIONS = [1.05, 0.85, 0.65, 0.45, 0.35, 0.25]
WORLD_SIZES = [1, 4, 8]


def compare(graph, loom_graph, tmp_path: Path, by_role: bool) -> list[str]:
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(graph_json(loom_graph)))
    problems, verdicts = [], set()
    for world_size in WORLD_SIZES:
        peak = no_ac_peak_gib(graph, world_size)
        for fraction in BUDGET_FRACTIONS:
            budget = round(peak * fraction, 3)
            torch_result = run_pytorch(graph, budget, world_size)
            why = disagreement(torch_result, run_loom(path, budget, world_size), budget, by_role)
            verdicts.add("infeasible" if torch_result[2] == -1 else
                         "binding" if torch_result[0] else "not binding")
            if why:
                problems.append(f"world {world_size}, budget {budget} GiB: {why}")
    assert verdicts == {"infeasible", "binding", "not binding"}, verdicts
    return problems


def test_graph_is_pytorchs_test_model(pytorch_graph):
    names = [n["fqn"] for n in pytorch_graph.nodes]
    assert names[0] == "Transformer"
    assert [n for n in names if re.fullmatch(r"Transformer\.layers\.\d+", n)] == \
        [f"Transformer.layers.{i}" for i in range(4)]
    assert not pytorch_graph.name2node["Transformer.layers.0"]["is_leaf"]
    # Parameters in fp32, the output projection tied to the token embedding.
    d, vocab, seq = 768, 8192, 1024
    block = 4 * d * d + 2 * 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d)
    params = 4 * (vocab * d + seq * d + 4 * block + 2 * d)
    assert pytorch_graph.nodes[0]["param_per_module"] == params


def test_milp_agrees_with_pytorch(pytorch_graph, tmp_path):
    problems = compare(pytorch_graph, pytorch_graph, tmp_path, by_role=True)
    assert not problems, "\n".join(problems)


def test_milp_agrees_module_for_module_without_ties(tie_broken_graph, tmp_path):
    problems = compare(tie_broken_graph, tie_broken_graph, tmp_path, by_role=False)
    assert not problems, "\n".join(problems)


def test_perturbed_statistics_fail_the_comparison(tie_broken_graph, tmp_path):
    """The comparison can fail: loom-sac given blocks that save a third less."""
    perturbed = copy.deepcopy(tie_broken_graph)
    for node in perturbed.nodes:
        if re.fullmatch(r"Transformer\.layers\.\d+(\.\w+)?", node["fqn"]):
            node["act_fw_per_module"] = int(node["act_fw_per_module"] * 2 / 3)
    problems = compare(tie_broken_graph, perturbed, tmp_path, by_role=False)
    print("\n".join(problems))
    assert len(problems) >= 3, problems
