"""Peak memory of PyTorch's test_sac_ilp Transformer as PyTorch's MemTracker accounts it, on CPU.

Two questions, one command each (docs/recompute.md, "PyTorch's test model",
records the answers and compares them with Loom's predictions):

``baseline``: where does test_sac_ilp's 2,583,888,896 bytes come from? It is
``torch.distributed._tools.ilp_utils.get_peak_memory_runtime_baseline``:
max over modules of P + TG_i + AG_i + TA_i from MemTracker's per-module
snapshots of the test's two-iteration loop on CUDA. This machine has no GPU,
so the loop runs on fake CPU tensors with what CUDA would do: the
memory-efficient attention kernel, nn.Dropout as native_dropout (bool mask)
and MemTracker's rounding of CUDA storages to 512 bytes:

    .venv/bin/python bench/pt_test_memory.py baseline

``peak``: what does MemTracker measure for a training step (loss inside the
model as in Loom's capture, two Adam iterations), with real tensors on CPU?
``--kernels`` picks the attention and dropout kernels: ``eager`` (PyTorch's
CPU kernels: math attention, dropout through a float32 noise tensor),
``captured`` (the ATen ops Loom's CPU capture records: math attention with
_safe_softmax, native_dropout) or ``cuda`` (as for ``baseline``; needs
``--fake``):

    .venv/bin/python bench/pt_test_memory.py peak --kernels captured
    .venv/bin/python bench/pt_test_memory.py peak --kernels cuda --fake

``--shape KEY=VALUE`` (repeatable) changes make()'s shape (``batch``,
``max_seq_len``, ``dim``, ``n_heads``, ``vocab_size``, ``n_layers``). The full
size with real tensors needs about 10 GiB and 4 minutes on two cores.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools import mem_tracker
from torch.distributed._tools.ilp_utils import Graph, get_peak_memory_runtime_baseline
from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType, _ModState

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
import pt_test_transformer  # noqa: E402
import pt_test_transformer_cuda  # noqa: E402

CUDA_BLOCK = 512


def captured_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False):
    """F.scaled_dot_product_attention as Loom's CPU capture records it: both
    operands scaled by the fourth root of the head size, an additive causal
    bias, _safe_softmax and native_dropout."""
    assert attn_mask is None and is_causal, "the test Transformer's call"
    scale = 1 / math.sqrt(math.sqrt(query.size(-1)))
    n = query.size(-2)
    bias = torch.where(torch.ones(n, n, dtype=torch.bool).tril(), 0.0, float("-inf"))
    scores = (query * scale) @ (key.transpose(-2, -1) * scale) + bias
    weights = torch.ops.aten._safe_softmax(scores, -1)
    return torch.native_dropout(weights, dropout_p, True)[0] @ value


def native_dropout(input, p=0.5, training=True, inplace=False):
    """nn.Dropout as CUDA runs it and the capture records it: a bool mask."""
    return torch.native_dropout(input, p, training)[0] if training else input


@contextlib.contextmanager
def kernels(name: str):
    """Patch torch.nn.functional (the test Transformer's ``F``) for the
    duration; ``eager`` leaves it alone."""
    attention = {"eager": None, "captured": captured_attention,
                 "cuda": pt_test_transformer_cuda.efficient_attention}[name]
    saved = F.scaled_dot_product_attention, F.dropout
    if attention is not None:
        F.scaled_dot_product_attention, F.dropout = attention, native_dropout
    try:
        yield
    finally:
        F.scaled_dot_product_attention, F.dropout = saved


@contextlib.contextmanager
def cuda_rounding():
    """MemTracker's accounting of a CUDA storage (whole 512-byte blocks),
    applied to the CPU storages that stand in for them."""
    info = mem_tracker._WeakRefInfo
    saved = info._calculate_mem_consumed
    info._calculate_mem_consumed = (
        lambda self: math.ceil(self.size * self.element_size / CUDA_BLOCK) * CUDA_BLOCK)
    try:
        yield
    finally:
        info._calculate_mem_consumed = saved


def build(shape: dict, summed: bool):
    """The test's model, optimizer and batch; ``summed`` keeps the loss
    inside the model (pt_test_transformer's SummedTransformer)."""
    model, ((tokens,),) = pt_test_transformer.make(**shape)
    if not summed:
        model.forward = super(type(model), model).forward
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=True)
    return model, optimizer, tokens


def baseline(shape: dict) -> dict:
    """test_sac_ilp's loop and get_peak_memory_runtime_baseline."""
    dev = torch.device("cpu")
    with FakeTensorMode(), kernels("cuda"), cuda_rounding():
        model, optimizer, tokens = build(shape, summed=False)
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        with tracker:
            for iteration in range(2):
                output = model(tokens)
                output.sum().backward()
                if iteration == 1:
                    last = tracker.get_tracker_snapshot("current")
                optimizer.step()
                optimizer.zero_grad()
                if iteration == 0:
                    tracker.reset_mod_stats()
    # The test's post-processing, then the fields ilp_utils.aggregate_stats
    # gives the baseline (the runtimes, which it also sums, are left out).
    stats = list(tracker.memory_tracking.values())
    graph = Graph(len(stats))
    for s in stats:
        s.snapshots.setdefault(_ModState.POST_BW, [copy.deepcopy(last)])
        snap = {state: s.snapshots[state][-1][dev] for state in
                (_ModState.PRE_BW, _ModState.PEAK_BW, _ModState.POST_FW)}
        graph.add_node({
            "fqn": s.mod_fqn, "param_per_module": s.parameter_mem,
            "grad_total": snap[_ModState.PRE_BW][_MemRefType.GRAD],
            "act_grad_per_module": (snap[_ModState.PEAK_BW][_MemRefType.TEMP]
                                    - snap[_ModState.PRE_BW][_MemRefType.TEMP]),
            "act_total": snap[_ModState.POST_FW][_MemRefType.ACT],
            "fw_runtime_per_module": 0.0, "bw_runtime_per_module": 0.0})
    peak, _ = get_peak_memory_runtime_baseline(graph)
    p = graph.nodes[0]["param_per_module"]
    at = max(graph.nodes, key=lambda n: p + n["grad_total"] + n["act_grad_per_module"]
             + n["act_total"])
    return {"peak": peak, "module": at["fqn"], "P": p, "TG": at["grad_total"],
            "AG": at["act_grad_per_module"], "TA": at["act_total"]}


def peak(shape: dict, kernel_name: str, fake: bool) -> dict:
    """MemTracker's peak over two Adam iterations, by memory kind."""
    if kernel_name == "cuda" and not fake:
        raise SystemExit("--kernels cuda runs only on fake tensors (--fake)")
    torch.manual_seed(0)
    with contextlib.ExitStack() as stack:
        if fake:
            stack.enter_context(FakeTensorMode())
        if kernel_name == "cuda":
            stack.enter_context(cuda_rounding())
        stack.enter_context(kernels(kernel_name))
        model, optimizer, tokens = build(shape, summed=True)
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        with tracker:
            for iteration in range(2):
                model(tokens).backward()
                optimizer.step()
                optimizer.zero_grad()
                if iteration == 0:
                    tracker.reset_mod_stats()
        snap = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]
    return {getattr(k, "value", k): v for k, v in snap.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["baseline", "peak"])
    parser.add_argument("--kernels", choices=["eager", "captured", "cuda"], default="captured")
    parser.add_argument("--fake", action="store_true", help="fake tensors (no memory, no compute)")
    parser.add_argument("--shape", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    shape = {}
    for item in args.shape:
        key, _, value = item.partition("=")
        shape[key] = ast.literal_eval(value)
    if args.mode == "baseline":
        result = baseline(shape)
    else:
        result = peak(shape, args.kernels, args.fake)
    for key, value in result.items():
        print(f"{key:12s} {value:>16,}" if isinstance(value, int) else f"{key:12s} {value}")


if __name__ == "__main__":
    main()
