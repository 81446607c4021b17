//===- Optimizer.cpp - torch.optim's SGD, Adam, AdamW, looped or fused ----===//
//
// impl=fused calls the ATen kernels torch/optim/{sgd,adam,adagrad}.py's
// `_fused_*` call, with the same arguments (see fusedStep). impl=forloop:
// each line mirrors one line of torch 2.9's `_single_tensor_sgd`,
// `_single_tensor_adam` (AdamW is Adam with decoupled_weight_decay=True),
// `_single_tensor_rmsprop`, `_single_tensor_adagrad` (dense gradients),
// `_single_tensor_adadelta`, `_single_tensor_adamax`, `_single_tensor_radam`,
// `_single_tensor_nadam`, `_single_tensor_rprop` or `_single_tensor_asgd`.
// Python passes a float operand of add/mul/div (`x.mul_(beta2)`) as a
// wrapped 0-d double tensor to the Tensor overload (PyTorch binds no Scalar
// overload of those to Python), so this does too (`number`): ATen's
// `mul_.Scalar` rounds differently on bf16 and f16 (it multiplies by the
// scalar in the tensor's precision, the wrapped tensor in float). A float
// that fills an `alpha`, `value` or `weight` argument is a Scalar in both.
// Keep the order of operations: floating point addition is not
// associative.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Optimizer.h"

#include "loomrt/Dtype.h"
#include "loomrt/Error.h"

#include <ATen/ScalarOps.h>
#include <ATen/ops/_fused_adagrad.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>
#include <ATen/ops/full.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cmath>

namespace loomrt {
namespace {

/// A Python float as an operand of add/mul/div: a wrapped 0-d double tensor.
at::Tensor number(double v) {
  return at::native::wrapped_scalar_tensor(at::Scalar(v));
}

/// torch.optim's `if torch.is_complex(param): x = torch.view_as_real(x)`
/// for the parameter (first) and each other defined tensor of `tensors`.
void viewAsRealIfComplex(std::initializer_list<at::Tensor *> tensors) {
  if (!(*tensors.begin())->is_complex())
    return;
  for (at::Tensor *t : tensors)
    if (t->defined())
      *t = at::view_as_real(*t);
}

/// The weight decay of Adam, AdamW, RAdam and NAdam: `decoupled` (AdamW,
/// and `decoupled_weight_decay`) scales the parameter,
/// `param.mul_(1 - lr * weight_decay)`; otherwise the L2 term joins the
/// gradient, `grad = grad.add(param, alpha=weight_decay)`; nothing at 0.
void applyWeightDecay(const OptimizerSpec &o, bool decoupled,
                      const at::Tensor &param, at::Tensor &grad) {
  if (o.weightDecay == 0)
    return;
  if (decoupled)
    param.mul_(number(1 - o.lr * o.weightDecay));
  else
    grad = grad.add(param, o.weightDecay);
}

void sgdStep(const OptimizerSpec &o, const at::Tensor &param,
             const at::Tensor &gradIn, const std::vector<at::Tensor> &state,
             float &step) {
  // grad = grads[i] if not maximize else -grads[i]
  at::Tensor grad = o.maximize ? at::neg(gradIn) : gradIn;
  // if weight_decay != 0: grad = grad.add(param, alpha=weight_decay)
  if (o.weightDecay != 0)
    grad = grad.add(param, o.weightDecay);
  if (o.momentum != 0) {
    const at::Tensor &buf = state[0];
    if (step == 0) {
      // buf = grad.detach().clone(): the runtime's buffer already exists
      // (zeros), so copy into it; the values are the clone's.
      buf.copy_(grad);
    } else {
      // buf.mul_(momentum).add_(grad, alpha=1 - dampening)
      buf.mul_(number(o.momentum)).add_(grad, 1 - o.dampening);
    }
    if (o.nesterov)
      grad = grad.add(buf, o.momentum); // grad.add(buf, alpha=momentum)
    else
      grad = buf;
  }
  // param.add_(grad, alpha=-lr)
  param.add_(grad, -o.lr);
  step += 1;
}

void adamStep(const OptimizerSpec &o, const at::Tensor &paramIn,
              const at::Tensor &gradIn, const std::vector<at::Tensor> &state,
              float &step) {
  at::Tensor param = paramIn;
  at::Tensor grad = o.maximize ? at::neg(gradIn) : gradIn;
  at::Tensor expAvg = state[0];
  at::Tensor expAvgSq = state[1];

  // step_t += 1, on a float32 tensor.
  step += 1.0f;

  applyWeightDecay(o, o.kind == OptimizerKind::AdamW, param, grad);

  at::Tensor maxExpAvgSq = o.amsgrad ? state[2] : at::Tensor();
  viewAsRealIfComplex({&param, &grad, &expAvg, &expAvgSq, &maxExpAvgSq});

  // exp_avg.lerp_(grad, 1 - beta1)
  expAvg.lerp_(grad, 1 - o.beta1);
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
  expAvgSq.mul_(number(o.beta2)).addcmul_(grad, grad, 1 - o.beta2);

  // step = _get_value(step_t): a Python float from the float32 tensor.
  double s = double(step);
  double biasCorrection1 = 1 - std::pow(o.beta1, s);
  double biasCorrection2 = 1 - std::pow(o.beta2, s);
  double stepSize = o.lr / biasCorrection1;
  // `bias_correction2 ** 0.5` is Python's float pow, i.e. C pow(), which
  // need not round like sqrt().
  double biasCorrection2Sqrt = std::pow(biasCorrection2, 0.5);

  // AMSGrad normalises by the running maximum:
  // torch.maximum(max_exp_avg_sqs[i], exp_avg_sq, out=max_exp_avg_sqs[i]).
  at::Tensor secondMoment = expAvgSq;
  if (o.amsgrad) {
    at::maximum_out(maxExpAvgSq, maxExpAvgSq, expAvgSq);
    secondMoment = maxExpAvgSq;
  }
  // denom = (second_moment.sqrt() / bias_correction2_sqrt).add_(eps), in
  // two statements, so that the first's temporaries (sqrt's result and the
  // wrapped bias correction) are freed before add_ runs: the scratch
  // PeakMemory.cpp predicts.
  at::Tensor denom = secondMoment.sqrt().div(number(biasCorrection2Sqrt));
  denom.add_(number(o.eps));
  // param.addcdiv_(exp_avg, denom, value=-step_size)
  param.addcdiv_(expAvg, denom, -stepSize);
}

/// State: [square_avg, momentum_buffer if momentum > 0, grad_avg if
/// centered] (LOOMX_OPTIMIZER_STATE's order).
void rmspropStep(const OptimizerSpec &o, const at::Tensor &paramIn,
                 const at::Tensor &gradIn, const std::vector<at::Tensor> &state,
                 float &step) {
  at::Tensor param = paramIn;
  // grad = grad if not maximize else -grad
  at::Tensor grad = o.maximize ? at::neg(gradIn) : gradIn;
  at::Tensor squareAvg = state[0];
  size_t next = 1;
  at::Tensor buf = o.momentum > 0 ? state[next++] : at::Tensor();
  at::Tensor gradAvg = o.centered ? state[next++] : at::Tensor();

  // step += 1
  step += 1.0f;
  // if weight_decay != 0: grad = grad.add(param, alpha=weight_decay)
  if (o.weightDecay != 0)
    grad = grad.add(param, o.weightDecay);

  viewAsRealIfComplex({&param, &grad, &squareAvg, &buf, &gradAvg});

  // square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
  squareAvg.mul_(number(o.alpha)).addcmul_(grad, grad, 1 - o.alpha);
  at::Tensor avg;
  if (o.centered) {
    // grad_avg.lerp_(grad, 1 - alpha)
    gradAvg.lerp_(grad, 1 - o.alpha);
    // avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
    avg = squareAvg.addcmul(gradAvg, gradAvg, -1).sqrt_();
  } else {
    // avg = square_avg.sqrt()
    avg = squareAvg.sqrt();
  }
  // avg = avg.add_(eps)
  avg = avg.add_(number(o.eps));
  if (o.momentum > 0) {
    // buf.mul_(momentum).addcdiv_(grad, avg); param.add_(buf, alpha=-lr)
    buf.mul_(number(o.momentum)).addcdiv_(grad, avg);
    param.add_(buf, -o.lr);
  } else {
    // param.addcdiv_(grad, avg, value=-lr)
    param.addcdiv_(grad, avg, -o.lr);
  }
}

/// State: [square_avg, acc_delta].
void adadeltaStep(const OptimizerSpec &o, const at::Tensor &param,
                  const at::Tensor &gradIn,
                  const std::vector<at::Tensor> &state, float &step) {
  at::Tensor squareAvg = state[0];
  at::Tensor accDelta = state[1];
  // step += 1
  step += 1.0f;
  // grad = grad if not maximize else -grad
  at::Tensor grad = o.maximize ? at::neg(gradIn) : gradIn;
  // if weight_decay != 0: grad = grad.add(param, alpha=weight_decay)
  if (o.weightDecay != 0)
    grad = grad.add(param, o.weightDecay);
  if (param.is_complex()) {
    squareAvg = at::view_as_real(squareAvg);
    accDelta = at::view_as_real(accDelta);
    grad = at::view_as_real(grad);
  }
  // square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
  squareAvg.mul_(number(o.rho)).addcmul_(grad, grad, 1 - o.rho);
  // std = square_avg.add(eps).sqrt_()
  at::Tensor std = squareAvg.add(number(o.eps)).sqrt_();
  // delta = acc_delta.add(eps).sqrt_()
  at::Tensor delta = accDelta.add(number(o.eps)).sqrt_();
  // delta.div_(std).mul_(grad)
  delta.div_(std).mul_(grad);
  // acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
  accDelta.mul_(number(o.rho)).addcmul_(delta, delta, 1 - o.rho);
  // if is_complex(param): delta = torch.view_as_complex(delta)
  if (param.is_complex())
    delta = at::view_as_complex(delta);
  // param.add_(delta, alpha=-lr)
  param.add_(delta, -o.lr);
}

/// State: [ax]; `scalars.eta` and `scalars.mu` are state["eta"] and
/// state["mu"], 0-d float32 tensors: eta reads back as a Python float
/// (`_get_value`), mu multiplies as the tensor it is. torch.optim creates
/// eta at the parameter's first step from that step's lr; the runtime sets
/// it here when the step count is 0.
void asgdStep(const OptimizerSpec &o, const at::Tensor &paramIn,
              const at::Tensor &gradIn, const std::vector<at::Tensor> &state,
              OptimizerScalars &scalars) {
  at::Tensor param = paramIn;
  if (scalars.step == 0) {
    // state["eta"] = torch.as_tensor(lr, dtype=float32); state["mu"] = 1
    scalars.eta = float(o.lr);
    scalars.mu = 1;
  }
  // grad = grad if not maximize else -grad
  at::Tensor grad = o.maximize ? at::neg(gradIn) : gradIn;
  at::Tensor ax = state[0];
  viewAsRealIfComplex({&param, &grad, &ax});
  // step_t += 1
  scalars.step += 1.0f;
  // if weight_decay != 0: grad = grad.add(param, alpha=weight_decay)
  if (o.weightDecay != 0)
    grad = grad.add(param, o.weightDecay);
  // eta_value = _get_value(eta)
  double eta = double(scalars.eta);
  // param.mul_(1 - lambd * eta_value); param.add_(grad, alpha=-eta_value)
  param.mul_(number(1 - o.lambd * eta));
  param.add_(grad, -eta);
  grad = at::Tensor(); // freed before the average needs its temporary
  // if mu.item() != 1: ax.add_(param.sub(ax).mul_(mu)) else: ax.copy_(param)
  if (scalars.mu != 1)
    ax.add_(param.sub(ax).mul_(
        at::scalar_tensor(scalars.mu, at::TensorOptions().dtype(at::kFloat))));
  else
    ax.copy_(param);
  // step = _get_value(step_t)
  double step = double(scalars.step);
  // eta.copy_(torch.as_tensor(lr / ((1 + lambd * lr * step) ** alpha)))
  scalars.eta = float(o.lr / std::pow(1 + o.lambd * o.lr * step, o.alpha));
  // mu.copy_(torch.as_tensor(1 / max(1, step - t0)))
  scalars.mu = float(1 / std::max(1.0, step - o.t0));
}

/// State: [exp_avg, exp_avg_sq]; `muProduct` is state["mu_product"], a 0-d
/// float32 that torch.optim multiplies in place (`mu_product *= mu`), so
/// the product is rounded to float32 at every step, and reads back as a
/// Python float (`_get_value`).
void nadamStep(const OptimizerSpec &o, const at::Tensor &paramIn,
               const at::Tensor &gradIn, const std::vector<at::Tensor> &state,
               OptimizerScalars &scalars) {
  at::Tensor param = paramIn;
  // grad = grads[i] if not maximize else -grads[i]
  at::Tensor grad = o.maximize ? at::neg(gradIn) : gradIn;
  at::Tensor expAvg = state[0];
  at::Tensor expAvgSq = state[1];
  viewAsRealIfComplex({&param, &grad, &expAvg, &expAvgSq});
  // step_t += 1; step = _get_value(step_t)
  scalars.step += 1.0f;
  double step = double(scalars.step);
  // bias_correction2 = 1 - beta2**step
  double biasCorrection2 = 1 - std::pow(o.beta2, step);
  applyWeightDecay(o, o.decoupledWeightDecay, param, grad);
  // mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay))), and
  // mu_next with step + 1.
  double mu = o.beta1 * (1.0 - 0.5 * std::pow(0.96, step * o.momentumDecay));
  double muNext =
      o.beta1 * (1.0 - 0.5 * std::pow(0.96, (step + 1) * o.momentumDecay));
  // mu_product *= mu, on the 0-d float32 tensor.
  at::Tensor muProduct = at::scalar_tensor(
      scalars.muProduct, at::TensorOptions().dtype(at::kFloat));
  muProduct.mul_(number(mu));
  scalars.muProduct = muProduct.item<float>();
  // exp_avg.lerp_(grad, 1 - beta1)
  expAvg.lerp_(grad, 1 - o.beta1);
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
  expAvgSq.mul_(number(o.beta2)).addcmul_(grad, grad, 1 - o.beta2);
  // denom = exp_avg_sq.div(bias_correction2).sqrt()
  at::Tensor denom = expAvgSq.div(number(biasCorrection2)).sqrt();
  // mu_product_next = _get_value(mu_product) * mu_next
  double product = double(scalars.muProduct);
  double productNext = product * muNext;
  // denom.add_(eps)
  denom.add_(number(o.eps));
  // param.addcdiv_(grad, denom, value=(-lr * (1.0 - mu) / (1.0 - mu_product)))
  param.addcdiv_(grad, denom, -o.lr * (1.0 - mu) / (1.0 - product));
  // param.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 -
  // mu_product_next))
  param.addcdiv_(expAvg, denom, (-o.lr * muNext) / (1.0 - productNext));
}

/// State: [exp_avg, exp_inf].
void adamaxStep(const OptimizerSpec &o, const at::Tensor &paramIn,
                const at::Tensor &gradIn, const std::vector<at::Tensor> &state,
                float &step) {
  at::Tensor param = paramIn;
  // grad = grad if not maximize else -grad
  at::Tensor grad = o.maximize ? at::neg(gradIn) : gradIn;
  at::Tensor expAvg = state[0];
  at::Tensor expInf = state[1];
  // step_t += 1
  step += 1.0f;
  // if weight_decay != 0: grad = grad.add(param, alpha=weight_decay)
  if (o.weightDecay != 0)
    grad = grad.add(param, o.weightDecay);
  viewAsRealIfComplex({&param, &grad, &expAvg, &expInf});
  // exp_avg.lerp_(grad, 1 - beta1)
  expAvg.lerp_(grad, 1 - o.beta1);
  // torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
  expInf.mul_(number(o.beta2));
  at::Tensor norm = grad.abs();
  norm.add_(number(o.eps));
  at::maximum_out(expInf, expInf, norm);
  // bias_correction = 1 - beta1 ** _get_value(step_t); clr = lr / it
  double clr = o.lr / (1 - std::pow(o.beta1, double(step)));
  // param.addcdiv_(exp_avg, exp_inf, value=-clr)
  param.addcdiv_(expAvg, expInf, -clr);
}

/// State: [exp_avg, exp_avg_sq]. The update's Python expression
/// `bias_corrected_exp_avg * lr * adaptive_lr * rect` is evaluated left to
/// right, with `bias_correction2 ** 0.5 / exp_avg_sq_sqrt` as Python's
/// Tensor.__rtruediv__ computes a float over a tensor: reciprocal, then
/// the multiplication.
void radamStep(const OptimizerSpec &o, const at::Tensor &paramIn,
               const at::Tensor &gradIn, const std::vector<at::Tensor> &state,
               float &step) {
  at::Tensor param = paramIn;
  // grad = grads[i] if not maximize else -grads[i]
  at::Tensor grad = o.maximize ? at::neg(gradIn) : gradIn;
  at::Tensor expAvg = state[0];
  at::Tensor expAvgSq = state[1];
  viewAsRealIfComplex({&param, &grad, &expAvg, &expAvgSq});
  // step_t += 1; step = _get_value(step_t)
  step += 1.0f;
  double s = double(step);
  applyWeightDecay(o, o.decoupledWeightDecay, param, grad);
  // exp_avg.lerp_(grad, 1 - beta1)
  expAvg.lerp_(grad, 1 - o.beta1);
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
  expAvgSq.mul_(number(o.beta2)).addcmul_(grad, grad, 1 - o.beta2);
  double biasCorrection1 = 1 - std::pow(o.beta1, s);
  double biasCorrection2 = 1 - std::pow(o.beta2, s);
  // bias_corrected_exp_avg = exp_avg / bias_correction1. Python computes
  // each product below into a new tensor; the same kernels in place give
  // the same values with one parameter-sized temporary fewer at a time.
  at::Tensor update = expAvg.div(number(biasCorrection1));
  double rhoInf = 2 / (1 - o.beta2) - 1;
  double rhoT = rhoInf - 2 * s * std::pow(o.beta2, s) / biasCorrection2;
  // * lr
  update.mul_(number(o.lr));
  if (rhoT > 5.0) {
    // _compute_adaptive_lr(): exp_avg_sq.sqrt().add_(eps), then
    // (bias_correction2 ** 0.5) / it
    at::Tensor adaptive = expAvgSq.sqrt();
    adaptive.add_(number(o.eps));
    adaptive.reciprocal_();
    adaptive.mul_(number(std::pow(biasCorrection2, 0.5)));
    update.mul_(adaptive);
    adaptive.reset();
    // * _compute_rect()
    update.mul_(number(std::pow((rhoT - 4) * (rhoT - 2) * rhoInf /
                                    ((rhoInf - 4) * (rhoInf - 2) * rhoT),
                                0.5)));
  }
  // param.add_(..., alpha=-1.0)
  param.add_(update, -1.0);
}

/// State: [prev, step_size]. torch.optim.Rprop creates step_size at the
/// parameter's first step as full_like(grad, lr) with that step's lr
/// (complex(lr, lr) for a complex parameter); the runtime created it as
/// zeros and fills it here when the step count is 1.
void rpropStep(const OptimizerSpec &o, const at::Tensor &paramIn,
               const at::Tensor &gradIn, const std::vector<at::Tensor> &state,
               float &step) {
  at::Tensor param = paramIn;
  // grad = grad if not maximize else -grad
  at::Tensor grad = o.maximize ? at::neg(gradIn) : gradIn;
  at::Tensor prev = state[0];
  at::Tensor stepSize = state[1];
  // step += 1
  step += 1.0f;
  viewAsRealIfComplex({&param, &grad, &prev, &stepSize});
  if (step == 1.0f)
    stepSize.fill_(o.lr);
  // sign = grad.mul(prev).sign()
  at::Tensor sign = grad.mul(prev).sign();
  // sign[sign.gt(0)] = etaplus; sign[sign.lt(0)] = etaminus;
  // sign[sign.eq(0)] = 1
  sign.masked_fill_(sign.gt(0), o.etaplus);
  sign.masked_fill_(sign.lt(0), o.etaminus);
  sign.masked_fill_(sign.eq(0), 1);
  // step_size.mul_(sign).clamp_(step_size_min, step_size_max)
  stepSize.mul_(sign).clamp_(o.stepSizeMin, o.stepSizeMax);
  // grad = grad.clone(); grad[sign.eq(etaminus)] = 0
  grad = grad.clone(at::MemoryFormat::Preserve);
  grad.masked_fill_(sign.eq(o.etaminus), 0);
  // param.addcmul_(grad.sign(), step_size, value=-1)
  param.addcmul_(grad.sign(), stepSize, -1);
  // prev.copy_(grad)
  prev.copy_(grad);
}

/// State: [sum], created by torch.optim.Adagrad's constructor as
/// full_like(param, initial_accumulator_value).
void adagradStep(const OptimizerSpec &o, const at::Tensor &paramIn,
                 const at::Tensor &gradIn, const std::vector<at::Tensor> &state,
                 float &step) {
  at::Tensor param = paramIn;
  at::Tensor stateSum = state[0];
  // step_t += 1; step = _get_value(step_t)
  step += 1.0f;
  double s = double(step);
  // grad = grad if not maximize else -grad
  at::Tensor grad = o.maximize ? at::neg(gradIn) : gradIn;
  // if weight_decay != 0: grad = grad.add(param, alpha=weight_decay)
  if (o.weightDecay != 0)
    grad = grad.add(param, o.weightDecay);
  // clr = lr / (1 + (step - 1) * lr_decay)
  double clr = o.lr / (1 + (s - 1) * o.lrDecay);
  viewAsRealIfComplex({&param, &grad, &stateSum});
  // state_sum.addcmul_(grad, grad, value=1)
  stateSum.addcmul_(grad, grad, 1);
  // std = state_sum.sqrt().add_(eps)
  at::Tensor stddev = stateSum.sqrt().add_(number(o.eps));
  // param.addcdiv_(grad, std, value=-clr)
  param.addcdiv_(grad, stddev, -clr);
}

/// One parameter's update by the fused kernel, as torch.optim's `_fused_sgd`,
/// `_fused_adam` and `_fused_adagrad` call it on CPU: a float lr, no
/// grad_scale/found_inf. The kernels update each tensor of their lists on
/// its own, so a one-element list gives the bits a whole-group call gives.
/// RMSprop, Adamax and RAdam have no fused kernel (the artifact reader
/// refuses them).
void fusedStep(const OptimizerSpec &o, const at::Tensor &param,
               const at::Tensor &grad, const std::vector<at::Tensor> &state,
               float &step) {
  if (!o.hasFusedKernel())
    throw Error(std::string(toString(o.kind)) + " has no fused implementation");
  if (param.is_complex())
    throw Error("impl=fused does not support the complex parameter (" +
                artifactDtypeName(param.scalar_type()) +
                "), as torch.optim's fused=True does not");
  if (o.kind == OptimizerKind::SGD) {
    // torch.optim creates the momentum buffers at the first step and tells
    // the kernel so (is_first_step: copy the gradient in, as the loop's
    // clone); the runtime's buffers exist from the start as zeros.
    std::vector<at::Tensor> buffers;
    if (o.momentum != 0)
      buffers.push_back(state[0]);
    at::_fused_sgd_({param}, {grad}, buffers, o.weightDecay, o.momentum, o.lr,
                    o.dampening, o.nesterov, o.maximize,
                    /*is_first_step=*/o.momentum != 0 && step == 0);
    step += 1;
    return;
  }
  // torch._foreach_add_(state_steps, 1) on the float32 step tensors the
  // fused path keeps, then the kernel reads the new count; the runtime
  // keeps the count as a float32 scalar (the checkpoint format), so it
  // makes the tensor from it.
  step += 1.0f;
  at::Tensor stepTensor = at::scalar_tensor(
      step, at::TensorOptions().dtype(at::kFloat).device(param.device()));
  if (o.kind == OptimizerKind::Adagrad) {
    at::_fused_adagrad_({param}, {grad}, {state[0]}, {stepTensor}, o.lr,
                        o.lrDecay, o.weightDecay, o.eps, o.maximize);
    return;
  }
  std::vector<at::Tensor> maxExpAvgSqs;
  if (o.amsgrad)
    maxExpAvgSqs.push_back(state[2]);
  if (o.kind == OptimizerKind::AdamW)
    at::_fused_adamw_({param}, {grad}, {state[0]}, {state[1]}, maxExpAvgSqs,
                      {stepTensor}, o.lr, o.beta1, o.beta2, o.weightDecay,
                      o.eps, o.amsgrad, o.maximize);
  else
    at::_fused_adam_({param}, {grad}, {state[0]}, {state[1]}, maxExpAvgSqs,
                     {stepTensor}, o.lr, o.beta1, o.beta2, o.weightDecay, o.eps,
                     o.amsgrad, o.maximize);
}

} // namespace

void optimizerStep(const OptimizerSpec &spec, const at::Tensor &param,
                   const at::Tensor &grad, const std::vector<at::Tensor> &state,
                   OptimizerScalars &scalars) {
  if (!grad.defined())
    throw Error("the gradient is undefined (the operator returned None)");
  if (grad.scalar_type() != param.scalar_type() ||
      grad.sizes() != param.sizes())
    throw Error("the gradient is " + artifactDtypeName(grad.scalar_type()) +
                " " + formatShape(grad.sizes()) + " but the parameter is " +
                artifactDtypeName(param.scalar_type()) + " " +
                formatShape(param.sizes()));
  if (state.size() != spec.numStateSlots())
    throw Error(std::string(toString(spec.kind)) + " needs " +
                std::to_string(spec.numStateSlots()) + " state tensors, got " +
                std::to_string(state.size()));
  if (spec.impl == OptimizerImpl::Fused)
    fusedStep(spec, param, grad, state, scalars.step);
  else if (spec.kind == OptimizerKind::SGD)
    sgdStep(spec, param, grad, state, scalars.step);
  else if (spec.kind == OptimizerKind::RMSprop)
    rmspropStep(spec, param, grad, state, scalars.step);
  else if (spec.kind == OptimizerKind::Adagrad)
    adagradStep(spec, param, grad, state, scalars.step);
  else if (spec.kind == OptimizerKind::Adadelta)
    adadeltaStep(spec, param, grad, state, scalars.step);
  else if (spec.kind == OptimizerKind::Adamax)
    adamaxStep(spec, param, grad, state, scalars.step);
  else if (spec.kind == OptimizerKind::NAdam)
    nadamStep(spec, param, grad, state, scalars);
  else if (spec.kind == OptimizerKind::RAdam)
    radamStep(spec, param, grad, state, scalars.step);
  else if (spec.kind == OptimizerKind::Rprop)
    rpropStep(spec, param, grad, state, scalars.step);
  else if (spec.kind == OptimizerKind::ASGD)
    asgdStep(spec, param, grad, state, scalars);
  else
    adamStep(spec, param, grad, state, scalars.step);
}

at::Tensor createOptimizerState(const OptimizerSpec &spec, StateInit init,
                                at::IntArrayRef shape,
                                const at::TensorOptions &options) {
  if (init == StateInit::Zeros)
    return at::zeros(shape, options);
  double v = spec.initialAccumulatorValue;
  if (c10::isComplexType(c10::typeMetaToScalarType(options.dtype())))
    return at::full(shape, at::Scalar(c10::complex<double>(v, v)), options);
  return at::full(shape, v, options);
}

double LrSchedule::lr(double baseLr, int64_t step) {
  auto it = std::find_if(history.begin(), history.end(),
                         [&](const auto &h) { return h.first == baseLr; });
  if (it == history.end()) {
    // Step 0: the constructors' initial step. LinearLR's multiplies the
    // initial lr by start_factor (1 for a linear decay alone);
    // CosineAnnealingLR's keeps it; SequentialLR runs only the first
    // scheduler's.
    double first = baseLr;
    if (spec.warmupSteps > 0)
      first = baseLr * spec.warmupStartFactor;
    else if (spec.decay == LrDecay::Linear)
      first = baseLr * 1.0;
    else if (spec.decay == LrDecay::CosineRestarts)
      first = restartsLr(baseLr, 0);
    history.push_back({baseLr, {first}});
    it = std::prev(history.end());
  }
  std::vector<double> &rates = it->second;
  while (int64_t(rates.size()) <= step)
    rates.push_back(next(baseLr, rates.back(), int64_t(rates.size())));
  return rates[size_t(step)];
}

/// LinearLR.get_lr at epoch `epoch` >= 1 from the rate `prev`.
static double linearStep(double prev, double start, double end, int64_t total,
                         int64_t epoch) {
  if (epoch > total)
    return prev;
  // group["lr"] * (1.0 + (end_factor - start_factor) / (total_iters *
  // start_factor + (last_epoch - 1) * (end_factor - start_factor)))
  return prev * (1.0 + (end - start) / (double(total) * start +
                                        double(epoch - 1) * (end - start)));
}

double LrSchedule::restartsLr(double baseLr, int64_t epoch) const {
  const double pi = 3.141592653589793; // math.pi
  // CosineAnnealingWarmRestarts.step(): T_cur += 1 per epoch, and when it
  // reaches T_i it wraps to 0 in a period T_mult times longer; so T_cur is
  // `epoch` less the whole periods before it (a period at a time: their
  // count grows with log(epoch) when T_mult > 1).
  int64_t tI = spec.decaySteps;
  int64_t tCur = spec.tMult == 1 ? epoch % tI : epoch;
  while (tCur >= tI) {
    tCur -= tI;
    tI *= spec.tMult;
  }
  // get_lr: eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2
  double eta = spec.etaMin;
  return eta +
         (baseLr - eta) * (1 + std::cos(pi * double(tCur) / double(tI))) / 2;
}

double LrSchedule::next(double baseLr, double prev, int64_t step) const {
  const double pi = 3.141592653589793; // math.pi
  int64_t warmup = spec.warmupSteps;
  bool decays = spec.decay != LrDecay::Constant;
  // SequentialLR(milestones=[W]) runs the warm-up below the milestone.
  if (warmup > 0 && (!decays || step < warmup))
    return linearStep(prev, spec.warmupStartFactor, 1.0, warmup, step);
  if (!decays)
    return prev;
  int64_t epoch = step - warmup;
  int64_t total = spec.decaySteps;
  if (warmup > 0 && epoch == 0) {
    // At the milestone SequentialLR calls the decay's _update_lr(0), which
    // takes the closed form.
    if (spec.decay == LrDecay::Step || spec.decay == LrDecay::Exponential ||
        spec.decay == LrDecay::MultiStep || spec.decay == LrDecay::Polynomial)
      // base_lr * gamma ** (0 // step_size), base_lr * gamma ** 0,
      // base_lr * gamma ** bisect_right(milestones, 0) (each >= 1),
      // base_lr * (1.0 - min(total_iters, 0) / total_iters) ** power
      return baseLr;
    if (spec.decay == LrDecay::CosineRestarts)
      // _update_lr(0) takes get_lr() at T_cur 0 (it has no closed form).
      return restartsLr(baseLr, 0);
    if (spec.decay == LrDecay::Cosine)
      // eta_min + (base_lr - eta_min) * (1 + cos(pi * 0 / T_max)) / 2
      return spec.etaMin + (baseLr - spec.etaMin) *
                               (1 + std::cos(pi * 0.0 / double(total))) / 2;
    // base_lr * (start_factor + (end_factor - start_factor) *
    // min(total_iters, 0) / total_iters)
    return baseLr * (1.0 + (spec.endFactor - 1.0) * 0.0 / double(total));
  }
  if (spec.decay == LrDecay::Linear)
    return linearStep(prev, 1.0, spec.endFactor, total, epoch);
  if (spec.decay == LrDecay::CosineRestarts)
    return restartsLr(baseLr, epoch);
  // StepLR.get_lr: group["lr"] * gamma every step_size epochs;
  // ExponentialLR.get_lr: every epoch.
  if (spec.decay == LrDecay::Step)
    return epoch % total != 0 ? prev : prev * spec.gamma;
  if (spec.decay == LrDecay::Exponential)
    return prev * spec.gamma;
  // MultiStepLR.get_lr: group["lr"] * gamma ** milestones[last_epoch] at a
  // milestone, where each is listed once (gamma ** 1 is gamma).
  if (spec.decay == LrDecay::MultiStep)
    return std::binary_search(spec.milestones.begin(), spec.milestones.end(),
                              epoch)
               ? prev * spec.gamma
               : prev;
  // PolynomialLR.get_lr: the ratio of consecutive closed forms, raised to
  // power, up to total_iters.
  if (spec.decay == LrDecay::Polynomial) {
    if (epoch > total)
      return prev;
    double t = double(total);
    return prev *
           std::pow((1.0 - double(epoch) / t) / (1.0 - double(epoch - 1) / t),
                    spec.power);
  }
  // CosineAnnealingLR.get_lr's two recursive branches.
  double eta = spec.etaMin;
  if ((epoch - 1 - total) % (2 * total) == 0)
    return prev + (baseLr - eta) * (1 - std::cos(pi / double(total))) / 2;
  return (1 + std::cos(pi * double(epoch) / double(total))) /
             (1 + std::cos(pi * double(epoch - 1) / double(total))) *
             (prev - eta) +
         eta;
}

} // namespace loomrt
