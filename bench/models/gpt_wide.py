"""The GPT example at a size where compute, not per-op overhead, dominates a
step on a CPU: vocab 512, width 256, 4 layers of 4 heads, sequence 128,
batch 8 (3.4 M parameters). Same code as examples/gpt.py."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "loom_example_gpt", Path(__file__).resolve().parents[2] / "examples" / "gpt.py")
gpt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpt)
gpt.VOCAB, gpt.DIM, gpt.LAYERS, gpt.HEADS, gpt.SEQ, gpt.BATCH = 512, 256, 4, 4, 128, 8


def make():
    return gpt.make()
