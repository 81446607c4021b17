"""nn.TransformerEncoder / nn.Transformer given a causal mask and no
``is_causal`` (``causal_mask_model.py``): eager decides from the mask's
values whether it is the causal one; capture answers that question on the
batches before export (loom/causal_masks.py), where export alone stops on
the data-dependent ``bool``.

Checked: the answers and that finding them leaves the model and the random
state as they were; the step trains bitwise like eager (dropout 0.1, seeded
alike; negative control: loom-run seeded otherwise) and, with FSDP and
recompute on 2 ranks, like PyTorch's fully_shard (negative control: its
parameters one step short); without the answers export stops, naming the
test's line in torch; a mask causal in one step only, and ``--meta``, which
cannot run the model, are clear errors.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from build_tools import LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, needs_tools
from capture_cli import loom_capture
from loom import causal_masks

MODEL = Path(__file__).parent / "causal_mask_model.py"
STEPS = 3
EXACT = ["--rtol", "0", "--atol", "0"]


def load(**kwargs):
    import causal_mask_model

    torch.manual_seed(0)
    return causal_mask_model.make(**kwargs)


def run(cmd: list) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("model, answers", [
    ("encoder", {"transformer_encoder": True}),
    # The decoder asks about its target mask; the encoder gets no mask.
    ("transformer", {"transformer.decoder": True}),
])
def test_the_mask_test_is_answered_without_touching_the_model(model, answers):
    net, batches = load(model=model)
    state = {k: v.clone() for k, v in net.state_dict().items()}
    rng = torch.get_rng_state()
    assert causal_masks.decide(net, batches) == answers
    assert torch.equal(torch.get_rng_state(), rng)  # dropout drew from a fork
    assert all(torch.equal(v, state[k]) for k, v in net.state_dict().items())
    assert not net._forward_hooks and not net._forward_pre_hooks
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules())



def test_nothing_is_answered_where_nothing_is_left_to_the_values():
    net, batches = load(model="encoder")
    encoder = net.transformer_encoder
    forward = encoder.forward
    encoder.forward = lambda x, mask: forward(x, mask, is_causal=True)
    assert causal_masks.decide(net, batches) == {}
    assert causal_masks.decide(torch.nn.Linear(2, 2), [(torch.ones(2),)]) == {}


def train(tmp_path: Path, capture_args: list, compile_args: list, run_args: list):
    result = loom_capture([MODEL, "--out", tmp_path, "--steps", STEPS, *capture_args])
    assert result.returncode == 0, result.stdout + result.stderr
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "step.loomx",
                  *compile_args])
    assert result.returncode == 0, result.stderr
    return lambda reference, *extra: run([
        LOOM_RUN, tmp_path / "step.loomx", "--batches", tmp_path / "batches.safetensors",
        "--steps", STEPS, "--check", reference, "--no-progress", *EXACT, *run_args, *extra])


@needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)
@pytest.mark.parametrize("model", ["encoder", "transformer"])
def test_the_step_trains_as_eager_bitwise(model, tmp_path):
    dims = ["--batch-dims", "1,1"] if model == "encoder" else []
    check = train(tmp_path, ["--make-arg", f"model={model}", "--seed", "5", *dims], [],
                  ["--seed", "5"])
    result = check(tmp_path / "reference.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"losses  {STEPS}/{STEPS} within rtol 0 " in result.stdout
    # Negative control: dropout's masks drawn from another seed.
    result = check(tmp_path / "reference.json", "--seed", "0")
    assert result.returncode == 1 and "MISMATCH" in result.stdout, result.stdout


@needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)
def test_fsdp_with_recompute_equals_fully_shard(tmp_path):
    """The encoder on 2 ranks, FSDP with every layer checkpointed, against
    PyTorch's fully_shard on 2 Gloo ranks seeded alike."""
    check = train(tmp_path, ["--make-arg", "model=encoder", "--seed", "5", "--batch-dims", "1,1",
                             "--split", "2", "--reference", "fsdp"],
                  ["--dp=fsdp", "--remat=full"], ["--seed", "5", "--nproc", "2"])
    result = check(tmp_path / "reference.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    result = check(tmp_path / "one-step-short" / "reference.json")
    assert result.returncode == 1 and "MISMATCH" in result.stdout, result.stdout


def test_without_the_answers_export_stops_at_the_mask_test(tmp_path, monkeypatch):
    monkeypatch.setattr(causal_masks, "decide", lambda model, batches: {})
    result = loom_capture([MODEL, "--out", tmp_path, "--steps", "1", "--batch-dims", "1,1"])
    assert result.returncode == 2, result.stdout + result.stderr
    assert "GuardOnDataDependentSymNode" in result.stderr
    assert "torch/nn/modules/transformer.py:" in result.stderr
    assert "`is_causal = _detect_is_causal_mask(mask, is_causal, seq_len)`" in result.stderr


def test_a_mask_causal_in_one_step_only_is_a_clear_error(tmp_path):
    result = loom_capture([MODEL, "--out", tmp_path, "--steps", "2", "--batch-dims", "1,1,none",
                           "--make-arg", "model=varying"])
    assert result.returncode == 2, result.stdout + result.stderr
    assert (f"{MODEL}: the mask given to TransformerEncoder 'transformer_encoder' is the causal "
            "mask in step 0 but not in step 1") in result.stderr
    assert "pass is_causal (tgt_is_causal) explicitly" in result.stderr


def test_meta_cannot_answer_and_says_what_to_do(tmp_path):
    result = loom_capture([MODEL, "--out", tmp_path, "--meta", "--batch-dims", "1,1"])
    assert result.returncode == 2, result.stdout + result.stderr
    assert "tests whether the mask it is given is the causal one from its values" in result.stderr
    assert "pass is_causal (tgt_is_causal) with the mask" in result.stderr


def test_a_forward_that_raises_is_reported_by_the_reference_run(tmp_path):
    """Deciding runs the forward first; its failure is left to the eager
    reference's located error, not a traceback of the decision."""
    model = tmp_path / "broken.py"
    model.write_text(
        "import torch, torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 1)\n"
        "    def forward(self, x):\n"
        "        return self.enc(x, torch.zeros(3, 3)).sum()\n"
        "def make():\n"
        "    return Net(), [(torch.randn(4, 2, 8),)]\n")
    result = loom_capture([model, "--out", tmp_path / "out", "--steps", "1"])
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{model}:7: model(*batch) raised RuntimeError" in result.stderr
    assert "Traceback" not in result.stderr
