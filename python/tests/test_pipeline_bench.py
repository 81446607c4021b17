"""bench/pipeline.py's stage cut: PyTorch's side runs the model Loom compiles.

The bench compares Loom's pipelined step with torch.distributed.pipelining
only if both cut the model into the same stages. Checked here without
processes: the boundaries given to loom-compile and the PyTorch stage
modules come from the same even split; the stage modules' parameters are
the model's own, each in exactly one stage, the stage of its block; and
chaining the stage modules on a batch gives the whole model's loss, bit for
bit (so no stage drops the embedding, a block, the final norm or RoPE).
"""

from __future__ import annotations

import sys

import pytest

from build_tools import REPO

torch = pytest.importorskip("torch")
sys.path.insert(0, str(REPO / "bench"))
import pipeline  # noqa: E402

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
