"""Every input the runtime's fuzzers crashed on, refused by loom-run (ctest sets LOOM_RUN).

runtime/fuzz/regressions/artifact/NAME.loomx is given to loom-run as the step,
regressions/safetensors/NAME.safetensors as the batches of a valid step,
regressions/checkpoint-index/NAME.json as the index.json of the checkpoint a
valid step resumes from. Each has a NAME.expect holding the error loom-run
must print after the file's path: the fuzzers found the crash, these tests
keep the fix and its message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parent.parent / "fuzz"
REGRESSIONS = FUZZ / "regressions"
LOOM_RUN = os.environ.get("LOOM_RUN", "")

pytestmark = pytest.mark.skipif(not LOOM_RUN, reason="LOOM_RUN is not set (ctest sets it)")


def cases(kind: str, suffix: str) -> list[Path]:
    return sorted((REGRESSIONS / kind).glob("*" + suffix))


def check_refused(path: Path, args: list[str], named: Path | None = None) -> None:
    """`named`: the path loom-run reads `path` under, when not its own."""
    r = subprocess.run([LOOM_RUN, *args, "--no-progress"], capture_output=True, text=True, timeout=120)
    expect = path.with_suffix(".expect").read_text().strip()
    # A signal (negative status) is the crash coming back; 2 is loom-run's
    # status for an input it refuses.
    assert r.returncode == 2, f"status {r.returncode}\n{r.stderr}"
    assert f"{named or path}: {expect}" in r.stderr, r.stderr


@pytest.mark.parametrize("path", cases("artifact", ".loomx"), ids=lambda p: p.stem)
def test_artifact_refused(path: Path):
    batches = FUZZ / "seeds" / "safetensors" / "batches.safetensors"
    check_refused(path, [str(path), "--batches", str(batches)])


@pytest.mark.parametrize("path", cases("safetensors", ".safetensors"), ids=lambda p: p.stem)
def test_safetensors_refused(path: Path):
    step = FUZZ / "seeds" / "artifact" / "tiny.loomx"
    check_refused(path, [str(step), "--batches", str(path)])


@pytest.mark.parametrize("path", cases("checkpoint-index", ".json"), ids=lambda p: p.stem)
def test_checkpoint_index_refused(path: Path, tmp_path: Path):
    index = tmp_path / "ck" / "index.json"
    index.parent.mkdir()
    shutil.copyfile(path, index)
    step = FUZZ / "seeds" / "artifact" / "tiny.loomx"
    batches = FUZZ / "seeds" / "safetensors" / "batches.safetensors"
    check_refused(path, [str(step), "--batches", str(batches), "--resume", str(index.parent)], named=index)


def test_every_regression_has_its_message():
    inputs = cases("artifact", ".loomx") + cases("safetensors", ".safetensors") + cases("checkpoint-index", ".json")
    assert inputs, f"no regression inputs under {REGRESSIONS}"
    for p in inputs:
        assert p.with_suffix(".expect").is_file(), f"{p} has no .expect"
