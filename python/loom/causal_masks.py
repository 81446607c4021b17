"""``nn.TransformerEncoder`` / ``nn.TransformerDecoder``'s causal-mask test,
decided on the batches before export.

Given a mask and no ``is_causal`` (``tgt_is_causal``), both modules ask
whether the mask *is* the causal one (``_detect_is_causal_mask``:
``bool((mask == causal).all())``) and, if so, let attention apply causality
itself rather than the mask. Eager answers that from the mask's values; a
traced step has none (export's tensors are fake), so torch.export stops on
the data-dependent ``bool``. That is the canonical use of these modules
(PyTorch's word-language-model example passes
``nn.Transformer.generate_square_subsequent_mask(T)``), so capture answers
the question as eager does: it runs the model's forward on every batch
first (on a copy, without autograd, with the random state put back) and
records each module's answer, then traces with the test returning that
answer. Each module must answer alike on every batch (a mask that is causal
in one step and not in another has no single traced step); otherwise
capture stops and names the module and the steps.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Callable, Iterator

import torch
import torch.nn as nn
import torch.nn.modules.transformer as transformer_module

_MODULE_TYPES = (nn.TransformerEncoder, nn.TransformerDecoder)


class InconsistentMask(Exception):
    """A module's mask is causal in one batch and not in another."""


def _modules(model: nn.Module) -> dict[nn.Module, str]:
    return {m: name or "<root>" for name, m in model.named_modules()
            if isinstance(m, _MODULE_TYPES)}


def _describe(model: nn.Module, name: str) -> str:
    module = model if name == "<root>" else model.get_submodule(name)
    return f"{type(module).__name__} '{name}'"


@contextlib.contextmanager
def _answering(model: nn.Module, answer: Callable[..., bool]) -> Iterator[None]:
    """Within: the mask test of a call of one of ``model``'s encoder/decoder
    modules that leaves it to the mask's values is ``answer(module name,
    test, mask, size)``, ``test`` being PyTorch's own."""
    names = _modules(model)
    calling: list[str] = []
    original = transformer_module._detect_is_causal_mask

    def detect(mask, is_causal=None, size=None):
        if is_causal is not None or mask is None or not calling:
            return original(mask, is_causal, size)
        return answer(calling[-1], original, mask, size)

    def enter(name: str) -> Callable[..., None]:
        def hook(*_) -> None:
            calling.append(name)
        return hook

    def leave(*_) -> None:  # a forward hook that returned a value would replace the output
        calling.pop()

    handles = []
    for module, name in names.items():
        handles.append(module.register_forward_pre_hook(enter(name)))
        handles.append(module.register_forward_hook(leave))
    transformer_module._detect_is_causal_mask = detect
    try:
        yield
    finally:
        transformer_module._detect_is_causal_mask = original
        for handle in handles:
            handle.remove()


def decide(model: nn.Module, batches: list[tuple[torch.Tensor, ...]]) -> dict[str, bool]:
    """Each encoder/decoder module's answer on the batches, where the
    module left the test to the mask's values (empty if none did). Raises
    InconsistentMask if a module answers differently on two batches."""
    if not _modules(model):
        return {}
    probe = copy.deepcopy(model)
    answers: dict[str, dict[bool, int]] = {}
    step = 0

    def record(name, test, mask, size):
        made = test(mask, None, size)
        answers.setdefault(name, {}).setdefault(made, step)
        return made

    with torch.random.fork_rng(devices=[]), torch.no_grad(), _answering(probe, record):
        for step, batch in enumerate(batches):
            try:
                probe(*batch)
            except Exception:  # noqa: BLE001 (the eager reference reports it, located)
                return {}
            if not answers:  # no module leaves the test to the values
                break
    for name, seen in answers.items():
        if len(seen) > 1:
            raise InconsistentMask(
                f"the mask given to {_describe(probe, name)} is the causal mask in step "
                f"{seen[True]} but not in step {seen[False]}: a captured step takes one path; "
                "pass is_causal (tgt_is_causal) explicitly, or give every step the same kind "
                "of mask")
    return {name: next(iter(seen)) for name, seen in answers.items()}


@contextlib.contextmanager
def replaying(model: nn.Module, decided: dict[str, bool]) -> Iterator[None]:
    """Within: the modules of ``decided`` answer the mask test as they did
    on the batches; any other call tests the values as usual."""
    if not decided:
        yield
        return

    def replay(name, test, mask, size):
        return decided[name] if name in decided else test(mask, None, size)

    with _answering(model, replay):
        yield
