"""Tests for ``python -m loom.capture``.

Each example is captured once (module-scoped fixture, 3 steps) and the
artifacts are checked from the consumer's side: the archive must load with
``torch.export.load``, carry Loom's per-node labels, have the signature the
C++ importer relies on, and -- most importantly -- compute what eager
PyTorch computes. The joint graph itself is executed (as a tiny Python
"runtime") and compared with the eager reference.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import runpy
import subprocess
import sys
import textwrap
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from torch.export.graph_signature import InputKind, OutputKind

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from loom import capture, eager_backward  # noqa: E402
from loom.safetensors_io import load_tensors  # noqa: E402

STEPS = 3
# One optimizer per example so that every optimizer path is exercised; gpt
# takes the default (AdamW) without naming it.
EXAMPLES = {"mlp": "sgd", "gpt": "adamw", "vit": "adam"}
CAPTURE_FLAGS = {"mlp": ["--optimizer", "sgd", "--lr", "0.01"], "gpt": [],
                 "vit": ["--optimizer", "adam"], "bn": ["--optimizer", "sgd", "--lr", "0.01"]}

BATCHNORM_MODEL = textwrap.dedent(
    '''
    """BatchNorm1d + Dropout(p=0) + Linear: exercises buffer mutation."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.bn = nn.BatchNorm1d(16)
            self.drop = nn.Dropout(p=0.0)
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x, y):
            h = self.drop(F.relu(self.bn(self.fc1(x))))
            return F.cross_entropy(self.fc2(h), y)

    def make():
        return Net(), [(torch.randn(6, 8), torch.randint(0, 4, (6,))) for _ in range(3)]
    '''
)


def load_program(path: Path) -> torch.export.ExportedProgram:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        return torch.export.load(path)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    return subprocess.run(
        [sys.executable, "-m", "loom.capture", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def call_cli(capsys, *args: str) -> subprocess.CompletedProcess:
    """``python -m loom.capture ARGS`` in this process (the same ``main``;
    torch is already imported here, which saves seconds per usage error):
    its exit status and what it printed. test_error_missing_make runs the
    real command line."""
    capsys.readouterr()
    try:
        code = capture.main(list(args))
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["loom.capture", *args], code, out.out, out.err)


class Captured:
    """The artifacts of one capture, loaded lazily."""

    def __init__(self, model_file: Path, out: Path, stdout: str):
        self.model_file = model_file
        self.out = out
        self.stdout = stdout
        self.ep = load_program(out / "step.pt2")
        self.reference = json.loads((out / "reference.json").read_text())
        self.batch_tensors, self.batch_meta = load_tensors(out / "batches.safetensors")
        self.final_state, _ = load_tensors(out / "reference.safetensors")

    def fresh_model(self) -> nn.Module:
        torch.manual_seed(self.reference["seed"])
        model, _ = runpy.run_path(str(self.model_file))["make"]()
        return model

    def batches(self) -> list[tuple[torch.Tensor, ...]]:
        n, k = int(self.batch_meta["num_steps"]), int(self.batch_meta["num_args"])
        return [tuple(self.batch_tensors[f"step{i}.arg{j}"] for j in range(k)) for i in range(n)]

    def initial_state(self) -> dict[str, torch.Tensor]:
        return {**self.ep.state_dict, **self.ep.constants}

    def nodes(self, phase: str | None = None) -> list[torch.fx.Node]:
        return [
            n
            for n in self.ep.graph.nodes
            if n.op == "call_function" and (phase is None or n.meta["custom"]["loom.phase"] == phase)
        ]


def do_capture(model_file: Path, out: Path, capsys, *extra: str) -> Captured:
    code = capture.main([str(model_file), "--out", str(out), "--steps", str(STEPS), *extra])
    stdout = capsys.readouterr().out
    assert code == 0
    return Captured(model_file, out, stdout)


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> dict[str, Captured]:
    results = {}
    root = tmp_path_factory.mktemp("captures")
    for name, optimizer in EXAMPLES.items():
        out = root / name
        model_file = REPO / "examples" / f"{name}.py"
        argv = [str(model_file), "--out", str(out), "--steps", str(STEPS), *CAPTURE_FLAGS[name]]
        assert capture.main(argv) == 0
        results[name] = Captured(model_file, out, "")
    model_file = root / "bn_model.py"
    model_file.write_text(BATCHNORM_MODEL)
    assert capture.main([str(model_file), "--out", str(root / "bn"), "--steps", str(STEPS),
                         *CAPTURE_FLAGS["bn"]]) == 0
    results["bn"] = Captured(model_file, root / "bn", "")
    return results


ALL = [*EXAMPLES, "bn"]


def trainable_names(model: nn.Module) -> list[str]:
    # named_parameters() yields each tied parameter once, under its first FQN.
    return [name for name, p in model.named_parameters() if p.requires_grad]


def run_joint_graph(c: Captured, state: dict[str, torch.Tensor], batch) -> dict[str, object]:
    """Execute the captured joint graph once; returns outputs by role."""
    with torch.no_grad():
        outs = eager_backward.joint_outputs(c.ep, state, batch)
    result: dict[str, object] = {"grads": {}, "mutations": {}}
    for spec, value in outs:
        if spec.kind == OutputKind.LOSS_OUTPUT:
            result["loss"] = value
        elif spec.kind == OutputKind.GRADIENT_TO_PARAMETER:
            result["grads"][spec.target] = value
        elif spec.kind == OutputKind.BUFFER_MUTATION:
            result["mutations"][spec.target] = value
    return result


# --------------------------------------------------------------------------
# Artifacts and metadata


@pytest.mark.parametrize("name", ALL)
def test_every_op_is_labelled(captured, name):
    c = captured[name]
    nodes = c.nodes()
    assert nodes
    for node in nodes:
        custom = node.meta.get("custom")
        assert custom is not None, node.name
        assert custom["loom.phase"] in ("forward", "backward"), node.name
        assert isinstance(custom["loom.module"], str)
        # The module label must agree with the nn_module_stack that was saved
        # alongside it, which also shows that nn_module_stack survives save.
        if custom["loom.module"]:
            stack = node.meta.get("nn_module_stack")
            assert stack, node.name
            assert list(stack.values())[-1][0] == custom["loom.module"]
    assert c.nodes("forward") and c.nodes("backward")


def test_an_archive_that_lost_a_label_is_refused(captured, tmp_path):
    """The capture's canary reads the saved graph as loom-import does: it
    passes the archive capture wrote, and refuses one whose node lost its
    phase (as a torch that stopped saving ``custom`` metadata would write)."""
    archive = captured["mlp"].out / "step.pt2"
    capture.verify_archive(archive)
    broken = tmp_path / "step.pt2"
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(broken, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("models/model.json"):
                model = json.loads(data)
                model["graph_module"]["graph"]["nodes"][3]["metadata"].pop("custom")
                data = json.dumps(model).encode()
            dst.writestr(item, data)
    with pytest.raises(RuntimeError, match=r"node 3 \(torch\.ops\.aten\..*\) lost its custom"):
        capture.verify_archive(broken)


@pytest.mark.parametrize("name", ALL)
def test_linear_layers_have_backward_ops(captured, name):
    c = captured[name]
    linears = {n for n, m in c.fresh_model().named_modules() if isinstance(m, nn.Linear)}
    backward_modules = {n.meta["custom"]["loom.module"] for n in c.nodes("backward")}
    assert linears and linears <= backward_modules


def test_gpt_module_paths(captured):
    c = captured["gpt"]
    forward_modules = {n.meta["custom"]["loom.module"] for n in c.nodes("forward")}
    for proj in ("wq", "wk", "wv", "wo"):
        assert f"layers.0.attn.{proj}" in forward_modules
    assert {"layers.0.ln1", "layers.0.mlp.fc1", "layers.1.mlp.fc2", "tok", "pos", "norm", "head"} <= forward_modules
    # Attention internals (matmul, softmax, mask) belong to the attention block.
    attn_ops = {str(n.target) for n in c.nodes("forward") if n.meta["custom"]["loom.module"] == "layers.0.attn"}
    assert "aten._softmax.default" in attn_ops and "aten.bmm.default" in attn_ops


@pytest.mark.parametrize("name", ALL)
def test_signature(captured, name):
    c = captured[name]
    sig = c.ep.graph_signature
    kinds = [s.kind for s in sig.output_specs]
    assert kinds.count(OutputKind.LOSS_OUTPUT) == 1
    grads = [s.target for s in sig.output_specs if s.kind == OutputKind.GRADIENT_TO_PARAMETER]
    expected = trainable_names(c.fresh_model())
    assert sorted(grads) == sorted(expected)
    params = [s.target for s in sig.input_specs if s.kind == InputKind.PARAMETER]
    assert sorted(params) == sorted(expected)
    n_user = sum(s.kind == InputKind.USER_INPUT for s in sig.input_specs)
    assert n_user == int(c.batch_meta["num_args"])


def test_tied_weight_is_one_parameter(captured):
    c = captured["gpt"]
    assert c.reference["tied_parameters"] == {"head.weight": "tok.weight"}
    inputs = [s.target for s in c.ep.graph_signature.input_specs]
    assert "tok.weight" in inputs and "head.weight" not in inputs
    grads = [s.target for s in c.ep.graph_signature.output_specs if s.kind == OutputKind.GRADIENT_TO_PARAMETER]
    assert grads.count("tok.weight") == 1
    assert "head.weight" not in c.final_state and "tok.weight" in c.final_state


def test_batchnorm_buffers_are_mutated(captured):
    sig = captured["bn"].ep.graph_signature
    buffers = {s.target for s in sig.input_specs if s.kind == InputKind.BUFFER}
    mutated = {s.target for s in sig.output_specs if s.kind == OutputKind.BUFFER_MUTATION}
    expected = {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}
    assert buffers == expected and mutated == expected
    # The archive holds the *initial* buffers: export must not have run BN.
    state = captured["bn"].initial_state()
    assert torch.equal(state["bn.running_mean"], torch.zeros(16))
    assert int(state["bn.num_batches_tracked"]) == 0


@pytest.mark.parametrize("name", ALL)
def test_reference_and_batches_files(captured, name):
    c = captured[name]
    ref = c.reference
    assert ref["steps"] == STEPS
    assert len(ref["losses"]) == STEPS and all(math.isfinite(x) for x in ref["losses"])
    assert ref["optimizer"]["name"] == EXAMPLES.get(name, "sgd")
    assert {"lr", "weight_decay"} <= set(ref["optimizer"])
    assert ref["torch_version"] == torch.__version__
    assert set(ref["param_checksums"]) == set(trainable_names(c.fresh_model()))
    assert math.isclose(ref["param_checksum"], sum(ref["param_checksums"].values()))
    n, k = int(c.batch_meta["num_steps"]), int(c.batch_meta["num_args"])
    assert set(c.batch_tensors) == {f"step{i}.arg{j}" for i in range(n) for j in range(k)}


def test_optimizer_defaults(captured):
    """Nothing said: AdamW with PyTorch's defaults; Adam's weight decay is 0."""
    adamw = captured["gpt"].reference["optimizer"]
    assert adamw["name"] == "adamw"
    assert adamw["lr"] == 1e-3 and adamw["weight_decay"] == 0.01 and adamw["betas"] == [0.9, 0.999]
    assert adamw["eps"] == 1e-8
    adam = captured["vit"].reference["optimizer"]
    assert adam["lr"] == 1e-3 and adam["weight_decay"] == 0
    sgd = captured["mlp"].reference["optimizer"]
    assert sgd["lr"] == 1e-2 and sgd["weight_decay"] == 0 and sgd["momentum"] == 0


def test_fused_optimizers_are_torchs_and_the_artifact_schemas():
    """Capture's FUSED_OPTIMIZERS are the torch.optim classes that take
    fused=True, and the optimizers the artifact schema lets say impl "fused"
    (LOOMX_OPTIMIZER_FUSED, which the compiler and the runtime read)."""
    sys.path.insert(0, str(REPO / "runtime" / "tests"))
    from loomx import SCHEMA

    takes_fused = {name for name in capture.OPTIMIZERS
                   if "fused" in inspect.signature(capture.OPTIMIZERS[name]).parameters}
    assert set(capture.FUSED_OPTIMIZERS) == takes_fused
    assert list(capture.FUSED_OPTIMIZERS) == SCHEMA.fused_optimizers


# --------------------------------------------------------------------------
# The run configuration (run.json, and the same text inside step.pt2)


def archived_run_config(pt2: Path) -> str:
    extra = {capture.RUN_CONFIG_EXTRA: ""}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        torch.export.load(pt2, extra_files=extra)
    return extra[capture.RUN_CONFIG_EXTRA]


EXPECTED_OPTIMIZERS = {
    "gpt": {"name": "adamw", "lr": 1e-3, "weight_decay": 0.01, "betas": [0.9, 0.999],
            "eps": 1e-8, "amsgrad": False, "maximize": False},
    "vit": {"name": "adam", "lr": 1e-3, "weight_decay": 0.0, "betas": [0.9, 0.999],
            "eps": 1e-8, "amsgrad": False, "maximize": False},
    "mlp": {"name": "sgd", "lr": 0.01, "weight_decay": 0.0, "momentum": 0.0, "dampening": 0.0,
            "nesterov": False, "maximize": False},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_OPTIMIZERS))
def test_run_config_records_every_hyperparameter(captured, name):
    c = captured[name]
    text = (c.out / "run.json").read_text()
    assert json.loads(text) == {
        "format": "loom-run-config", "version": 1, "world_size": 1, "microbatches": 1,
        "seed": 0, "steps": STEPS, "optimizer": EXPECTED_OPTIMIZERS[name]}
    # The importer reads the copy inside the archive: the very same text.
    assert archived_run_config(c.out / "step.pt2") == text
    # step/extra/loom_run.json is where torch 2.9 puts it (the C++ reader's path).
    with zipfile.ZipFile(c.out / "step.pt2") as z:
        assert z.read("step/extra/loom_run.json").decode() == text
    # What was recorded is what the eager reference trained with.
    used = c.reference["optimizer"]
    for key, value in EXPECTED_OPTIMIZERS[name].items():
        assert used[key] == value, key


def test_run_config_records_what_was_asked(tmp_path, capsys):
    c = do_capture(REPO / "examples" / "mlp.py", tmp_path / "out", capsys, "--steps", "2",
                   "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--dampening", "0.1",
                   "--weight-decay", "0.001", "--maximize", "--seed", "7", "--split", "2",
                   "--microbatches", "2")
    config = json.loads((tmp_path / "out" / "run.json").read_text())
    assert config["world_size"] == 2 and config["microbatches"] == 2
    assert config["seed"] == 7 and config["steps"] == 2
    assert config["optimizer"] == {"name": "sgd", "lr": 0.05, "weight_decay": 0.001,
                                   "momentum": 0.9, "dampening": 0.1, "nesterov": False,
                                   "maximize": True}
    assert c.reference["optimizer"]["maximize"] is True
    assert c.reference["optimizer"]["dampening"] == 0.1


@pytest.mark.parametrize("flags, fragment", [
    (["--optimizer", "sgd"], "--optimizer sgd needs --lr"),
    (["--optimizer", "sgd", "--lr", "0.1", "--betas", "0.8", "0.9"],
     "--betas is not an option of --optimizer sgd"),
    (["--optimizer", "sgd", "--lr", "0.1", "--eps", "1e-6"], "--eps is not an option"),
    (["--momentum", "0.9"], "--momentum is not an option of --optimizer adamw"),
    (["--optimizer", "adam", "--nesterov"], "--nesterov is not an option of --optimizer adam"),
    (["--optimizer", "sgd", "--lr", "0.1", "--nesterov"], "--nesterov needs --momentum > 0"),
    (["--lr", "0"], "--lr must be a positive number"),
    (["--betas", "0.9", "1.5"], "--betas must lie in [0, 1)"),
    # Each algorithm's own options, refused for the others.
    (["--optimizer", "sgd", "--lr", "0.1", "--amsgrad"], "--amsgrad is not an option of --optimizer sgd"),
    (["--optimizer", "adam", "--centered"], "--centered is not an option of --optimizer adam"),
    (["--optimizer", "rmsprop", "--betas", "0.8", "0.9"], "--betas is not an option of --optimizer rmsprop"),
    (["--optimizer", "rmsprop", "--adagrad-lr-decay", "0.1"],
     "--adagrad-lr-decay is not an option of --optimizer rmsprop"),
    (["--optimizer", "adagrad", "--momentum", "0.9"], "--momentum is not an option of --optimizer adagrad"),
    (["--optimizer", "adagrad", "--initial-accumulator-value", "-1"],
     "--initial-accumulator-value must be a non-negative number"),
    (["--optimizer", "rmsprop", "--alpha", "-0.5"], "--alpha must be a non-negative number"),
    (["--optimizer", "rmsprop", "--optimizer-impl", "fused"], "torch.optim has no fused rmsprop"),
    (["--optimizer", "adamax", "--amsgrad"], "--amsgrad is not an option of --optimizer adamax"),
    (["--optimizer", "adamax", "--optimizer-impl", "fused"], "torch.optim has no fused adamax"),
    (["--optimizer", "adam", "--decoupled-weight-decay"],
     "--decoupled-weight-decay is not an option of --optimizer adam"),
    (["--optimizer", "rmsprop", "--rho", "0.5"], "--rho is not an option of --optimizer rmsprop"),
    (["--optimizer", "adadelta", "--rho", "1.5"], "--rho must lie in [0, 1], got 1.5"),
    (["--optimizer", "adadelta", "--optimizer-impl", "fused"], "torch.optim has no fused adadelta"),
    (["--optimizer", "adam", "--momentum-decay", "0.01"],
     "--momentum-decay is not an option of --optimizer adam"),
    (["--optimizer", "nadam", "--momentum-decay", "-1"], "--momentum-decay must be a non-negative number"),
    (["--optimizer", "nadam", "--optimizer-impl", "fused"], "torch.optim has no fused nadam"),
    # Rprop has no weight decay or eps; its etas and step sizes as torch.optim.Rprop checks them.
    (["--optimizer", "rprop", "--weight-decay", "0.1"],
     "--weight-decay is not an option of --optimizer rprop"),
    (["--optimizer", "rprop", "--eps", "1e-6"], "--eps is not an option of --optimizer rprop"),
    (["--optimizer", "adam", "--etas", "0.4", "1.3"], "--etas is not an option of --optimizer adam"),
    (["--optimizer", "rprop", "--etas", "0.5", "0.9"],
     "--etas must satisfy 0 < ETAMINUS < 1 < ETAPLUS, got [0.5, 0.9]"),
    (["--optimizer", "rprop", "--step-sizes", "1", "0.5"],
     "--step-sizes must satisfy 0 <= MIN <= MAX, got [1.0, 0.5]"),
    (["--optimizer", "rprop", "--optimizer-impl", "fused"], "torch.optim has no fused rprop"),
    (["--optimizer", "rprop", "--split", "2", "--reference", "fsdp"],
     "PyTorch's fully_shard cannot run torch.optim.Rprop"),
    # ASGD has no eps; its lambd, alpha and t0 may be any finite number.
    (["--optimizer", "asgd", "--eps", "1e-6"], "--eps is not an option of --optimizer asgd"),
    (["--optimizer", "adam", "--t0", "10"], "--t0 is not an option of --optimizer adam"),
    (["--optimizer", "sgd", "--lr", "0.1", "--lambd", "0.1"],
     "--lambd is not an option of --optimizer sgd"),
    (["--optimizer", "asgd", "--t0", "inf"], "--t0 must be a finite number, got inf"),
    (["--optimizer", "asgd", "--optimizer-impl", "fused"], "torch.optim has no fused asgd"),
    # The schedule's options, as lr_scheduler's constructors take them.
    (["--lr-decay", "exponential"], "--lr-decay exponential needs --lr-gamma"),
    (["--lr-decay", "cosine", "--lr-decay-steps", "5", "--lr-gamma", "0.5"],
     "--lr-gamma needs --lr-decay step, exponential or multistep"),
    (["--lr-decay", "exponential", "--lr-gamma", "0.9", "--lr-decay-steps", "3"],
     "--lr-decay-steps needs --lr-decay cosine, linear, step, polynomial or cosine-restarts"),
    (["--lr-decay", "multistep"], "--lr-decay multistep needs --lr-milestones"),
    (["--lr-decay", "multistep", "--lr-milestones", "5,2"],
     "--lr-milestones must increase from 1, got [5, 2]"),
    (["--lr-decay", "multistep", "--lr-milestones", "5,x"],
     "expected step counts separated by commas, got '5,x'"),
    (["--lr-decay", "step", "--lr-decay-steps", "2", "--lr-milestones", "5"],
     "--lr-milestones needs --lr-decay multistep"),
    (["--lr-decay", "polynomial"], "--lr-decay polynomial needs --lr-decay-steps >= 1"),
    (["--lr-decay", "polynomial", "--lr-decay-steps", "4", "--lr-power", "-1"],
     "--lr-power must be a finite number >= 0, got -1.0"),
    (["--lr-decay", "cosine", "--lr-decay-steps", "4", "--lr-power", "2"],
     "--lr-power needs --lr-decay polynomial"),
    (["--lr-decay", "cosine-restarts", "--lr-decay-steps", "4", "--lr-t-mult", "0"],
     "--lr-t-mult must be an integer >= 1, got 0"),
    (["--lr-decay", "cosine", "--lr-decay-steps", "4", "--lr-t-mult", "2"],
     "--lr-t-mult needs --lr-decay cosine-restarts"),
    (["--lr-decay", "step", "--lr-decay-steps", "4", "--lr-eta-min", "0.1"],
     "--lr-eta-min needs --lr-decay cosine or cosine-restarts"),
    (["--lr-decay", "step"], "--lr-decay step needs --lr-decay-steps >= 1"),
    (["--lr-decay", "step", "--lr-decay-steps", "2", "--lr-gamma", "0"],
     "--lr-gamma must be a finite number > 0"),
])
def test_bad_optimizer_options_are_usage_errors(tmp_path, capsys, flags, fragment):
    result = call_cli(capsys, str(REPO / "examples" / "mlp.py"), "--out", str(tmp_path / "out"),
                      *flags)
    assert result.returncode == 2 and fragment in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------
# Numerics: the archive and eager PyTorch agree


def make_optimizer(hyper: dict, params) -> torch.optim.Optimizer:
    hyper = dict(hyper)
    cls = capture.OPTIMIZERS[hyper.pop("name")]
    # reference.json records opt.defaults, which for AdamW also holds the
    # non-constructor flag decoupled_weight_decay.
    accepted = inspect.signature(cls.__init__).parameters
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in hyper.items() if k in accepted}
    return cls(params, **kwargs)


@pytest.mark.parametrize("name", ALL)
def test_eager_replay_from_captured_weights(captured, name):
    c = captured[name]
    model = c.fresh_model()
    initial = c.initial_state()
    # make() under the same seed rebuilds exactly the archived weights.
    for key, value in model.state_dict().items():
        source = c.reference["tied_parameters"].get(key, key)
        assert torch.equal(value, initial[source]), key
        # Start from the archive regardless, as a runtime would.
        with torch.no_grad():
            value.copy_(initial[source])
    opt = make_optimizer(c.reference["optimizer"], [p for p in model.parameters() if p.requires_grad])
    batches = c.batches()
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = model(*batches[step % len(batches)])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses == pytest.approx(c.reference["losses"], rel=1e-6, abs=1e-6)
    final = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    assert set(final) == set(c.final_state)
    for key, value in c.final_state.items():
        torch.testing.assert_close(final[key].detach(), value, rtol=0, atol=1e-5)


def joint_and_eager_gradients(c: Captured) -> tuple[dict, dict]:
    """The joint graph's loss and gradients on the first batch, and eager
    autograd's gradients of a fresh model on it."""
    batch = c.batches()[0]
    out = run_joint_graph(c, c.initial_state(), batch)
    assert float(out["loss"]) == c.reference["losses"][0]
    model = c.fresh_model()
    model(*batch).backward()
    eager = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    assert set(out["grads"]) == set(eager)
    return out["grads"], eager


@pytest.mark.parametrize("name", ALL)
def test_joint_graph_matches_eager_gradients(captured, name):
    """Capture exports the joint graph without decompositions, so it calls
    the kernels eager autograd calls: loss and gradients are bitwise equal."""
    joint, eager = joint_and_eager_gradients(captured[name])
    for key, grad in joint.items():
        assert torch.equal(grad, eager[key]), key


SWIGLU_MISH = Path(__file__).parent / "swiglu_mish_model.py"
KERNEL_BACKWARDS = {torch.ops.aten.silu_backward.default, torch.ops.aten.mish_backward.default}


def test_activation_backwards_are_eagers_kernels(tmp_path, capsys):
    """silu_backward and mish_backward have a CPU kernel and a composite
    form; eager autograd runs the kernel, so the joint graph calls it (not
    sigmoid, sub and mul) and its gradients equal eager's bitwise."""
    c = do_capture(SWIGLU_MISH, tmp_path, capsys)
    assert KERNEL_BACKWARDS <= {n.target for n in c.nodes("backward")}
    joint, eager = joint_and_eager_gradients(c)
    for key, grad in joint.items():
        assert torch.equal(grad, eager[key]), key


OP_NAMED_INPUTS_MODEL = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, x, t):  # `t`, `mm`, `view`: names of ops the backward has
        return nn.BCELoss()(torch.sigmoid(self.out(torch.relu(self.fc(x)))).squeeze(1), t)

def make():
    return Net(), [(torch.randn(5, 6), torch.randint(0, 2, (5,)).float())]
"""


def test_inputs_named_like_ops_keep_eagers_kernels(tmp_path, capsys):
    """A forward argument named ``t`` made torch 2.9's joint export fail to
    rebuild its signature (``KeyError: 't_4'``: the backward's ``aten.t``
    nodes are named around it) and capture fell back to the decomposed
    export (binary_cross_entropy as log, log1p, clamp, ...: gradients 1 ulp
    from eager's, which Adadelta made visible after 3 steps). The inputs are
    renamed for the joint export instead: eager's kernels, eager's
    gradients bitwise, no note."""
    c = do_capture(write_model(tmp_path, OP_NAMED_INPUTS_MODEL), tmp_path / "out", capsys)
    assert "core-ATen" not in capsys.readouterr().err
    ops = {n.target for n in c.nodes("forward")} | {n.target for n in c.nodes("backward")}
    assert {torch.ops.aten.binary_cross_entropy.default,
            torch.ops.aten.binary_cross_entropy_backward.default} <= ops
    joint, eager = joint_and_eager_gradients(c)
    for key, grad in joint.items():
        assert torch.equal(grad, eager[key]), key


UPSAMPLE_MODEL = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)

    def forward(self, x):
        return torch.ops.aten.upsample_nearest2d.default(self.conv(x), [8, 8]).square().mean()

def make():
    return Net(), [(torch.randn(2, 2, 4, 4),)]
"""


def test_forward_ops_with_a_kernel_stay_differentiable(tmp_path, capsys):
    """upsample_nearest2d also has a CPU kernel and a composite form, but
    gradients flow through it: kept as an op, export would give it no
    derivative (the conv's weight would get no gradient). It stays
    composite; only backward ops are kept."""
    c = do_capture(write_model(tmp_path, UPSAMPLE_MODEL), tmp_path / "out", capsys)
    joint, eager = joint_and_eager_gradients(c)
    for key, grad in joint.items():
        assert torch.equal(grad, eager[key]), key


def test_activation_backwards_traced_composite_differ_from_eager(tmp_path, capsys, monkeypatch):
    """The negative control: traced in their composite form, as tracing does
    unless told to keep them, the same model's gradients are not eager's."""
    monkeypatch.setattr(capture, "_kernels_eager_runs", lambda: {})
    c = do_capture(SWIGLU_MISH, tmp_path, capsys)
    assert not KERNEL_BACKWARDS & {n.target for n in c.nodes("backward")}
    joint, eager = joint_and_eager_gradients(c)
    assert any(not torch.equal(grad, eager[key]) for key, grad in joint.items())


@pytest.mark.parametrize("name", ["mlp", "bn"])
def test_joint_graph_trains_like_eager_sgd(captured, name):
    """A minimal runtime: joint graph + plain SGD + buffer write-back."""
    c = captured[name]
    assert c.reference["optimizer"]["name"] == "sgd" and c.reference["optimizer"]["momentum"] == 0
    lr = c.reference["optimizer"]["lr"]
    state = {k: v.clone() for k, v in c.initial_state().items()}
    batches = c.batches()
    losses = []
    for step in range(STEPS):
        out = run_joint_graph(c, state, batches[step % len(batches)])
        losses.append(float(out["loss"]))
        for key, grad in out["grads"].items():
            state[key] = state[key] - lr * grad
        state.update(out["mutations"])
    assert losses == pytest.approx(c.reference["losses"], rel=1e-5, abs=1e-6)
    for key, value in c.final_state.items():
        torch.testing.assert_close(state[key].detach(), value, rtol=0, atol=1e-5)


# --------------------------------------------------------------------------
# Command line behaviour


def test_summary_and_outputs(tmp_path, capsys):
    c = do_capture(REPO / "examples" / "mlp.py", tmp_path / "out", capsys, "--steps", "1", "--lr", "0.05")
    assert "joint graph:" in c.stdout and "forward" in c.stdout and "backward" in c.stdout
    for name in ("step.pt2", "batches.safetensors", "reference.json", "reference.safetensors"):
        assert (tmp_path / "out" / name).is_file()
        assert name in c.stdout
    assert c.reference["optimizer"]["lr"] == 0.05 and c.reference["steps"] == 1


def write_model(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(body))
    return path


def assert_user_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("loom.capture: error: ")
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr


def test_error_missing_make(tmp_path):
    path = write_model(tmp_path, "import torch\n")
    assert_user_error(run_cli(str(path), "--out", str(tmp_path / "out")), "does not define make()")


def test_error_sparse_batch_tensor(tmp_path):
    """A sparse adjacency matrix as a batch tensor (a GCN's torch.sparse.mm)
    was a traceback from the batches' writer; it is refused up front."""
    path = write_model(tmp_path, """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x, adj):
                return torch.sparse.mm(adj, self.fc(x)).square().mean()

        def make():
            adj = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.ones(2), (3, 3))
            return Net(), [(torch.randn(3, 4), adj)]
        """)
    assert_user_error(run_cli(str(path), "--out", str(tmp_path / "out"), "--batch-dims", "none"),
                      "batch argument 1 of step 0: a tensor of layout sparse_coo; a compiled step "
                      "holds dense tensors only")


def test_error_packed_sequence_says_what_to_do(tmp_path):
    """pack_padded_sequence: the GRU's shapes come from the lengths'
    values, which export cannot trace (torch's own TypeError about a
    FakeTensor); the error says to run on the padded batch instead."""
    path = write_model(tmp_path, """
        import torch
        import torch.nn as nn
        from torch.nn.utils.rnn import pack_padded_sequence

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(4, 5, batch_first=True)

            def forward(self, x, lengths):
                _, h = self.rnn(pack_padded_sequence(x, lengths, batch_first=True))
                return h.square().mean()

        def make():
            return Net(), [(torch.randn(3, 6, 4), torch.tensor([6, 4, 2]))]
        """)
    result = run_cli(str(path), "--out", str(tmp_path / "out"), "--batch-dims", "0,none")
    assert_user_error(result, f"{path}:12: torch.export could not trace the model")
    assert "run the RNN on the padded batch" in result.stderr


def test_error_non_scalar_loss(tmp_path, capsys):
    path = write_model(
        tmp_path,
        """
        import torch
        import torch.nn as nn

        def make():
            return nn.Linear(4, 2), [(torch.randn(3, 4),)]
        """,
    )
    assert_user_error(call_cli(capsys, str(path), "--out", str(tmp_path / "out")), "scalar loss")
    assert not (tmp_path / "out" / "step.pt2").exists()


def test_error_loss_with_other_outputs(tmp_path, capsys):
    """A forward returning (loss, logits) is refused saying what to return."""
    path = write_model(
        tmp_path,
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                logits = self.fc(x)
                return logits.square().mean(), logits

        def make():
            return M(), [(torch.randn(3, 4),)]
        """,
    )
    assert_user_error(call_cli(capsys, str(path), "--out", str(tmp_path / "out")),
                      "got tuple; Loom trains the loss alone: return only it from forward")


@pytest.mark.parametrize(
    "body, fragment",
    [
        ("def make():\n    return 5\n", "must return (model, batches)"),
        ("import torch\ndef make():\n    return torch.nn.Linear(2, 1), []\n", "non-empty list of batches"),
        ("import torch\ndef make():\n    return torch.nn.Linear(2, 1), [(1.0,)]\n", "expected a torch.Tensor"),
        ("def make():\n    raise ValueError('boom')\n", "make() raised ValueError: boom"),
        (
            "import torch\ndef make():\n"
            "    return torch.nn.Linear(2, 1), [(torch.randn(3, 2),), (torch.randn(4, 2),)]\n",
            "same number, shapes and dtypes",
        ),
    ],
)
def test_error_bad_make(tmp_path, capsys, body, fragment):
    path = write_model(tmp_path, body)
    assert capture.main([str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("loom.capture: error: ") and fragment in err


def test_error_missing_file(tmp_path, capsys):
    assert capture.main([str(tmp_path / "nope.py"), "--out", str(tmp_path / "out")]) == 2
    assert "model file not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    "body, fragment",
    [
        (
            # Embedding(max_norm) renormalises its weight in place in forward.
            """
            import torch
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.emb = nn.Embedding(10, 4, max_norm=1.0)

                def forward(self, i):
                    return self.emb(i).sum()

            def make():
                return Net(), [(torch.tensor([1, 2, 3]),)]
            """,
            "changes a parameter in place during forward",
        ),
        (
            # An op without a derivative: eager's own backward fails.
            """
            import torch
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    y = self.lin(x).view(2, 4, 1, 1)
                    return torch.ops.aten.native_channel_shuffle.default(y, 2).sum()

            def make():
                return Net(), [(torch.randn(2, 4),)]
            """,
            "the backward of model(*batch) raised RuntimeError: derivative for "
            "aten::native_channel_shuffle is not implemented",
        ),
    ],
)
def test_error_uncapturable_models(tmp_path, capsys, body, fragment):
    path = write_model(tmp_path, body)
    assert capture.main([str(path), "--out", str(tmp_path / "out"), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("loom.capture: error: ") and fragment in err


CHANNELS_LAST_MODEL = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.out = nn.Linear(64, 1)

    def forward(self, x):
        return self.out(self.conv(x).flatten(1)).square().mean()

def make():
    net, x = Net(), torch.randn(2, 3, 6, 6)
    if "{layout}" == "channels_last":
        net, x = net.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
    return net, [(x,)]
"""


@pytest.mark.parametrize("layout", ["channels_last", "contiguous"])
def test_strided_tensors_are_noted(tmp_path, capsys, layout):
    """Loom holds every tensor row-major; a channels_last model is captured
    (its convolutions then round differently from eager's) with a note
    naming the tensors, and a row-major one without."""
    path = write_model(tmp_path, CHANNELS_LAST_MODEL.replace("{layout}", layout))
    assert capture.main([str(path), "--out", str(tmp_path / "out"), "--steps", "1"]) == 0
    err = capsys.readouterr().err
    note = "loom.capture: note: conv.weight, batch argument 0 are not row-major"
    assert (note in err) == (layout == "channels_last"), err


UNUSED_MODEL = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(4, 1)
        self.aux = nn.Linear(4, 1)

    def forward(self, x):
        return self.used(x).sum()

def make():
    return Net(), [(torch.randn(3, 4),) for _ in range(2)]
"""


def test_unused_parameters_are_captured_frozen(tmp_path, capsys):
    """A trainable parameter the loss never reads gets no gradient, and
    torch.optim leaves it as it is: the step is the step with it frozen
    (torch's joint export refuses it trainable). Capture says so, records
    the names in run.json (DDP must be told), and the graph reads it without
    a gradient output; the eager reference leaves it unchanged (AdamW's
    weight decay, too, skips it)."""
    path = write_model(tmp_path, UNUSED_MODEL)
    out = tmp_path / "out"
    assert capture.main([str(path), "--out", str(out), "--steps", "2"]) == 0
    err = capsys.readouterr().err
    assert ("loom.capture: note: parameter(s) aux.weight, aux.bias receive no gradient from "
            "the loss; captured as frozen") in err
    assert json.loads((out / "run.json").read_text())["unused_parameters"] == [
        "aux.weight", "aux.bias"]
    sig = load_program(out / "step.pt2").graph_signature
    grads = [s.target for s in sig.output_specs if s.kind == OutputKind.GRADIENT_TO_PARAMETER]
    params = [s.target for s in sig.input_specs if s.kind == InputKind.PARAMETER]
    assert sorted(grads) == ["used.bias", "used.weight"]
    assert sorted(params) == ["aux.bias", "aux.weight", "used.bias", "used.weight"]
    reference, _ = load_tensors(out / "reference.safetensors")
    torch.manual_seed(0)
    fresh = runpy.run_path(str(path))["make"]()[0]
    assert torch.equal(reference["aux.weight"], fresh.aux.weight.detach())
    assert not torch.equal(reference["used.weight"], fresh.used.weight.detach())


# --------------------------------------------------------------------------
# --split and --microbatches: the graph is one rank's microbatch


def user_input_shapes(out: Path) -> list[tuple[int, ...]]:
    ep = torch.export.load(out / "step.pt2")
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    return [
        tuple(placeholders[s.arg.name].meta["val"].shape)
        for s in ep.graph_signature.input_specs
        if s.kind == InputKind.USER_INPUT
    ]


@pytest.mark.parametrize("split, microbatches", [(2, 1), (4, 1), (2, 2)])
def test_split_exports_per_rank_batch(tmp_path, capsys, split, microbatches):
    out = tmp_path / "out"
    c = do_capture(
        REPO / "examples" / "mlp.py", out, capsys, "--split", str(split), "--microbatches", str(microbatches)
    )
    full = [tuple(t.shape) for t in c.batches()[0]]
    parts = split * microbatches
    assert user_input_shapes(out) == [(s[0] // parts, *s[1:]) for s in full]
    assert c.reference["split"] == split and c.reference["microbatches"] == microbatches
    config = json.loads((out / "run.json").read_text())
    assert config["world_size"] == split and config["microbatches"] == microbatches
    assert f"dim 0 / {parts}" in c.stdout
    # The reference trains on the whole batch, exactly as without --split.
    plain = do_capture(REPO / "examples" / "mlp.py", tmp_path / "plain", capsys)
    assert c.reference["losses"] == plain.reference["losses"]
    assert plain.reference["split"] == 1 and plain.reference["microbatches"] == 1


def test_split_must_divide_the_batch(tmp_path, capsys):
    path = write_model(
        tmp_path,
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x).sum()

        def make():
            return M(), [(torch.randn(6, 4),)]
        """,
    )
    assert capture.main([str(path), "--out", str(tmp_path / "out"), "--split", "4"]) == 2
    err = capsys.readouterr().err
    assert "dim 0 of size 6" in err and "--split 4" in err
    assert not (tmp_path / "out" / "step.pt2").exists()
    assert capture.main([str(path), "--out", str(tmp_path / "ok"), "--split", "3", "--steps", "1"]) == 0


def test_split_must_be_positive(tmp_path, capsys):
    result = call_cli(capsys, str(REPO / "examples" / "mlp.py"), "--out", str(tmp_path / "out"),
                      "--split", "0")
    assert result.returncode == 2 and "--split must be at least 1" in result.stderr


# A backward that is not the derivative of the forward: torch.export traces
# the forward only, so the captured step would train something else.
BACKWARD_MODEL = """
import torch
import torch.nn as nn


class Grad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > 0).to(g.dtype) * {scale}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        h = self.fc1(x)
        {activation}
        return self.fc2(h).square().mean()


def make():
    net = Net()
    {setup}
    return net, [(torch.randn(4, 6),)]
"""


def backward_model(tmp_path: Path, activation: str = "h = torch.relu(h)", setup: str = "pass",
                   scale: str = "2.0") -> Path:
    return write_model(tmp_path, BACKWARD_MODEL.format(activation=activation, setup=setup,
                                                       scale=scale))


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize(
    "model, fragment",
    [
        (dict(activation="h = Grad.apply(h)"),
         "{path}:{line}: custom torch.autograd.Function Grad (export differentiates its "
         "forward; its backward does not run)"),
        (dict(activation="h.register_hook(lambda g: g * 3.0)"),
         "{path}:{line}: Tensor.register_hook (export does not trace gradient hooks)"),
        (dict(setup="net.fc2.weight.register_hook(lambda g: g.clamp(-1e-3, 1e-3))"),
         "a gradient hook on parameter 'fc2.weight' (Tensor.register_hook)"),
        (dict(setup="net.fc2.register_full_backward_hook("
                    "lambda m, gi, go: tuple(g * 0.5 for g in gi))"),
         "a backward hook on module 'fc2' (register_full_backward_hook)"),
    ],
    ids=["function", "tensor-hook", "parameter-hook", "module-hook"])
def test_a_backward_export_does_not_trace_is_refused(tmp_path, capsys, model, fragment):
    """A custom autograd.Function's backward, a gradient hook, a module
    backward hook: export differentiates the traced forward instead, and the
    first batch's gradients show it (the eager backward runs on the model
    itself: a deep copy, as the reference trains, drops a parameter's hooks)."""
    path = backward_model(tmp_path, **model)
    where = model.get("activation", "")
    result = call_cli(capsys, str(path), "--out", str(tmp_path / "out"), "--steps", "1")
    assert_user_error(result, fragment.format(path=path, line=line_of(path, where) if where else 0))
    assert "the model's backward is not the derivative of its forward" in result.stderr
    assert "differs from eager autograd's on the first batch" in result.stderr
    assert not (tmp_path / "out" / "step.pt2").exists()


@pytest.mark.parametrize(
    "model, note",
    [
        (dict(activation="h = Grad.apply(h)", scale="1.0"), "custom torch.autograd.Function Grad"),
        (dict(activation="h = torch.relu(h); h.register_hook(lambda g: None)"),
         "Tensor.register_hook"),
    ],
    ids=["function", "logging-hook"])
def test_a_backward_equal_to_the_derivative_is_captured(tmp_path, capsys, model, note):
    """The same constructs whose backward is the forward's derivative (a
    Function reimplementing ReLU's gradient, a hook that only looks): the
    gradients agree and the step is captured, with a note."""
    path = backward_model(tmp_path, **model)
    code = capture.main([str(path), "--out", str(tmp_path / "out"), "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert note in err and "the captured gradients equal eager autograd's" in err
    assert (tmp_path / "out" / "step.pt2").is_file()


def test_meta_capture_notes_an_unchecked_backward(tmp_path, capsys):
    path = backward_model(tmp_path, activation="h = Grad.apply(h)")
    code = capture.main([str(path), "--out", str(tmp_path / "out"), "--meta"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "custom torch.autograd.Function Grad" in err and "a --meta capture cannot check" in err


def test_sparse_embedding_gradients_are_refused(tmp_path, capsys):
    path = write_model(tmp_path, """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(10, 4, sparse=True)

            def forward(self, i):
                return self.emb(i).square().mean()

        def make():
            return Net(), [(torch.tensor([1, 2, 3]),)]
        """)
    assert_user_error(call_cli(capsys, str(path), "--out", str(tmp_path / "out"), "--optimizer",
                               "adam"),
                      "emb: an embedding with sparse=True gives its weight a sparse gradient")


def test_the_reference_optimizers_step_error_is_reported(tmp_path, capsys):
    """torch.optim's step refusing the model's parameters (fused=True on a
    complex one) is a located error, not a traceback."""
    path = write_model(tmp_path, """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(3, dtype=torch.complex64))

            def forward(self, x):
                return (self.w * x).abs().square().mean()

        def make():
            return Net(), [(torch.randn(3),)]
        """)
    assert_user_error(call_cli(capsys, str(path), "--out", str(tmp_path / "out"), "--optimizer",
                               "adam", "--optimizer-impl", "fused"),
                      "the eager reference's torch.optim.Adam.step() raised RuntimeError: "
                      "`fused=True` requires all the params to be floating point")


def test_gradients_taken_in_forward_are_refused(tmp_path, capsys):
    """A gradient penalty calls torch.autograd.grad in forward: refused with
    its line (export's own failure on it named an internal tanh_backward)."""
    path = write_model(tmp_path, """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)

            def forward(self, x):
                x = x.clone().requires_grad_(True)
                out = torch.tanh(self.fc(x))
                g, = torch.autograd.grad(out.sum(), x, create_graph=True)
                return out.mean() + g.square().mean()

        def make():
            return Net(), [(torch.randn(3, 4),)]
        """)
    assert_user_error(call_cli(capsys, str(path), "--out", str(tmp_path / "out"), "--steps", "1"),
                      f"{path}:{line_of(path, 'autograd.grad')}: the forward calls "
                      "torch.autograd.grad")


def test_state_kept_on_the_model_is_noted(tmp_path, capsys):
    """A forward that keeps a tensor on the model for the next step (a
    recurrent memory) is traced from a model that has not run: noted with
    the attribute and its line. A buffer updated in place is the step's own
    state and is not noted."""
    path = write_model(tmp_path, """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.register_buffer("ema", torch.zeros(4))
                self.mem = None

            def forward(self, x):
                h = torch.tanh(self.fc(x))
                if self.mem is not None:
                    h = h + self.mem
                self.mem = h.detach()
                self.ema.mul_(0.9).add_(0.1 * h.detach().mean(0))
                return (h - self.ema).square().mean()

        def make():
            return Net(), [(torch.randn(3, 4),)]
        """)
    code = capture.main([str(path), "--out", str(tmp_path / "out"), "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert (f"keeps tensors on the model as plain attributes ({path}:"
            f"{line_of(path, 'self.mem = h')}: mem)") in err
    assert "ema" not in err


def test_host_randomness_in_forward_is_noted(tmp_path, capsys):
    """A forward drawing from Python's random module is traced with the
    number drawn while exporting: noted with the call and its line. Drawing
    with torch is not noted (the step draws anew each time)."""
    path = write_model(tmp_path, """
        import random
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)

            def forward(self, x):
                noise = torch.rand(()) * 0.1
                return (self.fc(x) * random.uniform(0.5, 1.5) + noise).square().mean()

        def make():
            return Net(), [(torch.randn(3, 4),)]
        """)
    code = capture.main([str(path), "--out", str(tmp_path / "out"), "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert (f"draws from Python's or NumPy's random generator ({path}:"
            f"{line_of(path, 'random.uniform')}: random.uniform)") in err
    assert "torch.rand" not in err.split("(")[1]


LAZY_MODEL = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.LazyLinear(4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.fc(x)).square().mean()

def make():
    return Net(), [(torch.randn(6, 3),), (torch.randn(6, 3),)]
"""


def test_lazy_modules_take_their_shapes_from_the_first_batch(tmp_path, capsys):
    """nn.LazyLinear has no parameters until a forward: capture runs one on
    the first batch (as PyTorch asks before building an optimizer), undoes
    its batch-norm update, and captures the step; it used to fail with a
    traceback (an uninitialized parameter). Under --meta a lazy module
    cannot even be made (PyTorch's own error, located in make())."""
    path = write_model(tmp_path, LAZY_MODEL)
    code = capture.main([str(path), "--out", str(tmp_path / "out"), "--steps", "2"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "lazy module(s) fc took their parameters' shapes from a forward of the first batch" in err
    ep = load_program(tmp_path / "out" / "step.pt2")
    assert tuple(ep.state_dict["fc.weight"].shape) == (4, 3)
    assert torch.equal(ep.state_dict["bn.running_mean"], torch.zeros(4))
    assert int(ep.state_dict["bn.num_batches_tracked"]) == 0

    result = call_cli(capsys, str(path), "--out", str(tmp_path / "meta"), "--meta")
    assert_user_error(result, f"{path}:{line_of(path, 'LazyLinear')}: make() raised RuntimeError")
    assert "UninitializedParameter" in result.stderr


def test_a_value_dependent_branch_is_located(tmp_path, capsys):
    """A branch on .item(): export fails on a data-dependent guard; the
    error names the model's line and what to do instead, without the
    partial graph torch prints. (Boolean-mask indexing that export can
    trace reaches loom-import, which refuses the symbolic size with the
    line.)"""
    line = "return self.fc(x).square().mean() if x.sum().item() > 0 else self.fc(x).mean()"
    path = write_model(tmp_path, f"""
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x, y):
                {line}

        def make():
            return Net(), [(torch.randn(6, 4), torch.randn(6))]
        """)
    result = call_cli(capsys, str(path), "--out", str(tmp_path / "out"), "--steps", "1")
    assert_user_error(result, f"{path}:{line_of(path, line[:20])}: torch.export could not trace "
                      "the model: GuardOnDataDependentSymNode")
    assert "a captured step has static shapes and one path" in result.stderr


@pytest.mark.parametrize("norm", ["meta", "hf", "torch"])
def test_the_casts_the_policy_makes_are_written_into_the_graph(norm):
    """Traced in f32, the RMSNorms' ``x.float()`` and ``.type_as(x)`` (and
    nn.RMSNorm's decomposition's casts) leave no op; traced with bf16
    parameters they are casts, which capture writes into the f32 graph as
    no-op ``_to_copy``s marked ``loom.policy_cast`` (loom/policy_casts.py).
    rmsnorm_casts_model.py has 5 norms (2 layers x 2, and the final one),
    each casting its input up and its result down, and 4 rotary embeddings
    (q and k of 2 layers), each ``view_as_complex(x.float())`` then
    ``.type_as(x)``: in forward 9 casts up (false: to the dtype they name)
    and 9 down (true: to the compute dtype). The f32 trace makes each of
    those conversions a copy (nn.RMSNorm runs as ATen's composite written in
    Python for it), whose gradients autograd sums before passing them on as
    under the policy, so the backwards line up too and the gradient casts
    are written: 9 to f32 and 9 to the compute dtype, and for nn.RMSNorm,
    whose weight multiplies in f32, 5 more: autograd's cast of each norm
    weight's gradient to bf16 after summing it in f32."""
    import rmsnorm_casts_model
    from loom import policy_casts

    model, batches = rmsnorm_casts_model.make(norm=norm)
    ep, _ = capture.export_joint(model, batches[0], torch.bfloat16)
    marks: dict[tuple[bool, bool], int] = {}
    for node in ep.graph.nodes:
        if policy_casts.POLICY_CAST_KEY in (node.meta.get("custom") or {}):
            key = (node.meta.get("partitioner_tag") == "is_backward",
                   node.meta["custom"][policy_casts.POLICY_CAST_KEY])
            marks[key] = marks.get(key, 0) + 1
            # As traced every one converts a value to its own dtype.
            assert node.kwargs["dtype"] == node.args[0].meta["val"].dtype == torch.float32
    assert marks == {(False, False): 9, (False, True): 9, (True, False): 9,
                     (True, True): 14 if norm == "torch" else 9}
    plain, _ = capture.export_joint(model, batches[0])
    assert not any(policy_casts.POLICY_CAST_KEY in (n.meta.get("custom") or {})
                   for n in plain.graph.nodes)
