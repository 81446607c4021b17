"""The options ``python -m loom capture`` and ``python -m loom run`` share.

The optimizer and learning-rate schedule flags, their checks (torch.optim's
constructors' and lr_scheduler's), their resolution against PyTorch's
defaults, ``--batch-dims``, and the run configuration's names. Importing it
does not import torch (``pytorch_defaults`` does, when called), so that
``loom run``, which only parses and resolves these before it starts the
capture in a process of its own, does not load torch.export and the
compiler stack it never uses.
"""

from __future__ import annotations

import argparse
import inspect
import math
from typing import Any

# torch.optim's class of each optimizer Loom runs (capture.OPTIMIZERS holds
# the classes themselves).
OPTIMIZER_CLASSES = {
    "sgd": "SGD",
    "adam": "Adam",
    "adamw": "AdamW",
    "rmsprop": "RMSprop",
    "adagrad": "Adagrad",
    "adadelta": "Adadelta",
    "adamax": "Adamax",
    "radam": "RAdam",
    "nadam": "NAdam",
    "rprop": "Rprop",
    "asgd": "ASGD",
}
# The data-parallel references capture trains (loom.dp_reference).
REFERENCE_MODES = ("ddp", "fsdp", "hsdp", "replicate")
# loom-compile's --comm-hook values and the DDP communication hook of each
# (in torch.distributed.algorithms.ddp_comm_hooks.default_hooks; allreduce:
# DDP's own, none registered).
COMM_HOOKS = {"allreduce": None, "fp16-compress": "fp16_compress_hook",
              "bf16-compress": "bf16_compress_hook"}

# The hyperparameters the run configuration records for each optimizer, in
# the order it lists them; everything else (foreach, capturable,
# differentiable, ...) is left at PyTorch's default, which is what Loom's
# runtime implements.
OPTIMIZER_KEYS = {
    "sgd": ("lr", "weight_decay", "momentum", "dampening", "nesterov", "maximize"),
    "adam": ("lr", "weight_decay", "betas", "eps", "amsgrad", "maximize"),
    "adamw": ("lr", "weight_decay", "betas", "eps", "amsgrad", "maximize"),
    "rmsprop": ("lr", "weight_decay", "alpha", "eps", "momentum", "centered", "maximize"),
    "adagrad": ("lr", "weight_decay", "lr_decay", "initial_accumulator_value", "eps",
                "maximize"),
    "adadelta": ("lr", "weight_decay", "rho", "eps", "maximize"),
    "adamax": ("lr", "weight_decay", "betas", "eps", "maximize"),
    "radam": ("lr", "weight_decay", "betas", "eps", "decoupled_weight_decay", "maximize"),
    "nadam": ("lr", "weight_decay", "betas", "eps", "momentum_decay", "decoupled_weight_decay",
              "maximize"),
    "rprop": ("lr", "etas", "step_sizes", "maximize"),
    "asgd": ("lr", "weight_decay", "lambd", "alpha", "t0", "maximize"),
}
# The hyperparameters that are pairs (a list in run.json, a tuple for torch).
PAIR_KEYS = ("betas", "etas", "step_sizes")
# The command-line flag of each hyperparameter (Adagrad's lr_decay is not
# --lr-decay, the schedule's option).
OPTIMIZER_FLAGS = {
    "lr": "--lr", "weight_decay": "--weight-decay", "momentum": "--momentum",
    "dampening": "--dampening", "nesterov": "--nesterov", "betas": "--betas", "eps": "--eps",
    "amsgrad": "--amsgrad", "alpha": "--alpha", "centered": "--centered",
    "lr_decay": "--adagrad-lr-decay", "initial_accumulator_value": "--initial-accumulator-value",
    "decoupled_weight_decay": "--decoupled-weight-decay", "rho": "--rho",
    "momentum_decay": "--momentum-decay", "etas": "--etas", "step_sizes": "--step-sizes",
    "lambd": "--lambd", "t0": "--t0",
    "maximize": "--maximize",
}


def optimizer_arg(args: argparse.Namespace, key: str) -> Any:
    """The command line's value of hyperparameter ``key`` (None: not given)."""
    return getattr(args, OPTIMIZER_FLAGS[key][2:].replace("-", "_"), None)


# The optimizers torch.optim has a fused=True implementation of.
FUSED_OPTIMIZERS = ("sgd", "adam", "adamw", "adagrad")
# How torch.optim computes the update; run.json records "impl" only for
# fused, so a configuration without it is the single-tensor loop.
OPTIMIZER_IMPLS = ("forloop", "fused")
DEFAULT_OPTIMIZER = "adamw"  # what loom-compile attaches when not told otherwise

RUN_CONFIG_FORMAT = "loom-run-config"
RUN_CONFIG_VERSION = 1
RUN_CONFIG_FILE = "run.json"
# The name under which step.pt2 carries the same text; torch.export.save
# stores it as "<archive>/extra/loom_run.json" (step/extra/loom_run.json).
RUN_CONFIG_EXTRA = "loom_run.json"


def pytorch_defaults(name: str) -> dict[str, Any]:
    """The keyword defaults of the optimizer's constructor in this torch."""
    import torch

    params = inspect.signature(getattr(torch.optim, OPTIMIZER_CLASSES[name]).__init__).parameters
    return {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}


def resolve_optimizer(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """``{"name": name, <every OPTIMIZER_KEYS[name]>}``: the values given
    (None: not given), else PyTorch's defaults, as JSON values."""
    defaults = pytorch_defaults(name)
    resolved: dict[str, Any] = {"name": name}
    for key in OPTIMIZER_KEYS[name]:
        value = given.get(key)
        value = defaults[key] if value is None else value
        if key in PAIR_KEYS:
            value = [float(v) for v in value]
        elif isinstance(value, bool):
            pass
        else:
            value = float(value)
        resolved[key] = value
    return resolved


def add_optimizer_arguments(parser: argparse.ArgumentParser) -> None:
    """The optimizer options, shared with ``python -m loom run``."""
    group = parser.add_argument_group(
        "optimizer (PyTorch's defaults for whatever is not given; recorded in run.json)")
    group.add_argument("--optimizer", choices=sorted(OPTIMIZER_CLASSES), default=DEFAULT_OPTIMIZER,
                       help=f"default {DEFAULT_OPTIMIZER}")
    group.add_argument("--lr", type=float,
                       help="learning rate (adam/adamw: default 1e-3; rmsprop/adagrad/rprop/asgd: 1e-2; "
                       "adamax/nadam: 2e-3; adadelta: 1.0; sgd: required)")
    group.add_argument("--weight-decay", type=float,
                       help="weight decay (default 0.01 for adamw, 0 for the others)")
    group.add_argument("--momentum", type=float, help="SGD/RMSprop momentum (default 0)")
    group.add_argument("--dampening", type=float, help="SGD dampening (default 0)")
    group.add_argument("--nesterov", action="store_true", default=None,
                       help="SGD Nesterov momentum")
    group.add_argument("--betas", type=float, nargs=2, metavar=("BETA1", "BETA2"),
                       help="Adam/AdamW/Adamax/RAdam/NAdam betas (default 0.9 0.999)")
    group.add_argument("--eps", type=float,
                       help="Adam/AdamW/RMSprop/Adagrad/Adadelta/Adamax/RAdam/NAdam eps (default 1e-8; "
                       "adagrad 1e-10; adadelta 1e-6)")
    group.add_argument("--amsgrad", action="store_true", default=None,
                       help="Adam/AdamW: the AMSGrad variant")
    group.add_argument("--alpha", type=float,
                       help="RMSprop smoothing constant (default 0.99); ASGD power of the eta "
                       "update (default 0.75)")
    group.add_argument("--centered", action="store_true", default=None,
                       help="RMSprop: centered (normalise by the gradient's variance)")
    group.add_argument("--adagrad-lr-decay", type=float,
                       help="Adagrad lr_decay (default 0)")
    group.add_argument("--initial-accumulator-value", type=float,
                       help="Adagrad initial_accumulator_value (default 0)")
    group.add_argument("--decoupled-weight-decay", action="store_true", default=None,
                       help="RAdam/NAdam: decoupled (AdamW's) weight decay")
    group.add_argument("--momentum-decay", type=float,
                       help="NAdam momentum_decay (default 4e-3)")
    group.add_argument("--rho", type=float,
                       help="Adadelta: decay of its running averages (default 0.9)")
    group.add_argument("--etas", type=float, nargs=2, metavar=("ETAMINUS", "ETAPLUS"),
                       help="Rprop step-size factors (default 0.5 1.2)")
    group.add_argument("--step-sizes", type=float, nargs=2, metavar=("MIN", "MAX"),
                       help="Rprop step-size bounds (default 1e-6 50)")
    group.add_argument("--lambd", type=float, help="ASGD decay term (default 1e-4)")
    group.add_argument("--t0", type=float,
                       help="ASGD: the step at which averaging starts (default 1e6)")
    group.add_argument("--maximize", action="store_true", default=None,
                       help="maximize the loss instead of minimizing it")
    group.add_argument("--optimizer-impl", choices=OPTIMIZER_IMPLS, default="forloop",
                       help="forloop (torch.optim's single-tensor default on CPU) or fused "
                       "(fused=True: sgd, adam, adamw, adagrad); recorded in run.json, from which "
                       "loom-compile takes it")


LR_DECAYS = ("constant", "cosine", "linear", "step", "exponential", "multistep", "polynomial",
             "cosine-restarts")


def add_schedule_arguments(parser: argparse.ArgumentParser) -> None:
    """The learning-rate schedule options (loom-attach-optimizer's lr-*)."""
    group = parser.add_argument_group(
        "learning-rate schedule (torch.optim.lr_scheduler; recorded in run.json)")
    group.add_argument("--lr-warmup-steps", type=int, default=0, metavar="W",
                       help="LinearLR warm-up over W steps (default 0: none)")
    group.add_argument("--lr-warmup-start-factor", type=float, default=1.0 / 3, metavar="F",
                       help="the warm-up's start_factor (default 1/3, LinearLR's)")
    group.add_argument("--lr-decay", choices=LR_DECAYS, default="constant",
                       help="after the warm-up: CosineAnnealingLR, LinearLR, StepLR, "
                            "ExponentialLR, MultiStepLR, PolynomialLR, "
                            "CosineAnnealingWarmRestarts or nothing")
    group.add_argument("--lr-decay-steps", type=int, default=0, metavar="T",
                       help="T_max / total_iters / step_size / T_0 of the decay")
    group.add_argument("--lr-eta-min", type=float, default=0.0,
                       help="cosine, cosine-restarts: eta_min (default 0)")
    group.add_argument("--lr-end-factor", type=float, default=0.0,
                       help="linear: end_factor (default 0)")
    group.add_argument("--lr-gamma", type=float, default=None,
                       help="step, multistep: gamma (default 0.1, StepLR's and "
                            "MultiStepLR's); exponential: gamma (required)")
    group.add_argument("--lr-milestones", type=_milestones, default=None, metavar="M1,M2,...",
                       help="multistep: the steps after the warm-up at which the rate is "
                            "multiplied by gamma (increasing, from 1)")
    group.add_argument("--lr-power", type=float, default=None,
                       help="polynomial: power (default 1.0, PolynomialLR's)")
    group.add_argument("--lr-t-mult", type=int, default=None,
                       help="cosine-restarts: each period's length over the last "
                            "(T_mult, default 1)")


def _milestones(text: str) -> list[int]:
    """``--lr-milestones 30,60,90`` as a list of step counts."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected step counts separated by commas, got '{text}'") from None


def schedule_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict | None:
    """The ``lr_schedule`` of run.json, checked as lr_scheduler and
    loom-attach-optimizer check it; None for a constant rate."""
    if args.lr_warmup_steps < 0:
        parser.error(f"--lr-warmup-steps must be >= 0, got {args.lr_warmup_steps}")
    if not 0 < args.lr_warmup_start_factor <= 1:
        parser.error(f"--lr-warmup-start-factor must be in (0, 1], got {args.lr_warmup_start_factor}")
    stepped = args.lr_decay in ("cosine", "linear", "step", "polynomial", "cosine-restarts")
    if not stepped and args.lr_decay_steps:
        parser.error("--lr-decay-steps needs --lr-decay cosine, linear, step, polynomial or "
                     "cosine-restarts")
    if stepped and args.lr_decay_steps < 1:
        parser.error(f"--lr-decay {args.lr_decay} needs --lr-decay-steps >= 1")
    factored = args.lr_decay in ("step", "exponential", "multistep")
    if not factored and args.lr_gamma is not None:
        parser.error("--lr-gamma needs --lr-decay step, exponential or multistep")
    if args.lr_decay == "exponential" and args.lr_gamma is None:
        parser.error("--lr-decay exponential needs --lr-gamma (ExponentialLR has no default)")
    gamma = 0.1 if factored and args.lr_gamma is None else args.lr_gamma
    if factored and not (gamma > 0 and math.isfinite(gamma)):
        parser.error(f"--lr-gamma must be a finite number > 0, got {gamma}")
    milestones = args.lr_milestones
    if (args.lr_decay == "multistep") != (milestones is not None):
        parser.error("--lr-milestones needs --lr-decay multistep" if milestones is not None
                     else "--lr-decay multistep needs --lr-milestones")
    if milestones is not None and not all(
            m >= (milestones[i - 1] + 1 if i else 1) for i, m in enumerate(milestones)):
        parser.error(f"--lr-milestones must increase from 1, got {args.lr_milestones}")
    if args.lr_decay != "polynomial" and args.lr_power is not None:
        parser.error("--lr-power needs --lr-decay polynomial")
    power = 1.0 if args.lr_power is None else args.lr_power
    if not (power >= 0 and math.isfinite(power)):
        parser.error(f"--lr-power must be a finite number >= 0, got {power}")
    if args.lr_decay not in ("cosine", "cosine-restarts") and args.lr_eta_min:
        parser.error("--lr-eta-min needs --lr-decay cosine or cosine-restarts")
    if args.lr_decay != "cosine-restarts" and args.lr_t_mult is not None:
        parser.error("--lr-t-mult needs --lr-decay cosine-restarts")
    t_mult = 1 if args.lr_t_mult is None else args.lr_t_mult
    if t_mult < 1:
        parser.error(f"--lr-t-mult must be an integer >= 1, got {t_mult}")
    if not (args.lr_eta_min >= 0 and math.isfinite(args.lr_eta_min)):
        parser.error(f"--lr-eta-min must be a finite number >= 0, got {args.lr_eta_min}")
    if args.lr_decay != "linear" and args.lr_end_factor:
        parser.error("--lr-end-factor needs --lr-decay linear")
    if not 0 <= args.lr_end_factor <= 1:
        parser.error(f"--lr-end-factor must be in [0, 1], got {args.lr_end_factor}")
    if args.lr_warmup_steps == 0 and args.lr_decay == "constant":
        return None
    config = {"warmup_steps": args.lr_warmup_steps,
              "warmup_start_factor": args.lr_warmup_start_factor,
              "decay": args.lr_decay, "decay_steps": args.lr_decay_steps,
              "eta_min": args.lr_eta_min, "end_factor": args.lr_end_factor}
    if factored:
        config["gamma"] = gamma
    if milestones is not None:
        config["milestones"] = milestones
    if args.lr_decay == "polynomial":
        config["power"] = power
    if args.lr_decay == "cosine-restarts":
        config["t_mult"] = t_mult
    return config


GRAD_NORM_TYPES = ("2", "inf")


def add_clip_arguments(parser: argparse.ArgumentParser) -> None:
    """Gradient clipping before each update (loom-attach-optimizer's
    max-grad-norm and grad-norm-type)."""
    group = parser.add_argument_group(
        "gradient clipping (torch.nn.utils.clip_grad_norm_ before each update; recorded in "
        "run.json)")
    group.add_argument("--max-grad-norm", type=float, metavar="X",
                       help="clip the gradients to total norm X across every shard and rank "
                            "(default: no clipping)")
    group.add_argument("--grad-norm-type", choices=GRAD_NORM_TYPES,
                       help="the norm (default 2)")


def clip_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict | None:
    """The ``clip_grad_norm`` of run.json, checked as loom-attach-optimizer
    checks it; None without clipping."""
    if args.max_grad_norm is None:
        if args.grad_norm_type is not None:
            parser.error("--grad-norm-type needs --max-grad-norm")
        return None
    if not (args.max_grad_norm > 0 and math.isfinite(args.max_grad_norm)):
        parser.error(f"--max-grad-norm must be a finite number > 0, got {args.max_grad_norm}")
    return {"max_norm": args.max_grad_norm, "norm_type": args.grad_norm_type or "2"}


def clip_gradients(parameters, clip: dict | None) -> None:
    """``clip_grad_norm_`` as a recorded ``clip_grad_norm`` asks (nothing for
    None)."""
    if clip:
        import torch

        torch.nn.utils.clip_grad_norm_(parameters, clip["max_norm"], float(clip["norm_type"]))


def optimizer_config(parser: argparse.ArgumentParser, args: argparse.Namespace,
                     resolve: bool = True) -> dict[str, Any]:
    """Checks the optimizer options against each other and resolves them
    (:func:`resolve_optimizer`); a bad combination is a usage error.
    ``resolve=False`` (``loom run``, which hands the options to capture):
    the given values only, without importing torch for its defaults (each
    check reads given values alone, but for SGD's Nesterov, which resolves)."""
    name = args.optimizer
    for key, flag in OPTIMIZER_FLAGS.items():
        if key not in OPTIMIZER_KEYS[name] and optimizer_arg(args, key) is not None:
            parser.error(f"{flag} is not an option of --optimizer {name}")
    # torch.optim.SGD would take 1e-3, a rate that barely moves most models;
    # a run is only reproducible if the rate it used is the one asked for.
    if name == "sgd" and args.lr is None:
        parser.error("--optimizer sgd needs --lr: give SGD's learning rate explicitly")
    given = {key: optimizer_arg(args, key) for key in OPTIMIZER_KEYS[name]}
    # SGD's Nesterov check needs its momentum and dampening, given or not.
    resolve = resolve or (name == "sgd" and bool(given.get("nesterov")))
    config = (resolve_optimizer(name, given) if resolve else
              {"name": name, **{k: v for k, v in given.items() if v is not None}})
    if "lr" in config and not (config["lr"] > 0 and math.isfinite(config["lr"])):
        parser.error(f"--lr must be a positive number, got {config['lr']}")
    if "weight_decay" in config and not (config["weight_decay"] >= 0
                                         and math.isfinite(config["weight_decay"])):
        parser.error(f"--weight-decay must be a non-negative number, got {config['weight_decay']}")
    # The range checks of torch.optim's constructors.
    for key in ("momentum", "eps", "alpha", "lr_decay", "initial_accumulator_value",
                "momentum_decay"):
        if name != "asgd" and key in config and not (config[key] >= 0 and math.isfinite(config[key])):
            parser.error(f"{OPTIMIZER_FLAGS[key]} must be a non-negative number, got {config[key]}")
    # torch.optim.ASGD checks none of its own; the arithmetic needs finite ones.
    for key in ("lambd", "alpha", "t0"):
        if name == "asgd" and key in config and not math.isfinite(config[key]):
            parser.error(f"{OPTIMIZER_FLAGS[key]} must be a finite number, got {config[key]}")
    if name == "sgd" and config.get("nesterov") and (config["momentum"] <= 0
                                                     or config["dampening"] != 0):
        parser.error("--nesterov needs --momentum > 0 and no dampening (as torch.optim.SGD)")
    if "rho" in config and not 0 <= config["rho"] <= 1:
        parser.error(f"--rho must lie in [0, 1], got {config['rho']}")
    if "betas" in config and not all(0 <= b < 1 for b in config["betas"]):
        parser.error(f"--betas must lie in [0, 1), got {config['betas']}")
    if "etas" in config and not 0 < config["etas"][0] < 1 < config["etas"][1] < math.inf:
        parser.error(f"--etas must satisfy 0 < ETAMINUS < 1 < ETAPLUS, got {config['etas']}")
    if "step_sizes" in config and not 0 <= config["step_sizes"][0] <= config["step_sizes"][1] < math.inf:
        parser.error(f"--step-sizes must satisfy 0 <= MIN <= MAX, got {config['step_sizes']}")
    if getattr(args, "optimizer_impl", "forloop") == "fused" and name not in FUSED_OPTIMIZERS:
        parser.error(f"--optimizer-impl fused: torch.optim has no fused {name} "
                     f"(fused: {', '.join(FUSED_OPTIMIZERS)})")
    if getattr(args, "optimizer_impl", "forloop") == "fused":
        config["impl"] = "fused"
    return config


def batch_dims_arg(text: str) -> list[int | None]:
    """``--batch-dims``' value: comma-separated non-negative dims, ``none``
    for a tensor without one (every rank and microbatch takes it whole)."""
    try:
        dims = [None if d == "none" else int(d) for d in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a comma-separated list of dims (or none)")
    if any(d is not None and d < 0 for d in dims):
        raise argparse.ArgumentTypeError(f"'{text}': dims are non-negative")
    return dims
