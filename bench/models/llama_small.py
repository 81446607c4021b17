"""A Llama-3-style model at a size a CPU trains for real, for bench/fsdp_vs_fsdp2.py.

The architecture of bench/models/llama3.py (RMSNorm, grouped-query attention
with RoPE, SwiGLU feed-forward, untied output; the blocks at
``layers.{i}``) with 4 layers of dim 256, 8 query and 4 KV heads, FFN hidden
768, a 4096-token vocabulary and 8 sequences of 256 tokens: 5.25 M parameters.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama3  # noqa: E402

SHAPE = dict(dim=256, n_layers=4, n_heads=8, n_kv_heads=4, ffn_hidden=768, vocab=4096,
             seq=256, batch=8)


def make():
    return llama3.make(**SHAPE)
