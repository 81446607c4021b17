"""``python -m loom run``: model file -> capture -> import -> compile -> train, in one command.

The MLP example on 2 ranks with FSDP for 3 steps must train at parity with
PyTorch eager (``--check``: losses and parameters within loom-run's default
1e-5); a second identical command must take every stage from its cache
(and still report the check); a changed compile option reruns compile and
train only; a failing stage stops the command with the stage named.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from build_tools import BUILD, LOOM_COMPILE, LOOM_IMPORT, LOOM_RUN, REPO, needs_tools

pytestmark = needs_tools(LOOM_IMPORT, LOOM_COMPILE, LOOM_RUN)

STAGES = ("capture", "import", "compile", "train")
BASE = ["examples/mlp.py", "--nproc", "2", "--dp", "fsdp", "--steps", "3", "--check"]


def loom_run(*args, out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), LOOM_BUILD=str(BUILD))
    return subprocess.run([sys.executable, "-m", "loom", "run", *map(str, args), "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def stage_lines(stdout: str) -> dict[str, str]:
    """Every stage's status line, in the order the stages ran."""
    return {line.split("] ", 1)[0][1:]: line.split("] ", 1)[1]
            for line in stdout.splitlines() if line.startswith("[")}


def ran(stdout: str) -> dict[str, str]:
    """Each stage's status line: 'cached' or the command it ran."""
    return {s: line.split("] ", 1)[1] for s in STAGES for line in stdout.splitlines()
            if line.startswith(f"[{s}] ")}


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "mlp"
    return out, loom_run(*BASE, out=out)


def test_one_command_trains_at_parity(first):
    out, result = first
    assert result.returncode == 0, result.stdout + result.stderr
    stages = ran(result.stdout)
    assert list(stages) == list(STAGES) and "cached" not in stages.values()
    assert "--split 2" in stages["capture"] and "--dp=fsdp" in stages["compile"]
    assert "PASS" in result.stdout
    assert len([l for l in result.stdout.splitlines() if l.startswith("step")]) == 3
    config = json.loads((out / "run.json").read_text())
    assert config["world_size"] == 2 and config["steps"] == 3
    assert config["optimizer"]["name"] == "adamw" and config["optimizer"]["lr"] == 1e-3


def test_second_run_hits_every_cache(first):
    out, _ = first
    result = loom_run(*BASE, out=out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ran(result.stdout) == {s: "cached" for s in STAGES}
    assert "PASS" in result.stdout  # the cached training log is replayed


def test_changed_compile_option_reruns_compile_and_train(first):
    out, _ = first
    result = loom_run(*BASE, "--reshard-after-forward=false", out=out)
    assert result.returncode == 0, result.stdout + result.stderr
    stages = ran(result.stdout)
    assert stages["capture"] == stages["import"] == "cached"
    assert "--reshard-after-forward=false" in stages["compile"]
    assert stages["train"] != "cached" and "PASS" in result.stdout


def test_check_tolerances_reach_loom_run(first):
    """--rtol and --atol are loom-run's: capture and import stay cached (the
    module's other tests may have compiled other options meanwhile)."""
    out, _ = first
    result = loom_run(*BASE, "--rtol", "0", "--atol", "0", out=out)
    stages = ran(result.stdout)
    assert stages["capture"] == stages["import"] == "cached"
    assert "reference.json --rtol 0.0 --atol 0.0" in stages["train"], stages["train"]
    # Two ranks against eager on the whole batch need not agree to the bit:
    # what matters is that the check ran at tolerance 0.
    assert re.search(r"losses +\d/3 within rtol 0 ", result.stdout), result.stdout


def test_failing_stage_is_named(first, tmp_path):
    out, _ = first
    result = loom_run(*BASE, "--reshard-after-forward=bogus", out=out)
    assert result.returncode == 1
    assert result.stderr.startswith("loom run: error: [compile] loom-compile exited with status 1")
    assert "bogus" in result.stderr
    assert "[train]" not in result.stdout
    # The failed compile left no cache record: the good options run it again.
    result = loom_run(*BASE, out=out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ran(result.stdout)["compile"] != "cached"

    # A capture that cannot split the batch (the MLP has 8 rows) over 3 ranks.
    result = loom_run("examples/mlp.py", "--nproc", "3", "--steps", "1", out=tmp_path / "three")
    assert result.returncode == 1
    assert result.stderr.startswith("loom run: error: [capture] python")
    assert "--split 3" in result.stderr


def test_pipeline_ranks_count_in_nproc(tmp_path):
    """With ``--pp=P``, ``--nproc`` counts every rank, as torchrun's does: 4
    ranks are 2 pipeline ranks times 2 data-parallel ones, so capture splits
    the batch in 2 (the pipeline's ranks train the same rows) and loom-run
    starts 4. PyTorch's CompositeParamModel under a loss wrapper, FSDP on
    each stage, checked against eager."""
    out = tmp_path / "composite"
    result = loom_run("python/tests/torch_test_models.py", "--make-arg", "model=compositeparam",
                      "--nproc", "4", "--pp=2", "--pp-schedule=1F1B", "--dp", "fsdp",
                      "--microbatches", "2", "--steps", "2", "--check", out=out)
    assert result.returncode == 0, result.stdout + result.stderr
    stages = ran(result.stdout)
    assert "--split 2 " in stages["capture"], stages["capture"]
    assert "PASS" in result.stdout
    assert "trained 2 steps on 4 ranks" in result.stdout


def test_measure_workspace_profiles_before_compiling(tmp_path):
    """``--measure-workspace``: the step compiled without the budget runs one
    step measuring the kernels' workspace, and compile counts it."""
    out = tmp_path / "conv"
    result = loom_run("python/tests/remat_conv_model.py", "--steps", "2", "--check",
                      "--measure-workspace", "--recompute-budget=1GB", "--summary", out=out)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = stage_lines(result.stdout)
    assert list(lines) == ["capture", "import", "profile-compile", "profile", "compile",
                           "train"], lines
    assert "--recompute-budget" not in lines["profile-compile"]
    assert "--kernel-workspace" in lines["profile"]
    assert f"--kernel-workspace={out / 'workspace.json'}" in lines["compile"]
    assert "--recompute-budget=1GB" in lines["compile"]
    table = json.loads((out / "workspace.json").read_text())["kernels"]
    assert any(k.startswith("aten::convolution") and v > 0 for k, v in table.items()), table
    assert "PASS" in result.stdout


def test_measure_op_times_profiles_before_compiling(tmp_path):
    """``--measure-op-times``: the step compiled without the budget runs 3
    traced steps, and compile prices the recompute budget by that trace."""
    out = tmp_path / "gpt"
    result = loom_run("examples/gpt.py", "--steps", "2", "--check", "--measure-op-times",
                      "--recompute-budget=640000", "--recompute-report", out=out)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = stage_lines(result.stdout)
    assert list(lines) == ["capture", "import", "profile-compile", "profile", "compile",
                           "train"], lines
    assert "--recompute-" not in lines["profile-compile"]
    assert "--trace" in lines["profile"] and "--steps 3" in lines["profile"]
    trace = out / "profile.trace.json"
    assert f"--op-times={trace}" in lines["compile"]
    assert f"op times of {trace}" in result.stdout + result.stderr
    assert "PASS" in result.stdout


def test_data_parallel_reference_checks_each_ranks_batch_norm(tmp_path):
    """``--reference fsdp``: a convolutional net with batch norm on 2 ranks
    with FSDP is checked at tolerance 0 against PyTorch's own ``fully_shard``
    on 2 Gloo ranks (loom-run's default tolerance; the differences are 0),
    each rank's running statistics (of its own rows) against that rank's.
    Negative control: against PyTorch eager on one
    device, which normalises by the whole batch's statistics, the losses,
    parameters and running statistics all differ."""
    model = "python/tests/models/cnn.py"
    flags = ["--nproc", "2", "--dp", "fsdp", "--steps", "3", "--check"]
    result = loom_run(model, *flags, "--reference", "fsdp", out=tmp_path / "fsdp")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--reference fsdp" in stage_lines(result.stdout)["capture"]
    assert "PASS" in result.stdout
    names = json.loads((tmp_path / "fsdp" / "reference.json").read_text())["reference"]
    assert names.startswith("PyTorch fully_shard on 2 Gloo ranks"), names
    from safetensors import safe_open
    with safe_open(str(tmp_path / "fsdp" / "reference.safetensors"), "pt") as f:
        keys = set(f.keys())
        # The ranks' statistics differ (0.4% here), so a check against one
        # rank's would fail on the other.
        assert not f.get_tensor("f.1.running_mean@rank0").equal(
            f.get_tensor("f.1.running_mean@rank1"))
    assert "f.1.running_mean" not in keys and "f.1.num_batches_tracked" in keys, sorted(keys)

    result = loom_run(model, *flags, out=tmp_path / "eager")
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "buffer 'f.1.running_mean': MISMATCH" in out, out
    assert re.search(r"step +0 +loss .* MISMATCH", out), out


def test_dropout_draws_what_eager_seeded_alike_draws(tmp_path):
    """A model with dropout (p = 0.25) trained with ``--seed 5``: loom-run
    seeds its generator with the capture's seed (``--seed 5``) before the
    first step, as the eager reference did, and the native dropout kernel
    draws its masks in the same order, so the step equals eager bitwise.
    Negative control: the same artifact seeded 0 (loom-run's default)
    draws other masks and fails the exact check."""
    model = REPO / "python" / "tests" / "remat_dropout_model.py"
    out = tmp_path / "run"
    result = loom_run(model, "--steps", "3", "--seed", "5", "--check", "--rtol", "0", "--atol",
                      "0", "--optimizer", "adamw", out=out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--seed 5" in stage_lines(result.stdout)["train"]
    assert "PASS" in result.stdout

    seeded_0 = subprocess.run(
        [LOOM_RUN, out / "step.loomx", "--batches",
         out / "batches.safetensors", "--steps", "3", "--check", out / "reference.json",
         "--rtol", "0", "--atol", "0", "--no-progress"], capture_output=True, text=True)
    assert seeded_0.returncode == 1, seeded_0.stdout + seeded_0.stderr
    assert re.search(r"step +0 +loss .* MISMATCH", seeded_0.stdout), seeded_0.stdout


@pytest.mark.parametrize("flags, fragment", [
    (["--measure-op-times"], "--measure-op-times needs --recompute-budget or --schedule"),
    (["--optimizer", "sgd"], "--optimizer sgd needs --lr"),
    (["--nproc", "0"], "--nproc must be at least 1"),
    (["--units", "fc1"], "unexpected argument 'fc1'"),
    (["--reference", "fsdp"], "--reference fsdp needs data-parallel ranks: --nproc N with N > 1"),
    (["--nproc", "2", "--pp=2", "--reference", "ddp"],
     "--reference ddp needs data-parallel ranks: --nproc N with N > 1 (N / 2 > 1 with --pp=2)"),
    (["--nproc", "3", "--pp=2"], "--nproc 3 is not a multiple of --pp=2"),
    (["--grad-norm-type", "inf"], "--grad-norm-type needs --max-grad-norm"),
    (["--check", "--param-groups=ndim<2:weight-decay=0"],
     "--param-groups changes the compiled step but not the reference --check compares with; "
     "define param_groups(model) in the model file"),
    (["--max-grad-norm", "0"], "--max-grad-norm must be a finite number > 0, got 0.0"),
    (["--rtol", "0"], "--rtol is --check's tolerance; add --check"),
    (["--check", "--atol", "-1"], "--atol must be a finite number at least 0"),
    (["--check", "--rtol", "nan"], "--rtol must be a finite number at least 0"),
    (["--optimizer", "adam", "--betas", "0.9", "1.5"], "--betas must lie in [0, 1), got [0.9, 1.5]"),
    (["--optimizer", "sgd", "--lr", "0.1", "--nesterov"],
     "--nesterov needs --momentum > 0 and no dampening"),
])
def test_usage_errors(tmp_path, flags, fragment, capsys, monkeypatch):
    # In this process (the command's own main; no interpreter and torch to
    # start per case): a usage error stops before any stage runs.
    from loom import run as command

    monkeypatch.chdir(REPO)
    try:
        code = command.main(["examples/mlp.py", *flags, "--out", str(tmp_path / "out")])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    stderr = capsys.readouterr().err
    assert code == 2 and fragment in stderr, stderr
    assert not (tmp_path / "out").exists()


def test_command_line_is_read_without_torch():
    """The command's own process reads and checks its options without
    importing torch (seconds per run): the optimizer's defaults are
    torch.optim's, resolved by capture, which records them in run.json."""
    code = ("import sys; from loom import run; "
            "args, _ = run.parse_args(['examples/mlp.py', '--nproc', '2', '--optimizer', 'adam', "
            "'--betas', '0.8', '0.9', '--check']); "
            "flags = run.capture_options(args, []); run.torch_version(); "
            "assert 'torch' not in sys.modules, 'imported torch'; print(' '.join(flags))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    assert result.returncode == 0, result.stderr
    assert "--optimizer adam --betas 0.8 0.9" in result.stdout
    assert "--eps" not in result.stdout and "--lr" not in result.stdout, result.stdout


@pytest.mark.parametrize("argv, compile_args, fragments", [
    (["--nproc", "2"], [], ["--reference ddp|fsdp|hsdp"]),
    (["--nproc", "2"], ["--pp=2"], ["pipelining equals the same step's gradient accumulation"]),
    (["--nproc", "2", "--microbatches", "2"], [],
     ["--reference ddp|fsdp|hsdp", "a loss averaged within each microbatch"]),
    (["--nproc", "1"], [], []),
    (["--nproc", "2", "--reference", "fsdp"], [], []),
    (["--nproc", "4", "--dp", "replicate", "--reference", "ddp"], [],
     ["reduces its first step's gradients as one bucket in parameter order"]),
    (["--nproc", "2", "--dp", "replicate", "--reference", "ddp"], [], []),
    (["--nproc", "2", "--dp", "fsdp", "--reference", "fsdp", "--microbatches", "3"], [],
     ["divides the 3 microbatches' summed gradients by 3 before reducing them"]),
    (["--nproc", "2", "--dp", "fsdp", "--reference", "fsdp", "--microbatches", "4"], [], []),
])
def test_a_failed_check_says_why_a_correct_step_can_differ(argv, compile_args, fragments):
    """After a failed check against eager, the note names the reasons a
    correct step differs from one device's whole batch (none on one rank
    without microbatches, or against PyTorch's own data parallelism but for
    DDP on more than 2 ranks, whose first step's bucket differs, and a
    microbatch count that is not a power of two)."""
    from loom import run as command

    args, compile_args = command.parse_args(["examples/mlp.py", "--check", *argv, *compile_args])
    hint = command.check_hint(args, compile_args, "[train] loom-run exited with status 1: FAIL")
    assert all(f in hint for f in fragments) and bool(hint) == bool(fragments), hint
    assert command.check_hint(args, compile_args, "[compile] loom-compile exited") == ""


def test_optimizer_and_schedule_reach_the_reference(tmp_path):
    """The optimizer's own options and the learning-rate schedule go to
    capture, so the reference trains with them and loom-compile takes them
    from run.json (not from its command line): centered RMSprop with a
    warm-up and cosine decay on the MLP passes the check."""
    out = tmp_path / "mlp"
    result = loom_run("examples/mlp.py", "--steps", "6", "--check", "--optimizer", "rmsprop",
                      "--lr", "1e-3", "--centered", "--momentum", "0.5", "--lr-warmup-steps", "2",
                      "--lr-decay", "cosine", "--lr-decay-steps", "4", out=out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    config = json.loads((out / "run.json").read_text())
    assert config["optimizer"]["name"] == "rmsprop" and config["optimizer"]["centered"] is True
    # What was not given is torch.optim.RMSprop's default, resolved by capture.
    assert config["optimizer"]["alpha"] == 0.99 and config["optimizer"]["eps"] == 1e-8
    assert config["lr_schedule"]["decay"] == "cosine" and config["lr_schedule"]["warmup_steps"] == 2
    stages = ran(result.stdout)
    assert "--lr-decay cosine" in stages["capture"] and "--lr-decay" not in stages["compile"]
