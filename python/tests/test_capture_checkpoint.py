"""Capture keeps ``torch.utils.checkpoint`` regions (PyTorch's test Transformer).

``Transformer(ModelArgs(checkpoint_activations=True))`` from PyTorch's
distributed test utilities wraps every layer in non-reentrant
``torch.utils.checkpoint``. Its capture must tag every forward op of layer i
with layer i's region and the region's policy, leave the joint graph itself
as it is without checkpointing (no recompute in it, same ops, same loss and
gradients), and keep the eager reference losses those of eager PyTorch.
"""

from __future__ import annotations

import collections
import json
import runpy
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
import torch.utils.checkpoint as torch_checkpoint
from torch.export.graph_signature import OutputKind

# Imported here, not first inside a capture: its import seeds and draws from
# the global RNG, which would give the first capture other initial weights.
import torch.testing._internal.distributed._tensor.common_dtensor  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from loom import capture, eager_backward  # noqa: E402

STEPS = 3

# make(ac=...): "none" (no checkpoint), "full" (the Transformer's own
# checkpoint per layer), "sac" (the same calls with a selective policy that
# saves mm and recomputes the rest) or "alternate" (a stateful policy that
# saves every other mm of a layer, as torchtitan's op-level SAC does). The
# Transformer calls torch.utils.checkpoint.checkpoint(layer, h,
# use_reentrant=False) itself; the selective variants rebind that function
# for the duration of the forward to pass a context_fn.
MODEL = textwrap.dedent(
    '''
    import collections
    import functools

    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.utils.checkpoint as cp
    from torch.testing._internal.distributed._tensor.common_dtensor import ModelArgs, Transformer

    ASKED = []  # (op, answer) of every forward policy call, for the test

    def save_mm(ctx, op, *args, **kwargs):
        if op == torch.ops.aten.mm.default:
            return cp.CheckpointPolicy.MUST_SAVE
        return cp.CheckpointPolicy.PREFER_RECOMPUTE

    def alternate_mm():
        count = collections.Counter()
        def policy(ctx, op, *args, **kwargs):
            answer = cp.CheckpointPolicy.PREFER_RECOMPUTE
            if op == torch.ops.aten.mm.default:
                count[ctx.is_recompute] += 1
                if count[ctx.is_recompute] % 2:
                    answer = cp.CheckpointPolicy.MUST_SAVE
            if not ctx.is_recompute:
                ASKED.append((op, answer))
            return answer
        return policy

    CONTEXTS = {
        "sac": lambda: cp.create_selective_checkpoint_contexts(save_mm),
        "alternate": lambda: cp.create_selective_checkpoint_contexts(alternate_mm()),
    }

    class Step(nn.Module):
        def __init__(self, ac):
            super().__init__()
            self.ac = ac
            self.model = Transformer(ModelArgs(
                n_layers=2, dim=16, n_heads=4, vocab_size=32, max_seq_len=8,
                checkpoint_activations=ac != "none", dropout_p=0.0))

        def forward(self, tokens, targets):
            original = cp.checkpoint
            if self.ac in CONTEXTS:
                cp.checkpoint = functools.partial(original, context_fn=CONTEXTS[self.ac])
            try:
                logits = self.model(tokens)
            finally:
                cp.checkpoint = original
            return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    def make(ac="full"):
        g = torch.Generator().manual_seed(1)
        batches = [(torch.randint(0, 32, (2, 8), generator=g),
                    torch.randint(0, 32, (2, 8), generator=g)) for _ in range(2)]
        return Step(ac), batches
    '''
)


def load_program(path: Path) -> torch.export.ExportedProgram:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        return torch.export.load(path)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "transformer_ac.py"
    path.write_text(MODEL)
    return path


@pytest.fixture(scope="module")
def captures(model_file, tmp_path_factory) -> dict[str, Path]:
    """One capture per checkpointing mode, through the command line entry."""
    root = tmp_path_factory.mktemp("captures")
    outs = {}
    for ac in ("none", "full", "sac"):
        out = root / ac
        argv = [str(model_file), "--out", str(out), "--steps", str(STEPS), "--make-arg", f"ac={ac}"]
        assert capture.main(argv) == 0
        outs[ac] = out
    return outs


def forward_nodes(ep: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    return [n for n in ep.graph.nodes
            if n.op == "call_function" and n.meta["custom"][capture.PHASE_KEY] == "forward"]


def forward_nodes_of(ep: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    """Forward nodes of a joint graph not yet labelled by annotate()."""
    return [n for n in ep.graph.nodes
            if n.op == "call_function" and n.meta.get("partitioner_tag") != "is_backward"]


def layer_of(node: torch.fx.Node) -> int | None:
    parts = node.meta["custom"][capture.MODULE_KEY].split(".")
    return int(parts[2]) if parts[:2] == ["model", "layers"] else None


def region_of(node: torch.fx.Node) -> int | None:
    return (node.meta.get("custom") or {}).get(capture.AC_REGION_KEY)


def policy_of(node: torch.fx.Node) -> str | None:
    return (node.meta.get("custom") or {}).get(capture.AC_POLICY_KEY)


def test_every_layer_op_is_in_its_layers_region(captures):
    """Read back from step.pt2: the keys survive torch.export.save/load."""
    ep = load_program(captures["full"] / "step.pt2")
    by_layer = collections.defaultdict(set)
    for node in forward_nodes(ep):
        layer = layer_of(node)
        if layer is None:
            assert region_of(node) is None and policy_of(node) is None, node.name
            continue
        by_layer[layer].add(region_of(node))
        assert policy_of(node) == "prefer_recompute", node.name
    # One region per layer, numbered in call order, and no op left out.
    assert dict(by_layer) == {0: {0}, 1: {1}}
    for node in ep.graph.nodes:
        if node.op == "call_function" and node.meta["custom"][capture.PHASE_KEY] == "backward":
            assert region_of(node) is None and policy_of(node) is None, node.name


def test_joint_graph_is_the_one_without_checkpoint(captures):
    """Checkpoint changes what eager keeps, not what the step computes: the
    captured joint graph has the same ops as without checkpoint (nothing is
    recomputed in it; loom-remat does that) and the same signature."""
    full = load_program(captures["full"] / "step.pt2")
    plain = load_program(captures["none"] / "step.pt2")

    def ops(ep):
        return [(n.target, n.meta["custom"][capture.PHASE_KEY], n.meta["custom"][capture.MODULE_KEY])
                for n in ep.graph.nodes if n.op == "call_function"]

    assert ops(full) == ops(plain)
    assert full.graph_signature.input_specs == plain.graph_signature.input_specs
    assert full.graph_signature.output_specs == plain.graph_signature.output_specs


def test_selective_policy_is_asked_per_op(captures):
    ep = load_program(captures["sac"] / "step.pt2")
    policies = collections.defaultdict(collections.Counter)
    for node in forward_nodes(ep):
        layer = layer_of(node)
        if layer is None:
            assert policy_of(node) is None, node.name
            continue
        assert region_of(node) == layer, node.name
        expected = "must_save" if node.target == torch.ops.aten.mm.default else "prefer_recompute"
        assert policy_of(node) == expected, node.name
        policies[layer][policy_of(node)] += 1
    # wq, wk, wv, wo are bias-free Linears (mm); the feed-forward's have a
    # bias (addmm) and are recomputed.
    assert {layer: counts["must_save"] for layer, counts in policies.items()} == {0: 4, 1: 4}


def test_stateful_policy_sees_the_order_eager_does(model_file):
    """A policy that counts its calls answers capture as it answers eager
    autograd: the mm decisions come in the same order with the same answers."""
    namespace = runpy.run_path(str(model_file))
    model, batches = namespace["make"](ac="alternate")
    model(*batches[0]).backward()
    eager = [str(answer.name).lower() for op, answer in namespace["ASKED"]
             if op == torch.ops.aten.mm.default]

    ep, _ = capture.export_joint(model, batches[0])
    captured = [policy_of(n) for n in forward_nodes_of(ep) if n.target == torch.ops.aten.mm.default
                and region_of(n) is not None]
    assert eager == ["must_save", "prefer_recompute"] * 4
    assert captured == eager


def test_reference_losses_are_eager_pytorchs(captures, model_file):
    """The eager reference runs PyTorch's own checkpoint, unpatched: its losses
    are those of the model without checkpoint (dropout 0, deterministic
    kernels), and those of a plain eager loop with checkpoint."""
    assert torch_checkpoint._checkpoint_without_reentrant_generator.__module__ == "torch.utils.checkpoint"
    losses = {ac: json.loads((out / "reference.json").read_text())["losses"]
              for ac, out in captures.items()}
    assert losses["full"] == losses["none"] == losses["sac"]

    torch.manual_seed(0)
    model, batches = runpy.run_path(str(model_file))["make"](ac="full")
    opt = torch.optim.AdamW(model.parameters())
    eager = []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = model(*batches[step % len(batches)])
        loss.backward()
        opt.step()
        eager.append(loss.item())
    assert losses["full"] == eager


def test_joint_graph_loss_and_gradients_match_eager_checkpoint(captures, model_file):
    ep = load_program(captures["sac"] / "step.pt2")
    torch.manual_seed(0)
    model, batches = runpy.run_path(str(model_file))["make"](ac="sac")
    with torch.no_grad():
        outs = eager_backward.joint_outputs(ep, {**ep.state_dict, **ep.constants}, batches[0])
    loss = model(*batches[0])
    loss.backward()
    grads = dict(model.named_parameters())
    for spec, value in outs:
        if spec.kind == OutputKind.LOSS_OUTPUT:
            assert torch.equal(value, loss.detach())
        elif spec.kind == OutputKind.GRADIENT_TO_PARAMETER:
            assert torch.equal(value, grads[spec.target].grad), spec.target


# Two Linear layers, the second under reentrant checkpoint; FORWARD is the
# body of forward(x).
REENTRANT_MODEL = '''
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        return FORWARD

def make():
    return Net(), [(torch.randn(2, 4),)]
'''


def write_reentrant_model(tmp_path: Path, forward: str) -> Path:
    path = tmp_path / "reentrant.py"
    path.write_text(REENTRANT_MODEL.replace("FORWARD", forward))
    return path


def test_reentrant_checkpoint_is_a_region(tmp_path, capsys):
    """use_reentrant=True is traced as a non-reentrant region (the same
    gradients), recorded like one."""
    path = write_reentrant_model(
        tmp_path, "checkpoint(self.b, self.a(x), use_reentrant=True).sum()")
    assert capture.main([str(path), "--out", str(tmp_path / "out"), "--steps", "1"]) == 0
    capsys.readouterr()
    ep = load_program(tmp_path / "out" / "step.pt2")
    assert {region_of(n) for n in forward_nodes(ep)
            if n.meta["custom"][capture.MODULE_KEY] == "b"} == {0}
    # The stand-in is gone: eager reentrant checkpoint works again.
    assert torch_checkpoint.CheckpointFunction.__name__ == "CheckpointFunction"


def test_reentrant_checkpoint_on_inputs_without_grad_is_refused(tmp_path, capsys):
    """With no input that requires grad, PyTorch's reentrant checkpoint gives
    the region's parameters no gradient (eager trains only `a` here), which
    a traced region would give them."""
    path = write_reentrant_model(
        tmp_path, "checkpoint(self.b, x, use_reentrant=True).sum() + self.a(x).sum()")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="None of the inputs have requires_grad")
        assert capture.main([str(path), "--out", str(tmp_path / "out"), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert (f"{path}:13: torch.utils.checkpoint with use_reentrant=True (the default when "
            "use_reentrant is not given) on inputs none of which requires grad") in err
    assert "pass use_reentrant=False" in err
    assert torch_checkpoint.CheckpointFunction.__name__ == "CheckpointFunction"


def test_policy_with_a_bad_answer_is_a_user_error(tmp_path, capsys):
    path = tmp_path / "bad_policy.py"
    path.write_text(textwrap.dedent(
        '''
        import functools
        import torch
        import torch.nn as nn
        from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

        def policy(ctx, op, *args, **kwargs):
            return "save"

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                context_fn = functools.partial(create_selective_checkpoint_contexts, policy)
                return checkpoint(self.fc, x, use_reentrant=False, context_fn=context_fn).sum()

        def make():
            return Net(), [(torch.randn(2, 4),)]
        '''))
    # Eager SAC reads any non-bool answer as "recompute"; capture says so.
    assert capture.main([str(path), "--out", str(tmp_path / "out"), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "the selective-checkpoint policy returned 'save' for aten.t.default" in err


class _Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)


def test_nested_checkpoint_is_refused():
    """torch.export loses the gradients of a checkpoint inside another."""

    class Nested(_Pair):
        def forward(self, x):
            inner = lambda h: torch_checkpoint.checkpoint(self.b, h, use_reentrant=False)  # noqa: E731
            return torch_checkpoint.checkpoint(inner, self.a(x), use_reentrant=False).sum()

    with pytest.raises(capture.CaptureError, match="region inside another cannot be captured"):
        capture.export_joint(Nested(), (torch.randn(2, 4),))
    assert torch_checkpoint._checkpoint_without_reentrant_generator.__module__ == "torch.utils.checkpoint"


def test_composable_checkpoint_is_a_region():
    """torch.distributed's checkpoint(module) runs the same implementation."""
    from torch.distributed._composable import checkpoint as composable_checkpoint

    class Net(_Pair):
        def forward(self, x):
            return self.b(self.a(x)).sum()

    model = Net()
    composable_checkpoint(model.b)
    ep, _ = capture.export_joint(model, (torch.randn(2, 4),))
    capture.annotate(ep, model)
    tagged = {(n.meta["custom"][capture.MODULE_KEY], region_of(n), policy_of(n))
              for n in forward_nodes(ep)}
    assert tagged == {("a", None, None), ("b", 0, "prefer_recompute"), ("", None, None)}


def test_pytorch_ac_graph_id_is_taken_as_it_is():
    """Where PyTorch's compiled checkpoint tagged a node itself, its id and
    policy win over capture's own numbering."""

    class Net(_Pair):
        def forward(self, x):
            return self.b(self.a(x)).sum()

    ep, _ = capture.export_joint(Net(), (torch.randn(2, 4),))
    addmm = [n for n in forward_nodes_of(ep) if n.target == torch.ops.aten.addmm.default]
    addmm[0].meta.update(ac_graph_id=7, recompute=torch_checkpoint.CheckpointPolicy.MUST_SAVE)
    addmm[1].meta.update(ac_graph_id=8)
    capture.tag_checkpoint_policies(ep, capture.CheckpointRegions([]))
    assert [(region_of(n), policy_of(n)) for n in addmm] == [(7, "must_save"), (8, "prefer_recompute")]
