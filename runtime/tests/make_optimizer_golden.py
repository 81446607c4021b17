"""torch.optim's own numbers for the runtime's optimizer test.

Usage: make_optimizer_golden.py OUT.safetensors

For each configuration below, runs torch.optim (foreach=False, as the
runtime's single-tensor algorithm, or fused=True, as its impl=fused) for a
few steps with given gradients and
records the parameter after every step and the final state. The C++ test
(OptimizerTest.cpp, OptimizerGolden.*) replays the same gradients through
loomrt::optimizerStep and requires bitwise-equal results.
"""

from __future__ import annotations

import json
import sys

import torch
from loomx import SCHEMA  # the state names, as the artifact schema declares them
from safetensors.torch import save_file

# Eight steps: RAdam's rectification starts once rho_t exceeds 5 (step 6
# with beta2 = 0.9), so its goldens take both branches.
STEPS = 8

CONFIGS = [
    ("sgd_plain", torch.float32, "sgd", dict(lr=0.1)),
    ("sgd_momentum", torch.float32, "sgd", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("sgd_nesterov", torch.float32, "sgd", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.05)),
    ("sgd_maximize", torch.float64, "sgd", dict(lr=0.1, momentum=0.5, maximize=True)),
    ("adam", torch.float32, "adam", dict(lr=1e-3)),
    ("adam_wd_maximize", torch.float32, "adam", dict(lr=1e-2, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1, maximize=True)),
    ("adam_f64", torch.float64, "adam", dict(lr=3e-3, weight_decay=0.01)),
    ("adamw", torch.float32, "adamw", dict(lr=1e-3, weight_decay=0.01)),
    ("adamw_bf16", torch.bfloat16, "adamw", dict(lr=1e-2, weight_decay=0.1)),
    ("adamw_complex", torch.complex64, "adamw", dict(lr=1e-2, betas=(0.5, 0.75), weight_decay=0.2)),
    # fused=True: ATen's fused kernels, the runtime's impl=fused.
    ("sgd_fused", torch.float32, "sgd", dict(lr=0.1, fused=True)),
    ("sgd_momentum_fused", torch.float32, "sgd", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01, fused=True)),
    ("sgd_nesterov_maximize_fused", torch.float64, "sgd", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.05, maximize=True, fused=True)),
    ("adam_fused", torch.float32, "adam", dict(lr=1e-3, fused=True)),
    ("adam_wd_maximize_fused", torch.float32, "adam", dict(lr=1e-2, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1, maximize=True, fused=True)),
    ("adamw_fused", torch.float32, "adamw", dict(lr=1e-3, weight_decay=0.01, fused=True)),
    ("adamw_bf16_fused", torch.bfloat16, "adamw", dict(lr=1e-2, weight_decay=0.1, fused=True)),
    # Reduced precision with the multipliers PyTorch's Python float operands
    # round differently from ATen's mul_.Scalar (momentum 0.9, beta2 0.95,
    # 1 - lr * weight_decay = 0.99).
    ("sgd_momentum_bf16", torch.bfloat16, "sgd", dict(lr=0.1, momentum=0.9)),
    ("adam_f16_beta2", torch.float16, "adam", dict(lr=1e-2, betas=(0.9, 0.95))),
    ("adamw_bf16_decay", torch.bfloat16, "adamw", dict(lr=0.1, betas=(0.9, 0.95), weight_decay=0.1)),
    # AMSGrad, RMSprop, Adagrad, Adamax, RAdam and Adadelta (artifact format 4).
    ("adam_amsgrad", torch.float32, "adam", dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
    ("adamw_amsgrad_complex", torch.complex64, "adamw", dict(lr=1e-2, amsgrad=True, maximize=True)),
    ("adam_amsgrad_fused", torch.float32, "adam", dict(lr=1e-2, weight_decay=0.1, amsgrad=True, fused=True)),
    ("adamw_amsgrad_fused", torch.float64, "adamw", dict(lr=1e-2, amsgrad=True, maximize=True, fused=True)),
    ("rmsprop", torch.float32, "rmsprop", dict(lr=1e-2)),
    ("rmsprop_centered_momentum", torch.float32, "rmsprop", dict(lr=1e-2, alpha=0.9, eps=1e-6, weight_decay=0.1, momentum=0.8, centered=True, maximize=True)),
    ("rmsprop_momentum_f64", torch.float64, "rmsprop", dict(lr=3e-3, momentum=0.5)),
    ("rmsprop_centered_complex", torch.complex64, "rmsprop", dict(lr=1e-2, centered=True, momentum=0.9)),
    ("rmsprop_bf16", torch.bfloat16, "rmsprop", dict(lr=1e-2, weight_decay=0.01)),
    ("adagrad", torch.float32, "adagrad", dict(lr=1e-2)),
    ("adagrad_decay_init", torch.float32, "adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3, eps=1e-6, maximize=True)),
    ("adagrad_complex", torch.complex64, "adagrad", dict(lr=0.1, initial_accumulator_value=0.1)),
    ("adagrad_fused", torch.float32, "adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3, fused=True)),
    ("adagrad_f64_maximize_fused", torch.float64, "adagrad", dict(lr=1e-2, maximize=True, fused=True)),
    ("adamax", torch.float32, "adamax", dict(lr=2e-3)),
    ("adamax_wd_maximize", torch.float32, "adamax", dict(lr=1e-2, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1, maximize=True)),
    ("adamax_bf16", torch.bfloat16, "adamax", dict(lr=1e-2, betas=(0.9, 0.99))),
    ("adamax_complex", torch.complex64, "adamax", dict(lr=1e-2, weight_decay=0.01)),
    ("radam", torch.float32, "radam", dict(lr=1e-2, betas=(0.9, 0.9))),
    ("radam_wd_maximize", torch.float32, "radam", dict(lr=1e-2, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1, maximize=True)),
    ("radam_decoupled_bf16", torch.bfloat16, "radam", dict(lr=1e-2, betas=(0.9, 0.9), weight_decay=0.1, decoupled_weight_decay=True)),
    ("radam_complex", torch.complex64, "radam", dict(lr=1e-2, betas=(0.9, 0.9), weight_decay=0.01, decoupled_weight_decay=True)),
    ("radam_f64_default", torch.float64, "radam", dict()),
    ("adadelta", torch.float32, "adadelta", dict()),
    ("adadelta_wd_maximize", torch.float32, "adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
    ("adadelta_bf16", torch.bfloat16, "adadelta", dict(lr=1.0, rho=0.95, weight_decay=0.01)),
    ("adadelta_complex", torch.complex64, "adadelta", dict(lr=0.5, weight_decay=0.01)),
    ("adadelta_f64", torch.float64, "adadelta", dict(rho=0.5)),
    ("nadam", torch.float32, "nadam", dict()),
    ("nadam_wd_maximize", torch.float32, "nadam", dict(lr=1e-2, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1, momentum_decay=0.01, maximize=True)),
    ("nadam_decoupled_bf16", torch.bfloat16, "nadam", dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1, decoupled_weight_decay=True)),
    ("nadam_complex", torch.complex64, "nadam", dict(lr=1e-2, weight_decay=0.01, decoupled_weight_decay=True)),
    ("nadam_f64", torch.float64, "nadam", dict(lr=3e-3, momentum_decay=0.1)),
    # Rprop's step_size starts at lr on the first step (filled by the runtime).
    ("rprop", torch.float32, "rprop", dict()),
    ("rprop_etas_maximize", torch.float32, "rprop", dict(lr=3e-3, etas=(0.4, 1.3), step_sizes=(1e-4, 5e-3), maximize=True)),
    ("rprop_bf16", torch.bfloat16, "rprop", dict(lr=1e-2, etas=(0.3, 1.5))),
    ("rprop_complex", torch.complex64, "rprop", dict(lr=1e-2)),
    ("rprop_f64", torch.float64, "rprop", dict(lr=5e-3, step_sizes=(1e-3, 2e-2))),
    # ASGD averages from step t0 + 2 (mu = 1 / (step - t0) once below 1):
    # t0 = 3 takes both branches in eight steps.
    ("asgd", torch.float32, "asgd", dict()),
    ("asgd_averaging_wd_maximize", torch.float32, "asgd",
     dict(lr=5e-2, lambd=1e-2, alpha=0.6, t0=3, weight_decay=0.1, maximize=True)),
    ("asgd_bf16", torch.bfloat16, "asgd", dict(lr=2e-2, t0=2)),
    ("asgd_complex", torch.complex64, "asgd", dict(lr=1e-2, t0=4, weight_decay=0.01)),
    ("asgd_f64", torch.float64, "asgd", dict(lr=3e-2, lambd=0.1, alpha=1.5, t0=1.5)),
]

CLASSES = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW,
           "rmsprop": torch.optim.RMSprop, "adagrad": torch.optim.Adagrad, "adadelta": torch.optim.Adadelta, "nadam": torch.optim.NAdam,
           "adamax": torch.optim.Adamax, "radam": torch.optim.RAdam, "rprop": torch.optim.Rprop,
           "asgd": torch.optim.ASGD}


def spec(kind: str, opt: torch.optim.Optimizer) -> dict:
    g = opt.param_groups[0]
    return {
        "name": kind,
        "lr": g["lr"],
        "betas": list(g.get("betas", (0.9, 0.999))),
        "eps": g.get("eps", 1e-8),
        "weight_decay": g.get("weight_decay", 0.0),
        "etas": list(g.get("etas", (0.5, 1.2))),
        "step_sizes": list(g.get("step_sizes", (1e-6, 50))),
        "momentum": g.get("momentum", 0.0),
        "dampening": g.get("dampening", 0.0),
        "nesterov": g.get("nesterov", False),
        "maximize": g["maximize"],
        "amsgrad": g.get("amsgrad", False),
        "alpha": g.get("alpha", 0.99),
        "lambd": g.get("lambd", 1e-4),
        "t0": g.get("t0", 1e6),
        "rho": g.get("rho", 0.9),
        "momentum_decay": g.get("momentum_decay", 4e-3),
        "centered": g.get("centered", False),
        "lr_decay": g.get("lr_decay", 0.0),
        "initial_accumulator_value": g.get("initial_accumulator_value", 0.0),
        "decoupled_weight_decay": g.get("decoupled_weight_decay", False) and kind in ("radam", "nadam"),
        **({"impl": "fused"} if g.get("fused") else {}),
    }


def main() -> int:
    out = sys.argv[1]
    tensors: dict[str, torch.Tensor] = {}
    configs = []
    for i, (name, dtype, kind, hp) in enumerate(CONFIGS):
        gen = torch.Generator().manual_seed(1000 + i)
        param = torch.randn(5, 7, generator=gen, dtype=torch.float64).to(dtype) if not dtype.is_complex else torch.randn(5, 7, generator=gen, dtype=dtype)
        p = torch.nn.Parameter(param.clone())
        opt = CLASSES[kind]([p], foreach=False, **hp)
        tensors[f"{name}.param0"] = param.clone()
        for s in range(STEPS):
            g = torch.randn(5, 7, generator=gen, dtype=torch.float64).to(dtype) if not dtype.is_complex else torch.randn(5, 7, generator=gen, dtype=dtype)
            tensors[f"{name}.grad{s}"] = g.clone()
            p.grad = g.clone()
            opt.step()
            tensors[f"{name}.param{s + 1}"] = p.detach().clone()
        state = opt.state[p]
        names = SCHEMA.state_names(spec(kind, opt))
        for k in names:
            tensors[f"{name}.state.{k}"] = state[k].clone()
        # The per-parameter 0-d scalars: step (not kept by SGD), NAdam's
        # mu_product, ASGD's eta and mu.
        for k in ("step", "mu_product", "eta", "mu"):
            if k in state:
                tensors[f"{name}.state.{k}"] = state[k].clone()
        configs.append({"name": name, "optimizer": spec(kind, opt), "steps": STEPS, "state": names})
    save_file(tensors, out, metadata={"configs": json.dumps(configs), "torch_version": torch.__version__})
    return 0


if __name__ == "__main__":
    sys.exit(main())
