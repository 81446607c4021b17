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
reference), it first traces the step as FSDP2 runs it, with the floating
parameters and forward inputs in the compute dtype (buffers keep theirs),
recording every dtype conversion the forward calls (:class:`Conversions`).
Then, tracing in float32, it makes each call that converted under the
policy but keeps the dtype here a copy, ``_to_copy(x, dtype=f32)``, marked
``meta["custom"]["loom.policy_cast"]``: true where the policy's cast was to
the compute dtype (``.type_as(x)`` of a bf16 x), false where it was to the
dtype it names (``.float()``). The copy makes autograd sum the gradients of
its output before passing them on, as under the policy, so the two joint
graphs then line up op by op (casts aside) in backward too, and the policy
trace's casts that are not in the float32 graph (its gradient casts, a
decomposition's casts that no Python call makes) are written in the same
way, as no-op ``_to_copy``s of the float32 value. ``loom-fsdp`` makes a
marked cast to the compute dtype (true) or to the dtype it names (false)
real where the value's dtype differs and drops it where not; without mixed
precision every marked cast is the value itself.

The forwards must line up (else only the forced copies are marked, and a
note says the rest is not recorded); the backwards may not, where the
policy's casts are inside an ATen composite (``F.rms_norm``: eager sums the
gradients of its f32 copy of x before casting them, the float32 trace adds
them into x's one by one). Then only the forward's casts are written.
"""

from __future__ import annotations

import contextlib
import copy
import io
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn as nn
from torch.fx import Node
from torch.overrides import TorchFunctionMode
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
            # buffer's) converts nothing under the policy either; one to a
            # dtype the float32 value does not have (where the float32
            # trace converts elsewhere) is no no-op to write.
            if _dtype(y) != compute and (_dtype(y) == _dtype(_origin(y))
                                         or _dtype(y) != _dtype(x)):
                continue
            plan.append((a, i, x, y))
    return plan


def write_policy_casts(traced: torch.fx.Graph, policy: torch.fx.Graph,
                       compute: torch.dtype, renamed: dict[str, str]) -> int:
    """Writes the policy graph's casts into the float32 graph (module
    docstring); returns how many.
    ``renamed`` maps each step output now read through a written cast to the
    cast's name (the exported signature names the outputs).

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
        # The step's outputs too: autograd casts a parameter's gradient to
        # the parameter's dtype after summing it to its shape.
        outputs = [(traced.output_node(), policy.output_node())]
        plan += _planned_casts(list(zip(*backward)) + outputs, mapping, compute)
    except Mismatch:
        pass  # only the forward's casts
    written: dict[Node, Node] = {}
    for a, i, x, y in plan:
        if y not in written:
            written[y] = _write_cast(traced, a, x, y, compute)
        ours, spec = tree_flatten((a.args, a.kwargs))
        ours[i] = written[y]
        a.args, a.kwargs = spec.unflatten(ours)
        if a.op == "output":
            renamed[x.name] = written[y].name
    return len(written)


# The Tensor methods that convert a tensor's dtype (and return it as it is
# where it has that dtype already).
CONVERSIONS = frozenset({torch.Tensor.to, torch.Tensor.float, torch.Tensor.type_as,
                         torch.Tensor.type, torch.Tensor.bfloat16, torch.Tensor.half,
                         torch.Tensor.double})


@dataclass
class Conversion:
    """A conversion the forward called under the policy: whether it
    converted to the compute dtype."""
    method: str
    to_compute: bool


class Conversions(TorchFunctionMode):
    """Records the dtype conversions a forward calls, in call order (None
    for one that kept the dtype); with ``policy`` (the record of the
    policy trace), makes each call that converted there but keeps the
    dtype here a copy, ``_to_copy(x, dtype)``, so that autograd differentiates
    it as it does under the policy (ToCopyBackward sums the gradients of its
    output before casting them back)."""

    def __init__(self, compute: torch.dtype, policy: list[Conversion | None] | None = None):
        super().__init__()
        self.compute, self.policy = compute, policy
        self.calls: list[Conversion | None] = []
        self.forced: list[Conversion] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if (func not in CONVERSIONS or not args or not isinstance(args[0], torch.Tensor)
                or not isinstance(out, torch.Tensor)):
            return out
        k = len(self.calls)
        # (Under export's tracing a no-op returns an alias, not its input.)
        same = out.dtype == args[0].dtype
        self.calls.append(None if same else Conversion(func.__name__,
                                                       out.dtype == self.compute))
        theirs = self.policy[k] if self.policy is not None and k < len(self.policy) else None
        if theirs is not None and same and theirs.method == func.__name__:
            self.forced.append(theirs)
            return torch.ops.aten._to_copy.default(out, dtype=out.dtype)
        return out


def _rms_norm_composite(original: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``F.rms_norm`` as ATen's composite computes it (``rms_norm_composite``
    in aten/src/ATen/native/layer_norm.cpp), with its casts as Python calls:
    the input cast up to its math dtype, ``rsqrt(mean(x^2) + eps)``, the
    products with it and the weight in that dtype, the result cast back with
    ``type_as``. The same ops autograd differentiates in eager, so the same
    numbers; written in Python, :class:`Conversions` sees its casts."""

    def rms_norm(input, normalized_shape, weight=None, eps=None):
        if (input.is_complex() or not input.is_floating_point()
                or input.dim() < len(normalized_shape)):
            return original(input, normalized_shape, weight, eps)
        math_dtype = (torch.float32 if input.dtype in (torch.bfloat16, torch.float16)
                      else input.dtype)
        dims = [input.dim() - i - 1 for i in range(len(normalized_shape))]
        # (ATen's default is its math dtype's epsilon: f32's for bf16 too.)
        eps_value = eps if eps is not None else torch.finfo(math_dtype).eps
        upcast = input.to(math_dtype)
        rstd = torch.rsqrt(upcast.pow(2).mean(dims, keepdim=True).add_(eps_value))
        result = upcast.mul(rstd)
        if weight is not None:
            result = result.mul(weight)
        return result.contiguous().type_as(input)

    return rms_norm


@contextlib.contextmanager
def python_composites():
    """Within: ``F.rms_norm`` (``nn.RMSNorm``) runs as its ATen composite
    written in Python, so that both traces show its casts as calls."""
    original = torch.nn.functional.rms_norm
    torch.nn.functional.rms_norm = _rms_norm_composite(original)
    try:
        yield
    finally:
        torch.nn.functional.rms_norm = original


@dataclass
class PolicyTrace:
    """The step traced under the policy: its joint graph and the conversions
    its forward called."""
    compute: torch.dtype
    graph: torch.fx.Graph
    conversions: list[Conversion | None]


def _failed(note: Callable[[str], None], compute: torch.dtype, why: str) -> None:
    note(f"{why}; the casts the model makes under {compute} mixed precision are not recorded, "
         "and loom-fsdp types the step by type promotion alone")


def trace_policy(model: nn.Module, example: tuple[torch.Tensor, ...], compute: torch.dtype,
                 trace: Callable[[nn.Module, tuple], torch.export.ExportedProgram],
                 note: Callable[[str], None]) -> PolicyTrace | None:
    """Traces ``model`` under the policy with ``trace`` (capture's joint
    export), recording its conversions; None, with a note, where it fails."""
    recorder = Conversions(compute)
    try:
        policy, inputs = policy_model(model, compute), policy_example(example, compute)
        with contextlib.redirect_stderr(io.StringIO()), python_composites(), recorder:
            ep = trace(policy, inputs)
    except Exception as exc:  # torch.export raises many exception types
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        _failed(note, compute, f"tracing the step with {compute} parameters failed ({first})")
        return None
    return PolicyTrace(compute, ep.graph, recorder.calls)


@contextlib.contextmanager
def replaying(policy: PolicyTrace | None):
    """Within (the float32 trace): each conversion ``policy`` made is a copy
    (:class:`Conversions`, yielded; None and nothing changed without a
    policy)."""
    if policy is None:
        yield None
        return
    conversions = Conversions(policy.compute, policy.conversions)
    with python_composites(), conversions:
        yield conversions


def _no_op_casts(graph: torch.fx.Graph) -> list[Node]:
    return [n for n in graph.nodes if is_cast(n) and not _is_backward(n)
            and _dtype(n) is not None and _dtype(n) == _dtype(n.args[0])]


def _mark(node: Node, to_compute: bool) -> None:
    node.meta["custom"] = {**(node.meta.get("custom") or {}), POLICY_CAST_KEY: to_compute}


def mark_forced_casts(graph: torch.fx.Graph, forced: list[Conversion]) -> bool:
    """Marks the copies :class:`Conversions` forced (the forward's no-op
    casts, in call order): each converts to the compute dtype where the
    policy's did. (Autograd writes no cast for their gradients, which keep
    their dtype as traced; the policy trace's are written by lining the
    backwards up, which the copies make possible.) False, marking nothing,
    where they do not count up."""
    forward = _no_op_casts(graph)
    if len(forward) != len(forced):
        return False
    for node, conversion in zip(forward, forced):
        _mark(node, conversion.to_compute)
    return True


def add_policy_casts(ep: torch.export.ExportedProgram, policy: PolicyTrace,
                     forced: list[Conversion], note: Callable[[str], None]) -> None:
    """Marks the copies forced while tracing ``ep`` and writes the policy
    trace's other casts (a decomposition's, which no Python call makes) into
    ``ep``'s graph by lining the graphs up."""
    compute = policy.compute
    if not mark_forced_casts(ep.graph, forced):
        _failed(note, compute, f"{len(forced)} conversions were traced as copies, but the "
                "graph does not have as many")
    renamed: dict[str, str] = {}
    try:
        count = write_policy_casts(ep.graph, policy.graph, compute, renamed)
    except Mismatch as exc:
        _failed(note, compute, f"the step traced with {compute} parameters does not line up "
                f"with the float32 trace ({exc})")
        return
    for output in ep.graph_signature.output_specs:
        name = getattr(output.arg, "name", None)
        if name in renamed:
            output.arg = type(output.arg)(name=renamed[name])
    if count:
        ep.graph_module.recompile()
