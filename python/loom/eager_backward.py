"""What a model's backward does beyond the derivative of its forward.

``torch.export`` traces the forward and the joint graph derives the backward
from it by autodiff. Eager autograd can do more, and a captured step would
silently drop it:

- a custom ``torch.autograd.Function``: export traces its ``forward`` and
  differentiates that; its own ``backward`` (a straight-through estimator, a
  gradient reversal, a scaled or clipped gradient) never runs;
- ``Tensor.register_hook`` on a tensor of the forward, or on a parameter;
- ``Module.register_full_backward_hook`` / ``_pre_hook`` (and the global
  ones);
- ``Tensor.register_post_accumulate_grad_hook``.

:func:`recording` notes, while the model is exported, each of these the model
uses and where; :func:`check` then runs one eager forward and backward of the
model itself (not a copy: ``copy.deepcopy`` drops a parameter's hooks) and
the joint graph on the same batch from the same RNG state, and raises
:class:`Mismatch` when their gradients differ: the step would train something
else than the model's own backward. Where they agree (a logging hook, a
Function whose backward is its forward's derivative) the step is captured
as traced. Models that use none of these are not run again.
"""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch
import torch.nn as nn
from torch.export.graph_signature import InputKind, OutputKind

# A gradient differing from eager's by more than this fraction of the
# parameter's largest eager gradient element is not rounding: the joint
# graph's kernels are eager's (or their decompositions, last bits apart).
RTOL = 1e-3
ATOL = 1e-7

_TORCH_DIR = Path(torch.__file__).resolve().parent
_LOOM_DIR = Path(__file__).resolve().parent
_STDLIB_DIR = Path(contextlib.__file__).resolve().parent


class Mismatch(Exception):
    """The joint graph's gradients are not the model's eager ones."""


class NotCapturable(Exception):
    """The forward does what no captured step can (take gradients itself)."""


@dataclass
class Extensions:
    """What the model's backward does beyond autodiff, one line each; the
    tensors its forward keeps on a module for a later step; its draws from
    Python's or NumPy's random generators (constants in the trace)."""

    found: list[str]
    state: list[str] = field(default_factory=list)
    host_random: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return "; ".join(dict.fromkeys(self.found))


def _is_loom_frame(frame: traceback.FrameSummary) -> bool:
    return Path(frame.filename).resolve().is_relative_to(_LOOM_DIR)


def is_model_frame(frame: traceback.FrameSummary) -> bool:
    """Whether a frame runs the model's code: not torch's, Loom's or
    Python's own (its standard library, frozen modules)."""
    if frame.filename.startswith("<"):
        return False
    path = Path(frame.filename).resolve()
    return not any(path.is_relative_to(d) for d in (_TORCH_DIR, _LOOM_DIR, _STDLIB_DIR))


def _caller() -> str | None:
    """'FILE:LINE: ' of the innermost frame in the model's code; None where
    Loom's own frame comes first (torch called from capture, not from the
    model)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if _is_loom_frame(frame):
            return None
        if is_model_frame(frame):
            return f"{frame.filename}:{frame.lineno}: "
    return None


# The module-level draws of Python's and NumPy's generators.
_HOST_RANDOM = ("random", "uniform", "randint", "randrange", "choice", "choices", "sample",
                "shuffle", "gauss", "normalvariate", "betavariate", "expovariate", "triangular",
                "rand", "randn", "normal", "binomial", "permutation", "random_sample",
                "integers", "beta", "exponential", "poisson")


def _host_random_modules() -> list[Any]:
    """``random``, and ``numpy.random`` where the model imported NumPy."""
    import random
    import sys

    return [random] + ([sys.modules["numpy.random"]] if "numpy.random" in sys.modules else [])


def _is_torch_class(cls: type) -> bool:
    return cls.__module__ == "torch" or cls.__module__.startswith("torch.")


def _static_hooks(model: nn.Module) -> list[str]:
    """The gradient hooks already registered on the model's parameters and
    modules, and the global module backward hooks."""
    found = []
    for name, p in model.named_parameters(remove_duplicate=False):
        if getattr(p, "_backward_hooks", None):
            found.append(f"a gradient hook on parameter '{name}' (Tensor.register_hook)")
        if getattr(p, "_post_accumulate_grad_hooks", None):
            found.append(f"a post-accumulate-grad hook on parameter '{name}'")
    for name, m in model.named_modules():
        if m._backward_hooks or m._backward_pre_hooks:
            found.append(f"a backward hook on module '{name or type(m).__name__}' "
                         "(register_full_backward_hook)")
    modules = torch.nn.modules.module
    if modules._global_backward_hooks or modules._global_backward_pre_hooks:
        found.append("a global module backward hook (register_module_full_backward_hook)")
    return found


@contextlib.contextmanager
def recording(model: nn.Module) -> Iterator[Extensions]:
    """Notes the backward extensions of ``model`` while its forward runs
    (exported) inside the block."""
    seen = Extensions(_static_hooks(model))
    apply = torch.autograd.Function.__dict__["apply"]
    register_hook = torch.Tensor.register_hook
    register_post = torch.Tensor.register_post_accumulate_grad_hook

    def recorded_apply(cls: type, *args: Any, **kwargs: Any) -> Any:
        if not _is_torch_class(cls):
            seen.found.append(f"{_caller() or ''}custom torch.autograd.Function {cls.__qualname__} "
                              "(export differentiates its forward; its backward does not run)")
        return apply.__func__(cls, *args, **kwargs)

    def recorded_hook(self: torch.Tensor, hook: Any) -> Any:
        where = _caller()
        if where is not None:
            seen.found.append(f"{where}Tensor.register_hook (export does not trace gradient hooks)")
        return register_hook(self, hook)

    def recorded_post(self: torch.Tensor, hook: Any) -> Any:
        where = _caller()
        if where is not None:
            seen.found.append(f"{where}Tensor.register_post_accumulate_grad_hook")
        return register_post(self, hook)

    def refused_grad(*args: Any, **kwargs: Any) -> Any:
        where = _caller()
        if where is None:
            return grad(*args, **kwargs)
        raise NotCapturable(
            f"{where}the forward calls torch.autograd.grad (a gradient penalty, a double "
            "backward): a captured step differentiates the traced forward once, and cannot "
            "take gradients inside it")

    names = {id(m): name for name, m in model.named_modules()}

    def recorded_setattr(self: nn.Module, name: str, value: Any) -> None:
        if (isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)
                and id(self) in names and name not in self._buffers):
            where = _caller()
            if where is not None:
                owner = names[id(self)]
                seen.state.append(f"{where}{owner + '.' if owner else ''}{name}")
        setattr_(self, name, value)

    def recorded_random(name: str, draw: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            where = _caller()
            if where is not None:
                seen.host_random.append(f"{where}{name}")
            return draw(*args, **kwargs)
        return wrapper

    host = [(module, name) for module in _host_random_modules() for name in _HOST_RANDOM
            if callable(getattr(module, name, None))]
    originals = [getattr(module, name) for module, name in host]
    grad = torch.autograd.grad
    setattr_ = nn.Module.__setattr__
    torch.autograd.Function.apply = classmethod(recorded_apply)
    torch.Tensor.register_hook = recorded_hook
    torch.Tensor.register_post_accumulate_grad_hook = recorded_post
    torch.autograd.grad = refused_grad
    nn.Module.__setattr__ = recorded_setattr
    for (module, name), draw in zip(host, originals):
        setattr(module, name, recorded_random(f"{module.__name__}.{name}", draw))
    try:
        yield seen
    finally:
        for (module, name), draw in zip(host, originals):
            setattr(module, name, draw)
        torch.autograd.Function.apply = apply
        torch.Tensor.register_hook = register_hook
        torch.Tensor.register_post_accumulate_grad_hook = register_post
        torch.autograd.grad = grad
        nn.Module.__setattr__ = setattr_


@contextlib.contextmanager
def buffers_kept(model: nn.Module) -> Iterator[None]:
    """Puts every buffer of ``model`` back as it was after the block (the
    same tensor, with the same values), whatever forwards ran in it (batch
    norm's running statistics, a buffer a forward rebinds). A lazy module's
    buffer not yet materialized has nothing to keep."""
    buffers = [(n, b, b.detach().clone()) for n, b in model.named_buffers()
               if not isinstance(b, nn.parameter.UninitializedBuffer)]
    try:
        yield
    finally:
        for name, buffer, value in buffers:
            owner, _, leaf = name.rpartition(".")
            model.get_submodule(owner)._buffers[leaf] = buffer
            with torch.no_grad():
                buffer.copy_(value)


def joint_outputs(ep: torch.export.ExportedProgram, state: dict[str, torch.Tensor],
                  batch: tuple[torch.Tensor, ...]) -> list[tuple[Any, torch.Tensor]]:
    """Runs the joint graph once on ``batch`` with the parameters, buffers
    and constants of ``state`` (by FQN): each output with its spec."""
    inputs = iter(batch)
    outputs = ep.graph_module(*(next(inputs) if s.kind == InputKind.USER_INPUT
                                else state[s.target] for s in ep.graph_signature.input_specs))
    return list(zip(ep.graph_signature.output_specs, outputs))


def _eager_gradients(model: nn.Module, example: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    """Each trainable parameter's gradient from one eager forward and
    backward of ``model`` itself, leaving its gradients and buffers as they
    were."""
    params = dict(model.named_parameters())
    grads = {n: p.grad for n, p in params.items()}
    for p in params.values():
        p.grad = None
    try:
        with buffers_kept(model):
            model(*example).backward()
        return {n: p.grad for n, p in params.items() if p.requires_grad}
    finally:
        for n, p in params.items():
            p.grad = grads[n]


def _joint_gradients(ep: torch.export.ExportedProgram,
                     example: tuple[torch.Tensor, ...]) -> dict[str, torch.Tensor]:
    return {s.target: o for s, o in joint_outputs(ep, {**ep.state_dict, **ep.constants}, example)
            if s.kind == OutputKind.GRADIENT_TO_PARAMETER}


def _difference(eager: torch.Tensor | None, joint: torch.Tensor) -> str:
    """'' where the joint gradient is eager's up to rounding, else how not."""
    if eager is None:
        return "eager autograd gives it no gradient"
    diff = (joint.double() - eager.double()).abs().max().item()
    scale = eager.double().abs().max().item()
    if diff <= RTOL * scale + ATOL:
        return ""
    return f"max |captured - eager| {diff:.3g} where max |eager| is {scale:.3g}"


def check(model: nn.Module, example: tuple[torch.Tensor, ...],
          ep: torch.export.ExportedProgram, extensions: Extensions) -> None:
    """Raises :class:`Mismatch` if the joint graph's gradients on ``example``
    are not the model's own eager ones (both from the same RNG state)."""
    with torch.random.fork_rng(devices=[]):
        state = torch.get_rng_state()
        eager = _eager_gradients(model, example)
        torch.set_rng_state(state)
        with torch.no_grad():
            joint = _joint_gradients(ep, example)
    for name, grad in joint.items():
        if name not in eager:  # a tied parameter's other name
            continue
        how = _difference(eager[name], grad)
        if how:
            raise Mismatch(
                f"the model's backward is not the derivative of its forward: "
                f"{extensions.describe()}; the captured step's gradient of '{name}' differs "
                f"from eager autograd's on the first batch ({how}). A captured step runs "
                "the derivative of the traced forward only: write the gradient change into "
                "the forward (a straight-through estimator, say, as "
                "x + (f(x) - x).detach()) or drop it")
