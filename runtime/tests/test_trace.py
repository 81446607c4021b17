"""loom-run --trace on several ranks: a valid Chrome trace with compute and communication tracks.

On the hand-written FSDP linear step of make_dp_linear.py (2 ranks, 2
all-gathers and 2 reduce-scatters per step), the merged trace must be valid
Chrome trace-event JSON (what Perfetto and chrome://tracing load), with one
process per rank and the tracks "steps", "compute" and "comm"; every
collective must appear on a comm track as an interval from its issue (inside
its start instruction on the compute track) to its completion (no later than
the end of its wait instruction), and the wait must appear on the compute
track. Under an external launcher (RANK set) each rank writes its own file.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
LOOM_RUN = os.environ.get("LOOM_RUN", "")
STEPS = 3
EPS_US = 1.0  # timestamps are doubles in microseconds; JSON keeps them exactly, allow rounding

pytestmark = pytest.mark.skipif(not LOOM_RUN, reason="LOOM_RUN is not set (ctest sets it)")


@pytest.fixture(scope="module")
def fsdp2(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fsdp2")
    import make_dp_linear  # in this process: one torch import

    assert make_dp_linear.main([str(out), "--mode", "fsdp", "--nproc", "2"]) == 0
    return out


def run(d: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LOOM_RUN, str(d / "step.loomx"), "--batches", str(d / "batches.safetensors"),
         "--steps", str(STEPS), *extra],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


def check_chrome_trace(root: dict) -> list[dict]:
    """The rules of the Chrome trace-event format that viewers rely on."""
    assert isinstance(root, dict) and isinstance(root["traceEvents"], list)
    events = root["traceEvents"]
    for e in events:
        assert e["ph"] in ("X", "M", "C"), e
        assert isinstance(e["pid"], int) and isinstance(e["name"], str), e
        if e["ph"] == "X":
            assert isinstance(e["tid"], int), e
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)), e
            assert e["ts"] >= 0 and e["dur"] >= 0, e
        if e["ph"] == "C":
            assert all(isinstance(v, (int, float)) for v in e["args"].values()), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name",
                                 "thread_sort_index"), e
    return events


def tracks(events: list[dict]) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"]
            for e in events if e["ph"] == "M" and e["name"] == "thread_name"}


def test_two_ranks_trace(fsdp2: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    r = run(fsdp2, "--nproc", "2", "--trace", str(trace))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"wrote trace {trace} (2 ranks)" in r.stderr
    # The per-rank files were merged and removed.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]
    events = check_chrome_trace(json.loads(trace.read_text()))

    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {0: "rank 0", 1: "rank 1"}
    by_track = tracks(events)
    for pid in (0, 1):
        assert by_track[(pid, 0)] == "steps" and by_track[(pid, 1)] == "compute"
        assert by_track[(pid, 2)] == "comm"
        assert all(name == "comm" or name.startswith("comm ") for (p, t), name in by_track.items()
                   if p == pid and t >= 2)

    for pid in (0, 1):
        steps = [e for e in events if e["ph"] == "X" and e["pid"] == pid and e["tid"] == 0]
        assert [e["name"] for e in steps] == [f"step {i}" for i in range(STEPS)]
        compute = [e for e in events if e["ph"] == "X" and e["pid"] == pid and e["tid"] == 1]
        comm = [e for e in events if e["ph"] == "X" and e["pid"] == pid and e["tid"] >= 2]
        for step in range(STEPS):
            window = steps[step]
            insts = {e["args"]["index"]: e for e in compute if e["args"]["step"] == step}
            colls = [e for e in comm if e["args"]["step"] == step]
            assert sorted(e["args"]["kind"] for e in colls) == ["all_gather"] * 2 + ["reduce_scatter"] * 2
            # The main thread runs one instruction at a time, inside the step.
            ordered = sorted(insts.values(), key=lambda e: e["ts"])
            assert [e["args"]["index"] for e in ordered] == sorted(insts)
            for a, b in zip(ordered, ordered[1:]):
                assert a["ts"] + a["dur"] <= b["ts"] + EPS_US
            assert window["ts"] - EPS_US <= ordered[0]["ts"]
            assert ordered[-1]["ts"] + ordered[-1]["dur"] <= window["ts"] + window["dur"] + EPS_US
            waits = 0.0
            for c in colls:
                start, wait = insts[c["args"]["start_index"]], insts[c["args"]["wait_index"]]
                assert start["cat"] == "comm_issue" and start["args"]["op"].endswith("_start")
                assert wait["cat"] == "comm_wait" and wait["args"]["op"] == "wait"
                assert start["args"]["stream"] == wait["args"]["stream"] == "comm"
                # Issued inside the start instruction, completed by the end of the wait.
                assert start["ts"] - EPS_US <= c["ts"] <= start["ts"] + start["dur"] + EPS_US
                assert c["ts"] + c["dur"] <= wait["ts"] + wait["dur"] + EPS_US
                assert 0 <= c["args"]["wait_us"] <= wait["dur"] + EPS_US
                assert c["args"]["bytes"] > 0 and "over axes [shard] ranks [0, 1]" in c["args"]["collective"]
                waits += c["args"]["wait_us"]
            assert window["args"]["collectives"] == 4
            assert window["args"]["comm_wait_us"] == pytest.approx(waits, abs=1e-3)
            assert window["args"]["comm_in_flight_us"] == pytest.approx(sum(c["dur"] for c in colls), abs=1e-3)
    # Perfetto needs the complete events of one thread to nest: none of ours
    # overlap on a track (the comm lanes are assigned so).
    for (pid, tid) in tracks(events):
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                       if e["ph"] == "X" and e["pid"] == pid and e["tid"] == tid)
        for (a0, a1), (b0, _) in zip(spans, spans[1:]):
            assert a1 <= b0 + EPS_US, (pid, tid, a0, a1, b0)
    # One time axis: the two ranks' steps overlap (they run in lockstep).
    s0 = [e for e in events if e["ph"] == "X" and e["tid"] == 0 and e["name"] == "step 1"]
    (a, b) = sorted(s0, key=lambda e: e["pid"])
    assert a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]


def test_external_launcher_writes_one_trace_per_rank(fsdp2: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    # Rank 0 serves the store on a socket bound here (as loom-run's launcher hands it one), so no
    # other process can take a port picked free before rank 0 binds it.
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    env = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(held.getsockname()[1])}
    with held:
        procs = [subprocess.Popen(
            [LOOM_RUN, str(fsdp2 / "step.loomx"), "--batches", str(fsdp2 / "batches.safetensors"),
             "--steps", "1", "--trace", str(trace)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **env, "RANK": str(rank), "LOCAL_RANK": str(rank),
                 **({"LOOMRT_MASTER_LISTEN_FD": str(held.fileno())} if rank == 0 else {})},
            pass_fds=(held.fileno(),) if rank == 0 else ()) for rank in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.rank0.json", "t.rank1.json"]
    for rank in (0, 1):
        assert f"rank {rank} wrote trace {tmp_path / f't.rank{rank}.json'}" in outs[rank][1]
        root = json.loads((tmp_path / f"t.rank{rank}.json").read_text())
        events = check_chrome_trace(root)
        assert {e["pid"] for e in events} == {rank}
        assert root["otherData"]["rank"] == rank and root["otherData"]["world_size"] == 2
        assert len([e for e in events if e.get("cat") == "comm"]) == 4


def test_single_rank_trace_has_no_comm_track(tmp_path: Path) -> None:
    import make_linear

    assert make_linear.main([str(tmp_path)]) == 0
    trace = tmp_path / "t.json"
    r = run(tmp_path, "--trace", str(trace))
    assert r.returncode == 0, r.stdout + r.stderr
    events = check_chrome_trace(json.loads(trace.read_text()))
    assert set(tracks(events).values()) == {"steps", "compute"}
    assert {e["pid"] for e in events} == {0}
