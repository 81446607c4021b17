"""The GPT example trained in one dtype throughout (``--make-arg
dtype=bfloat16|float16|float64``): ``model.to(dtype)``, as a pure-bf16
fine-tuning run does, not mixed precision; the token batches stay int64.
"""

import runpy
from pathlib import Path

import torch

GPT = runpy.run_path(str(Path(__file__).resolve().parents[2] / "examples" / "gpt.py"))


def make(dtype: str = "bfloat16", batch: int = 8):
    model, batches = GPT["make"](int(batch))
    return model.to(getattr(torch, dtype)), batches
