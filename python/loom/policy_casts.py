"""The casts eager mixed precision makes that a float32 trace cannot show.

Capture traces the step with the parameters in their own dtype (float32).
There ``x.float()``, ``.type_as(x)``, ``x.to(x_dtype)`` and a decomposition's
own up-casts (``F.rms_norm``, math attention) convert a tensor to the dtype
it has, and export writes no op for them. Under FSDP2's
``MixedPrecisionPolicy(param_dtype=bf16)`` the same code converts for real:
Meta's and Hugging Face's RMSNorm normalise in float32 and cast the result
back to bf16 before the weight multiplies it, and autograd casts their
gradients back and forth in backward. ``loom-fsdp``'s mixed precision gives
each op the dtype type promotion would, which cannot know where the model
cast (the product with the weight promotes to float32 there), so such a
model drifted from ``fully_shard`` by far more than rounding.

When capture is told the policy (``--param-dtype``, for its ``fully_shard``
reference), it traces the step once more as FSDP2 runs it, with the floating
parameters and forward inputs in the compute dtype (buffers keep theirs),
lines the two joint graphs up op by op, and writes each cast of the policy
trace into the float32 graph as a ``_to_copy`` of the float32 value to its own
dtype, a no-op as traced, with ``meta["custom"]["loom.policy_cast"]``: true
where the cast converts to the compute dtype (``.type_as(x)`` of a bf16 x),
false where it converts to the dtype it names (``.float()``). ``loom-fsdp``
makes the first a cast to its ``param-dtype`` and keeps the second, dropping
either where the value already has that dtype; without mixed precision both
are the values themselves.

Where the two graphs do not line up (an op only one of them has), nothing
is written and a note says so: ``loom-fsdp`` then types the step by
promotion alone, as before.
"""

from __future__ import annotations

import contextlib
import copy
import io
from typing import Any, Callable

import torch
import torch.nn as nn
from torch.fx import Node
from torch.utils._pytree import tree_flatten

POLICY_CAST_KEY = "loom.policy_cast"
# loom-compile's names of MixedPrecisionPolicy's dtypes.
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
# The node metadata a written cast takes from the policy trace's cast.
_KEPT_META = ("nn_module_stack", "stack_trace", "partitioner_tag", "source_fn_stack",
              "torch_fn")


def is_cast(node: Any) -> bool:
    """Whether ``node`` is a dtype conversion (``_to_copy`` changing no more
    than dtype, layout and device)."""
    return (isinstance(node, Node) and node.op == "call_function"
            and node.target is torch.ops.aten._to_copy.default and len(node.args) == 1
            and set(node.kwargs) <= {"dtype", "layout", "device"})


def _is_backward(node: Node) -> bool:
    return node.meta.get("partitioner_tag") == "is_backward"


def _ops(graph: torch.fx.Graph, backward: bool) -> list[Node]:
    return [n for n in graph.nodes if n.op == "call_function" and not is_cast(n)
            and _is_backward(n) == backward]


def _origin(node: Node) -> Node:
    while is_cast(node):
        node = node.args[0]
    return node


def _dtype(node: Node) -> torch.dtype | None:
    val = node.meta.get("val")
    return val.dtype if isinstance(val, torch.Tensor) else None


def policy_model(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """A copy of ``model`` whose floating parameters are in ``dtype``
    (FSDP2's unsharded parameters); buffers keep their dtype."""
    policy = copy.deepcopy(model)
    for param in policy.parameters():
        if param.is_floating_point():
            param.data = param.data.to(dtype)
    return policy


def policy_example(example: tuple[torch.Tensor, ...], dtype: torch.dtype):
    """The root's floating forward inputs cast to ``dtype``
    (``MixedPrecisionPolicy(cast_forward_inputs=True)``)."""
    return tuple(t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                 for t in example)


class Mismatch(Exception):
    """The two joint graphs do not line up."""


def _line_up(traced: list[Node], policy: list[Node], mapping: dict[Node, Node]) -> None:
    """Maps each op of ``policy`` to the op of ``traced`` at the same place;
    raises Mismatch where they differ."""
    if len(traced) != len(policy):
        raise Mismatch(f"{len(traced)} ops against {len(policy)}")
    for a, b in zip(traced, policy):
        if a.target != b.target:
            raise Mismatch(f"{a.name} is {a.target}, the policy trace has {b.target}")
        mapping[b] = a


def _write_cast(graph: torch.fx.Graph, before: Node, value: Node, cast: Node,
                compute: torch.dtype) -> Node:
    """A no-op cast of ``value`` standing for the policy trace's ``cast``."""
    to_compute = _dtype(cast) == compute
    dtype = _dtype(value) if to_compute else _dtype(cast)
    with graph.inserting_before(before):
        node = graph.call_function(torch.ops.aten._to_copy.default, (value,), {"dtype": dtype})
    for key in _KEPT_META:
        if key in cast.meta:
            node.meta[key] = copy.copy(cast.meta[key])
    node.meta["val"] = value.meta["val"]
    node.meta["custom"] = {POLICY_CAST_KEY: to_compute}
    return node


def _planned_casts(pairs: list[tuple[Node, Node]], mapping: dict[Node, Node],
                   compute: torch.dtype) -> list[tuple[Node, int, Node, Node]]:
    """(op, argument index, float32 value, policy cast) for each argument the
    policy trace casts and the float32 graph does not."""
    plan = []
    for a, b in pairs:
        theirs, _ = tree_flatten((b.args, b.kwargs))
        ours, _ = tree_flatten((a.args, a.kwargs))
        if len(theirs) != len(ours):
            raise Mismatch(f"{a.name} takes {len(ours)} arguments, the policy trace's "
                           f"{len(theirs)}")
        for i, (x, y) in enumerate(zip(ours, theirs)):
            if not is_cast(y) or not isinstance(x, Node) or is_cast(x):
                continue  # no cast, or the float32 graph casts here too
            if mapping.get(_origin(y)) is not x:
                raise Mismatch(f"argument {i} of {a.name} is not the policy trace's")
            if _dtype(y) is None or _dtype(x) is None:
                continue
            # A cast to float32 from float32 (its operand kept in float32, a
            # buffer's) converts nothing under the policy either.
            if _dtype(y) != compute and _dtype(y) == _dtype(_origin(y)):
                continue
            plan.append((a, i, x, y))
    return plan


def write_policy_casts(traced: torch.fx.Graph, policy: torch.fx.Graph,
                       compute: torch.dtype) -> tuple[int, bool]:
    """Writes the policy graph's casts into the float32 graph (module
    docstring); returns how many, and whether the backwards lined up too.

    The forwards must line up op by op (else Mismatch, ``traced`` left as it
    was). The backwards may not: where eager sums the gradients of a cast's
    output before casting them back (RMSNorm's ``x.float()`` read twice),
    the float32 trace adds them one by one into the input's other
    gradients. Then only the forward's casts are written, and the backward
    computes in the dtypes type promotion gives."""
    mapping: dict[Node, Node] = {}
    placeholders = {n.name: n for n in traced.nodes if n.op == "placeholder"}
    for node in policy.nodes:
        if node.op == "placeholder":
            if node.name not in placeholders:
                raise Mismatch(f"input {node.name} is not in the float32 graph")
            mapping[node] = placeholders[node.name]
    forward = (_ops(traced, False), _ops(policy, False))
    _line_up(*forward, mapping)
    plan = _planned_casts(list(zip(*forward)), mapping, compute)
    backward = (_ops(traced, True), _ops(policy, True))
    try:
        _line_up(*backward, mapping)
        plan += _planned_casts(list(zip(*backward)), mapping, compute)
        both = True
    except Mismatch:
        both = False
    written: dict[Node, Node] = {}
    for a, i, x, y in plan:
        if y not in written:
            written[y] = _write_cast(traced, a, x, y, compute)
        ours, spec = tree_flatten((a.args, a.kwargs))
        ours[i] = written[y]
        a.args, a.kwargs = spec.unflatten(ours)
    return len(written), both


def add_policy_casts(ep: torch.export.ExportedProgram, model: nn.Module,
                     example: tuple[torch.Tensor, ...], compute: torch.dtype,
                     trace: Callable[[nn.Module, tuple], torch.export.ExportedProgram],
                     note: Callable[[str], None]) -> None:
    """Traces ``model`` under the policy with ``trace`` (capture's joint
    export) and writes its casts into ``ep``'s graph; a policy trace that
    fails or does not line up leaves ``ep`` as it is, with a note."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            policy = trace(policy_model(model, compute), policy_example(example, compute))
        count, _ = write_policy_casts(ep.graph, policy.graph, compute)
    except Mismatch as exc:
        note(f"the step traced with {compute} parameters does not line up with the float32 "
             f"trace ({exc}); the casts the model makes under mixed precision are not "
             "recorded, and loom-fsdp types the step by type promotion alone")
        return
    except Exception as exc:  # torch.export raises many exception types
        note(f"tracing the step with {compute} parameters failed "
             f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); the casts the "
             "model makes under mixed precision are not recorded, and loom-fsdp types the "
             "step by type promotion alone")
        return
    if count:
        ep.graph_module.recompile()
