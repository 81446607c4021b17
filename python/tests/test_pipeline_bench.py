"""bench/pipeline.py's stage cut: PyTorch's side runs the model Loom compiles.

The bench compares Loom's pipelined step with torch.distributed.pipelining
only if both cut the model into the same stages. Checked here without
processes: the boundaries given to loom-compile and the PyTorch stage
modules come from the same even split; the stage modules' parameters are
the model's own, each in exactly one stage, the stage of its block; and
chaining the stage modules on a batch gives the whole model's loss, bit for
bit (so no stage drops the embedding, a block, the final norm or RoPE).

``bench/pipeline.py sim`` (bench/pipeline_sim.py): the bf16 retype of the
imported step, the pass pipeline it gives loom-opt per schedule, and one
end-to-end run on a shallow, short 70B-wide step whose report must hold
every schedule with consistent throughput and recompute time.
"""

from __future__ import annotations

import json
import sys

import pytest

from build_tools import LOOM_IMPORT, LOOM_OPT, REPO, needs_tools

torch = pytest.importorskip("torch")
sys.path.insert(0, str(REPO / "bench"))
import pipeline  # noqa: E402
import pipeline_sim  # noqa: E402

SMALL = {
    "llama": dict(dim=32, n_layers=4, n_heads=4, n_kv_heads=2, ffn_hidden=64, vocab=50, seq=8,
                  batch=2),
    "stack": dict(layers=8, dim=6, batch=4),
}


def test_even_split_and_boundaries():
    assert pipeline.stage_starts(4, 2) == [0, 2]
    assert pipeline.stage_starts(4, 4) == [0, 1, 2, 3]
    assert pipeline.stage_starts(5, 2) == [0, 2]  # the last stage, which holds the head, gets more
    assert pipeline.stage_ranges(8, 4) == [(0, 2), (2, 4), (4, 6), (6, 8)]
    assert pipeline.boundaries("layers", 4, 2) == "layers.2"
    assert pipeline.boundaries("stack", 8, 4) == "stack.2,stack.4,stack.6"
    with pytest.raises(ValueError, match="cannot cut 2 blocks into 4 stages"):
        pipeline.stage_starts(2, 4)


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("stages", [2, 4])
def test_stage_modules_are_the_model_cut_at_the_boundaries(name, stages, monkeypatch):
    model_file, _, container = pipeline.MODELS[name]
    monkeypatch.setitem(pipeline.MODELS, name, (model_file, SMALL[name], container))
    import runpy
    torch.manual_seed(0)
    model, batches = runpy.run_path(str(model_file))["make"](**SMALL[name])
    fqn = {id(p): n for n, p in model.named_parameters()}
    starts = pipeline.stage_starts(pipeline.units_of(name), stages)

    def expected_stage(param: str) -> int:
        if param.startswith(container + "."):
            block = int(param.split(".")[1])
            return max(s for s, start in enumerate(starts) if start <= block)
        # Embedding before the first block, final norm and head after the last.
        return 0 if param.startswith("tok_embeddings") else stages - 1

    modules = [pipeline.torch_stage_module(name, model, s, stages) for s in range(stages)]
    owner = {}
    for s, module in enumerate(modules):
        for p in module.parameters():
            assert id(p) in fqn, f"stage {s} holds a parameter that is not the model's"
            assert id(p) not in owner, f"{fqn[id(p)]} in stages {owner[id(p)]} and {s}"
            owner[id(p)] = s
    assert sorted(fqn[i] for i in owner) == sorted(fqn.values())
    assert {fqn[i]: s for i, s in owner.items()} == {n: expected_stage(n) for n in fqn.values()}

    x, y = batches[0]
    h = x
    with torch.no_grad():
        for module in modules:
            h = module(h)
        loss_fn = pipeline.llama_loss if name == "llama" else torch.nn.functional.cross_entropy
        assert torch.equal(loss_fn(h, y), model(x, y))


# ------------------------------------------------------- bench/pipeline.py sim


def test_sim_retypes_every_f32_to_bf16():
    step = ('%0 = loom.aten "aten::_log_softmax_backward_data.default"(%1, %2) '
            '{args = [#loom.arg<0>, #loom.arg<1>, 1, f32], loom.module = "buf32"} : '
            '(tensor<8x128xf32>, tensor<f32>) -> tensor<8x128xf32>')
    assert pipeline_sim.to_bf16(step) == step.replace("xf32>", "xbf16>").replace(
        "tensor<f32>", "tensor<bf16>").replace(", f32]", ", bf16]")
    assert "buf32" in pipeline_sim.to_bf16(step)


def test_sim_pass_pipeline():
    zbv = pipeline_sim.pass_pipeline("ZBVZeroBubble", "full", 8, 16, 8, "fsdp", "h100", 8, None)
    assert zbv.startswith("builtin.module(func.func(loom-remat{mode=full}),"
                          "loom-pipeline-split{stages=16 split-backward=true},"
                          "loom-pipeline-schedule{schedule=ZBVZeroBubble pp=8 microbatches=16 dp=8},"
                          "loom-fsdp{mesh=pp shard-axes=dp reshard-after-backward=false "
                          "param-dtype=bf16 reduce-dtype=f32},")
    assert zbv.endswith("loom-simulate{device=h100 nodes=8 json=true})")
    one = pipeline_sim.pass_pipeline("1F1B", "none", 4, 8, 1, "fsdp", "h100", 1, None)
    assert "loom-remat" not in one and "loom-fsdp" not in one
    assert "loom-pipeline-split{stages=4}" in one


@needs_tools(LOOM_OPT, LOOM_IMPORT)
def test_sim_end_to_end_on_a_shallow_short_70b(tmp_path):
    """Four 70B-wide blocks on 2 pipeline ranks x 2 FSDP ranks, 64 tokens:
    every schedule's row is there, the baseline's ratio is 1, tokens/s/GPU is
    M x seq / (pp x step), and full recompute shows up as recompute time."""
    out = tmp_path / "sim.json"
    schedules = ["1F1B", "Interleaved1F1B", "ZBVZeroBubble"]
    assert pipeline_sim.main(["--flavors", "70B", "--pp", "70B=2", "--n-layers", "4",
                              "--seq", "64", "--dp", "2", "--schedules", *schedules,
                              "--cache", str(tmp_path / "cache"), "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert [r["schedule"] for r in results] == schedules
    for r in results:
        assert r["microbatches"] == 4 and r["stages"] == 2 * pipeline_sim.SCHEDULES[r["schedule"]]
        assert r["tokens_per_s_per_gpu"] == pytest.approx(4 * 64 / (2 * r["step_s"]))
        assert 0 <= r["bubble_fraction"] < 1
        assert r["busiest_rank_recompute_s"] > 0
