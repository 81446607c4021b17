"""Capture a PyTorch training step for the Loom compiler.

Usage (from the repository root)::

    PYTHONPATH=python python -m loom.capture FILE.py --out DIR \
        [--steps K] [--optimizer sgd|adam|adamw|rmsprop|adagrad|adadelta|adamax|radam|nadam|rprop|asgd] \
        [--lr X] \
        [--weight-decay W] [--momentum M] [--dampening D] [--nesterov] \
        [--betas B1 B2] [--eps E] [--amsgrad] [--alpha A] [--centered] \
        [--adagrad-lr-decay D] [--initial-accumulator-value V] [--rho R] \
        [--momentum-decay P] [--decoupled-weight-decay] [--etas E- E+] [--step-sizes MIN MAX] \
        [--lambd L] [--t0 T] \
        [--maximize] [--seed S] [--split N] [--microbatches M] \
        [--make-arg KEY=VALUE ...] [--meta]
        [--reference eager|ddp|fsdp|hsdp|replicate [--replicate-size R]
         [--reshard-after-forward auto|true|false|K] [--param-dtype D] [--reduce-dtype D]
         [--broadcast-buffers true|false] [--comm-hook allreduce|fp16-compress|bf16-compress]]

FILE.py defines ``make()`` returning ``(model, batches)``: ``model(*batch)``
returns a scalar loss and ``batches`` is a list of tuples of tensors, one per
step (training cycles through them). The capture writes into DIR:

``step.pt2``
    The joint forward+loss+backward graph as a ``torch.export`` archive with
    the initial weights. Every ``call_function`` node carries
    ``meta["custom"] = {"loom.phase": "forward"|"backward",
    "loom.module": "<dotted module path, '' for the root>"}`` (and, for a
    node that ran in a module called more than once per forward,
    ``"loom.calls": {"<path>": <call index from 1>}``), which survives
    ``torch.export.save`` (``partitioner_tag``/``seq_nr`` do not). A forward
    node that ran inside a ``torch.utils.checkpoint`` region also carries
    ``"loom.ac_region": R`` (regions numbered from 0 in call order, or
    PyTorch's ``ac_graph_id`` where a node has one) and ``"loom.ac_policy":
    "must_save" | "prefer_save" | "must_recompute" | "prefer_recompute"``,
    what the region's policy says of the op: ``prefer_recompute`` for plain
    ``checkpoint``; with ``create_selective_checkpoint_contexts`` the policy
    function's answer for the op. The joint graph itself recomputes nothing
    (``loom-remat`` does). A ``use_reentrant=True`` region is traced as a
    non-reentrant one (the same gradients); one none of whose inputs
    requires grad, and a checkpoint inside another, cannot be captured. A
    forward ``_to_copy`` and the backward ``_to_copy`` autograd made for it
    (which casts the gradient back to the forward input's dtype) share an
    id, ``"loom.cast": K``. With ``--param-dtype`` the casts eager makes
    only under that mixed-precision policy (``.type_as(x)`` of a bf16 x)
    are written in as no-op ``_to_copy`` nodes with ``"loom.policy_cast":
    true|false`` (loom/policy_casts.py).
``run.json``
    The run configuration: what this capture was asked, every value
    resolved, so that later stages need not be told again::

        {"format": "loom-run-config", "version": 1, "world_size": N,
         "microbatches": M, "seed": S, "steps": K,
         "optimizer": {"name": "sgd", "lr": ..., "weight_decay": ...,
                       "momentum": ..., "dampening": ..., "nesterov": ...,
                       "maximize": ...}}

    (``--batch-dims`` other than 0 adds ``"batch_dims": [D, ...]``, one dim
    per batch tensor. Trainable parameters the loss never reads, which
    torch.optim leaves as they are, are captured frozen and listed in
    ``"unused_parameters": [FQN, ...]``. Each optimizer records its own hyperparameters instead of
    the three SGD fields: Adam and AdamW ``betas``, ``eps`` and ``amsgrad``;
    RMSprop ``alpha``, ``eps``, ``momentum`` and ``centered``; Adagrad
    ``lr_decay``, ``initial_accumulator_value`` and ``eps``; Adamax ``betas`` and ``eps``;
    RAdam ``betas``, ``eps`` and ``decoupled_weight_decay``; Adadelta ``rho`` and ``eps``;
    NAdam ``betas``, ``eps``, ``momentum_decay`` and ``decoupled_weight_decay``;
    Rprop ``etas`` and ``step_sizes`` (and no ``weight_decay``: it has none);
    ASGD ``lambd``, ``alpha`` and ``t0``;
    ``--optimizer-impl fused`` adds ``"impl": "fused"``, and the
    reference then runs torch.optim with ``fused=True``.) When FILE.py defines ``param_groups(model)`` (the list of
    dicts a user passes to ``torch.optim``, e.g. ``[{"params": decay,
    "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]``),
    ``"param_groups"`` lists the resolved groups of the real optimizer:
    ``[{"params": [FQN, ...], "lr": ..., "weight_decay": ...}, ...]``; the
    groups may set ``lr`` and ``weight_decay``, every parameter that trains
    must be in one. With ``--lr-warmup-steps``/``--lr-decay``,
    ``"lr_schedule"`` records the schedule (``warmup_steps``,
    ``warmup_start_factor``, ``decay``, ``decay_steps``, ``eta_min``,
    ``end_factor``, ``gamma`` for the step, exponential and multistep decays,
    ``milestones`` for multistep, ``power`` for polynomial, ``t_mult`` for
    cosine-restarts), which the reference trains with as
    ``SequentialLR([LinearLR, CosineAnnealingLR | LinearLR | StepLR |
    ExponentialLR | MultiStepLR | PolynomialLR | CosineAnnealingWarmRestarts],
    [W])`` and
    loom-compile gives loom-attach-optimizer. With ``--max-grad-norm X
    [--grad-norm-type 2|inf]``, ``"clip_grad_norm": {"max_norm": X,
    "norm_type": "2"}``: the references clip with ``clip_grad_norm_``
    before each update, and loom-compile clips the same way. ``step.pt2`` carries the identical text as the extra file
    ``loom_run.json`` (zip entry ``step/extra/loom_run.json``), which is
    where ``loom-import`` reads it.
``batches.safetensors``
    ``step{i}.arg{j}`` for every batch ``i`` of ``batches`` and argument
    ``j``; metadata ``num_steps`` (= ``len(batches)``) and ``num_args``.
    Training step ``s`` uses ``step{s % num_steps}``.
``reference.json``
    Eager PyTorch losses for K steps (``losses[i]`` is step i's loss, before
    its update) with the chosen optimizer and all its hyperparameters,
    float64 sums of the final parameters (and of the initial ones), and the
    tied-parameter aliases that were folded into one graph input.
``reference.safetensors``
    Parameters and buffers after K eager steps, keyed by FQN.

With ``--split N`` (data parallelism over N ranks, docs/distributed.md) and
``--microbatches M`` (gradient accumulation), the joint graph is exported
for one rank's microbatch: every batch tensor's dim 0 divided by ``N * M``
(which must divide it). ``batches.safetensors`` and the eager reference keep
the whole batch on one device; ``reference.json`` records ``"split": N`` and
``"microbatches": M``. ``--batch-dims D[,D...]`` names the dim that indexes
the samples instead of 0, one for every batch tensor or one per tensor in
order (``1`` for sequence-first ``(S, B, ...)`` tensors, as
``nn.Transformer``, ``nn.MultiheadAttention`` and the RNNs take by
default), or ``none`` for a tensor without one (a mask every sample shares;
a 0-d tensor is that without being told), which every rank and microbatch
takes whole; ``run.json`` records it as ``"batch_dims"`` (``null`` for none)
and every later stage (``loom-import``'s ``loom.batch_dim`` and
``loom.unbatched``, data parallelism, accumulation, pipelining, loom-run,
the data-parallel references) splits that dim.

``--reference`` says which run ``reference.*`` hold. ``eager`` (the
default): the whole batch on one device, as above; exact for a single-rank
step and for SGD. ``ddp``, ``fsdp``, ``hsdp`` or ``replicate`` (with
``--split N``, N > 1): PyTorch's own ``DistributedDataParallel``,
``fully_shard`` (HSDP on a ``--replicate-size R`` x N/R mesh;
``--reshard-after-forward`` as loom-compile's; ``--param-dtype`` and
``--reduce-dtype``, loom-compile's names, as its ``MixedPrecisionPolicy``;
``--broadcast-buffers``, DDP's ``broadcast_buffers``, and ``--comm-hook``, the
DDP communication hook, as loom-compile's)
or FSDP2-based ``replicate``
trains the same model on N Gloo ranks, each on its slice of
every batch (loom/dp_reference.py); its losses and parameters replace the
eager ones, ``reference.json`` says which run made them in
``"reference"``, and ``one-step-short/`` holds the same run's parameters one
step before the end, a negative control a check must reject. That is the
right reference where the summation order of a distributed gradient shows
(Adam and AdamW turn it into lr-sized steps on near-zero gradients;
docs/distributed.md).

``--make-arg KEY=VALUE`` (repeatable) calls ``make(KEY=VALUE, ...)``; VALUE
is a Python literal (``n_layers=2``, ``dim=64``) or else a string.

With ``--meta`` nothing is materialised: ``make()`` runs under a
``FakeTensorMode`` (CPU fake tensors: shapes, dtypes and strides, no storage),
so a model of any size (e.g. Llama-3-8B, bench/models/llama3.py) exports in
seconds and little memory. Only ``step.pt2`` and ``run.json`` are written;
the weight entries are empty, so import it with ``loom-import --no-weights`` (parameters become
typed step arguments). There is no eager reference, no batches file and no
``reference.json``: the step can be compiled and simulated, not run.

The optimizer's defaults are PyTorch's: AdamW (lr 1e-3, weight decay 0.01,
betas (0.9, 0.999), eps 1e-8) unless ``--optimizer`` says otherwise; Adam
(lr 1e-3, weight decay 0). SGD needs ``--lr``.

User errors (missing file, bad ``make()``, non-scalar loss, ...) are reported
as ``loom.capture: error: ...`` with exit status 2 and no traceback.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import functools
import importlib.util
import io
import itertools
import json
import math
import re
import sys
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.fx
import torch.fx.graph_module as fx_graph_module
import torch.fx.traceback as fx_traceback
import torch.nn as nn
import torch.utils.checkpoint as torch_checkpoint
from torch.export.experimental import (
    _copy_graph_module_and_signature,
    _export_forward_backward,
    _remove_detach_pass,
)
from torch._export.utils import _collect_all_valid_cia_ops_for_aten_namespace
from torch.export.exported_program import _decompose_exported_program, _special_op_to_preserve_cia
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from torch._subclasses.fake_tensor import FakeTensor

from loom.options import (  # noqa: F401 (re-exported: capture's options)
    COMM_HOOKS,
    DEFAULT_OPTIMIZER,
    FUSED_OPTIMIZERS,
    LR_DECAYS,
    OPTIMIZER_CLASSES,
    OPTIMIZER_FLAGS,
    OPTIMIZER_IMPLS,
    OPTIMIZER_KEYS,
    PAIR_KEYS,
    RUN_CONFIG_EXTRA,
    RUN_CONFIG_FILE,
    RUN_CONFIG_FORMAT,
    RUN_CONFIG_VERSION,
    add_clip_arguments,
    add_optimizer_arguments,
    add_schedule_arguments,
    batch_dims_arg,
    clip_config,
    clip_gradients,
    optimizer_arg,
    optimizer_config,
    pytorch_defaults,
    resolve_optimizer,
    schedule_config,
)
from loom import causal_masks, eager_backward, policy_casts, rnn_dropout
from loom.safetensors_io import save_tensors

PROG = "loom.capture"

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    name: getattr(torch.optim, cls) for name, cls in OPTIMIZER_CLASSES.items()}

PHASE_KEY = "loom.phase"
MODULE_KEY = "loom.module"
CALLS_KEY = "loom.calls"
AC_REGION_KEY = "loom.ac_region"
AC_POLICY_KEY = "loom.ac_policy"
CAST_KEY = "loom.cast"
SYNC_BATCH_NORM_KEY = "loom.sync_batch_norm"
# The training-mode batch norm forwards AOTAutograd traces F.batch_norm to
# (with running statistics, and without).
BATCH_NORM_FORWARDS = (torch.ops.aten._native_batch_norm_legit_functional.default,
                       torch.ops.aten._native_batch_norm_legit.no_stats)
# PyTorch's CheckpointPolicy as loom-import spells #loom.ac_policy.
AC_POLICY_NAMES = {
    torch_checkpoint.CheckpointPolicy.MUST_SAVE: "must_save",
    torch_checkpoint.CheckpointPolicy.PREFER_SAVE: "prefer_save",
    torch_checkpoint.CheckpointPolicy.MUST_RECOMPUTE: "must_recompute",
    torch_checkpoint.CheckpointPolicy.PREFER_RECOMPUTE: "prefer_recompute",
}


class CaptureError(Exception):
    """A problem with the user's model file; reported without a traceback."""


# --------------------------------------------------------------------------
# Loading and validating the user's model file


def _user_location(exc: BaseException, path: Path) -> str:
    """'FILE:LINE: ' of the innermost frame of ``exc`` inside the user file."""
    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == path:
            where = f"{path}:{frame.lineno}: "
    return where


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def load_param_groups(path: Path) -> Callable[[nn.Module], Any] | None:
    """The model file's optional ``param_groups(model)``; load_make has
    imported it already."""
    name = "loom_user_model_" + "".join(c if c.isalnum() else "_" for c in path.stem)
    fn = getattr(sys.modules.get(name), "param_groups", None)
    if fn is not None and not callable(fn):
        raise CaptureError(f"{path}: param_groups is not callable")
    return fn


def load_make(path: Path) -> Callable[[], Any]:
    if not path.is_file():
        raise CaptureError(f"model file not found: {path}")
    # Registered in sys.modules like a script would be, so that dataclasses
    # and pickling-based helpers inside the user file work; the file's folder
    # goes on sys.path so it can import its neighbours.
    name = "loom_user_model_" + "".join(c if c.isalnum() else "_" for c in path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CaptureError(f"cannot import {path} (not a Python file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # any failure here is the user file's
        raise CaptureError(f"{_user_location(exc, path)}importing {path} failed: {_describe(exc)}") from exc
    make = getattr(module, "make", None)
    if make is None:
        raise CaptureError(f"{path} does not define make()")
    if not callable(make):
        raise CaptureError(f"{path}: make is not callable")
    return make


@dataclass
class UserProgram:
    model: nn.Module
    batches: list[tuple[torch.Tensor, ...]]


def _spec(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"


def make_seeded(path: Path, seed: int, kwargs: dict[str, Any] | None = None) -> UserProgram:
    """Imports the user file, then seeds, then calls its ``make()``: the
    initial weights and batches depend on the seed alone, not on whether
    importing the file (or a module it imports, e.g. torch's test helpers)
    drew random numbers, which happens only the first time in a process."""
    make = load_make(path)
    torch.manual_seed(seed)
    return call_make(make, path, kwargs)


def call_make(make: Callable[..., Any], path: Path, kwargs: dict[str, Any] | None = None) -> UserProgram:
    try:
        result = make(**(kwargs or {}))
    except Exception as exc:
        raise CaptureError(f"{_user_location(exc, path)}make() raised {_describe(exc)}") from exc
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise CaptureError(f"make() must return (model, batches), got {type(result).__name__}")
    model, batches = result
    if not isinstance(model, nn.Module):
        raise CaptureError(
            f"make() returned a model of type {type(model).__name__}, expected a torch.nn.Module"
        )
    if not isinstance(batches, (list, tuple)) or not batches:
        raise CaptureError("make() must return a non-empty list of batches")

    normalized: list[tuple[torch.Tensor, ...]] = []
    for i, batch in enumerate(batches):
        if not isinstance(batch, (tuple, list)) or not batch:
            raise CaptureError(
                f"batch {i} must be a non-empty tuple of tensors, got {type(batch).__name__}"
            )
        for j, arg in enumerate(batch):
            if not isinstance(arg, torch.Tensor):
                raise CaptureError(
                    f"batch {i} element {j} is a {type(arg).__name__}, expected a torch.Tensor"
                )
        normalized.append(tuple(batch))

    # The graph is specialised to the shapes of batches[0]; a batch that
    # differs would silently not match the compiled step.
    first = [_spec(t) for t in normalized[0]]
    for i, batch in enumerate(normalized[1:], start=1):
        specs = [_spec(t) for t in batch]
        if specs != first:
            raise CaptureError(
                f"batch {i} has arguments {specs} but batch 0 has {first}; "
                "all batches must have the same number, shapes and dtypes of tensors"
            )

    if not any(p.requires_grad for p in model.parameters()):
        raise CaptureError("the model has no trainable parameters")
    return UserProgram(model, normalized)


def _some_names(names: list[str]) -> str:
    """The first three names, and how many more there are."""
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more


def _lazy_modules(model: nn.Module) -> list[str]:
    return [name or type(m).__name__ for name, m in model.named_modules()
            if isinstance(m, nn.modules.lazy.LazyModuleMixin) and m.has_uninitialized_params()]


def materialize_lazy_modules(model: nn.Module, batch: tuple[torch.Tensor, ...], path: Path) -> None:
    """Gives lazy modules (nn.LazyLinear, nn.LazyConv2d, ...) their
    parameters by one forward of the first batch, as PyTorch asks before an
    optimizer is built: the parameters are drawn from the generator as make()
    left it, and the forward's buffer updates (batch norm's running
    statistics) are undone. (The reference re-seeds before it trains.)"""
    lazy = _lazy_modules(model)
    if not lazy:
        return
    with torch.no_grad(), eager_backward.buffers_kept(model):
        try:
            model(*batch)
        except Exception as exc:
            raise CaptureError(f"{_user_location(exc, path)}initializing the lazy modules "
                               f"({_some_names(lazy)}) by a forward of the first batch raised "
                               f"{_describe(exc)}") from exc
    print(f"{PROG}: note: lazy module(s) {_some_names(lazy)} took their parameters' shapes "
          "from a forward of the first batch", file=sys.stderr)


def note_strided_tensors(model: nn.Module, batches: list[tuple[torch.Tensor, ...]]) -> None:
    """Says which parameters, buffers and batch tensors are not row-major
    (e.g. ``channels_last``): Loom holds every one row-major, so kernels
    that pick an algorithm by layout (convolutions) sum in another order
    than eager's and results differ in the last bits."""
    named = [*model.named_parameters(), *model.named_buffers(),
             *((f"batch argument {j}", t) for j, t in enumerate(batches[0]))]
    strided = [name for name, t in named if not t.is_contiguous()]
    if strided:
        print(f"{PROG}: note: {_some_names(strided)} are not row-major (e.g. "
              "channels_last); Loom runs every tensor row-major, so convolutions round "
              "differently from eager's (AdamW magnifies that where a gradient is "
              "mathematically zero, e.g. a bias before batch norm)", file=sys.stderr)


def refuse_layouts_not_dense(model: nn.Module, batches: list[tuple[torch.Tensor, ...]]) -> None:
    """A sparse (COO, CSR, ...) parameter, buffer or batch tensor: the
    compiled step holds dense tensors only (the archive and loom-run's
    batches cannot even store one)."""
    named = [*model.named_parameters(), *model.named_buffers(),
             *((f"batch argument {j} of step {i}", t) for i, batch in enumerate(batches)
               for j, t in enumerate(batch))]
    other = [(name, t.layout) for name, t in named if t.layout != torch.strided]
    if other:
        layouts = ", ".join(sorted({str(layout).removeprefix("torch.") for _, layout in other}))
        raise CaptureError(
            f"{_some_names([name for name, _ in other])}: a tensor of layout {layouts}; a "
            "compiled step holds dense tensors only: pass it dense (t.to_dense()) and use the "
            "dense op (torch.mm for torch.sparse.mm)")


def refuse_sparse_gradients(model: nn.Module) -> None:
    """nn.Embedding/EmbeddingBag(sparse=True) give their weight a sparse
    gradient, which the compiled step, whose tensors are dense, cannot
    hold."""
    sparse = [name for name, m in model.named_modules()
              if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse]
    if sparse:
        raise CaptureError(
            f"{_some_names(sparse)}: an embedding with sparse=True gives its weight a sparse "
            "gradient, and a compiled step holds dense tensors only; construct it with "
            "sparse=False (the same gradient values, dense)")


def check_loss(loss: Any) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor):
        hint = ""
        if isinstance(loss, (tuple, list, dict)) or hasattr(loss, "loss"):
            # (loss, logits), {"loss": ...}, a Hugging Face ModelOutput.
            hint = ("; Loom trains the loss alone: return only it from forward (other "
                    "outputs are not supported)")
        raise CaptureError(f"model(*batch) must return a scalar loss tensor, got "
                           f"{type(loss).__name__}{hint}")
    if loss.dim() != 0:
        raise CaptureError(
            f"model(*batch) must return a scalar loss, got a tensor of shape {tuple(loss.shape)} "
            "(reduce it, e.g. with .mean())"
        )
    if not loss.is_floating_point():
        raise CaptureError(f"the loss must be a floating point tensor, got {loss.dtype}")
    if not loss.requires_grad:
        raise CaptureError("the loss does not depend on any trainable parameter")
    return loss


# --------------------------------------------------------------------------
# Eager reference run


@dataclass
class Reference:
    losses: list[float]
    optimizer: dict[str, Any]
    final_state: dict[str, torch.Tensor]
    checksums: dict[str, float]
    lrs: list[list[float]]


def _json_hyperparameters(defaults: dict[str, Any]) -> dict[str, Any]:
    """The optimizer's full default dict, made JSON-friendly."""
    out: dict[str, Any] = {}
    for key, value in defaults.items():
        if isinstance(value, torch.Tensor):
            value = value.item()
        if isinstance(value, tuple):
            value = list(value)
        if value is None or isinstance(value, (bool, int, float, str, list)):
            out[key] = value
    return out


def optimizer_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """The constructor keywords of a resolved optimizer configuration."""
    kwargs = {k: tuple(v) if k in PAIR_KEYS else v for k, v in config.items()
              if k not in ("name", "impl")}
    if config.get("impl") == "fused":
        kwargs["fused"] = True
    return kwargs


def resolve_param_groups(
    make_groups: Callable[[nn.Module], Any], model: nn.Module, optimizer: dict[str, Any]
) -> list[dict[str, Any]]:
    """The groups of ``torch.optim`` built from ``make_groups(model)`` (the
    model file's ``param_groups``), by parameter name: ``[{"params":
    [FQN, ...], "lr": ..., "weight_decay": ...}]``. Only lr and weight decay
    may differ between groups, and every trainable parameter must be in one:
    Loom updates every parameter that has a gradient."""
    try:
        groups = make_groups(model)
        opt = OPTIMIZERS[optimizer["name"]](groups, **optimizer_kwargs(optimizer))
    except Exception as exc:
        raise CaptureError(f"param_groups(model): {_describe(exc)}") from exc
    names = {id(p): n for n, p in model.named_parameters()}
    resolved, seen = [], set()
    for i, group in enumerate(opt.param_groups):
        for key in OPTIMIZER_KEYS[optimizer["name"]]:
            if key in ("lr", "weight_decay"):
                continue
            value = group[key]
            want = optimizer[key]
            if (list(value) if isinstance(value, tuple) else value) != want:
                raise CaptureError(
                    f"param group {i} sets {key}={value!r}; a group may set only lr and "
                    f"weight_decay (the optimizer's {key} is {want!r})")
        decays = "weight_decay" in OPTIMIZER_KEYS[optimizer["name"]]
        if not decays and "weight_decay" in group:
            raise CaptureError(f"param group {i} sets weight_decay, which torch.optim."
                               f"{type(opt).__name__} does not have (it would ignore it)")
        params = []
        for p in group["params"]:
            if id(p) not in names:
                raise CaptureError(f"param group {i} holds a tensor that is not a parameter "
                                   "of the model")
            if p.requires_grad:
                params.append(names[id(p)])
                seen.add(names[id(p)])
        if params:
            # Rprop has no weight decay: its groups record 0, which the
            # compiler's group rules accept for it.
            resolved.append({"params": params, "lr": float(group["lr"]),
                             "weight_decay": float(group.get("weight_decay", 0.0))})
    missing = [n for n, p in model.named_parameters() if p.requires_grad and n not in seen]
    if missing:
        raise CaptureError(f"parameters in no param group: {', '.join(missing)} (Loom updates "
                           "every trainable parameter; put each in a group)")
    return resolved


def make_optimizer(model: nn.Module, optimizer: dict[str, Any],
                   param_groups: list[dict[str, Any]] | None = None,
                   **extra: Any) -> torch.optim.Optimizer:
    """``torch.optim`` over the trainable parameters of ``model`` with
    ``optimizer``'s hyperparameters and, when given, the groups of
    :func:`resolve_param_groups` (by name, so any copy of the model or a
    DDP/FSDP-wrapped one takes the same groups)."""
    cls = OPTIMIZERS[optimizer["name"]]
    # named_parameters() drops tied duplicates, so a tied weight is one
    # optimizer parameter, as it is one input in the exported graph.
    named = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if not param_groups:
        return cls(list(named.values()), **optimizer_kwargs(optimizer), **extra)
    decays = "weight_decay" in OPTIMIZER_KEYS[optimizer["name"]]
    groups = [{"params": [named[n] for n in g["params"]], "lr": g["lr"],
               **({"weight_decay": g["weight_decay"]} if decays else {})}
              for g in param_groups]
    return cls(groups, **optimizer_kwargs(optimizer), **extra)


def make_scheduler(opt: torch.optim.Optimizer, schedule: dict[str, Any] | None):
    """The ``torch.optim.lr_scheduler`` of a recorded ``lr_schedule`` (None:
    constant): a LinearLR warm-up, then CosineAnnealingLR, LinearLR, StepLR,
    ExponentialLR, MultiStepLR, PolynomialLR or CosineAnnealingWarmRestarts
    decay, chained by
    SequentialLR at the end of the warm-up."""
    if not schedule:
        return None
    from torch.optim import lr_scheduler

    warmup, decay = schedule["warmup_steps"], schedule["decay"]
    parts = []
    if warmup > 0:
        parts.append(lr_scheduler.LinearLR(opt, start_factor=schedule["warmup_start_factor"],
                                           end_factor=1.0, total_iters=warmup))
    if decay == "cosine":
        parts.append(lr_scheduler.CosineAnnealingLR(opt, T_max=schedule["decay_steps"],
                                                    eta_min=schedule["eta_min"]))
    elif decay == "linear":
        parts.append(lr_scheduler.LinearLR(opt, start_factor=1.0,
                                           end_factor=schedule["end_factor"],
                                           total_iters=schedule["decay_steps"]))
    elif decay == "step":
        parts.append(lr_scheduler.StepLR(opt, step_size=schedule["decay_steps"],
                                         gamma=schedule["gamma"]))
    elif decay == "exponential":
        parts.append(lr_scheduler.ExponentialLR(opt, gamma=schedule["gamma"]))
    elif decay == "multistep":
        parts.append(lr_scheduler.MultiStepLR(opt, milestones=schedule["milestones"],
                                              gamma=schedule["gamma"]))
    elif decay == "polynomial":
        parts.append(lr_scheduler.PolynomialLR(opt, total_iters=schedule["decay_steps"],
                                               power=schedule["power"]))
    elif decay == "cosine-restarts":
        parts.append(lr_scheduler.CosineAnnealingWarmRestarts(
            opt, T_0=schedule["decay_steps"], T_mult=schedule["t_mult"],
            eta_min=schedule["eta_min"]))
    if len(parts) == 1:
        return parts[0]
    return lr_scheduler.SequentialLR(opt, parts, milestones=[warmup])


@functools.cache
def resolve_vector_math_kernels() -> tuple[str, ...]:
    """Calls, once per process and on one thread, every function ATen computes
    with oneMKL's vector math (``IMPLEMENT_VML_MKL`` in ATen/cpu/vml.h); the
    names called.

    oneMKL picks each function's kernel on its first call, and first calls
    from two intra-op threads at once can run the low-accuracy kernel on one
    thread's chunk (pytorch/pytorch#188792): a reference ``sqrt`` of 4,096
    elements on two threads was off by up to 3.2e-4 in half its elements in
    about 1 process in 100 on a loaded machine. One element is below ATen's
    parallel grain, so these calls resolve the kernels before the reference
    runs. libloomrt does the same before a session's first step
    (runtime/lib/VectorMath.h).
    """
    header = Path(torch.__file__).parent / "include" / "ATen" / "cpu" / "vml.h"
    if not header.exists():  # a build without headers (or without MKL)
        return ()
    names = tuple(re.findall(r"^IMPLEMENT_VML_MKL\((\w+),", header.read_text(), re.MULTILINE))
    for dtype in (torch.float32, torch.float64):
        x = torch.full((1,), 0.5, dtype=dtype)  # in every function's domain
        for name in names:
            getattr(torch, name)(x)
    return names


def run_reference(
    model: nn.Module,
    batches: Sequence[tuple[torch.Tensor, ...]],
    steps: int,
    optimizer: dict[str, Any],
    path: Path,
    param_groups: list[dict[str, Any]] | None = None,
    schedule: dict[str, Any] | None = None,
    clip: dict[str, Any] | None = None,
) -> Reference:
    """Train ``model`` (the caller passes a copy) eagerly for ``steps`` steps
    with ``optimizer`` (a :func:`resolve_optimizer` result), its
    ``param_groups`` and ``schedule``, clipping the gradients as ``clip``
    (run.json's ``clip_grad_norm``) asks before each update.

    ``losses[i]`` is the loss computed at step ``i`` with the parameters
    before that step's update, i.e. what the joint graph returns for step i;
    ``lrs[i]`` the rate of each group at step i (``get_last_lr()``).
    """
    resolve_vector_math_kernels()
    opt = make_optimizer(model, optimizer, param_groups)
    scheduler = make_scheduler(opt, schedule)

    losses: list[float] = []
    lrs: list[list[float]] = []
    for step in range(steps):
        batch = batches[step % len(batches)]
        opt.zero_grad(set_to_none=True)
        try:
            loss = model(*batch)
        except Exception as exc:
            raise CaptureError(f"{_user_location(exc, path)}model(*batch) raised {_describe(exc)}") from exc
        check_loss(loss)
        try:
            loss.backward()
        except Exception as exc:
            raise CaptureError(f"{_user_location(exc, path)}the backward of model(*batch) "
                               f"raised {_describe(exc)}") from exc
        lrs.append([g["lr"] for g in opt.param_groups])
        clip_gradients(model.parameters(), clip)
        try:
            opt.step()
        except Exception as exc:
            raise CaptureError(f"the eager reference's torch.optim.{type(opt).__name__}.step() "
                               f"raised {_describe(exc)}") from exc
        if scheduler is not None:
            scheduler.step()
        value = loss.item()
        if not math.isfinite(value):
            raise CaptureError(f"the eager loss is {value} at step {step}; lower --lr or fix the model")
        losses.append(value)

    final = {name: p.detach().clone() for name, p in model.named_parameters()}
    final.update({name: b.detach().clone() for name, b in model.named_buffers()})
    checksums = {name: p.detach().double().sum().item() for name, p in model.named_parameters()}
    hyper = {"name": optimizer["name"], **_json_hyperparameters(opt.defaults)}
    return Reference(losses, hyper, final, checksums, lrs)


# --------------------------------------------------------------------------
# Export of the joint graph


def canonicalize_tied_parameters(
    ep: torch.export.ExportedProgram, model: nn.Module
) -> tuple[torch.export.ExportedProgram, dict[str, str]]:
    """Give each tied parameter a single placeholder before the joint export.

    Non-strict export keeps one PARAMETER input per FQN of a tied weight
    (``tok.weight`` and ``head.weight``) but routes every use to one of the
    placeholders, leaving the other unused; AOTAutograd then asserts "Found
    a parameter that did not receive a gradient" (pytorch/pytorch#147380,
    unfixed in 2.9). We keep the first FQN in ``named_parameters()`` order,
    point the uses of the aliases at it and drop the aliases from the graph,
    the signature and the state dict, so the joint graph has one input and
    one gradient per distinct parameter. Returns ``{alias: canonical}``.
    """
    canonical_of: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in canonical_of:
            aliases[name] = canonical_of[id(p)]
        else:
            canonical_of[id(p)] = name
    if not aliases:
        return ep, aliases

    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    node_of_target = {
        spec.target: placeholders[spec.arg.name]
        for spec in ep.graph_signature.input_specs
        if spec.kind == InputKind.PARAMETER
    }
    kept_specs = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.PARAMETER and spec.target in aliases:
            alias_node = placeholders[spec.arg.name]
            alias_node.replace_all_uses_with(node_of_target[aliases[spec.target]])
            ep.graph.erase_node(alias_node)
        else:
            kept_specs.append(spec)
    ep.graph_module.recompile()
    signature = ExportGraphSignature(kept_specs, list(ep.graph_signature.output_specs))
    state_dict = {k: v for k, v in ep.state_dict.items() if k not in aliases}
    return ep._update(ep.graph_module, signature, state_dict=state_dict), aliases


def _copy_forward_meta_to_backward(graph: torch.fx.Graph) -> None:
    """Label backward nodes with the module of the forward op they differentiate.

    AOTAutograd gives a forward op and the backward ops derived from it the
    same ``seq_nr``; backward nodes are tagged ``partitioner_tag ==
    "is_backward"`` but have no module stack of their own.
    """
    forward_by_seq: dict[int, torch.fx.Node] = {}
    for node in graph.nodes:
        is_forward = node.meta.get("partitioner_tag") != "is_backward"
        if is_forward and node.meta.get("nn_module_stack") and "seq_nr" in node.meta:
            forward_by_seq.setdefault(node.meta["seq_nr"], node)
    for node in graph.nodes:
        if node.meta.get("partitioner_tag") != "is_backward":
            continue
        forward = forward_by_seq.get(node.meta.get("seq_nr"))
        if forward is None:
            continue
        node.meta["nn_module_stack"] = dict(forward.meta["nn_module_stack"])
        if forward.meta.get("stack_trace"):
            node.meta["stack_trace"] = forward.meta["stack_trace"]


def _pair_casts(graph: torch.fx.Graph, ids: Iterator[int]) -> None:
    """Give a forward ``_to_copy`` and the backward ``_to_copy`` autograd made
    for it (ToCopyBackward: the gradient cast back to the dtype of the forward
    cast's input) one id, ``meta["custom"]["loom.cast"]``.

    AOTAutograd gives both the same ``seq_nr``. The joint graph is traced in
    the parameters' dtype; when ``loom-fsdp``'s mixed precision lowers the
    forward cast's input to the compute dtype, eager's gradient of it is in
    the compute dtype too, and the backward cast follows it (an autocast
    region's cast of a bf16 activation under ``MixedPrecisionPolicy``).
    """
    casts: dict[int, torch.fx.Node] = {}
    for node in graph.nodes:
        if (node.target is torch.ops.aten._to_copy.default and "seq_nr" in node.meta
                and node.meta.get("partitioner_tag") != "is_backward"):
            casts.setdefault(node.meta["seq_nr"], node)
    for node in graph.nodes:
        if (node.target is not torch.ops.aten._to_copy.default
                or node.meta.get("partitioner_tag") != "is_backward"):
            continue
        forward = casts.get(node.meta.get("seq_nr"))
        if forward is None:
            continue
        if CAST_KEY not in (forward.meta.get("custom") or {}):
            forward.meta["custom"] = {**(forward.meta.get("custom") or {}), CAST_KEY: next(ids)}
        node.meta["custom"] = {**(node.meta.get("custom") or {}),
                               CAST_KEY: forward.meta["custom"][CAST_KEY]}


@contextlib.contextmanager
def _keep_joint_node_metadata():
    """Make the joint export keep per-node provenance.

    ``aot_export_module(trace_joint=True)`` builds a first joint graph (with
    ``nn_module_stack``, ``stack_trace``, ``seq_nr`` and ``partitioner_tag``)
    and then re-traces it by calling it as plain Python, which drops all of
    that metadata. While node metadata is being preserved we run the inner
    graph through ``torch.fx.Interpreter`` instead, which replays each node's
    metadata onto the ops it emits, after first copying module stacks from
    forward nodes to their backward counterparts and pairing casts.
    """
    original = fx_graph_module._WrappedCall.__call__
    cast_ids = itertools.count()

    def call(self, obj, *args, **kwargs):
        if kwargs or not fx_traceback.has_preserved_node_meta():
            return original(self, obj, *args, **kwargs)
        _copy_forward_meta_to_backward(obj.graph)
        _pair_casts(obj.graph, cast_ids)
        return torch.fx.Interpreter(obj).run(*args)

    fx_graph_module._WrappedCall.__call__ = call
    try:
        with fx_traceback.preserve_node_meta():
            yield
    finally:
        fx_graph_module._WrappedCall.__call__ = original


# --------------------------------------------------------------------------
# torch.utils.checkpoint regions


@dataclass
class CheckpointRegions:
    """The ``torch.utils.checkpoint`` regions met while exporting, in call
    order: ``policies[r]`` is region r's selective-checkpoint policy function
    (the one given to ``create_selective_checkpoint_contexts``), or None for
    a region that recomputes everything (plain ``checkpoint``)."""

    policies: list[Callable[..., Any] | None]


def _checkpoint_caller() -> str:
    """'FILE:LINE: ' of the code that called torch.utils.checkpoint."""
    torch_dir = Path(torch.__file__).resolve().parent
    # torch.compiler.disable wraps checkpoint(): its frames are no caller,
    # nor this file's (a reentrant region is traced through a second call).
    wrappers = (torch_dir / "_dynamo", torch_dir / "_compile.py", Path(__file__).resolve())
    checkpoint_file = Path(torch_checkpoint.__file__).resolve()
    inside = False
    for frame in reversed(traceback.extract_stack()):
        path = Path(frame.filename).resolve()
        if path == checkpoint_file:
            inside = True
        elif inside and not any(path.is_relative_to(w) for w in wrappers):
            return f"{frame.filename}:{frame.lineno}: "
    return ""


class _ReentrantCheckpoint:
    """Stands in for ``CheckpointFunction`` while exporting.

    Reentrant checkpoint runs its region under no_grad and rebuilds the
    autograd graph in its own backward, which export never runs: traced as
    it is, the step would lose the region's gradients. Its gradients are the
    non-reentrant checkpoint's (both recompute the region's forward with the
    saved RNG state and differentiate it), so the region is traced as a
    non-reentrant one, and recorded like one. But for one case: when no
    tensor input of the region requires grad, PyTorch's reentrant
    checkpoint gives the region's parameters no gradient at all (its warning
    "None of the inputs have requires_grad=True"), which no non-reentrant
    region reproduces; that is refused.
    """

    @staticmethod
    def apply(function: Any, preserve_rng_state: bool, *args: Any) -> Any:
        if not any(torch.is_tensor(a) and a.requires_grad for a in args):
            raise CaptureError(
                f"{_checkpoint_caller()}torch.utils.checkpoint with use_reentrant=True (the "
                "default when use_reentrant is not given) on inputs none of which requires "
                "grad: PyTorch gives the region's parameters no gradient, which a captured "
                "step cannot reproduce; pass use_reentrant=False")
        return torch_checkpoint.checkpoint(function, *args, use_reentrant=False,
                                           preserve_rng_state=preserve_rng_state)


@contextlib.contextmanager
def _record_checkpoint_regions():
    """Tag every op a ``torch.utils.checkpoint`` region traces with the region.

    Non-strict export runs checkpoint's eager code: the region's forward is
    traced like any other code and its recompute would only happen in an
    eager backward, which export never runs. The joint graph therefore saves
    activations as if there were no checkpoint (no duplicated recompute;
    ``loom-remat`` recomputes), but the region boundaries are lost. While
    exporting, the non-reentrant implementation is wrapped so that the nodes
    traced inside a region carry ``custom["loom.ac_region"]``: export copies
    ``fx_traceback.current_meta["custom"]`` onto each node it creates while
    node metadata is preserved, and the joint export copies it on to the ATen
    ops each node lowers to. A selective-checkpoint region runs without its
    dispatch modes (they only bookkeep for the eager backward); its policy is
    asked per joint-graph op afterwards (:func:`tag_checkpoint_policies`).
    Reentrant regions are traced as non-reentrant ones
    (:class:`_ReentrantCheckpoint`); nested checkpoints, which export gets
    wrong, are refused.
    Yields the regions recorded.
    """
    regions = CheckpointRegions([])
    original = torch_checkpoint._checkpoint_without_reentrant_generator
    original_function = torch_checkpoint.CheckpointFunction
    # torch.distributed's composable checkpoint(module) imported the
    # generator by name.
    composable = sys.modules.get("torch.distributed._composable.checkpoint_activation")
    depth = 0
    live: list[Any] = []

    def region(fn, preserve_rng_state, context_fn, *rest, **kwargs):
        nonlocal depth
        if depth:
            # Export traces the inner region so that the loss no longer
            # depends on the parameters (torch 2.9): refuse it by name.
            raise CaptureError(
                f"{_checkpoint_caller()}a torch.utils.checkpoint region inside another "
                "cannot be captured; checkpoint the outer region only")
        policy_fn = None
        if context_fn is not torch_checkpoint.noop_context_fn:
            contexts = context_fn()
            if isinstance(contexts[0], torch_checkpoint._CachingTorchDispatchMode):
                # The policy is asked once per op after the joint export; a
                # stateful one (counting matmuls, say) must not be asked
                # during tracing as well.
                policy_fn = contexts[0].policy_fn
                context_fn = torch_checkpoint.noop_context_fn
            else:
                # Context managers of the user's own make no policy: the
                # region recomputes everything, as eager checkpoint does.
                context_fn = lambda: contexts  # noqa: E731
        index = len(regions.policies)
        regions.policies.append(policy_fn)
        depth += 1
        try:
            with fx_traceback.preserve_node_meta():
                custom = dict(fx_traceback.current_meta.get("custom") or {})
                fx_traceback.current_meta["custom"] = {**custom, AC_REGION_KEY: index}
                yield from original(fn, preserve_rng_state, context_fn, *rest, **kwargs)
        finally:
            depth -= 1

    def tracked(*args, **kwargs):
        gen = region(*args, **kwargs)
        live.append(gen)
        return gen

    torch_checkpoint._checkpoint_without_reentrant_generator = tracked
    torch_checkpoint.CheckpointFunction = _ReentrantCheckpoint
    if composable is not None:
        composable._checkpoint_without_reentrant_generator = tracked
    try:
        yield regions
    finally:
        # A region whose forward raised is never resumed; closing it undoes
        # its preserve_node_meta now rather than whenever it is collected.
        for gen in reversed(live):
            gen.close()
        torch_checkpoint._checkpoint_without_reentrant_generator = original
        torch_checkpoint.CheckpointFunction = original_function
        if composable is not None:
            composable._checkpoint_without_reentrant_generator = original


def _policy_name(policy: Any, node: torch.fx.Node) -> str:
    if isinstance(policy, bool):  # the legacy form, read as PyTorch does
        policy = (torch_checkpoint.CheckpointPolicy.MUST_SAVE if policy
                  else torch_checkpoint.CheckpointPolicy.PREFER_RECOMPUTE)
    if policy not in AC_POLICY_NAMES:
        raise CaptureError(
            f"the selective-checkpoint policy returned {policy!r} for {node.target}; "
            "expected a torch.utils.checkpoint.CheckpointPolicy or a bool")
    return AC_POLICY_NAMES[policy]


def _region_policy(policy_fn: Callable[..., Any] | None, node: torch.fx.Node) -> str:
    """What a region's policy (None: plain checkpoint) says of its ``node``."""
    recompute = AC_POLICY_NAMES[torch_checkpoint.CheckpointPolicy.PREFER_RECOMPUTE]
    if not isinstance(node.target, torch._ops.OpOverload):
        # operator.getitem picks one output of a multi-output op: it is no
        # op of its own and shares its producer's policy.
        producer = node.args[0] if node.args else None
        if isinstance(producer, torch.fx.Node):
            return producer.meta.get("custom", {}).get(AC_POLICY_KEY, recompute)
        return recompute
    # PyTorch's dispatch mode does not ask about the ops it ignores.
    if policy_fn is None or node.target in torch_checkpoint.SAC_IGNORED_OPS:
        return recompute
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
    context = torch_checkpoint.SelectiveCheckpointContext(is_recompute=False)
    try:
        policy = policy_fn(context, node.target, *args, **kwargs)
    except Exception as exc:
        raise CaptureError(
            f"the selective-checkpoint policy raised {_describe(exc)} for {node.target}") from exc
    return _policy_name(policy, node)


def tag_checkpoint_policies(ep: torch.export.ExportedProgram, regions: CheckpointRegions) -> None:
    """Give every forward op of a checkpoint region its region's policy.

    A plain region recomputes everything (``prefer_recompute``). A selective
    one asks its policy function about each forward op of the joint graph,
    in forward order and with the op's example values, as
    ``_CachingTorchDispatchMode`` asks it about each ATen op eager autograd
    runs (the joint graph calls those same ops). PyTorch's own
    ``ac_graph_id``/``recompute`` node metadata, which its compiled
    checkpoint sets, is taken as it is where present. Backward ops belong to
    no region: the keys are dropped from them.
    """
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        custom = dict(node.meta.get("custom") or {})
        if node.meta.get("partitioner_tag") == "is_backward":
            custom.pop(AC_REGION_KEY, None)
            custom.pop(AC_POLICY_KEY, None)
        elif node.meta.get("ac_graph_id") is not None:
            custom[AC_REGION_KEY] = int(node.meta["ac_graph_id"])
            custom[AC_POLICY_KEY] = _policy_name(
                node.meta.get("recompute", torch_checkpoint.CheckpointPolicy.PREFER_RECOMPUTE), node)
        elif AC_REGION_KEY in custom:
            custom[AC_POLICY_KEY] = _region_policy(regions.policies[custom[AC_REGION_KEY]], node)
        else:
            continue
        node.meta["custom"] = custom


def module_path(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return ""
    path, _type = list(stack.values())[-1]
    return path


def module_calls(node: torch.fx.Node) -> dict[str, int]:
    """The call of each enclosing module that ran more than once in the
    forward: torch.export keys a module's second call ``<key>@1`` in
    ``nn_module_stack`` (its path stays the same), third ``@2``; a first
    call has no suffix and is left out. A backward node carries the stack of
    the forward node it differentiates (``_copy_forward_meta_to_backward``)."""
    calls = {}
    for key, (path, _type) in (node.meta.get("nn_module_stack") or {}).items():
        _, at, index = key.rpartition("@")
        if at and index.isdigit() and int(index) > 0 and path:
            calls[path] = int(index)
    return calls


def sync_batch_norm_modules(model: nn.Module) -> set[str]:
    """The paths of the model's ``nn.SyncBatchNorm`` modules. On one process
    SyncBatchNorm runs as plain batch norm, so the trace cannot tell them
    apart; Loom synchronizes over every data-parallel rank, as
    SyncBatchNorm's default group (the world) does."""
    paths = set()
    for path, module in model.named_modules():
        if not isinstance(module, nn.SyncBatchNorm):
            continue
        if module.process_group is not None:
            raise CaptureError(
                f"nn.SyncBatchNorm '{path}' has a process_group of its own; Loom synchronizes "
                "batch statistics over all data-parallel ranks (convert_sync_batchnorm without "
                "process_group)")
        paths.add(path)
    return paths


def annotate(ep: torch.export.ExportedProgram, model: nn.Module) -> tuple[int, int]:
    """Set Loom's phase/module labels, and mark the batch norm forwards of
    ``nn.SyncBatchNorm`` modules; returns (forward, backward) node counts."""
    counts = {"forward": 0, "backward": 0}
    synced = sync_batch_norm_modules(model)
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        phase = "backward" if node.meta.get("partitioner_tag") == "is_backward" else "forward"
        counts[phase] += 1
        custom = dict(node.meta.get("custom") or {})
        custom.update({PHASE_KEY: phase, MODULE_KEY: module_path(node)})
        if (phase == "forward" and node.target in BATCH_NORM_FORWARDS
                and module_path(node) in synced):
            custom[SYNC_BATCH_NORM_KEY] = True
        calls = module_calls(node)
        if calls:
            custom[CALLS_KEY] = calls
        node.meta["custom"] = custom
    return counts["forward"], counts["backward"]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _model_location(exc: BaseException) -> str:
    """'FILE:LINE: ' of the innermost frame of ``exc`` in the model's code
    (outside torch, Loom and Python's own modules), or ''."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if eager_backward.is_model_frame(f)]
    return f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""


def _data_dependence_hint(exc: BaseException, printed: str) -> str:
    """What to change where export failed on a value-dependent shape or
    branch; ``printed``: what export wrote to stderr."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    value_dependent = bool(names & {"GuardOnDataDependentSymNode", "DynamicOutputShapeException",
                                    "DataDependentOutputException"})
    files = [Path(f.filename).as_posix() for f in traceback.extract_tb(exc.__traceback__)]
    if (any(f.endswith("torch/nn/utils/rnn.py") for f in files)
            or (any(f.endswith("torch/nn/modules/rnn.py") for f in files)
                and (value_dependent or "FakeTensor" in str(exc)))):
        return (" (a packed sequence's shapes depend on its lengths' values, and a captured "
                "step has static shapes: run the RNN on the padded batch and take each "
                "sequence's last valid output by index (torch.gather) instead)")
    if not value_dependent:
        return ""
    # Export prints the graph traced so far, each op under a "# File:
    # PATH:LINE in FUNC, code: CODE" line: the last one is where the value
    # was asked for, often inside torch (the model's frame is the call).
    traced = re.findall(r"# File: (\S+:\d+) in \S+, code: (.*)", printed)
    where = f" at {traced[-1][0]}: `{traced[-1][1].strip()}`" if traced else ""
    if traced and "_detect_is_causal_mask" in traced[-1][1]:
        return (f" (nn.TransformerEncoder/Decoder tests whether the mask it is given is the "
                f"causal one from its values{where}; capture answers that by running the model "
                "on the batches first, which --meta cannot: pass is_causal (tgt_is_causal) "
                "with the mask)")
    return (f" (the step's shapes or control flow depend on tensor values{where}: boolean-mask "
            "indexing, nonzero, or .item() in a condition; a captured step has static shapes "
            "and one path, so weight by the mask (torch.where) instead)")


def _params_without_grad(model: nn.Module, example: tuple[torch.Tensor, ...]) -> list[str]:
    probe = copy.deepcopy(model)
    probe(*example).backward()
    return [n for n, p in probe.named_parameters() if p.requires_grad and p.grad is None]


@functools.cache
def _kernels_eager_runs() -> dict[torch._ops.OpOverload, Callable]:
    """The backward ops tracing would replace by their composite form though
    eager runs a kernel of their own, each mapped to "keep it".

    An ATen op with both a CPU kernel and a CompositeImplicitAutograd one
    runs the kernel in eager, but the joint graph's tracer takes the
    composite form: ``silu_backward`` becomes sigmoid, sub and mul (half the
    elements of SiLU's gradient then differ from eager's in the last bit),
    ``mish_backward`` likewise. Kept, the graph calls the kernel eager
    autograd calls. Only backward ops: export gives a kept op no
    derivative, so a forward op such as ``upsample_nearest2d`` must stay
    composite for gradients to flow through it.
    """
    cpu = torch._C.DispatchKey.CPU
    return {op: _special_op_to_preserve_cia
            for op in _collect_all_valid_cia_ops_for_aten_namespace()
            if op.name().endswith("_backward")
            and torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), cpu)}


def _export_joint_without_decompositions(
    ep: torch.export.ExportedProgram,
) -> torch.export.ExportedProgram:
    """``_export_forward_backward`` without its core-ATen decompositions.

    The public helper decomposes every op (log_softmax + nll_loss into
    gather/where/sum, layer-norm backward into elementwise math, ...), which
    changes the floating-point results: its gradients differ from eager
    autograd's in the last bits, and Adam turns such noise on near-zero
    gradients (e.g. the key bias of attention) into visible parameter
    differences. Without decompositions the joint graph calls exactly the
    kernels eager autograd calls (``native_layer_norm_backward``,
    ``nll_loss_backward``, ...), so its loss and gradients are bitwise equal
    to eager PyTorch's.
    """
    ep = _decompose_exported_program(
        ep,
        cia_to_decomp=_kernels_eager_runs(),
        python_decomp_table={},
        joint_loss_index=0,
        decompose_custom_triton_ops=False,
    )
    gm, signature = _copy_graph_module_and_signature(ep)
    _remove_detach_pass(gm, signature)
    return ep._update(gm, signature)


def _inputs_renamed(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """``ep`` with its tensor user inputs named ``loom_input_N``.

    The joint export names the backward's nodes after their ops (``t``,
    ``mm``, ``view``, ...) and then looks its gradients up by name; a
    forward argument with such a name (``def forward(self, x, t)``) shifts
    those names, and torch 2.9's signature rebuilding fails on the lookup
    (``KeyError: 't_4'``). The inputs are positional to everything after
    capture, so their names carry nothing.
    """
    gm, signature = _copy_graph_module_and_signature(ep)
    placeholders = {n.name: n for n in gm.graph.nodes if n.op == "placeholder"}
    renamed: dict[str, str] = {}
    for i, spec in enumerate(signature.input_specs):
        if spec.kind == InputKind.USER_INPUT and isinstance(spec.arg, TensorArgument):
            node = placeholders[spec.arg.name]
            node._rename(f"loom_input_{i}")
            renamed[spec.arg.name] = node.name
    gm.recompile()

    def arg(a: Any) -> Any:
        return TensorArgument(name=renamed[a.name]) if (
            isinstance(a, TensorArgument) and a.name in renamed) else a

    inputs = [InputSpec(s.kind, arg(s.arg), s.target, s.persistent)
              for s in signature.input_specs]
    outputs = [OutputSpec(s.kind, arg(s.arg),
                          renamed.get(s.target, s.target)
                          if s.kind == OutputKind.USER_INPUT_MUTATION else s.target)
               for s in signature.output_specs]
    return ep._update(gm, ExportGraphSignature(inputs, outputs))


def _trace_joint(model: nn.Module, example: tuple) -> torch.export.ExportedProgram:
    """The joint graph as export_joint traces it, without its checks and
    notes: the policy trace of :mod:`loom.policy_casts`."""
    with _record_checkpoint_regions():
        ep = torch.export.export(model, example)
    ep, _ = canonicalize_tied_parameters(ep, model)
    with _keep_joint_node_metadata():
        return _export_joint_without_decompositions(ep)


def _note(message: str) -> None:
    print(f"{PROG}: note: {message}", file=sys.stderr)


def export_joint(
    model: nn.Module, example: tuple[torch.Tensor, ...], compute: torch.dtype | None = None,
) -> tuple[torch.export.ExportedProgram, dict[str, str]]:
    """Exports the joint graph, turning torch.export's failures on models it
    cannot capture into errors that say what to change. With ``compute``
    (the mixed-precision policy's parameter dtype) the casts eager makes
    under the policy are written into it (:mod:`loom.policy_casts`)."""
    # On a failure torch.export prints the partial graph to stderr before it
    # raises; the error below names the line instead.
    printed = io.StringIO()
    traced_in_policy = compute is not None and compute != torch.float32 and not any(
        isinstance(t, FakeTensor) for t in example)
    policy = (policy_casts.trace_policy(model, example, compute, _trace_joint, _note)
              if traced_in_policy else None)
    try:
        with (_record_checkpoint_regions() as regions,
              eager_backward.recording(model) as extensions,
              contextlib.redirect_stderr(printed),
              policy_casts.replaying(policy) as conversions):
            ep = torch.export.export(model, example)
        sys.stderr.write(printed.getvalue())
    except CaptureError:
        raise
    except eager_backward.NotCapturable as exc:
        raise CaptureError(str(exc)) from None
    except Exception as exc:  # torch.export raises many exception types
        raise CaptureError(f"{_model_location(exc)}torch.export could not trace the model: "
                           f"{_first_line(exc)}{_data_dependence_hint(exc, printed.getvalue())}"
                           ) from exc
    if extensions.state:
        print(f"{PROG}: note: the forward keeps tensors on the model as plain attributes "
              f"({_some_names(list(dict.fromkeys(extensions.state)))}): the step is traced from "
              "a model that has not run, so state carried from one step to the next this way is "
              "not captured (a cache recomputed alike every step is); keep such state in a "
              "buffer updated in place (register_buffer, then .copy_)", file=sys.stderr)
    if extensions.host_random:
        print(f"{PROG}: note: the forward draws from Python's or NumPy's random generator "
              f"({_some_names(list(dict.fromkeys(extensions.host_random)))}): the trace keeps "
              "the numbers drawn while exporting as constants, so every step reuses them where "
              "eager draws new ones; draw with torch (torch.rand, ...), whose draws the step "
              "makes anew each time", file=sys.stderr)
    ep, aliases = canonicalize_tied_parameters(ep, model)
    try:
        with _keep_joint_node_metadata():
            try:
                try:
                    joint = _export_joint_without_decompositions(ep)
                except KeyError:
                    joint = _export_joint_without_decompositions(_inputs_renamed(ep))
            except KeyError:
                # torch 2.9's signature rebuilding trips over some graphs
                # when nothing is decomposed (e.g. a gradient that is a
                # view of another); the decomposed export handles them, at
                # the price of last-bit differences from eager.
                print(f"{PROG}: note: exporting with core-ATen decompositions; "
                      "gradients may differ from eager PyTorch in the last bits",
                      file=sys.stderr)
                joint = _export_forward_backward(ep)
            ep = joint
    except Exception as exc:
        message = str(exc)
        if "did not receive a gradient" in message:
            unused = _params_without_grad(model, example)
            if not unused:
                raise CaptureError(
                    "a parameter receives no gradient from the loss, but a backward of the "
                    "model gives every parameter one; set requires_grad=False on the ones the "
                    "loss does not use") from exc
            # torch.optim skips a parameter whose .grad is None (no update, no
            # state, no weight decay), so training it is training it frozen.
            for name in unused:
                model.get_parameter(name).requires_grad_(False)
            print(f"{PROG}: note: parameter(s) {', '.join(unused)} receive no gradient from "
                  "the loss; captured as frozen (torch.optim leaves a parameter without a "
                  "gradient as it is)", file=sys.stderr)
            return export_joint(model, example, compute)
        if "requires gradients, and received a mutation" in message:
            raise CaptureError(
                "the model changes a parameter in place during forward (e.g. "
                "nn.Embedding(max_norm=...)); a training step cannot be captured with that"
            ) from exc
        raise CaptureError(f"exporting the backward graph failed: {_first_line(exc)}") from exc
    tag_checkpoint_policies(ep, regions)
    if policy:
        policy_casts.add_policy_casts(ep, policy, conversions.forced, _note)
    check_backward(model, example, ep, extensions)
    return ep, aliases


def check_backward(model: nn.Module, example: tuple[torch.Tensor, ...],
                   ep: torch.export.ExportedProgram,
                   extensions: eager_backward.Extensions) -> None:
    """Refuses a model whose eager backward the joint graph does not
    reproduce (a custom autograd.Function's backward, a gradient hook:
    :mod:`loom.eager_backward`); models without either are not run again."""
    if not extensions.found:
        return
    if any(isinstance(t, FakeTensor) for t in example):
        print(f"{PROG}: note: {extensions.describe()}: a --meta capture cannot check that "
              "the traced backward is the model's; the step differentiates the traced forward",
              file=sys.stderr)
        return
    try:
        eager_backward.check(model, example, ep, extensions)
    except eager_backward.Mismatch as exc:
        raise CaptureError(str(exc)) from None
    print(f"{PROG}: note: {extensions.describe()}: the captured gradients equal eager "
          "autograd's on the first batch, so the step is captured as traced", file=sys.stderr)


def verify_archive(path: Path) -> None:
    """Fail loudly if this torch version stops saving our labels: every node
    of the archive's graph, as loom-import reads it (``models/model.json``
    in PyTorch's serialized schema), carries the phase in its ``custom``
    metadata. (Reading the JSON is what loom-import does; deserializing the
    whole program with torch.export.load took seconds a capture.)"""
    with zipfile.ZipFile(path) as archive:
        model = next((name for name in archive.namelist()
                      if name == "models/model.json" or name.endswith("/models/model.json")), None)
        if model is None:
            raise RuntimeError(f"{path}: torch.export.save wrote no models/model.json")
        graph = json.loads(archive.read(model))["graph_module"]["graph"]
    for index, node in enumerate(graph["nodes"]):
        custom = (node.get("metadata") or {}).get("custom")
        if not custom or PHASE_KEY not in json.loads(custom):
            raise RuntimeError(f"{path}: node {index} ({node.get('target')}) lost its custom "
                               "metadata in torch.export.save")


# --------------------------------------------------------------------------
# Driver


def run_config(args: argparse.Namespace) -> dict[str, Any]:
    """What this capture was asked, fully resolved: the run configuration
    that loom-compile and loom-run take their world size and optimizer from
    (docs/artifact.md)."""
    config = {
        "format": RUN_CONFIG_FORMAT,
        "version": RUN_CONFIG_VERSION,
        "world_size": args.split,
        "microbatches": args.microbatches,
        "seed": args.seed,
        "steps": args.steps,
        "optimizer": args.optimizer_config,
    }
    if getattr(args, "param_groups", None):
        config["param_groups"] = args.param_groups
    if getattr(args, "lr_schedule", None):
        config["lr_schedule"] = args.lr_schedule
    if getattr(args, "clip", None):
        config["clip_grad_norm"] = args.clip
    if getattr(args, "unused_parameters", None):
        # Trainable in the model, frozen in the step: DDP needs
        # find_unused_parameters=True to train the model on several ranks.
        config["unused_parameters"] = args.unused_parameters
    if getattr(args, "resolved_batch_dims", None) and any(d != 0 for d in
                                                          args.resolved_batch_dims):
        config["batch_dims"] = args.resolved_batch_dims
    return config


def save_step(ep: torch.export.ExportedProgram, out: Path, config_text: str, hint: str = "") -> Path:
    """Writes ``out/step.pt2`` with the run configuration inside (the
    importer's copy) and ``out/run.json`` next to it (the user's)."""
    pt2 = out / "step.pt2"
    try:
        torch.export.save(ep, pt2, extra_files={RUN_CONFIG_EXTRA: config_text})
    except Exception as exc:
        raise CaptureError(
            f"torch.export.save cannot serialize the joint graph ({_first_line(exc)}){hint}"
        ) from exc
    (out / RUN_CONFIG_FILE).write_text(config_text)
    return pt2


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="Python file defining make() -> (model, batches)")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--steps", type=int, default=20, help="eager reference steps (default 20)")
    add_optimizer_arguments(parser)
    add_schedule_arguments(parser)
    add_clip_arguments(parser)
    parser.add_argument("--seed", type=int, default=0, help="torch.manual_seed before make() (default 0)")
    parser.add_argument(
        "--split", type=int, default=1, metavar="N",
        help="export for one of N data-parallel ranks: batch dim 0 divided by N (default 1)",
    )
    parser.add_argument(
        "--microbatches", type=int, default=1, metavar="M",
        help="export for one of M gradient-accumulation microbatches per rank (default 1)",
    )
    parser.add_argument(
        "--batch-dims", type=batch_dims_arg, default=None, metavar="D[,D...]",
        help="the dim of each batch tensor that indexes the samples, which --split and "
        "--microbatches divide: one for all tensors or one per tensor (default 0; 1 for "
        "sequence-first tensors; none for a tensor every rank takes whole)",
    )
    parser.add_argument(
        "--make-arg", action="append", default=[], metavar="KEY=VALUE",
        help="pass KEY=VALUE to make() (VALUE a Python literal, else a string); repeatable",
    )
    parser.add_argument(
        "--meta", action="store_true",
        help="build the model and batches as fake tensors (no weights, no data) and write only "
        "step.pt2, for loom-import --no-weights; no eager reference",
    )
    parser.add_argument(
        "--reference", choices=("eager", "ddp", "fsdp", "hsdp", "replicate"), default="eager",
        help="the run reference.* hold: eager on one device (default), or PyTorch's DDP, "
        "fully_shard, HSDP or FSDP2-based replicate on the --split ranks",
    )
    parser.add_argument("--replicate-size", type=int, default=2, metavar="R",
                        help="--reference hsdp: replicas, the mesh is R x N/R (default 2)")
    parser.add_argument("--reshard-after-forward", default="auto", metavar="auto|true|false|K",
                        help="--reference fsdp/hsdp: fully_shard's reshard_after_forward "
                        "(default auto)")
    parser.add_argument("--param-dtype", choices=("bf16", "f16", "f32"),
                        help="--reference fsdp/hsdp: MixedPrecisionPolicy(param_dtype), as "
                        "loom-compile's --param-dtype")
    parser.add_argument("--reduce-dtype", choices=("bf16", "f16", "f32"),
                        help="--reference fsdp/hsdp: MixedPrecisionPolicy(reduce_dtype), as "
                        "loom-compile's --reduce-dtype")
    parser.add_argument("--comm-hook", choices=tuple(COMM_HOOKS), default="allreduce",
                        help="--reference ddp: the DDP communication hook registered "
                        "(fp16_compress_hook, bf16_compress_hook), as loom-compile's --comm-hook")
    parser.add_argument("--broadcast-buffers", choices=("true", "false"), default="false",
                        help="--reference ddp: DistributedDataParallel(broadcast_buffers), as "
                        "loom-compile's --broadcast-buffers (default false)")
    args = parser.parse_args(argv)
    if args.broadcast_buffers == "true" and args.reference != "ddp":
        parser.error("--broadcast-buffers is DistributedDataParallel's: it needs --reference ddp")
    if args.comm_hook != "allreduce" and args.reference != "ddp":
        parser.error("--comm-hook is a DistributedDataParallel hook: it needs --reference ddp")
    if (args.param_dtype or args.reduce_dtype) and args.reference not in ("fsdp", "hsdp"):
        parser.error("--param-dtype and --reduce-dtype are fully_shard's mixed precision: they "
                     "need --reference fsdp or hsdp")
    if args.reference != "eager":
        from loom.dp_reference import reshard_setting

        if args.split < 2:
            parser.error(f"--reference {args.reference} needs --split N with N > 1")
        if args.meta:
            parser.error("--meta has no reference to replace")
        if args.reference == "hsdp" and (args.replicate_size < 2 or args.split % args.replicate_size):
            parser.error(f"--replicate-size must be > 1 and divide --split {args.split}, "
                         f"got {args.replicate_size}")
        try:
            reshard_setting(args.reshard_after_forward)
        except ValueError as exc:
            parser.error(f"--reshard-after-forward: {exc}")
        # torch.optim.Rprop writes through a boolean mask
        # (sign[sign.gt(0)] = etaplus), an index_put_ whose sharding DTensor
        # cannot propagate: PyTorch's fully_shard cannot train with it.
        if args.reference in ("fsdp", "hsdp") and args.optimizer == "rprop":
            parser.error(f"--reference {args.reference}: PyTorch's fully_shard cannot run "
                         "torch.optim.Rprop (its masked index_put_ has no DTensor sharding rule); "
                         "use --reference ddp, whose update is the same elementwise math")
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.split < 1:
        parser.error("--split must be at least 1")
    if args.microbatches < 1:
        parser.error("--microbatches must be at least 1")
    args.optimizer_config = optimizer_config(parser, args)
    args.lr_schedule = schedule_config(parser, args)
    args.clip = clip_config(parser, args)
    args.make_kwargs = {}
    for item in args.make_arg:
        key, sep, text = item.partition("=")
        if not sep or not key.isidentifier():
            parser.error(f"--make-arg expects KEY=VALUE with KEY a Python identifier, got '{item}'")
        try:
            args.make_kwargs[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            args.make_kwargs[key] = text
    return args


def resolve_batch_dims(batch: tuple[torch.Tensor, ...],
                       dims: list[int | None] | None) -> list[int | None]:
    """Each batch tensor's batch dim: ``--batch-dims`` (one for all tensors,
    or one each), else 0; None for a tensor without one (``none``, and a 0-d
    tensor: a per-step scalar), which every rank and microbatch takes whole.
    Checked against the tensors' ranks."""
    dims = list(dims or [0])
    if len(dims) == 1:
        dims = dims * len(batch)
    if len(dims) != len(batch):
        raise CaptureError(f"--batch-dims gives {len(dims)} dims but a batch has {len(batch)} "
                           "tensors (give one dim for all, or one per tensor)")
    for j, (t, d) in enumerate(zip(batch, dims)):
        if d is not None and t.dim() and d >= t.dim():
            raise CaptureError(f"--batch-dims gives batch element {j} dim {d}, but it has "
                               f"{t.dim()} dims")
    return [None if t.dim() == 0 else d for t, d in zip(batch, dims)]


def slice_rows(t: torch.Tensor, dim: int, slot: int, parts: int) -> torch.Tensor:
    """Slice ``slot`` of ``parts`` equal slices of ``t`` along ``dim``,
    contiguous (as a data loader hands a rank its microbatch, and as
    loom-run passes it: a strided slice of dim 1 takes other kernel paths)."""
    rows = t.shape[dim] // parts
    return t.narrow(dim, slot * rows, rows).contiguous()


def per_rank_batch(batch: tuple[torch.Tensor, ...], split: int, microbatches: int,
                   dims: list[int]) -> tuple[torch.Tensor, ...]:
    """The first rank's first microbatch of ``batch``: rows ``[0, B / (split * microbatches))``
    of every tensor's batch dim (``dims``: resolve_batch_dims). The graph is
    specialised to its shapes; the runtime slices the whole batch the same way
    on every rank (docs/distributed.md)."""
    parts = split * microbatches
    if parts == 1:
        return batch
    what = f"--split {split}" + (f" x --microbatches {microbatches}" if microbatches > 1 else "")
    sliced = [(j, t, d) for j, (t, d) in enumerate(zip(batch, dims)) if d is not None]
    for j, t, d in sliced:
        if t.shape[d] % parts:
            # Sizes that differ from the first tensor's suggest a tensor
            # without a batch dim, a shared mask say.
            odd = t.shape[d] != sliced[0][1].shape[sliced[0][2]]
            raise CaptureError(
                f"batch element {j} has dim {d} of size {t.shape[d]}, which {what} "
                f"({parts} slices) does not divide"
                + (" (--batch-dims none takes a tensor without a batch dim whole)" if odd else "")
            )
    return tuple(t if d is None else slice_rows(t, d, 0, parts).clone()
                 for t, d in zip(batch, dims))


def export_rank_step(model: nn.Module, batches: list, args: argparse.Namespace):
    """The joint graph of one rank's first microbatch (and the tied-parameter
    aliases); records each batch tensor's resolved batch dim on ``args``
    (``run.json``'s ``"batch_dims"``)."""
    args.resolved_batch_dims = resolve_batch_dims(batches[0], args.batch_dims)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    try:
        compute = policy_casts.DTYPES[args.param_dtype] if args.param_dtype else None
        with (causal_masks.replaying(model, getattr(args, "causal_masks", {})),
              rnn_dropout.between_layers()):
            exported = export_joint(model, per_rank_batch(batches[0], args.split, args.microbatches,
                                                          args.resolved_batch_dims), compute)
    except CaptureError as exc:
        sizes = {t.shape[d] for t, d in zip(batches[0], args.resolved_batch_dims)
                 if d is not None}
        if args.split * args.microbatches == 1 or len(sizes) < 2:
            raise
        raise CaptureError(
            f"{exc} (the batch tensors were sliced on their batch dims, whose sizes differ: "
            f"{', '.join(map(str, sorted(sizes)))}; a tensor without a batch dim, a shared "
            "mask say, takes --batch-dims none)") from exc
    args.unused_parameters = [n for n in trainable if not model.get_parameter(n).requires_grad]
    return exported


def capture_meta(args: argparse.Namespace, path: Path) -> None:
    """``--meta``: export the joint graph of a model made of fake tensors.

    CPU fake tensors, not the meta device: on ``meta``, scaled-dot-product
    attention decomposes differently and AOTAutograd loses parameter
    gradients; fake CPU tensors trace the kernels a CPU run would call.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        program = make_seeded(path, args.seed, args.make_kwargs)
    model, batches = program.model, program.batches
    if args.out.exists() and not args.out.is_dir():
        raise CaptureError(f"--out {args.out} exists and is not a directory")
    ep, aliases = export_rank_step(model, batches, args)
    n_forward, n_backward = annotate(ep, model)
    args.out.mkdir(parents=True, exist_ok=True)
    pt2 = save_step(ep, args.out, json.dumps(run_config(args), indent=2) + "\n")

    params = dict(model.named_parameters())
    n_elems = sum(p.numel() for p in params.values())
    print(f"{PROG}: {args.file} (--meta: no weights, no reference)")
    print(f"  parameters: {len(params)} tensors, {n_elems} elements")
    for alias, canonical in aliases.items():
        print(f"  tied: {alias} -> {canonical}")
    print(f"  joint graph: {n_forward + n_backward} ops ({n_forward} forward, {n_backward} backward)")
    if args.split * args.microbatches > 1:
        print(
            f"  per-rank batch: dim 0 / {args.split * args.microbatches} "
            f"(--split {args.split}, --microbatches {args.microbatches})"
        )
    print(f"  wrote {pt2} and {args.out / RUN_CONFIG_FILE}")


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    return f"{value:g}" if isinstance(value, float) else str(value)


def capture(args: argparse.Namespace) -> None:
    path = args.file.resolve()
    if args.meta:
        capture_meta(args, path)
        return
    # Determinism: the model's initial weights and batches depend only on the
    # seed; CPU kernels are deterministic already, warn_only keeps a user
    # model from failing on an op that has no deterministic variant.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_default_dtype(torch.float32)
    program = make_seeded(path, args.seed, args.make_kwargs)
    model, batches = program.model, program.batches
    refuse_layouts_not_dense(model, batches)
    materialize_lazy_modules(model, batches[0], path)
    note_strided_tensors(model, batches)
    refuse_sparse_gradients(model)
    try:
        args.causal_masks = causal_masks.decide(model, batches)
    except causal_masks.InconsistentMask as exc:
        raise CaptureError(f"{path}: {exc}") from None
    make_groups = load_param_groups(path)
    args.param_groups = (resolve_param_groups(make_groups, model, args.optimizer_config)
                         if make_groups else None)

    initial_checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    if args.out.exists() and not args.out.is_dir():
        raise CaptureError(f"--out {args.out} exists and is not a directory")

    # The eager run trains a copy, so `model` keeps the initial weights that
    # go into the archive. Re-seeding makes random ops in the reference (e.g.
    # dropout) independent of how much randomness make() consumed.
    torch.manual_seed(args.seed)
    reference = run_reference(copy.deepcopy(model), batches, args.steps, args.optimizer_config,
                              path, args.param_groups, args.lr_schedule, args.clip)

    ep, aliases = export_rank_step(model, batches, args)
    n_forward, n_backward = annotate(ep, model)

    args.out.mkdir(parents=True, exist_ok=True)
    pt2 = save_step(ep, args.out, json.dumps(run_config(args), indent=2) + "\n",
                    "; control flow such as torch.cond is not supported")
    verify_archive(pt2)

    num_args = len(batches[0])
    save_tensors(
        args.out / "batches.safetensors",
        {f"step{i}.arg{j}": t for i, batch in enumerate(batches) for j, t in enumerate(batch)},
        {"num_steps": len(batches), "num_args": num_args},
    )
    save_tensors(args.out / "reference.safetensors", reference.final_state, {"steps": args.steps})
    report = {
        "model": str(args.file),
        "optimizer": reference.optimizer,
        "steps": args.steps,
        "seed": args.seed,
        "losses": reference.losses,
        "param_checksums": reference.checksums,
        "param_checksum": sum(reference.checksums.values()),
        "initial_param_checksum": initial_checksum,
        "tied_parameters": aliases,
        "torch_version": torch.__version__,
        "split": args.split,
        "microbatches": args.microbatches,
    }
    if args.param_groups or args.lr_schedule:
        # Each step's rate of each group, as get_last_lr() gave it.
        report["lrs"] = reference.lrs
    (args.out / "reference.json").write_text(json.dumps(report, indent=2) + "\n")
    losses = reference.losses
    if args.reference != "eager":
        from loom import dp_reference

        synced = sorted(sync_batch_norm_modules(model))
        if synced:
            raise CaptureError(
                f"--reference {args.reference}: PyTorch runs nn.SyncBatchNorm ({_some_names(synced)}) "
                "on GPUs only, so its data parallelism cannot train this model on CPU ranks; "
                "SyncBatchNorm over every rank normalises by the whole batch, as one device "
                "does: check against --reference eager")
        try:
            got = dp_reference.train(path, args.out, args.out, args.reference,
                                     args.replicate_size, args.reshard_after_forward,
                                     args.make_kwargs,
                                     precision=(args.param_dtype, args.reduce_dtype),
                                     broadcast_buffers=args.broadcast_buffers == "true",
                                     comm_hook=args.comm_hook)
        except ValueError as exc:
            raise CaptureError(f"--reference {args.reference}: {exc}") from exc
        losses = got["losses"]

    params = dict(model.named_parameters())
    n_elems = sum(p.numel() for p in params.values())
    n_bytes = sum(p.numel() * p.element_size() for p in params.values())
    print(f"{PROG}: {args.file}")
    print(f"  parameters: {len(params)} tensors, {n_elems} elements, {n_bytes} bytes")
    for alias, canonical in aliases.items():
        print(f"  tied: {alias} -> {canonical}")
    for name, is_causal in args.causal_masks.items():
        print(f"  mask test: {name} answered is_causal={is_causal} on every batch (traced so)")
    print(f"  joint graph: {n_forward + n_backward} ops ({n_forward} forward, {n_backward} backward)")
    if args.split * args.microbatches > 1:
        print(
            f"  per-rank batch: dim 0 / {args.split * args.microbatches} "
            f"(--split {args.split}, --microbatches {args.microbatches})"
        )
    hyper = ", ".join(f"{k}={_show(v)}" for k, v in args.optimizer_config.items() if k != "name")
    run = "eager"
    if args.reference != "eager":
        run = json.loads((args.out / "reference.json").read_text())["reference"]
    print(
        f"  reference ({run}): {args.steps} steps of {args.optimizer} ({hyper}), "
        f"loss {losses[0]:.6f} -> {losses[-1]:.6f}"
    )
    for i, group in enumerate(args.param_groups or []):
        print(f"  param group {i}: lr={_show(group['lr'])}, "
              f"weight_decay={_show(group['weight_decay'])}: {', '.join(group['params'])}")
    if args.lr_schedule:
        sched = args.lr_schedule
        what = [f"warm-up {sched['warmup_steps']} steps from {_show(sched['warmup_start_factor'])}"
                ] if sched["warmup_steps"] else []
        if sched["decay"] == "cosine":
            what.append(f"cosine over {sched['decay_steps']} steps to {_show(sched['eta_min'])}")
        elif sched["decay"] == "linear":
            what.append(f"linear over {sched['decay_steps']} steps to "
                        f"{_show(sched['end_factor'])} x lr")
        elif sched["decay"] == "step":
            what.append(f"x {_show(sched['gamma'])} every {sched['decay_steps']} steps")
        elif sched["decay"] == "exponential":
            what.append(f"x {_show(sched['gamma'])} every step")
        elif sched["decay"] == "multistep":
            what.append(f"x {_show(sched['gamma'])} after steps "
                        f"{', '.join(map(str, sched['milestones']))}")
        elif sched["decay"] == "polynomial":
            what.append(f"polynomial (power {_show(sched['power'])}) to 0 over "
                        f"{sched['decay_steps']} steps")
        elif sched["decay"] == "cosine-restarts":
            what.append(f"cosine to {_show(sched['eta_min'])} over {sched['decay_steps']} steps, "
                        f"restarting (periods x {sched['t_mult']})")
        print(f"  lr schedule: {', then '.join(what)}")
    if args.clip:
        print(f"  gradient clipping: clip_grad_norm_(max_norm={_show(args.clip['max_norm'])}, "
              f"norm_type={args.clip['norm_type']}) before each update")
    names = ["step.pt2", RUN_CONFIG_FILE, "batches.safetensors", "reference.json",
             "reference.safetensors"]
    if args.reference != "eager":
        names.append("one-step-short/")
    for name in names:
        print(f"  wrote {args.out / name}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        capture(args)
    except CaptureError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
