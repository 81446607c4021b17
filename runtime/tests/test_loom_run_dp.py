"""loom-run on hand-written multi-rank artifacts, end to end.

make_dp_linear.py writes a linear + MSE step distributed DDP-style (all-reduce
avg of the gradients), FSDP-style (sharded, padded parameters and AdamW state;
all-gather before use, reduce-scatter avg of the gradients) and HSDP-style on
a (2, 2) mesh (reduce-scatter on "shard", all-reduce on "replicate"), with
PyTorch eager's losses and parameters for the whole batch in one process.
loom-run starts the artifact's world_size ranks itself (--nproc, if given,
must match) and --check must reproduce them (losses rtol 1e-5, tensors
1e-5 * max(1, |ref|)) on every rank, print the collectives of every step,
and, when one rank dies, stop the others and name it within seconds. The
failures are injected by loom-run-faults, the test build of the same tool;
the shipped loom-run has no such hooks.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

HERE = Path(__file__).resolve().parent
LOOM_RUN = os.environ.get("LOOM_RUN", "")
LOOM_RUN_FAULTS = os.environ.get("LOOM_RUN_FAULTS", "")
LOOMRT_LIB = os.environ.get("LOOMRT_LIB", "")
STEP_LINE = re.compile(
    r"^step +(\d+)  loss (\d+\.\d{7})  time \d+\.\d\d ms  peak \d+\.\d\d MiB"
    r"  ref \d+\.\d{7}  rel \S+  ok  \|(?P<colls>( \w+ \d+ \(\d+\.\d\d [KM]iB\))+)$"
)

pytestmark = pytest.mark.skipif(not LOOM_RUN, reason="LOOM_RUN is not set (ctest sets it)")

# mode, ranks, the collectives every step issues
CASES = [
    ("ddp", 2, {"all_reduce": 2}),
    ("ddp", 4, {"all_reduce": 2}),
    ("fsdp", 2, {"all_gather": 2, "reduce_scatter": 2}),
    ("fsdp", 4, {"all_gather": 2, "reduce_scatter": 2}),
    ("hsdp", 4, {"all_gather": 2, "reduce_scatter": 2, "all_reduce": 2}),
]


def make(out: Path, mode: str, nproc: int) -> Path:
    # In this process: a subprocess per case would import torch again.
    import make_dp_linear

    assert make_dp_linear.main([str(out), "--mode", mode, "--nproc", str(nproc)]) == 0
    return out


def loom_run(d: Path, nproc: int | None, *extra: str, env: dict | None = None, timeout: float = 120,
             tool: str | None = None):
    """loom-run (or `tool`) on d's artifact; `nproc` None leaves --nproc out."""
    nproc_flag = [] if nproc is None else ["--nproc", str(nproc)]
    return subprocess.run(
        [tool or LOOM_RUN, str(d / "step.loomx"), "--batches", str(d / "batches.safetensors"), *nproc_flag,
         *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("mode,nproc,collectives", CASES, ids=[f"{m}-{n}" for m, n, _ in CASES])
def test_matches_eager(tmp_path: Path, mode: str, nproc: int, collectives: dict) -> None:
    d = make(tmp_path, mode, nproc)
    saved = tmp_path / "params.safetensors"
    r = loom_run(d, nproc, "--check", str(d / "reference.json"), "--save-params", str(saved))
    assert r.returncode == 0, r.stdout + r.stderr
    steps = [line for line in r.stdout.splitlines() if line.startswith("step")]
    assert len(steps) == 5, r.stdout
    for line in steps:
        m = STEP_LINE.match(line)
        assert m, line
        counts = dict(re.findall(r" (\w+) (\d+) \(", m.group("colls")))
        assert {k: int(v) for k, v in counts.items()} == collectives, line
    assert "check: tensors 2/2" in r.stdout and r.stdout.rstrip().endswith("PASS"), r.stdout
    # Only rank 0 prints steps; the others say nothing when all goes well.
    assert "[rank" not in r.stdout + r.stderr, r.stderr
    # Saved parameters are the full (gathered, unpadded) tensors.
    ref = load_file(str(d / "reference.safetensors"))
    got = load_file(str(saved))
    for name, t in ref.items():
        assert got[name].shape == t.shape, name
        assert (got[name] - t).abs().max().item() <= 1e-5, name


def test_perturbed_reference_fails(tmp_path: Path) -> None:
    d = make(tmp_path, "fsdp", 2)
    import json

    ref = json.loads((d / "reference.json").read_text())
    ref["losses"][1] *= 1.001
    (d / "reference.json").write_text(json.dumps(ref))
    r = loom_run(d, 2, "--check", str(d / "reference.json"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL: 1 loss mismatches, 0 tensor mismatches" in r.stdout
    assert "loom-run: rank 0 failed (exit code 1)" in r.stderr


def test_dead_rank_stops_the_run(tmp_path: Path) -> None:
    d = make(tmp_path, "fsdp", 4)
    start = time.monotonic()
    r = loom_run(
        d, 4, "--steps", "5", "--timeout", "30",
        env={"LOOMRT_TEST_FAIL_RANK": "1", "LOOMRT_TEST_FAIL_STEP": "2"}, timeout=60, tool=LOOM_RUN_FAULTS,
    )
    elapsed = time.monotonic() - start
    assert r.returncode == 2, r.stdout + r.stderr
    assert "loom-run: rank 1 failed (exit code 2)" in r.stderr, r.stderr
    assert "[rank 1] loom-run: error: rank 1: test failure injected at step 2" in r.stderr
    # The peers fail in their collective, naming it, long before the timeout.
    assert re.search(r"rank [023]: programs\[0\]\.instructions\[\d+\] \(in '\w+'\) wait: \w+ over axes \[shard\]", r.stderr), r.stderr
    assert elapsed < 15, elapsed
    assert "step   1" in r.stdout and "step   2" not in r.stdout


def test_world_size_comes_from_the_artifact(tmp_path: Path) -> None:
    """No --nproc: loom-run starts the artifact's 2 ranks itself."""
    d = make(tmp_path, "ddp", 2)
    r = loom_run(d, None, "--check", str(d / "reference.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 ranks" in r.stderr and r.stdout.rstrip().endswith("PASS"), r.stdout + r.stderr


def test_rank_zero_serves_the_rendezvous_on_the_socket_it_is_handed(tmp_path: Path) -> None:
    """loom-run's launcher binds the rendezvous port itself and hands rank 0 the listening
    socket (LOOMRT_MASTER_LISTEN_FD): picking a free port and letting rank 0 bind it later left a
    window in which another process took it (EADDRINUSE on a loaded CI machine)."""
    d = make(tmp_path, "ddp", 2)

    def start(rank: int, port: int, handed: int | None) -> subprocess.Popen:
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        if handed is not None:
            env["LOOMRT_MASTER_LISTEN_FD"] = str(handed)
        return subprocess.Popen(
            [LOOM_RUN, str(d / "step.loomx"), "--batches", str(d / "batches.safetensors"), "--steps", "1",
             "--timeout", "20"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            pass_fds=() if handed is None else (handed,))

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        # Negative control: rank 0 told only the port cannot bind it while another socket holds it.
        alone = start(0, port, None)
        _, err = alone.communicate(timeout=60)
        assert alone.returncode == 2 and f"rank 0: rendezvous at 127.0.0.1:{port} failed" in err, err
        assert "EADDRINUSE" in err, err
        # Handed the socket, rank 0 serves the store on it and rank 1 meets it there.
        procs = [start(0, port, held.fileno()), start(1, port, None)]
        outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0].startswith("step   0  loss "), outs


def test_nproc_must_match_the_artifact(tmp_path: Path) -> None:
    d = make(tmp_path, "ddp", 2)
    r = loom_run(d, 4, "--steps", "1")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "loom-run: error: --nproc 4 but " in r.stderr, r.stderr
    assert "was compiled for world_size 2 (leave --nproc out: loom-run starts the artifact's 2 ranks)" in r.stderr
    # Under an external launcher, WORLD_SIZE is the one to match.
    r = subprocess.run([LOOM_RUN, str(d / "step.loomx"), "--batches", str(d / "batches.safetensors"), "--nproc", "2"],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "RANK": "0", "WORLD_SIZE": "3", "MASTER_PORT": "1"})
    assert r.returncode == 2
    assert "--nproc 2 but the environment says WORLD_SIZE=3" in r.stderr, r.stderr


def test_check_fails_on_the_rank_whose_shard_differs(tmp_path: Path) -> None:
    """Negative control for --check on every rank: the reference's last row
    of fc.weight is perturbed. FSDP on 2 ranks keeps rows 3-4 on rank 1 (3
    rows per rank, one of padding), so rank 1's check fails and names it
    while rank 0's passes; a check on rank 0 alone would pass."""
    d = make(tmp_path, "fsdp", 2)
    ref = load_file(str(d / "reference.safetensors"))
    ref["fc.weight"][4, 0] += 1e-2
    save_file(ref, str(d / "reference.safetensors"))
    r = loom_run(d, None, "--check", str(d / "reference.json"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "check: tensors 2/2" in r.stdout, r.stdout  # rank 0's rows are right
    assert re.search(r"\[rank 1\] check: rank 1: parameter 'fc\.weight' \(rows 3 to 5 of dim 0\): MISMATCH",
                     r.stderr), r.stderr
    assert "[rank 1] FAIL: rank 1: 0 loss mismatches, 1 tensor mismatches" in r.stderr, r.stderr
    assert "loom-run: rank 1 failed (exit code 1)" in r.stderr, r.stderr
    assert "loom-run: --check failed on rank(s) 1\n" in r.stderr, r.stderr


def test_check_fails_on_a_drifted_replica(tmp_path: Path) -> None:
    """Negative control: DDP's replicated parameters drift on rank 1 only
    (loom-run-faults adds 1e-2 to them before the check); rank 1's own check
    fails and the run names it."""
    d = make(tmp_path, "ddp", 2)
    r = loom_run(d, None, "--check", str(d / "reference.json"), env={"LOOMRT_TEST_PERTURB_RANK": "1"},
                 tool=LOOM_RUN_FAULTS)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "check: tensors 2/2" in r.stdout, r.stdout
    assert "[rank 1] check: rank 1: parameter 'fc.weight': MISMATCH" in r.stderr, r.stderr
    assert "loom-run: rank 1 failed (exit code 1)" in r.stderr, r.stderr
    # The same run without the perturbation passes: the hook, not the step, failed it.
    r = loom_run(d, None, "--check", str(d / "reference.json"), tool=LOOM_RUN_FAULTS)
    assert r.returncode == 0, r.stdout + r.stderr


def test_shipped_loom_run_has_no_fault_hooks(tmp_path: Path) -> None:
    """The hooks are compiled into loom-run-faults only: neither loom-run nor
    libloomrt names their variables, and setting them changes nothing."""
    for binary in (LOOM_RUN, LOOMRT_LIB):
        data = Path(binary).read_bytes()
        for var in (b"LOOMRT_TEST_FAIL_RANK", b"LOOMRT_TEST_PERTURB_RANK"):
            assert var not in data, (binary, var)
    assert b"LOOMRT_TEST_FAIL_RANK" in Path(LOOM_RUN_FAULTS).read_bytes()
    d = make(tmp_path, "ddp", 2)
    r = loom_run(d, None, "--check", str(d / "reference.json"),
                 env={"LOOMRT_TEST_FAIL_RANK": "1", "LOOMRT_TEST_FAIL_STEP": "1", "LOOMRT_TEST_PERTURB_RANK": "1"})
    assert r.returncode == 0, r.stdout + r.stderr


def test_batch_must_split_evenly(tmp_path: Path) -> None:
    # hsdp's batch of 8 rows split over 4 ranks; feed batches of 6 rows.
    d = make(tmp_path, "hsdp", 4)
    from safetensors.torch import save_file
    import torch

    b = load_file(str(d / "batches.safetensors"))
    b = {k: v[:6].contiguous() for k, v in b.items()}
    save_file(b, str(d / "batches.safetensors"), metadata={"num_steps": "3", "num_args": "2"})
    r = loom_run(d, 4, "--steps", "1")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "has 6 rows on dim 0, not divisible by the 4 ranks inputs[2] ('x') is split over" in r.stderr, r.stderr


def test_hung_rank_times_out(tmp_path: Path) -> None:
    # Rank 1 stops responding at step 2: rank 0's collective times out after
    # --timeout, names itself and the collective, and the launcher stops rank 1.
    d = make(tmp_path, "fsdp", 2)
    start = time.monotonic()
    r = loom_run(
        d, 2, "--steps", "5", "--timeout", "3",
        env={"LOOMRT_TEST_FAIL_RANK": "1", "LOOMRT_TEST_FAIL_STEP": "2", "LOOMRT_TEST_FAIL_MODE": "hang"}, timeout=60,
        tool=LOOM_RUN_FAULTS,
    )
    elapsed = time.monotonic() - start
    assert r.returncode == 3, r.stdout + r.stderr
    # (Gloo words its timeout "Timed out ..." or "Application timeout caused
    # pair closure" depending on the operation that waited.)
    assert re.search(r"rank 0: programs\[0\]\.instructions\[\d+\] \(in '\w+'\) wait: all_gather over axes \[shard\] "
                     r"ranks \[0, 1\] .*([Tt]imed out|timeout)", r.stderr), r.stderr
    # Rank 0 names the collective by its number on the group, which ranks
    # reached it and what the missing rank started last (one before: the
    # reduction of step 1's loss): the compiled order is every rank's.
    m = re.search(r"collective #(\d+) this rank started on axes \[shard\] ranks \[0, 1\]: reached by rank 0; "
                  r"rank 1 has not reached it \(the last it started on this group: #(\d+), (\w+) over .* "
                  r"the runtime's reduction of step 1's loss\)", r.stderr)
    assert m, r.stderr
    assert int(m.group(2)) == int(m.group(1)) - 1, m.group(0)
    assert "loom-run: rank 0 failed (exit code 3)" in r.stderr
    assert "loom-run: stopped rank(s) 1, still running 2 s after the first failure" in r.stderr, r.stderr
    assert elapsed < 20, elapsed


@pytest.mark.parametrize("mode,nproc", [("fsdp", 2), ("hsdp", 4)])
def test_peak_memory_is_the_same_every_step(tmp_path: Path, mode: str, nproc: int) -> None:
    """The same step measures the same bytes every time: Gloo's worker
    threads report their own buffers to the session's tracker at moments
    that race with the session's thread, and free the copies Gloo made
    while issuing a collective whenever they finish; the tracker counts
    neither race (docs/runtime.md, "Memory accounting")."""
    d = make(tmp_path, mode, nproc)
    trace = tmp_path / "trace.json"
    r = loom_run(d, nproc, "--steps", "40", "--trace", str(trace))
    assert r.returncode == 0, r.stdout + r.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    # --nproc merges the ranks' traces, one pid per rank.
    by_rank = {}
    for e in events:
        if e["ph"] == "X" and "peak_bytes" in e.get("args", {}):
            by_rank.setdefault(e["pid"], []).append(e["args"])
    assert len(by_rank) == nproc
    for steps in by_rank.values():
        assert len(steps) == 40
        assert len({(s["start_bytes"], s["peak_bytes"]) for s in steps}) == 1, steps
        assert steps[0]["peak_bytes"] > steps[0]["start_bytes"]
