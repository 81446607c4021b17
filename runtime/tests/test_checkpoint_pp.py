"""Checkpoints of pipelined (MPMD) artifacts: bitwise kill-and-resume, and a
pipeline checkpoint resuming without the pipeline.

pp_ckpt_model.py (a tied input projection and head around four blocks,
AdamW) is captured twice, for 4 microbatches and for 2 microbatches of one
of 2 data-parallel ranks, and compiled into the layouts below by the
compiler built next to this runtime (LOOM_BIN: loom-import, loom-compile).
Every run uses one ATen thread per rank (intra-op reductions round by
thread count). Losses come from --trace, as doubles.

Tolerances: on the same layout, none (a resumed run is the uninterrupted
one, bit for bit). A checkpoint of PP=2 x FSDP 2 resumed on one rank
changes how the gradients are summed (two data-parallel partial sums of two
microbatches each, averaged over Gloo, against four microbatches summed in
order), which may round differently: the continued losses and parameters
are held to 1e-6 relative (+1e-7 absolute for parameters), and a negative
control shows that this tolerance fails when the optimizer state is lost.
(On this model the sums happen to round alike and the runs are equal; the
test asks only for what the format promises across layouts.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from checkpoint_helpers import complete, ok, rewrite_checkpoint, trace_losses  # runtime/tests, on sys.path under pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LOOM_RUN = os.environ.get("LOOM_RUN", "")
LOOM_RUN_FAULTS = os.environ.get("LOOM_RUN_FAULTS", "")
LOOM_BIN = Path(os.environ.get("LOOM_BIN", REPO / "build" / "bin"))
STEPS = 6

pytestmark = pytest.mark.skipif(not LOOM_RUN or not LOOM_RUN_FAULTS,
                                reason="LOOM_RUN/LOOM_RUN_FAULTS are not set (ctest sets them)")

# name -> (capture, loom-compile flags, ranks)
LAYOUTS = {
    "1f1b": ("mb4", ["--pp=2", "--pp-schedule=1F1B"], 2),
    # Four stages, two per rank: each rank's program holds two stages.
    "interleaved": ("mb4", ["--pp=2", "--pp-schedule=Interleaved1F1B"], 2),
    "pp-fsdp": ("split2", ["--pp=2", "--pp-schedule=1F1B", "--dp=fsdp"], 4),
    # The same capture as a single-rank step accumulating 4 microbatches.
    "one-rank": ("mb4", [], 1),
}
CAPTURES = {"mb4": ["--microbatches", "4"], "split2": ["--microbatches", "2", "--split", "2"]}


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=180, **kwargs)




@pytest.fixture(scope="module")
def arts(tmp_path_factory) -> dict[str, Path]:
    """Each layout's directory: step.loomx, batches.safetensors."""
    tools = [LOOM_BIN / "loom-import", LOOM_BIN / "loom-compile"]
    missing = [str(t) for t in tools if not t.exists()]
    if missing:
        pytest.fail(f"not built: {', '.join(missing)} (build the compiler: make build; or set LOOM_BIN)",
                    pytrace=False)
    root = tmp_path_factory.mktemp("pp")
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))

    def capture(name: str) -> None:
        out = root / name
        ok(run([sys.executable, "-m", "loom.capture", HERE / "pp_ckpt_model.py", "--out", out, "--steps",
                str(STEPS), *CAPTURES[name]], env=env))
        ok(run([tools[0], out / "step.pt2", "-o", out / "step.mlir"]))

    # The two captures are independent: overlap their Python start-up.
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(capture, CAPTURES))
    out = {}
    for name, (cap, flags, _) in LAYOUTS.items():
        d = root / name
        d.mkdir()
        ok(run([tools[1], root / cap / "step.mlir", "-o", d / "step.loomx", *flags]))
        (d / "batches.safetensors").symlink_to(root / cap / "batches.safetensors")
        out[name] = d
    return out


def loom_run(d: Path, *extra: str, tool: str | None = None, env: dict | None = None):
    nproc = LAYOUTS[d.name][2]
    return run([tool or LOOM_RUN, d / "step.loomx", "--batches", d / "batches.safetensors", "--nproc", str(nproc),
                "--threads", "1", "--no-progress", "--timeout", "20", *extra],
               env={**os.environ, **(env or {})})






_uninterrupted: dict[str, tuple[dict[int, float], dict[str, torch.Tensor], Path]] = {}


def uninterrupted(d: Path, tmp: Path) -> tuple[dict[int, float], dict[str, torch.Tensor], Path]:
    """The losses and final parameters of STEPS steps, and the checkpoint
    directory that run filled every 2 steps (saving does not change a run:
    the kill-and-resume below holds it to that)."""
    if d.name not in _uninterrupted:
        ck = tmp / f"u-{d.name}"
        ok(loom_run(d, "--steps", str(STEPS), "--trace", tmp / "u.json", "--save-params", tmp / "u.st",
                    "--checkpoint-dir", ck, "--save-every", "2"))
        _uninterrupted[d.name] = (trace_losses(tmp / "u.json"), load_file(str(tmp / "u.st")), ck)
    return _uninterrupted[d.name]


@pytest.mark.parametrize("name", ["1f1b", "interleaved", "pp-fsdp"])
def test_kill_and_resume_is_bitwise(arts, tmp_path: Path, name: str) -> None:
    """The last rank (the last stage's) is SIGKILLed as step 5 begins; the
    run resumes from step 4 on the same layout and gives the uninterrupted
    run's losses and final parameters exactly."""
    d = arts[name]
    nproc = LAYOUTS[name][2]
    want_losses, want_params, _ = uninterrupted(d, tmp_path)
    ck = tmp_path / "ck"
    r = loom_run(d, "--steps", str(STEPS), "--checkpoint-dir", ck, "--save-every", "2", tool=LOOM_RUN_FAULTS,
                 env={"LOOMRT_TEST_FAIL_RANK": str(nproc - 1), "LOOMRT_TEST_FAIL_STEP": "5",
                      "LOOMRT_TEST_FAIL_MODE": "kill"})
    assert r.returncode != 0, r.stdout + r.stderr
    assert f"rank {nproc - 1} failed (signal 9" in r.stderr, r.stderr
    assert complete(ck) == ["step-00000002", "step-00000004"]
    index = json.loads((ck / "step-00000004" / "index.json").read_text())
    assert index["layout"]["mpmd"] is True
    assert len(index["layout"]["programs"]) == 2

    r = ok(loom_run(d, "--steps", str(STEPS), "--resume", ck, "--trace", tmp_path / "r.json",
                    "--save-params", tmp_path / "r.st"))
    assert "resumed from " + str(ck / "step-00000004") + " at step 4" in r.stderr
    assert trace_losses(tmp_path / "r.json") == {4: want_losses[4], 5: want_losses[5]}
    params = load_file(str(tmp_path / "r.st"))
    assert params.keys() == want_params.keys()
    for k in params:
        assert torch.equal(params[k], want_params[k]), k


def test_index_places_every_tensor(arts, tmp_path: Path) -> None:
    """PP=2 x FSDP 2: the index alone says where each tensor is. Each is
    written by the ranks of the first program holding it, FSDP shards as row
    ranges of the two ranks of that stage; the tied weight, held by both
    stages' programs, is written once (by stage 0's ranks)."""
    _, _, ck = uninterrupted(arts["pp-fsdp"], tmp_path)
    index = json.loads((ck / "step-00000004" / "index.json").read_text())
    layout = index["layout"]
    assert layout["mesh"] == {"shape": [2, 2], "axes": ["pp", "dp"]}
    assert layout["programs"] == [[0, 1], [2, 3]]
    by_name = {t["name"]: t for t in index["tensors"]}
    tied = by_name["proj.weight"]
    assert tied["programs"] == [0, 1]
    assert tied["shard_dim"] == 0 and [p["file"] for p in tied["pieces"]] == [0, 1], tied
    assert by_name["proj.weight.exp_avg"]["programs"] == [0, 1]
    last = by_name["layers.3.fc.weight"]
    assert last["programs"] == [1] and [p["file"] for p in last["pieces"]] == [2, 3], last
    assert [p["rows"] for p in last["pieces"]] == [[0, 4], [4, 8]]




def within(got: float | torch.Tensor, want: float | torch.Tensor, rtol: float, atol: float = 0.0) -> bool:
    return bool(torch.allclose(torch.as_tensor(got), torch.as_tensor(want), rtol=rtol, atol=atol))


def test_pipeline_checkpoint_resumes_on_one_rank(arts, tmp_path: Path) -> None:
    """PP=2 x FSDP 2 (4 ranks, 2 programs) saves at step 4; the same model
    compiled for one rank without a pipeline resumes from it, from the index
    alone, and continues within the reduction-order tolerance (module
    docstring) of the uninterrupted 4-rank run. Negative control: the same
    checkpoint with the AdamW moments zeroed (valid checksums) fails that
    tolerance at step 5."""
    want_losses, want_params, ck = uninterrupted(arts["pp-fsdp"], tmp_path)
    r = ok(loom_run(arts["one-rank"], "--steps", str(STEPS), "--resume", ck / "step-00000004",
                    "--trace", tmp_path / "one.json", "--save-params", tmp_path / "one.st"))
    assert "at step 4" in r.stderr
    got = trace_losses(tmp_path / "one.json")
    assert sorted(got) == [4, 5]
    for s in got:
        assert within(got[s], want_losses[s], 1e-6), (s, got[s], want_losses[s])
    params = load_file(str(tmp_path / "one.st"))
    assert params.keys() == want_params.keys()
    for k in params:
        assert within(params[k], want_params[k], 1e-6, 1e-7), k

    lost = tmp_path / "lost"
    shutil.copytree(ck / "step-00000004", lost)
    rewrite_checkpoint(lost, lambda k, v: torch.zeros_like(v) if ".exp_avg" in k else v)
    ok(loom_run(arts["one-rank"], "--steps", str(STEPS), "--resume", lost, "--trace", tmp_path / "lost.json"))
    bad = trace_losses(tmp_path / "lost.json")
    assert within(bad[4], want_losses[4], 1e-6)  # the parameters were restored
    assert not within(bad[5], want_losses[5], 1e-6), (bad[5], want_losses[5])
