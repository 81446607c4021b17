//===- Optimizer.h - torch.optim's single-tensor updates in C++ -*- C++ -*-===//
//
// SGD, Adam, AdamW (with or without AMSGrad), RMSprop, Adagrad, Adadelta,
// Adamax, RAdam, NAdam, Rprop and ASGD exactly as torch/optim/*.py's
// `_single_tensor_*` functions compute them on CPU (foreach=False,
// capturable=False, differentiable=False, dense gradients), or as their
// `_fused_*`: the same ATen calls with the same scalars in the same order, so
// the updated parameters are bitwise-identical to torch.optim's. Python-side
// scalar arithmetic
// (`1 - beta1`, `beta2 ** step`, `bias_correction2 ** 0.5`) is done in double,
// as Python floats are.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_OPTIMIZER_H
#define LOOMRT_OPTIMIZER_H

#include "loomrt/Artifact.h"

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace loomrt {

/// The per-parameter scalars torch.optim keeps as 0-d float32 tensors beside
/// the parameter-shaped state: `state["step"]` (every algorithm), NAdam's
/// `state["mu_product"]`, the running product of its momentum coefficients,
/// and ASGD's `state["eta"]` (the rate its next step applies; the first
/// step's lr, set at that step, as torch.optim creates it then) and
/// `state["mu"]` (the averaging weight). Float32, as PyTorch's are, so they
/// round and stop growing where its do.
struct OptimizerScalars {
  float step = 0;
  float muProduct = 1;
  float eta = 0;
  float mu = 1;

  /// The member state_dict name `name` is ("step", "mu_product", "eta",
  /// "mu"); nullptr for any other.
  float *find(const std::string &name) {
    if (name == "step")
      return &step;
    if (name == "mu_product")
      return &muProduct;
    if (name == "eta")
      return &eta;
    if (name == "mu")
      return &mu;
    return nullptr;
  }
};

/// Whether `kind` (a checkpoint tensor's kind) names such a scalar.
inline bool isOptimizerScalar(const std::string &kind) {
  return OptimizerScalars().find(kind) != nullptr;
}

/// The scalars `kind` keeps per parameter, in torch.optim's state order:
/// the step count, then NAdam's mu_product or ASGD's eta and mu.
inline std::vector<const char *> optimizerScalarNames(OptimizerKind kind) {
  if (kind == OptimizerKind::NAdam)
    return {"step", "mu_product"};
  if (kind == OptimizerKind::ASGD)
    return {"step", "eta", "mu"};
  return {"step"};
}

/// Updates `param` in place from `grad`, one step of `spec`'s optimizer.
/// `state` holds the spec.stateNames() tensors (SGD: [momentum_buffer];
/// Adam/AdamW: [exp_avg, exp_avg_sq(, max_exp_avg_sq)]; RMSprop:
/// [square_avg(, momentum_buffer)(, grad_avg)]; Adagrad: [sum]; Adadelta:
/// [square_avg, acc_delta]; Adamax: [exp_avg, exp_inf]; RAdam: [exp_avg,
/// exp_avg_sq]; NAdam: [exp_avg, exp_avg_sq]; Rprop: [prev, step_size];
/// ASGD: [ax]),
/// created before the first step as zeros (Adagrad's sum: filled with
/// initial_accumulator_value; Rprop's step_size is filled with the lr at the
/// parameter's first step, here). `scalars.step` is the per-parameter step
/// count; it is incremented here, and SGD uses it to tell the first step,
/// where torch.optim creates the momentum buffer as a clone of the gradient.
/// Throws loomrt::Error when shapes or dtypes do not match.
void optimizerStep(const OptimizerSpec &spec, const at::Tensor &param,
                   const at::Tensor &grad, const std::vector<at::Tensor> &state,
                   OptimizerScalars &scalars);

/// A state tensor as it is before the first step: zeros, or for `init`
/// InitialAccumulatorValue filled as torch.optim.Adagrad's constructor fills
/// `sum` (full_like(p, v), complex(v, v) for a complex parameter).
at::Tensor createOptimizerState(const OptimizerSpec &spec, StateInit init,
                                at::IntArrayRef shape,
                                const at::TensorOptions &options);

/// The learning rates of an `lr_schedule`, as torch.optim.lr_scheduler
/// sets `param_group["lr"]`: step k's rate is what `get_last_lr()` returns
/// after k `scheduler.step()` calls. PyTorch computes it recursively from
/// the previous rate (the chainable form), with a closed form only where
/// SequentialLR restarts the decay at its milestone; the rounding of each
/// form differs, so this follows the same recursion in double, operation
/// for operation, and memoises each group's sequence.
class LrSchedule {
public:
  explicit LrSchedule(const LrScheduleSpec &spec) : spec(spec) {}
  /// The rate of step `step` (0-based) of a group whose initial lr is
  /// `baseLr`.
  double lr(double baseLr, int64_t step);

private:
  double next(double baseLr, double prev, int64_t step) const;
  /// CosineAnnealingWarmRestarts' rate `epoch` steps into the decay (its
  /// get_lr is a closed form of T_cur and T_i, not a recursion).
  double restartsLr(double baseLr, int64_t epoch) const;

  LrScheduleSpec spec;
  /// Per initial lr (one per parameter group): the rates so far.
  std::vector<std::pair<double, std::vector<double>>> history;
};

} // namespace loomrt

#endif // LOOMRT_OPTIMIZER_H
