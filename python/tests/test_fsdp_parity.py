"""FSDP and HSDP parity on N real ranks:
capture --split N -> loom-compile --dp=fsdp -> loom-run --nproc N --check.

As PyTorch's fully_shard training tests compare with a single-device
(or DDP) reference: 20 steps, the averaged losses within 1e-5 relative of
eager on the whole batch and the final parameters (gathered from their
shards, padding dropped) within 1e-5 * max(1, |ref|). The collectives the
runtime issued every step must be the compiler's: one all-gather per unit
in forward (and again in backward when the unit reshards), one
reduce-scatter per unit, and for HSDP one all-reduce per unit.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest

from run_output import issued
from fsdp2_mixed_precision import compare_with_fsdp2, emulate
from test_distributed_parity import (LOOM_COMPILE, LOOM_RUN, MODELS, OPTIMIZERS, STEPS,
                                     capture_and_import, pytestmark, run, train)  # noqa: F401
from capture_cli import loom_capture
from test_pipeline import LOOM_IMPORT, REPO

sys.path.insert(0, str(REPO / "python"))
from loom.safetensors_io import load_tensors  # noqa: E402


def compile_fsdp(name, out, world, *extra) -> dict:
    flags = [*OPTIMIZERS[name][1], "--dp=fsdp", f"--world-size={world}", *extra]
    result = run([LOOM_COMPILE, out / "step.mlir", "-o", out / "step.loomx", *flags])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_COMPILE, out / "step.mlir", "--emit=program", *flags])
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def count(program: dict, op: str) -> int:
    return sum(1 for i in program["programs"][0]["instructions"] if i["op"] == op)


# GPT and ViT: units layers.0, layers.1 and the root. FSDP2's counts for
# that structure (test_fully_shard_comm.py::TestFullyShardCommunication):
# auto reshards every unit but the root (AG 3 forward + 2 backward), true
# every unit (3 + 3), false none (3); one reduce-scatter per unit. Each model with each setting on
# 2 and on 4 ranks.
@pytest.mark.parametrize("name, world, reshard, gathers", [
    (name, world, reshard, gathers)
    for name in ("gpt", "vit") for world in (2, 4)
    for reshard, gathers in (("auto", 5), ("true", 6), ("false", 3))
])
def test_fsdp_trains_at_parity_with_eager(name, world, reshard, gathers, tmp_path):
    capture_and_import(name, world, tmp_path)
    program = compile_fsdp(name, tmp_path, world, f"--reshard-after-forward={reshard}")
    assert program["mesh"]["shape"] == [world]
    assert count(program, "all_gather_start") == gathers
    assert count(program, "reduce_scatter_start") == 3
    sharded = [i for i in program["inputs"] if "shard" in i]
    assert sharded and all(i["role"] == "parameter" for i in sharded)

    result = train(tmp_path, world)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    assert issued(result.stdout, "all_gather") == [gathers] * STEPS
    assert issued(result.stdout, "reduce_scatter") == [3] * STEPS


def test_fsdp_uneven_shards_mlp_at_parity(tmp_path):
    """The MLP's 10-row head on 4 ranks is padded to 12 (3 rows a rank)."""
    capture_and_import("mlp", 4, tmp_path)
    program = compile_fsdp("mlp", tmp_path, 4, "--units=fc1,fc2,fc3")
    padded = [i for i in program["inputs"] if "shard" in i and
              i["shard"]["global_shape"][0] % 4 != 0]
    assert padded, "expected a parameter whose dim 0 is not divisible by 4"
    result = train(tmp_path, 4)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout


@pytest.mark.parametrize("name", ["gpt", "vit"])
def test_hsdp_2x2_at_parity(name, tmp_path):
    """HSDP on a (replicate 2, shard 2) mesh: reduce-scatter over the shard
    axis, then all-reduce over the replicate axis, per unit."""
    capture_and_import(name, 4, tmp_path)
    program = compile_fsdp(name, tmp_path, 4, "--replicate-size=2")
    assert program["mesh"] == {"shape": [2, 2], "axes": ["replicate", "shard"]}
    units = count(program, "reduce_scatter_start")
    assert count(program, "all_reduce_start") == units
    result = train(tmp_path, 4)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    assert issued(result.stdout, "all_reduce") == [units] * STEPS


# Mixed precision (bf16 parameters, fp32 reduction): the tolerances of
# docs/distributed.md "Mixed precision parity". Against FSDP2's semantics
# (fsdp2_mixed_precision.py) Loom runs the same kernels on the same values
# in the same order on one thread per rank, so the check is exact; against
# the fp32 single-device reference, bf16 rounding (unit roundoff 2^-8)
# moves the losses (measured <= 7.0e-3 relative) and, through AdamW, the
# parameters (measured <= 1.06e-2, an lr-sized step per step at most).
MP_FP32_RTOL = "2e-2"
# That elementwise tolerance alone would pass a run that never trained: in
# 20 AdamW steps at lr 1e-3 no ViT parameter moves more than 1.94e-2 from
# its initial value (measured on 4 ranks). So the parameters are also held
# to where training moved them: |loom - ref| / |ref - initial| over all
# parameters together (L2 norms) must stay below MP_UPDATE_RTOL. Measured on
# 4 ranks: 0.022 for GPT, 0.044 for ViT; parameters that never moved score 1.
MP_UPDATE_RTOL = 0.2


def update_error(step: Path, params: Path) -> float:
    """|params - reference| / |reference - initial| over every floating
    tensor of the capture's reference.safetensors (initial: the imported
    weights)."""
    reference, _ = load_tensors(step / "reference.safetensors")
    initial, _ = load_tensors(step / "step.weights.safetensors")
    final, _ = load_tensors(params)
    names = [n for n, t in reference.items() if t.is_floating_point()]
    off = sum((final[n].double() - reference[n].double()).pow(2).sum().item() for n in names)
    moved = sum((reference[n].double() - initial[n].double()).pow(2).sum().item() for n in names)
    assert moved > 0, "the reference never trained"
    return math.sqrt(off / moved)


def check_update(step: Path, params: Path) -> None:
    error = update_error(step, params)
    assert error < MP_UPDATE_RTOL, f"parameters {error:.3f} of the update away from the reference"
    # Negative control: parameters left at their initial values fail it.
    assert update_error(step, step / "step.weights.safetensors") > MP_UPDATE_RTOL


@pytest.mark.parametrize("name", ["gpt", "vit"])
def test_fsdp_bf16_params_fp32_reduce_matches_fsdp2_mixed_precision(name, tmp_path):
    """--param-dtype=bf16 --reduce-dtype=f32 on 2 ranks, 20 AdamW steps:
    bitwise equal to an eager emulation of FSDP2's MixedPrecisionPolicy
    (itself bitwise equal to the real fully_shard), and within bf16
    tolerances of fp32 single-device training."""
    capture_and_import(name, 2, tmp_path, optimizer=["--optimizer", "adamw"])
    flags = ["--optimizer=adamw", "--lr=0.001", "--dp=fsdp", "--world-size=2",
             "--param-dtype=bf16", "--reduce-dtype=f32"]
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "step.loomx", *flags])
    assert result.returncode == 0, result.stderr
    lowered = run([LOOM_COMPILE, tmp_path / "step.mlir", "--emit=mlir", *flags]).stdout
    # The gathers move bf16, the reductions f32 (3 units each).
    gathers = re.findall(r"collective_start <all_gather> .*: tensor<\d+x(\w+)>", lowered)
    reduces = re.findall(r"collective_start <reduce_scatter> .*: tensor<\d+x(\w+)>", lowered)
    assert gathers and set(gathers) == {"bf16"}, gathers
    assert reduces == ["f32"] * 3, reduces
    emulate(MODELS[name], tmp_path, tmp_path / "fsdp2", 2)
    # The emulation is itself bitwise equal to the real fully_shard with that
    # MixedPrecisionPolicy on 2 Gloo ranks (losses and parameters, difference 0).
    assert compare_with_fsdp2(MODELS[name], tmp_path / "fsdp2", 2)

    def check(reference, *tolerance):
        return run([LOOM_RUN, tmp_path / "step.loomx", "--nproc", "2", "--batches",
                    tmp_path / "batches.safetensors", "--check", reference, "--no-progress",
                    "--save-params", tmp_path / "final.safetensors", *tolerance], timeout=600)

    result = check(tmp_path / "fsdp2" / "reference.json", "--rtol", "0", "--atol", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    result = check(tmp_path / "reference.json", "--rtol", MP_FP32_RTOL)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    check_update(tmp_path, tmp_path / "final.safetensors")
    # bf16 really happened: the fp32 reference is not met at the fp32 tolerance.
    result = check(tmp_path / "reference.json")
    assert result.returncode == 1, result.stdout + result.stderr


def test_fsdp_bf16_leaves_float_buffers_alone(tmp_path):
    """FSDP2 never casts buffers: `bf16 logits + f32 buffer` is f32 and so
    is the loss. loom-fsdp follows type promotion the same way, so Loom is
    bitwise equal to the emulation (casting the buffer to bf16 instead left
    the losses 3e-3 apart after 5 AdamW steps); the real fully_shard equals
    the emulation bitwise here."""
    model = Path(__file__).parent / "fsdp_mp_buffer_model.py"
    result = loom_capture([model, "--out", tmp_path,
                  "--steps", "5", "--optimizer", "adamw", "--split", "2"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "step.loomx",
                  "--optimizer=adamw", "--lr=0.001", "--dp=fsdp", "--world-size=2",
                  "--param-dtype=bf16", "--reduce-dtype=f32"])
    assert result.returncode == 0, result.stderr
    emulate(model, tmp_path, tmp_path / "fsdp2", 2)
    result = run([LOOM_RUN, tmp_path / "step.loomx", "--nproc", "2", "--batches",
                  tmp_path / "batches.safetensors", "--check", tmp_path / "fsdp2" / "reference.json",
                  "--no-progress", "--rtol", "0", "--atol", "0"], timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_fsdp_bf16_on_pytorchs_test_transformer(tmp_path):
    """PyTorch's test Transformer (torch_test_models.py) ends its forward
    with ``.float()``, which export guards with ``_assert_tensor_metadata``
    stating the traced dtype, f32. Under bf16 mixed precision the logits it
    checks are bf16, so the check must say bf16 (it said f32 and failed at
    run time, "Tensor dtype mismatch"), and the attention kernel's
    logsumexp stays f32. 5 AdamW steps on 2 ranks, bitwise equal to the
    emulation of FSDP2's MixedPrecisionPolicy, which equals the real
    fully_shard bitwise here too."""
    model = Path(__file__).parent / "torch_test_models.py"
    result = loom_capture([model, "--out", tmp_path, "--steps", "5", "--optimizer", "adamw",
                           "--split", "2"])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_IMPORT, tmp_path / "step.pt2", "-o", tmp_path / "step.mlir"])
    assert result.returncode == 0, result.stderr
    assert "aten::_assert_tensor_metadata" in (tmp_path / "step.mlir").read_text()
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "step.loomx",
                  "--optimizer=adamw", "--lr=0.001", "--dp=fsdp", "--world-size=2",
                  "--param-dtype=bf16", "--reduce-dtype=f32"])
    assert result.returncode == 0, result.stderr
    emulate(model, tmp_path, tmp_path / "fsdp2", 2)
    assert compare_with_fsdp2(model, tmp_path / "fsdp2", 2)
    result = run([LOOM_RUN, tmp_path / "step.loomx", "--nproc", "2", "--batches",
                  tmp_path / "batches.safetensors", "--check", tmp_path / "fsdp2" / "reference.json",
                  "--no-progress", "--rtol", "0", "--atol", "0"], timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout


@pytest.mark.parametrize("name", ["gpt", "vit"])
def test_fsdp_bf16_on_4_ranks_within_bf16_tolerance(name, tmp_path):
    """bf16 parameters / f32 reduction on 4 ranks (20 AdamW steps) against
    f32 single-device training at the bf16 tolerance. (The exact FSDP2
    emulation assumes Gloo sums in rank order, which holds for 2 ranks
    only.)"""
    capture_and_import(name, 4, tmp_path, optimizer=["--optimizer", "adamw"])
    flags = ["--optimizer=adamw", "--lr=0.001", "--dp=fsdp", "--world-size=4",
             "--param-dtype=bf16", "--reduce-dtype=f32"]
    result = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "step.loomx", *flags])
    assert result.returncode == 0, result.stderr
    result = run([LOOM_RUN, tmp_path / "step.loomx", "--nproc", "4", "--batches",
                  tmp_path / "batches.safetensors", "--check", tmp_path / "reference.json",
                  "--no-progress", "--rtol", MP_FP32_RTOL,
                  "--save-params", tmp_path / "final.safetensors"], timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    check_update(tmp_path, tmp_path / "final.safetensors")



def test_loom_run_reference_takes_the_mixed_precision_policy(tmp_path):
    """``loom run --dp fsdp --param-dtype=bf16 --reduce-dtype=f32 --reference
    fsdp`` trains PyTorch's fully_shard reference with that
    ``MixedPrecisionPolicy`` (capture --param-dtype/--reduce-dtype), so the
    check is the fair one and exact: GPT, 5 AdamW steps on 2 ranks, every
    loss and parameter bitwise. The policy took effect in the reference: the
    same run compiled and referenced in f32 has other losses."""
    from test_run_command import loom_run

    def train(out: Path, *flags: str):
        return loom_run(MODELS["gpt"], "--nproc", "2", "--dp", "fsdp", "--reference", "fsdp",
                        "--optimizer", "adamw", "--steps", "5", "--check", "--rtol", "0",
                        "--atol", "0", *flags, out=out)

    mixed = train(tmp_path / "bf16", "--param-dtype=bf16", "--reduce-dtype=f32")
    assert mixed.returncode == 0, mixed.stdout + mixed.stderr
    assert "PASS" in mixed.stdout
    report = json.loads((tmp_path / "bf16" / "reference.json").read_text())
    assert "MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=f32)" in report["reference"]
    plain = train(tmp_path / "f32")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    f32 = json.loads((tmp_path / "f32" / "reference.json").read_text())
    assert report["losses"] != f32["losses"], f32["losses"]


def test_fsdp_bf16_autocast_model_matches_fully_shard(tmp_path):
    """A model that runs under ``torch.autocast(bf16)`` (autocast_model.py)
    with FSDP's bf16 parameters and f32 reduction equals PyTorch's
    fully_shard with that MixedPrecisionPolicy, bit for bit: 3 SGD steps on 2
    ranks. The model is traced in f32, where autograd casts the gradient of
    each autocast cast back to f32; under FSDP2 the cast's input is already
    bf16 and the gradient stays bf16 (the residual stream's gradient is
    summed in bf16). Loom kept the f32 casts and differed by up to 5e-5
    after one step. Negative control: the same step compiled without the
    policy is checked against this reference and fails."""
    from test_run_command import loom_run

    model = Path(__file__).parent / "autocast_model.py"
    flags = ["--nproc", "2", "--dp", "fsdp", "--reference", "fsdp", "--optimizer", "sgd",
             "--lr", "0.1", "--steps", "3", "--check", "--rtol", "0", "--atol", "0",
             "--param-dtype=bf16", "--reduce-dtype=f32"]
    result = loom_run(model, *flags, out=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    plain = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "plain.loomx",
                 "--dp=fsdp"], timeout=600)
    assert plain.returncode == 0, plain.stderr
    control = run([LOOM_RUN, tmp_path / "plain.loomx", "--batches",
                   tmp_path / "batches.safetensors", "--steps", "3", "--check",
                   tmp_path / "reference.json", "--rtol", "0", "--atol", "0", "--no-progress"],
                  timeout=600)
    assert control.returncode != 0 and "FAIL" in control.stdout, control.stdout


@pytest.mark.parametrize("flags", [("--nproc", "2", "--param-dtype=bf16", "--reduce-dtype=f32"),
                                   ("--nproc", "2", "--reduce-dtype=bf16"),
                                   ("--nproc", "4", "--pp=2", "--pp-schedule=1F1B",
                                    "--param-dtype=bf16", "--reduce-dtype=f32")],
                         ids=["bf16-f32", "f32-bf16", "pp2-bf16-f32"])
def test_fsdp_mixed_precision_accumulation_matches_fully_shard(tmp_path, flags):
    """Gradient accumulation under a mixed-precision policy equals PyTorch's
    fully_shard with ``set_requires_gradient_sync`` on the last of 2
    microbatches, bit for bit: GPT, 3 AdamW steps on 2 ranks, and pipelined
    on 2 stages x FSDP 2 (its tied embedding and head on both stages).
    FSDP2 accumulates the unsynced gradients in the reduce dtype (bf16
    gradients in an f32 accumulator; f32 gradients in a bf16 one); Loom
    summed bf16 gradients in bf16 and differed by up to 1.2e-4."""
    from test_run_command import loom_run

    result = loom_run(MODELS["gpt"], "--dp", "fsdp", "--reference", "fsdp",
                      "--optimizer", "adamw", "--steps", "3", "--microbatches", "2", "--check",
                      "--rtol", "0", "--atol", "0", *flags, out=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_fsdp_bf16_complex_rotary_embeddings_match_fully_shard(tmp_path, norm):
    """Rotary embeddings as complex numbers (rope_llama_model.py: Meta's and
    torchtitan's `view_as_complex` of `x.float()`, grouped-query attention)
    under FSDP's bf16/f32 policy equal PyTorch's fully_shard bit for bit: 3
    SGD steps on 2 ranks, with LayerNorm (``norm=layer``) and with
    nn.RMSNorm (``norm=rms``, eps left to PyTorch on two of its norms: ATen
    takes its math dtype's epsilon, f32's for bf16 inputs too, so the f32
    trace's constant is eager's). nn.RMSNorm computes in f32 inside its
    composite, which capture writes into the graph by tracing under the
    policy (loom/policy_casts.py). ATen has no bf16 complex: the backward's
    `view_as_complex` of a bf16 gradient failed at run time ("view_as_complex
    is only supported for half, float and double tensors"); Loom now casts it
    up to f32 as autograd does."""
    from test_run_command import loom_run

    model = Path(__file__).parent / "rope_llama_model.py"
    result = loom_run(model, "--make-arg", f"norm={norm}", "--nproc", "2", "--dp", "fsdp",
                      "--reference", "fsdp", "--optimizer", "sgd", "--lr", "0.1", "--steps", "3",
                      "--check", "--rtol", "0", "--atol", "0", "--param-dtype=bf16",
                      "--reduce-dtype=f32", out=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout


@pytest.mark.parametrize("norm", ["meta", "hf", "torch"])
def test_fsdp_bf16_casts_the_model_makes_match_fully_shard(tmp_path, norm):
    """The RMSNorms people write (rmsnorm_casts_model.py: Meta's
    ``_norm(x.float()).type_as(x) * weight``, Hugging Face's
    ``weight * x.to(input_dtype)``, ``nn.RMSNorm`` with its eps) cast in
    ways an f32 trace does not show; capture traces the step under the bf16
    policy first and writes those casts into the graph
    (loom/policy_casts.py). All three train bitwise equal to fully_shard: 3
    AdamW steps on 2 ranks, tolerance 0. By type promotion alone Meta's and
    Hugging Face's product with the weight ran in f32 (the first loss was
    3.6e-3 off, the parameters 1.4e-4 after 3 SGD steps), and nn.RMSNorm's
    normalisation in bf16 (1e-5 to 5e-5). Negative control: the same
    capture compiled without the policy misses the first loss."""
    from test_run_command import loom_run

    model = Path(__file__).parent / "rmsnorm_casts_model.py"
    tolerance = ("--rtol", "0", "--atol", "0")
    result = loom_run(model, "--make-arg", f"norm={norm}", "--nproc", "2", "--dp", "fsdp",
                      "--reference", "fsdp", "--optimizer", "adamw", "--steps", "3", "--check",
                      *tolerance, "--param-dtype=bf16", "--reduce-dtype=f32", out=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    plain = run([LOOM_COMPILE, tmp_path / "step.mlir", "-o", tmp_path / "plain.loomx",
                 "--dp=fsdp"], timeout=600)
    assert plain.returncode == 0, plain.stderr
    control = run([LOOM_RUN, tmp_path / "plain.loomx", "--nproc", "2", "--batches",
                   tmp_path / "batches.safetensors", "--steps", "3", "--check",
                   tmp_path / "reference.json", *tolerance, "--no-progress"], timeout=600)
    first = next(ln for ln in control.stdout.splitlines() if ln.startswith("step   0 "))
    assert control.returncode != 0 and " rel 0.0e+00 " not in first, control.stdout
