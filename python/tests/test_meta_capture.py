"""Weightless capture (``loom.capture --meta``) and import (``loom-import --no-weights``).

A Llama-3-shaped model (bench/models/llama3.py: RMSNorm, RoPE, grouped-query
attention, SwiGLU) at a small size (dim 64, 2 layers, 4 heads, 2 KV heads)
is captured twice, once with weights and once as fake tensors; the weightless
step must be the same program (same ops, types, modules and phases) with the
parameters as plain typed arguments, and the importer must refuse it without
``--no-weights`` with an error that says so.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from build_tools import LOOM_IMPORT, LOOM_OPT, REPO, require_tools
LLAMA = REPO / "bench" / "models" / "llama3.py"
SMALL = {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 128,
         "vocab": 256, "seq": 32, "batch": 2}


def capture(out: Path, *extra: str, shape: dict | None = None) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "loom.capture", str(LLAMA), "--out", str(out)]
    for key, value in (SMALL if shape is None else shape).items():
        args += ["--make-arg", f"{key}={value}"]
    return subprocess.run(args + list(extra), capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO / "python")))


def loom_import(pt2: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LOOM_IMPORT), str(pt2), *extra], capture_output=True, text=True)


def body(mlir: str) -> list[str]:
    """The step's ops without locations and with the source path dropped."""
    ops = [line.split(" loc(")[0].strip() for line in mlir.splitlines()
           if line.startswith("    ") and "=" in line]
    assert ops, mlir[:2000]
    return ops


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    require_tools(LOOM_IMPORT)
    root = tmp_path_factory.mktemp("meta")
    meta = capture(root / "meta", "--meta")
    assert meta.returncode == 0, meta.stderr
    real = capture(root / "real", "--steps", "1")
    assert real.returncode == 0, real.stderr
    return root, meta.stdout


def test_meta_writes_only_the_step(steps):
    root, stdout = steps
    assert sorted(p.name for p in (root / "meta").iterdir()) == ["run.json", "step.pt2"]
    # The run configuration travels inside the archive too, as the importer reads it.
    config = json.loads((root / "meta" / "run.json").read_text())
    assert config["format"] == "loom-run-config" and config["world_size"] == 1
    with zipfile.ZipFile(root / "meta" / "step.pt2") as z:
        assert z.read("step/extra/loom_run.json") == (root / "meta" / "run.json").read_bytes()
    # 2 layers x 9 tensors + embedding, final norm, output.
    assert "parameters: 21 tensors, 106816 elements" in stdout
    assert "--meta: no weights" in stdout


def test_weightless_import_is_the_same_program(steps):
    root, _ = steps
    meta = loom_import(root / "meta" / "step.pt2", "--no-weights")
    assert meta.returncode == 0, meta.stderr
    real = loom_import(root / "real" / "step.pt2", "--no-weights")
    assert real.returncode == 0, real.stderr
    assert body(meta.stdout) == body(real.stdout)
    signature = next(line for line in meta.stdout.splitlines() if "func.func @step(" in line)
    # Grouped-query attention: 2 KV heads of 16 -> wk is 32 x 64, wq 64 x 64.
    assert ('tensor<32x64xf32> {loom.name = "layers.1.attention.wk.weight", '
            'loom.role = #loom.role<parameter>}') in signature
    assert ('tensor<64x64xf32> {loom.name = "layers.0.attention.wq.weight", '
            'loom.role = #loom.role<parameter>}') in signature
    assert 'tensor<256x64xf32> {loom.name = "output.weight"' in signature
    assert 'tensor<2x32xi64> {loom.name = "tokens", loom.role = #loom.role<input>}' in signature
    assert "loom.weights" not in meta.stdout
    # The attention kernel torchtitan runs, forward and backward.
    assert len(re.findall(r'"aten::_scaled_dot_product_flash_attention_for_cpu\.default"', meta.stdout)) == 2
    assert len(re.findall(r'"aten::_scaled_dot_product_flash_attention_for_cpu_backward\.default"',
                          meta.stdout)) == 2


def test_import_without_flag_says_what_to_do(steps, tmp_path):
    root, _ = steps
    r = loom_import(root / "meta" / "step.pt2", "-o", str(tmp_path / "step.mlir"))
    assert r.returncode == 1
    assert re.search(r"step\.pt2: error: the archive holds no data for the weights of "
                     r"'tok_embeddings\.weight' .* import with --no-weights", r.stderr), r.stderr
    assert not (tmp_path / "step.mlir").exists()


def test_weightless_step_shards(steps, tmp_path):
    root, _ = steps
    mlir = tmp_path / "step.mlir"
    assert loom_import(root / "meta" / "step.pt2", "--no-weights", "-o", str(mlir)).returncode == 0
    r = subprocess.run([str(LOOM_OPT), str(mlir),
                        "--loom-fsdp=mesh-shape=4 param-dtype=bf16 reduce-dtype=f32"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # Per-layer units and the root: one forward gather per unit, one backward
    # re-gather per layer (the root is not resharded), one reduce-scatter per unit.
    assert r.stdout.count("loom.all_gather_start") == 3 + 2
    assert r.stdout.count("loom.reduce_scatter_start") == 3
    assert ("tensor<64x64xf32> {loom.name = \"tok_embeddings.weight\", loom.role = "
            "#loom.role<parameter>, loom.shard = #loom.shard<@dp, axes = [\"shard\"], dim = 0, "
            "global = [256, 64]>}") in r.stdout


def test_make_arg_errors(tmp_path):
    r = capture(tmp_path / "x", "--meta", shape={"no_such_arg": 1})
    assert r.returncode == 2
    assert "make() raised TypeError" in r.stderr and "no_such_arg" in r.stderr
    r = capture(tmp_path / "y", "--meta", shape={"": 1})
    assert r.returncode == 2 and "--make-arg expects KEY=VALUE" in r.stderr


def test_llama3_sim_bench_runs(tmp_path):
    """bench/llama3_sim.py end to end at 8B width but 1 layer and 256 tokens
    (the capture dominates: fake tensors make the width free)."""
    require_tools(LOOM_OPT)
    out = tmp_path / "r.json"
    cmd = [sys.executable, str(REPO / "bench" / "llama3_sim.py"), "--n-layers", "1", "--seq", "256",
           "--worlds", "8", "16", "--cache", str(tmp_path / "cache"), "--json", str(out),
           "--timeline", str(tmp_path / "tl")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "is not the 8B step" in r.stdout
    report = json.loads(out.read_text())
    rows = {(row["variant"], row["world_size"]): row for row in report["results"]}
    assert sorted(rows) == [(v, w) for v in ("fsdp2", "none", "scheduled") for w in (8, 16)]
    for (variant, world), row in rows.items():
        assert row["nodes"] == world // 8
        assert 0 < row["compute_s"] <= row["step_s"]
        assert 0 <= row["exposed_comm_s"] <= row["comm_s"] + 1e-12
        assert row["tokens_per_s_per_gpu"] == pytest.approx(256 / row["step_s"])
        assert row["vs_torchtitan"] == pytest.approx(row["tokens_per_s_per_gpu"] / 6667)
    for world in (8, 16):
        # The same step and collectives in every order; prefetching and
        # scheduling only hide them.
        none, fsdp2, sched = (rows[(v, world)] for v in ("none", "fsdp2", "scheduled"))
        assert none["comm_s"] == pytest.approx(sched["comm_s"])
        assert none["exposed_comm_s"] == pytest.approx(none["comm_s"])
        assert sched["step_s"] <= fsdp2["step_s"] <= none["step_s"]
    # Two nodes put the collectives on the slower inter-node links.
    assert rows[("none", 16)]["comm_s"] > rows[("none", 8)]["comm_s"]
    assert (tmp_path / "tl" / "llama3-16-scheduled.trace.json").exists()
    # The second run takes the capture from the cache.
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0 and "capture --meta: cached" in r.stdout, r.stdout + r.stderr
