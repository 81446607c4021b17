//===- OptimizerTest.cpp - SGD/Adam/AdamW match torch.optim bitwise -------===//
//
// Two references:
//  * OptimizerMirror: torch/optim/{sgd,adam}.py's single-tensor loops written
//    out in this file with plain ATen calls (on clones, step by step as
//    torch.optim keeps its state), compared bitwise with optimizerStep.
//  * OptimizerGolden: the numbers torch.optim itself produced in Python
//    (make_optimizer_golden.py, run by ctest as a fixture; the path comes in
//    LOOMRT_OPTIMIZER_GOLDEN), compared bitwise.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "loomrt/Optimizer.h"
#include "loomrt/Safetensors.h"

#include <ATen/Context.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>

using namespace loomrt;
using namespace loomrt::test;

namespace {

OptimizerSpec sgd(double lr, double momentum, double dampening, double wd,
                  bool nesterov, bool maximize) {
  OptimizerSpec o;
  o.kind = OptimizerKind::SGD;
  o.lr = lr;
  o.momentum = momentum;
  o.dampening = dampening;
  o.weightDecay = wd;
  o.nesterov = nesterov;
  o.maximize = maximize;
  return o;
}

OptimizerSpec adam(OptimizerKind kind, double lr, double beta1, double beta2,
                   double eps, double wd, bool maximize) {
  OptimizerSpec o;
  o.kind = kind;
  o.lr = lr;
  o.beta1 = beta1;
  o.beta2 = beta2;
  o.eps = eps;
  o.weightDecay = wd;
  o.maximize = maximize;
  return o;
}

/// torch.optim.SGD's _single_tensor_sgd for one parameter, with the
/// momentum buffer as torch.optim keeps it (None before the first step).
struct MirrorSGD {
  explicit MirrorSGD(const OptimizerSpec &o) : o(o) {}
  OptimizerSpec o;
  at::Tensor buf; // undefined = None
  void step(at::Tensor &param, const at::Tensor &g) {
    at::Tensor grad = o.maximize ? g.neg() : g;
    if (o.weightDecay != 0)
      grad = grad.add(param, o.weightDecay);
    if (o.momentum != 0) {
      if (!buf.defined())
        buf = grad.detach().clone();
      else
        buf.mul_(o.momentum).add_(grad, 1 - o.dampening);
      grad = o.nesterov ? grad.add(buf, o.momentum) : buf;
    }
    param.add_(grad, -o.lr);
  }
};

/// torch.optim.Adam(W)'s _single_tensor_adam with capturable=False,
/// differentiable=False, amsgrad=False, real parameters.
struct MirrorAdam {
  explicit MirrorAdam(const OptimizerSpec &o) : o(o) {}
  OptimizerSpec o;
  at::Tensor expAvg, expAvgSq;
  float stepT = 0; // state["step"], a float32 tensor in torch.optim
  void step(at::Tensor &param, const at::Tensor &g) {
    if (!expAvg.defined()) {
      expAvg = at::zeros_like(param);
      expAvgSq = at::zeros_like(param);
    }
    at::Tensor grad = o.maximize ? g.neg() : g;
    stepT += 1;
    if (o.weightDecay != 0) {
      if (o.kind == OptimizerKind::AdamW)
        param.mul_(1 - o.lr * o.weightDecay);
      else
        grad = grad.add(param, o.weightDecay);
    }
    expAvg.lerp_(grad, 1 - o.beta1);
    expAvgSq.mul_(o.beta2).addcmul_(grad, grad, 1 - o.beta2);
    double step = stepT;
    double bc1 = 1 - std::pow(o.beta1, step);
    double bc2 = 1 - std::pow(o.beta2, step);
    double stepSize = o.lr / bc1;
    double bc2Sqrt = std::pow(bc2, 0.5);
    // Python's `tensor / float` is div.Tensor with a wrapped scalar, which is
    // what div.Scalar builds.
    at::Tensor denom = expAvgSq.sqrt().div(bc2Sqrt).add_(o.eps);
    param.addcdiv_(expAvg, denom, -stepSize);
  }
};

/// Runs `steps` steps of optimizerStep and of `mirror` on the same random
/// parameter and gradients; every step must agree bitwise.
template <typename Mirror>
void expectMirrorMatches(const OptimizerSpec &spec, Mirror mirror,
                         at::ScalarType dtype = at::kFloat, int steps = 5) {
  at::manual_seed(42);
  at::Tensor param = at::randn({4, 3}).to(dtype);
  at::Tensor expected = param.clone();
  std::vector<at::Tensor> state;
  for (size_t i = 0; i < spec.numStateSlots(); ++i)
    state.push_back(at::zeros_like(param));
  float stepCount = 0;
  for (int s = 0; s < steps; ++s) {
    at::Tensor grad = at::randn({4, 3}).to(dtype);
    optimizerStep(spec, param, grad, state, stepCount);
    mirror.step(expected, grad);
    ASSERT_TRUE(at::equal(param, expected))
        << toString(spec.kind) << " differs from the mirror at step " << s
        << "\n"
        << param.sub(expected).abs().max().item<double>();
  }
  EXPECT_EQ(stepCount, float(steps));
}

TEST(OptimizerMirror, SGDPlain) {
  OptimizerSpec o = sgd(0.1, 0, 0, 0, false, false);
  EXPECT_EQ(o.numStateSlots(), 0u);
  expectMirrorMatches(o, MirrorSGD(o));
}

TEST(OptimizerMirror, SGDMomentumDampeningWeightDecay) {
  OptimizerSpec o = sgd(0.1, 0.9, 0.3, 0.01, false, false);
  EXPECT_EQ(o.numStateSlots(), 1u);
  expectMirrorMatches(o, MirrorSGD(o));
}

TEST(OptimizerMirror, SGDNesterovMaximize) {
  OptimizerSpec o = sgd(0.05, 0.8, 0, 0.05, true, true);
  expectMirrorMatches(o, MirrorSGD(o), at::kDouble);
}

TEST(OptimizerMirror, Adam) {
  OptimizerSpec o = adam(OptimizerKind::Adam, 1e-3, 0.9, 0.999, 1e-8, 0, false);
  expectMirrorMatches(o, MirrorAdam(o));
}

TEST(OptimizerMirror, AdamWeightDecayMaximize) {
  OptimizerSpec o = adam(OptimizerKind::Adam, 1e-2, 0.8, 0.9, 1e-6, 0.1, true);
  expectMirrorMatches(o, MirrorAdam(o));
}

TEST(OptimizerMirror, AdamW) {
  OptimizerSpec o =
      adam(OptimizerKind::AdamW, 1e-3, 0.9, 0.999, 1e-8, 0.01, false);
  expectMirrorMatches(o, MirrorAdam(o), at::kFloat, 12);
}

TEST(OptimizerMirror, AdamWBFloat16) {
  OptimizerSpec o =
      adam(OptimizerKind::AdamW, 1e-2, 0.9, 0.99, 1e-8, 0.1, false);
  expectMirrorMatches(o, MirrorAdam(o), at::kBFloat16);
}

TEST(Optimizer, SGDFirstStepBufferIsTheGradient) {
  // torch.optim creates the momentum buffer as a clone of the (decayed)
  // gradient on the first step; the runtime's zero buffer must end up equal.
  OptimizerSpec o = sgd(0.1, 0.9, 0.5, 0.0, false, false);
  at::Tensor param = at::ones({3});
  at::Tensor grad = at::full({3}, 2.0);
  std::vector<at::Tensor> state = {at::zeros({3})};
  float step = 0;
  optimizerStep(o, param, grad, state, step);
  EXPECT_TRUE(at::equal(state[0], grad));
  EXPECT_TRUE(at::equal(param, at::full({3}, 0.8)));
}

TEST(Optimizer, GradientShapeMismatch) {
  OptimizerSpec o = sgd(0.1, 0, 0, 0, false, false);
  at::Tensor param = at::ones({3});
  float step = 0;
  EXPECT_CONTAINS(
      errorOf([&] { optimizerStep(o, param, at::ones({4}), {}, step); }),
      "the gradient is f32 [4] but the parameter is f32 [3]");
  EXPECT_CONTAINS(
      errorOf([&] { optimizerStep(o, param, at::Tensor(), {}, step); }),
      "the gradient is undefined");
}

// --- Against torch.optim's own output ---------------------------------------

TEST(OptimizerGolden, MatchesTorchOptimBitwise) {
  const char *path = std::getenv("LOOMRT_OPTIMIZER_GOLDEN");
  if (!path)
    GTEST_SKIP() << "LOOMRT_OPTIMIZER_GOLDEN is not set (ctest sets it after "
                    "running make_optimizer_golden.py)";
  SafetensorsFile golden = SafetensorsFile::open(path);
  json configs = json::parse(golden.metadata().at("configs"));
  ASSERT_GE(configs.size(), 10u);
  for (const json &c : configs) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    const json &j = c["optimizer"];
    OptimizerSpec o;
    std::string kind = j["name"];
    o.kind = kind == "sgd"    ? OptimizerKind::SGD
             : kind == "adam" ? OptimizerKind::Adam
                              : OptimizerKind::AdamW;
    o.lr = j["lr"];
    o.beta1 = j["betas"][0];
    o.beta2 = j["betas"][1];
    o.eps = j["eps"];
    o.weightDecay = j["weight_decay"];
    o.momentum = j["momentum"];
    o.dampening = j["dampening"];
    o.nesterov = j["nesterov"];
    o.maximize = j["maximize"];

    at::Tensor param = golden.read(name + ".param0");
    std::vector<at::Tensor> state;
    for (size_t i = 0; i < o.numStateSlots(); ++i)
      state.push_back(at::zeros_like(param));
    float step = 0;
    int steps = c["steps"];
    for (int s = 0; s < steps; ++s) {
      optimizerStep(o, param, golden.read(name + ".grad" + std::to_string(s)),
                    state, step);
      at::Tensor want = golden.read(name + ".param" + std::to_string(s + 1));
      ASSERT_TRUE(at::equal(param, want))
          << "parameter differs from torch.optim after step " << s + 1;
    }
    std::vector<std::string> stateNames = c["state"];
    ASSERT_EQ(stateNames.size(), state.size());
    for (size_t i = 0; i < state.size(); ++i)
      EXPECT_TRUE(
          at::equal(state[i], golden.read(name + ".state." + stateNames[i])))
          << "state " << stateNames[i] << " differs";
  }
}

} // namespace
