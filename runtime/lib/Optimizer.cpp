//===- Optimizer.cpp - torch.optim's single-tensor SGD, Adam, AdamW -------===//
//
// Each line mirrors one line of torch 2.9's torch/optim/sgd.py
// `_single_tensor_sgd` or torch/optim/adam.py `_single_tensor_adam` (AdamW
// is Adam with decoupled_weight_decay=True). Python passes a float to a
// Tensor method as a wrapped 0-d double tensor, C++ passes an at::Scalar;
// ATen's Scalar overloads wrap it the same way and reach the same kernel,
// so the arithmetic is identical. Keep the order of operations: floating
// point addition is not associative.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Optimizer.h"

#include "loomrt/Dtype.h"
#include "loomrt/Error.h"

#include <ATen/ops/neg.h>
#include <ATen/ops/view_as_real.h>

#include <cmath>

namespace loomrt {
namespace {

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
      buf.mul_(o.momentum).add_(grad, 1 - o.dampening);
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

  if (o.weightDecay != 0) {
    if (o.kind == OptimizerKind::AdamW) {
      // param.mul_(1 - lr * weight_decay)
      param.mul_(1 - o.lr * o.weightDecay);
    } else {
      // grad = grad.add(param, alpha=weight_decay)
      grad = grad.add(param, o.weightDecay);
    }
  }

  if (param.is_complex()) {
    grad = at::view_as_real(grad);
    expAvg = at::view_as_real(expAvg);
    expAvgSq = at::view_as_real(expAvgSq);
    param = at::view_as_real(param);
  }

  // exp_avg.lerp_(grad, 1 - beta1)
  expAvg.lerp_(grad, 1 - o.beta1);
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
  expAvgSq.mul_(o.beta2).addcmul_(grad, grad, 1 - o.beta2);

  // step = _get_value(step_t): a Python float from the float32 tensor.
  double s = double(step);
  double biasCorrection1 = 1 - std::pow(o.beta1, s);
  double biasCorrection2 = 1 - std::pow(o.beta2, s);
  double stepSize = o.lr / biasCorrection1;
  // `bias_correction2 ** 0.5` is Python's float pow, i.e. C pow(), which
  // need not round like sqrt().
  double biasCorrection2Sqrt = std::pow(biasCorrection2, 0.5);

  // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
  at::Tensor denom = expAvgSq.sqrt().div(biasCorrection2Sqrt).add_(o.eps);
  // param.addcdiv_(exp_avg, denom, value=-step_size)
  param.addcdiv_(expAvg, denom, -stepSize);
}

} // namespace

void optimizerStep(const OptimizerSpec &spec, const at::Tensor &param,
                   const at::Tensor &grad, const std::vector<at::Tensor> &state,
                   float &step) {
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
  if (spec.kind == OptimizerKind::SGD)
    sgdStep(spec, param, grad, state, step);
  else
    adamStep(spec, param, grad, state, step);
}

} // namespace loomrt
