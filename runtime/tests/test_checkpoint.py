"""loom-run checkpoints: bitwise kill-and-resume, resharding, refused bad checkpoints.

The artifacts are make_dp_linear.py's linear layer + MSE + AdamW, written for
FSDP on 4, 2 and 1 ranks and DDP on 1 rank from the same seed (same initial
weights, same batches), plus make_linear.py's different model. Losses come
from --trace, which records them as doubles (the step lines round to 7
digits), so "bitwise" below compares the exact float32 values.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from checkpoint_helpers import complete, ok, rewrite_checkpoint, trace_losses  # runtime/tests, on sys.path under pytest

HERE = Path(__file__).resolve().parent
LOOM_RUN = os.environ.get("LOOM_RUN", "")
LOOM_RUN_FAULTS = os.environ.get("LOOM_RUN_FAULTS", "")
STEPS = 6

pytestmark = pytest.mark.skipif(not LOOM_RUN or not LOOM_RUN_FAULTS,
                                reason="LOOM_RUN/LOOM_RUN_FAULTS are not set (ctest sets them)")

# name -> make_dp_linear.program's mode and ranks; one model, one set of
# batches, AdamW everywhere.
LAYOUTS = {"fsdp4": ("fsdp", 4), "fsdp2": ("fsdp", 2), "fsdp1": ("fsdp", 1), "ddp1": ("ddp", 1),
           "hsdp4": ("hsdp", 4)}


@pytest.fixture(scope="module")
def arts(tmp_path_factory) -> dict[str, Path]:
    """The four layouts of make_dp_linear's model, written in this process
    (one torch import, one reference: fsdp4/reference.json), and
    make_linear.py's other model ("other")."""
    root = tmp_path_factory.mktemp("artifacts")
    other = subprocess.Popen([sys.executable, str(HERE / "make_linear.py"), str(root / "other"), "--optimizer",
                              "adamw"])
    sys.path.insert(0, str(HERE))
    import loomx
    import make_dp_linear as mdl

    # As make_dp_linear.main does, so the weights and batches are its own.
    torch.manual_seed(0)
    model = mdl.Model()
    batches = [(torch.randn(mdl.BATCH, mdl.IN), torch.randn(mdl.BATCH, mdl.OUT)) for _ in range(3)]
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt_json = loomx.optimizer_json(mdl.make_optimizer("fsdp", copy.deepcopy(model).parameters()))
    for name, (mode, nproc) in LAYOUTS.items():
        (root / name).mkdir()
        loomx.write_artifact(str(root / name / "step.loomx"), mdl.program(mode, nproc, opt_json, model), initial)
        loomx.save_batches(str(root / name / "batches.safetensors"), batches)
    loomx.train_reference(str(root / "fsdp4"), model, mdl.make_optimizer("fsdp", model.parameters()), batches, STEPS)
    assert other.wait(timeout=300) == 0
    return {name: root / name for name in [*LAYOUTS, "other"]}


def loom_run(d: Path, *extra: str, tool: str | None = None, env: dict | None = None):
    return subprocess.run([tool or LOOM_RUN, str(d / "step.loomx"), "--batches", str(d / "batches.safetensors"),
                           "--no-progress", "--timeout", "20", *extra],
                          capture_output=True, text=True, timeout=180, env={**os.environ, **(env or {})})






_uninterrupted: dict[str, tuple[dict[int, float], dict[str, torch.Tensor]]] = {}


def uninterrupted(d: Path, tmp: Path) -> tuple[dict[int, float], dict[str, torch.Tensor]]:
    """The losses and final parameters of STEPS steps without checkpoints."""
    if d.name not in _uninterrupted:
        ok(loom_run(d, "--steps", str(STEPS), "--trace", str(tmp / "u.json"), "--save-params", str(tmp / "u.st")))
        _uninterrupted[d.name] = (trace_losses(tmp / "u.json"), load_file(str(tmp / "u.st")))
    return _uninterrupted[d.name]




@pytest.mark.parametrize("name", ["fsdp1", "fsdp2", "fsdp4"])
def test_kill_and_resume_is_bitwise(arts, tmp_path: Path, name: str) -> None:
    d = arts[name]
    nproc = int(name[-1])
    want_losses, want_params = uninterrupted(d, tmp_path)
    ck = tmp_path / "ck"
    # The last rank is SIGKILLed as step 5 begins: checkpoints 2 and 4 are on disk.
    r = loom_run(d, "--steps", str(STEPS), "--checkpoint-dir", str(ck), "--save-every", "2", tool=LOOM_RUN_FAULTS,
                 env={"LOOMRT_TEST_FAIL_RANK": str(nproc - 1), "LOOMRT_TEST_FAIL_STEP": "5",
                      "LOOMRT_TEST_FAIL_MODE": "kill"})
    assert r.returncode != 0, r.stdout + r.stderr
    assert complete(ck) == ["step-00000002", "step-00000004"]

    r = ok(loom_run(d, "--steps", str(STEPS), "--resume", str(ck), "--checkpoint-dir", str(ck), "--save-every", "2",
                    "--trace", str(tmp_path / "r.json"), "--save-params", str(tmp_path / "r.st")))
    assert "resumed from " + str(ck / "step-00000004") + " at step 4" in r.stderr
    got = trace_losses(tmp_path / "r.json")
    assert got == {4: want_losses[4], 5: want_losses[5]}
    params = load_file(str(tmp_path / "r.st"))
    assert params.keys() == want_params.keys()
    for k in params:
        assert torch.equal(params[k], want_params[k]), k
    assert complete(ck)[-1] == "step-00000006"




def test_negative_control_lost_optimizer_state_changes_the_run(arts, tmp_path: Path) -> None:
    """The comparison above can fail: the same checkpoint with its AdamW
    moments zeroed (and valid checksums) resumes, gives the same loss at
    step 4 (the parameters are restored) and a different one at step 5."""
    d = arts["fsdp2"]
    want_losses, _ = uninterrupted(d, tmp_path)
    ck = tmp_path / "ck"
    ok(loom_run(d, "--steps", "4", "--checkpoint-dir", str(ck), "--save-every", "4"))
    rewrite_checkpoint(ck / "step-00000004", lambda k, v: torch.zeros_like(v) if ".exp_avg" in k else v)
    ok(loom_run(d, "--steps", str(STEPS), "--resume", str(ck), "--trace", str(tmp_path / "r.json")))
    got = trace_losses(tmp_path / "r.json")
    assert got[4] == want_losses[4]
    assert got[5] != want_losses[5]


# The per-parameter scalars an optimizer keeps beside the step count, and
# the one whose loss changes the next step: NAdam's mu_product (the product
# of its momentum coefficients, 1 before the first step); ASGD's eta (the
# rate of its next step, the lr before the first) and mu (the averaging
# weight, which changes only its average `ax`).
OPTIMIZER_SCALARS = {"nadam": (("mu_product",), "mu_product", 1.0),
                     "asgd": (("eta", "mu"), "eta", 0.05)}


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZER_SCALARS))
def test_optimizer_scalars_are_saved_and_restored(tmp_path: Path, optimizer: str) -> None:
    """The index lists every per-parameter scalar (its own kind, a float32
    scalar), a resume on 2 FSDP ranks is bitwise the uninterrupted run (its
    losses, parameters and final optimizer state: ASGD's `ax` depends on
    mu), and the same checkpoint with one scalar put back to its value
    before the first step resumes to the same step-4 loss and a different
    step-5 loss."""
    sys.path.insert(0, str(HERE))
    import make_dp_linear

    kinds, lost, initial = OPTIMIZER_SCALARS[optimizer]
    name = optimizer + "2"
    d = Path(make_dp_linear.write_layouts(tmp_path / "a", {name: ("fsdp", 2)}, optimizer=optimizer)[name])
    want_losses, want_params = uninterrupted(d, tmp_path)
    ck = tmp_path / "ck"
    ok(loom_run(d, "--steps", "4", "--checkpoint-dir", str(ck), "--save-every", "4"))
    index = json.loads((ck / "step-00000004" / "index.json").read_text())
    for kind in kinds:
        scalars = {t["name"]: t for t in index["tensors"] if t["kind"] == kind}
        assert set(scalars) == {f"fc.weight.{kind}", f"fc.bias.{kind}"}
        assert all(t["param"] == t["name"][:-len(kind) - 1] and t["shape"] == [] and t["dtype"] == "f32"
                   for t in scalars.values())
    ok(loom_run(d, "--steps", str(STEPS), "--resume", str(ck), "--trace", str(tmp_path / "r.json"),
                "--save-params", str(tmp_path / "r.st")))
    assert trace_losses(tmp_path / "r.json") == {4: want_losses[4], 5: want_losses[5]}
    params = load_file(str(tmp_path / "r.st"))
    assert all(torch.equal(params[k], want_params[k]) for k in want_params)
    # The optimizer state after the last step, resumed and uninterrupted.
    ends = {}
    for run_name, extra in (("resumed", ["--resume", str(ck)]), ("whole", [])):
        ok(loom_run(d, "--steps", str(STEPS), *extra, "--checkpoint-dir", str(tmp_path / run_name),
                    "--save-every", str(STEPS)))
        step_dir = tmp_path / run_name / f"step-{STEPS:08d}"
        ends[run_name] = {(f.name, k): v for f in sorted(step_dir.glob("rank-*.safetensors"))
                          for k, v in load_file(str(f)).items()}
    assert ends["resumed"].keys() == ends["whole"].keys()
    assert any(k.endswith((".ax", ".exp_avg")) for _, k in ends["whole"])
    for k, v in ends["whole"].items():
        assert torch.equal(ends["resumed"][k], v), k

    # Negative control: the scalar lost.
    saved = []
    rewrite_checkpoint(ck / "step-00000004",
                       lambda k, v: saved.append(v.item()) or torch.full_like(v, initial)
                       if k.endswith("." + lost) else v)
    assert saved and all(p != initial for p in saved)
    ok(loom_run(d, "--steps", str(STEPS), "--resume", str(ck), "--trace", str(tmp_path / "n.json")))
    got = trace_losses(tmp_path / "n.json")
    assert got[4] == want_losses[4] and got[5] != want_losses[5]


def test_resharded_resume_4_2_1(arts, tmp_path: Path) -> None:
    """FSDP on 4 ranks saves at step 2, FSDP on 2 continues to step 4 and
    saves, then FSDP on 1 rank and DDP on 1 rank each finish the run.

    Tolerance: a layout changes only how the gradient average is summed (4,
    2 or 1 partial sums of float32, in another order), a few ulps per step;
    the continued losses and final parameters are held to --check's 1e-5
    relative against PyTorch eager, the tolerance every DP layout meets
    without checkpoints, and the losses to 1e-5 relative against the
    uninterrupted 4-rank run."""
    want_losses, _ = uninterrupted(arts["fsdp4"], tmp_path)
    ck = tmp_path / "ck"
    ok(loom_run(arts["fsdp4"], "--steps", "2", "--checkpoint-dir", str(ck), "--save-every", "2"))
    ref = str(arts["fsdp4"] / "reference.json")
    ok(loom_run(arts["fsdp2"], "--steps", "4", "--resume", str(ck), "--checkpoint-dir", str(ck), "--save-every", "2",
                "--check", ref, "--trace", str(tmp_path / "t2.json")))
    losses = trace_losses(tmp_path / "t2.json")
    assert sorted(losses) == [2, 3]
    for name in ("fsdp1", "ddp1"):
        r = ok(loom_run(arts[name], "--resume", str(ck), "--check", ref, "--trace", str(tmp_path / f"{name}.json")))
        assert "at step 4" in r.stderr
        assert "check: losses  2/2" in r.stdout and "PASS" in r.stdout, r.stdout
        got = {**losses, **trace_losses(tmp_path / f"{name}.json")}
        assert sorted(got) == [2, 3, 4, 5]
        for s, v in got.items():
            assert abs(v - want_losses[s]) <= 1e-5 * abs(want_losses[s]), (name, s, v, want_losses[s])


def test_hsdp_writes_each_shard_once_and_resumes_on_fsdp2(arts, tmp_path: Path) -> None:
    """HSDP (2 x 2) holds each shard on two ranks: ranks 0 and 1 write them,
    ranks 2 and 3 only their generator state; FSDP on 2 ranks continues
    (tolerance as in test_resharded_resume_4_2_1)."""
    ck = tmp_path / "ck"
    ok(loom_run(arts["hsdp4"], "--steps", "3", "--checkpoint-dir", str(ck), "--save-every", "3"))
    index = json.loads((ck / "step-00000003" / "index.json").read_text())
    for t in index["tensors"]:
        files = [p["file"] for p in t["pieces"]]
        assert files == ([0, 1] if t["shard_dim"] == 0 else [0]), t
    r = ok(loom_run(arts["fsdp2"], "--resume", str(ck), "--check", str(arts["fsdp4"] / "reference.json")))
    assert "check: losses  3/3" in r.stdout and "PASS" in r.stdout, r.stdout


def test_a_save_that_dies_leaves_the_previous_checkpoint(arts, tmp_path: Path) -> None:
    d = arts["fsdp2"]
    want_losses, want_params = uninterrupted(d, tmp_path)
    ck = tmp_path / "ck"
    r = loom_run(d, "--steps", str(STEPS), "--checkpoint-dir", str(ck), "--save-every", "2", tool=LOOM_RUN_FAULTS,
                 env={"LOOMRT_TEST_SAVE_KILL_RANK": "1", "LOOMRT_TEST_SAVE_KILL_STEP": "4"})
    assert r.returncode != 0
    assert "loom-run: rank 1 failed (signal 9" in r.stderr, r.stderr
    assert "rank 0: saving " + str(ck / "step-00000004") + ": gathering the ranks' file checksums failed" in r.stderr
    # Rank 1's file of step 4 is there, the index is not.
    assert (ck / "step-00000004" / "rank-00001.safetensors").exists()
    assert complete(ck) == ["step-00000002"]
    # Resuming takes step 2; the rerun saves 4 and 6, and --keep 2 rotates 2 out.
    r = ok(loom_run(d, "--steps", str(STEPS), "--resume", str(ck), "--checkpoint-dir", str(ck), "--save-every", "2",
                    "--keep", "2", "--trace", str(tmp_path / "r.json"), "--save-params", str(tmp_path / "r.st")))
    assert "at step 2" in r.stderr
    assert trace_losses(tmp_path / "r.json") == {s: want_losses[s] for s in range(2, STEPS)}
    for k, v in load_file(str(tmp_path / "r.st")).items():
        assert torch.equal(v, want_params[k]), k
    assert sorted(p.name for p in ck.iterdir()) == ["step-00000004", "step-00000006"]


@pytest.fixture(scope="module")
def good_checkpoint(arts, tmp_path_factory) -> Path:
    """A directory holding FSDP-2's checkpoint at step 2."""
    ck = tmp_path_factory.mktemp("good") / "ck"
    ok(loom_run(arts["fsdp2"], "--steps", "2", "--checkpoint-dir", str(ck), "--save-every", "2"))
    return ck


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def truncate(ck: Path) -> None:
    p = ck / "rank-00001.safetensors"
    p.write_bytes(p.read_bytes()[:-100])


def flip_a_byte(ck: Path) -> None:
    p = ck / "rank-00000.safetensors"
    b = bytearray(p.read_bytes())
    b[-1] ^= 0x40
    p.write_bytes(bytes(b))


def remove_rank_file(ck: Path) -> None:
    (ck / "rank-00001.safetensors").unlink()


BAD = [
    ("truncated", truncate, "fsdp2", "rank-00001.safetensors: truncated"),
    ("checksum", flip_a_byte, "fsdp2", "rank-00000.safetensors: checksum mismatch"),
    ("missing-rank", remove_rank_file, "fsdp2", "rank-00001.safetensors: missing"),
    ("another-model", None, "other", "index.json: 'fc.weight' is the parameter f32 [5, 6]"),
]


@pytest.mark.parametrize("case,damage,art,message", BAD, ids=[b[0] for b in BAD])
def test_bad_checkpoint_is_refused(arts, good_checkpoint, tmp_path: Path, case, damage, art, message) -> None:
    ck = tmp_path / "ck"
    shutil.copytree(good_checkpoint, ck)
    if damage:
        damage(ck / "step-00000002")
    before = snapshot(ck)
    # A run that got past the load would save into the same directory.
    r = loom_run(arts[art], "--steps", str(STEPS), "--resume", str(ck), "--checkpoint-dir", str(ck),
                 "--save-every", "1")
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr, r.stderr
    assert "step " not in r.stdout
    assert snapshot(ck) == before


def test_export_loads_into_pytorch_and_a_pytorch_file_starts_a_run(arts, tmp_path: Path) -> None:
    """--save-params writes full (unsharded) weights that load_state_dict
    takes; a state_dict PyTorch saved starts a run (--weights) that matches
    the reference trained from the same weights."""
    d = arts["fsdp2"]
    ok(loom_run(d, "--steps", "2", "--save-params", str(tmp_path / "w.st")))
    exported = torch.nn.Module()
    exported.fc = torch.nn.Linear(6, 5)
    exported.load_state_dict(load_file(str(tmp_path / "w.st")), strict=True)

    torch.manual_seed(0)  # make_dp_linear's seed: its model's initial weights
    model = torch.nn.Module()
    model.fc = torch.nn.Linear(6, 5)
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "pt.st"))
    r = ok(loom_run(d, "--weights", str(tmp_path / "pt.st"), "--check", str(arts["fsdp4"] / "reference.json")))
    assert "PASS" in r.stdout


@pytest.mark.parametrize("args,message", [
    (["--save-every", "2"], "--checkpoint-dir and --save-every go together"),
    (["--checkpoint-dir", "d"], "--checkpoint-dir and --save-every go together"),
    (["--checkpoint-dir", "d", "--save-every", "2", "--keep", "0"], "--keep expects an integer >= 1"),
    (["--keep", "2"], "--keep applies to --save-every"),
    (["--resume", "d", "--weights", "w"], "--resume and --weights both set the parameters"),
])
def test_usage_errors(args: list[str], message: str) -> None:
    r = subprocess.run([LOOM_RUN, "x.loomx", "--batches", "b", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_resume_past_the_requested_steps_is_refused(arts, good_checkpoint) -> None:
    r = loom_run(arts["fsdp2"], "--resume", str(good_checkpoint), "--steps", "2")
    assert r.returncode == 2
    assert "nothing to run: the checkpoint is at step 2 and --steps is 2" in r.stderr, r.stderr
