//===- OptimizerTest.cpp - SGD/Adam/AdamW match torch.optim bitwise -------===//
//
// Two references:
//  * OptimizerMirror: torch/optim/{sgd,adam}.py's single-tensor loops written
//    out in this file with plain ATen calls (on clones, step by step as
//    torch.optim keeps its state), compared bitwise with optimizerStep.
//  * OptimizerGolden: the numbers torch.optim itself produced in Python, with
//    foreach=False and with fused=True (impl=fused)
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
#include <ATen/ops/full_like.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
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
  OptimizerScalars stepCount;
  for (int s = 0; s < steps; ++s) {
    at::Tensor grad = at::randn({4, 3}).to(dtype);
    optimizerStep(spec, param, grad, state, stepCount);
    mirror.step(expected, grad);
    ASSERT_TRUE(at::equal(param, expected))
        << toString(spec.kind) << " differs from the mirror at step " << s
        << "\n"
        << param.sub(expected).abs().max().item<double>();
  }
  EXPECT_EQ(stepCount.step, float(steps));
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
  // gradient on the first step, in the loop and in the fused kernel
  // (is_first_step); the runtime's zero buffer must end up equal.
  for (OptimizerImpl impl : {OptimizerImpl::Forloop, OptimizerImpl::Fused}) {
    OptimizerSpec o = sgd(0.1, 0.9, 0.5, 0.0, false, false);
    o.impl = impl;
    at::Tensor param = at::ones({3});
    at::Tensor grad = at::full({3}, 2.0);
    std::vector<at::Tensor> state = {at::zeros({3})};
    OptimizerScalars step;
    optimizerStep(o, param, grad, state, step);
    EXPECT_TRUE(at::equal(state[0], grad));
    EXPECT_TRUE(at::equal(param, at::full({3}, 0.8)));
    EXPECT_EQ(step.step, 1.0f);
  }
}

TEST(Optimizer, GradientShapeMismatch) {
  OptimizerSpec o = sgd(0.1, 0, 0, 0, false, false);
  at::Tensor param = at::ones({3});
  OptimizerScalars step;
  EXPECT_CONTAINS(
      errorOf([&] { optimizerStep(o, param, at::ones({4}), {}, step); }),
      "the gradient is f32 [4] but the parameter is f32 [3]");
  EXPECT_CONTAINS(
      errorOf([&] { optimizerStep(o, param, at::Tensor(), {}, step); }),
      "the gradient is undefined");
}

// --- Against torch.optim's own output ---------------------------------------

TEST(OptimizerFused, DiffersFromTheLoopAndSharesItsState) {
  // The negative control of the fused goldens: the kernel computes
  // differently from the loop, so a runtime that ignored impl would fail
  // them. On f32 whether the roundings differ depends on the CPU (this
  // step's f32 results are bitwise equal on an AVX-512 Xeon, and differed
  // on the machine the test was written on), so the difference is checked
  // on bf16 parameters, where the loop rounds every intermediate to bf16
  // and the kernel computes in f32 and rounds once, on any CPU. The state
  // is the same tensors, so either impl continues the other's (checkpoints
  // move between them).
  OptimizerSpec loop =
      adam(OptimizerKind::AdamW, 1e-3, 0.9, 0.999, 1e-8, 0.01, false);
  OptimizerSpec fused = loop;
  fused.impl = OptimizerImpl::Fused;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    at::manual_seed(7);
    at::Tensor p0 = at::randn({64, 33}).to(dtype);
    at::Tensor a = p0.clone(), b = p0.clone();
    std::vector<at::Tensor> sa = {at::zeros_like(a), at::zeros_like(a)};
    std::vector<at::Tensor> sb = {at::zeros_like(b), at::zeros_like(b)};
    OptimizerScalars stepA, stepB;
    for (int s = 0; s < 10; ++s) {
      at::Tensor grad = at::randn({64, 33}).to(dtype);
      optimizerStep(loop, a, grad, sa, stepA);
      optimizerStep(s < 5 ? loop : fused, b, grad, sb, stepB);
    }
    EXPECT_EQ(stepA.step, 10.0f);
    EXPECT_EQ(stepB.step, 10.0f);
    double apart = a.sub(b).abs().max().item<double>();
    if (dtype == at::kFloat) {
      EXPECT_LT(apart, 1e-6);
    } else {
      EXPECT_FALSE(at::equal(a, b));
      // A bf16 ulp near the parameters' magnitudes (up to about 4: 2^-6).
      EXPECT_LT(apart, 0.02);
    }
  }
}

TEST(OptimizerFused, RefusesComplexParameters) {
  OptimizerSpec o =
      adam(OptimizerKind::AdamW, 1e-3, 0.9, 0.999, 1e-8, 0.01, false);
  o.impl = OptimizerImpl::Fused;
  at::Tensor param = at::ones({3}, at::kComplexFloat);
  std::vector<at::Tensor> state = {at::zeros_like(param),
                                   at::zeros_like(param)};
  OptimizerScalars step;
  EXPECT_CONTAINS(errorOf([&] {
                    optimizerStep(o, param, at::ones_like(param), state, step);
                  }),
                  "impl=fused does not support the complex parameter");
}

TEST(OptimizerGolden, MatchesTorchOptimBitwise) {
  const char *path = std::getenv("LOOMRT_OPTIMIZER_GOLDEN");
  if (!path)
    GTEST_SKIP() << "LOOMRT_OPTIMIZER_GOLDEN is not set (ctest sets it after "
                    "running make_optimizer_golden.py)";
  SafetensorsFile golden = SafetensorsFile::open(path);
  json configs = json::parse(golden.metadata().at("configs"));
  ASSERT_GE(configs.size(), 63u);
  for (const json &c : configs) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    const json &j = c["optimizer"];
    OptimizerSpec o;
    std::optional<OptimizerKind> kind = parseOptimizerKind(j["name"]);
    ASSERT_TRUE(kind);
    o.kind = *kind;
    o.lr = j["lr"];
    o.beta1 = j["betas"][0];
    o.beta2 = j["betas"][1];
    o.eps = j["eps"];
    o.weightDecay = j["weight_decay"];
    o.momentum = j["momentum"];
    o.dampening = j["dampening"];
    o.nesterov = j["nesterov"];
    o.maximize = j["maximize"];
    o.amsgrad = j["amsgrad"];
    o.alpha = j["alpha"];
    o.rho = j["rho"];
    o.momentumDecay = j["momentum_decay"];
    o.centered = j["centered"];
    o.lrDecay = j["lr_decay"];
    o.initialAccumulatorValue = j["initial_accumulator_value"];
    o.decoupledWeightDecay = j["decoupled_weight_decay"];
    o.etaminus = j["etas"][0];
    o.etaplus = j["etas"][1];
    o.stepSizeMin = j["step_sizes"][0];
    o.stepSizeMax = j["step_sizes"][1];
    o.lambd = j["lambd"];
    o.t0 = j["t0"];
    o.impl = j.value("impl", "forloop") == "fused" ? OptimizerImpl::Fused
                                                   : OptimizerImpl::Forloop;

    at::Tensor param = golden.read(name + ".param0");
    // As the session creates them: zeros, Adagrad's sum filled.
    std::vector<at::Tensor> state;
    StateInit init = o.kind == OptimizerKind::Adagrad
                         ? StateInit::InitialAccumulatorValue
                         : StateInit::Zeros;
    for (size_t i = 0; i < o.numStateSlots(); ++i)
      state.push_back(
          createOptimizerState(o, init, param.sizes(), param.options()));
    OptimizerScalars step;
    int steps = c["steps"];
    for (int s = 0; s < steps; ++s) {
      optimizerStep(o, param, golden.read(name + ".grad" + std::to_string(s)),
                    state, step);
      at::Tensor want = golden.read(name + ".param" + std::to_string(s + 1));
      ASSERT_TRUE(at::equal(param, want))
          << "parameter differs from torch.optim after step " << s + 1;
    }
    std::vector<std::string> stateNames = c["state"];
    ASSERT_EQ(stateNames, o.stateNames());
    for (size_t i = 0; i < state.size(); ++i)
      EXPECT_TRUE(
          at::equal(state[i], golden.read(name + ".state." + stateNames[i])))
          << "state " << stateNames[i] << " differs";
    // The 0-d float32 scalars torch.optim keeps (SGD keeps no step),
    // bitwise too.
    if (golden.find(name + ".state.step")) {
      EXPECT_EQ(step.step, golden.read(name + ".state.step").item<float>());
    }
    for (const char *scalar : optimizerScalarNames(o.kind))
      if (golden.find(name + ".state." + scalar))
        EXPECT_EQ(*step.find(scalar),
                  golden.read(name + ".state." + scalar).item<float>())
            << scalar << " differs";
  }
}

} // namespace

namespace {
struct LrScheduleCase {
  const char *name;
  LrScheduleSpec spec;
  double baseLr;
  std::vector<double> lrs;
};
} // namespace

// get_last_lr() of torch.optim.lr_scheduler's LinearLR / CosineAnnealingLR /
// StepLR / ExponentialLR / MultiStepLR / PolynomialLR /
// CosineAnnealingWarmRestarts / SequentialLR, 25 steps each, as exact hex
// floats (printed by float.hex() from torch 2.9's schedulers built as
// loom.capture builds them). The cosine past T_max takes CosineAnnealingLR's
// second branch.
TEST(LrSchedule, MatchesTorchLrSchedulerBitwise) {
  const LrScheduleCase cases[] = {
      {"WarmupCosine",
       {5, 0x1.999999999999ap-4, LrDecay::Cosine, 15, 0x1.a36e2eb1c432dp-14,
        0x0.0p+0},
       0x1.47ae147ae147bp-7,
       {0x1.0624dd2f1a9fcp-10, 0x1.6f0068db8bac7p-9,  0x1.2d77318fc5048p-8,
        0x1.a36e2eb1c432cp-8,  0x1.0cb295e9e1b08p-7,  0x1.47ae147ae147bp-7,
        0x1.4422b08356554p-7,  0x1.39a82ce2c13efp-7,  0x1.28b3c6b748af2p-7,
        0x1.1203303f8f7dfp-7,  0x1.ed288ce703afbp-8,  0x1.af33f15fd27ebp-8,
        0x1.6cddbd2f35efep-8,  0x1.290c248153b07p-8,  0x1.cd6be0a16e431p-9,
        0x1.5182a9930be10p-9,  0x1.c78e04c5aa914p-10, 0x1.12095107e1078p-10,
        0x1.14cc3f583910cp-11, 0x1.b490153b9eb36p-13, 0x1.a36e2eb1c432dp-14,
        0x1.b490153b9eb37p-13, 0x1.14cc3f5839112p-11, 0x1.12095107e1074p-10,
        0x1.c78e04c5aa908p-10}},
      {"WarmupLinear",
       {3, 0x1.5555555555555p-2, LrDecay::Linear, 10, 0x0.0p+0,
        0x1.999999999999ap-4},
       0x1.999999999999ap-5,
       {0x1.1111111111111p-6, 0x1.c71c71c71c71dp-6, 0x1.3e93e93e93e94p-5,
        0x1.999999999999ap-5, 0x1.74bc6a7ef9db3p-5, 0x1.4fdf3b645a1ccp-5,
        0x1.2b020c49ba5e5p-5, 0x1.0624dd2f1a9fdp-5, 0x1.c28f5c28f5c2bp-6,
        0x1.78d4fdf3b645cp-6, 0x1.2f1a9fbe76c8dp-6, 0x1.cac083126e97cp-7,
        0x1.374bc6a7ef9dep-7, 0x1.47ae147ae147fp-8, 0x1.47ae147ae147fp-8,
        0x1.47ae147ae147fp-8, 0x1.47ae147ae147fp-8, 0x1.47ae147ae147fp-8,
        0x1.47ae147ae147fp-8, 0x1.47ae147ae147fp-8, 0x1.47ae147ae147fp-8,
        0x1.47ae147ae147fp-8, 0x1.47ae147ae147fp-8, 0x1.47ae147ae147fp-8,
        0x1.47ae147ae147fp-8}},
      {"CosinePastTMax",
       {0, 0x1.5555555555555p-2, LrDecay::Cosine, 7, 0x0.0p+0, 0x0.0p+0},
       0x1.3a92a30553261p-12,
       {0x1.3a92a30553261p-12, 0x1.2aff1de2513cbp-12,
        0x1.feb4aae6a73cdp-13, 0x1.809263aa017c8p-13,
        0x1.e925c4c1499f5p-14, 0x1.d9c26c8ffc3d4p-15,
        0x1.f270a4603d2bcp-17, 0x0.0p+0,
        0x1.f270a4603d2b3p-17, 0x1.d9c26c8ffc3cfp-15,
        0x1.e925c4c1499f3p-14, 0x1.809263aa017c3p-13,
        0x1.feb4aae6a73ccp-13, 0x1.2aff1de2513ccp-12,
        0x1.3a92a30553261p-12, 0x1.2aff1de2513ccp-12,
        0x1.feb4aae6a73cfp-13, 0x1.809263aa017c5p-13,
        0x1.e925c4c1499f7p-14, 0x1.d9c26c8ffc3d9p-15,
        0x1.f270a4603d2c7p-17, 0x0.0p+0,
        0x1.f270a4603d2b3p-17, 0x1.d9c26c8ffc417p-15,
        0x1.e925c4c149a3dp-14}},
      {"WarmupOnly",
       {4, 0x1.0000000000000p-2, LrDecay::Constant, 0, 0x0.0p+0, 0x0.0p+0},
       0x1.999999999999ap-4,
       {0x1.999999999999ap-6, 0x1.6666666666667p-5, 0x1.0000000000001p-4,
        0x1.4cccccccccccep-4, 0x1.999999999999bp-4, 0x1.999999999999bp-4,
        0x1.999999999999bp-4, 0x1.999999999999bp-4, 0x1.999999999999bp-4,
        0x1.999999999999bp-4, 0x1.999999999999bp-4, 0x1.999999999999bp-4,
        0x1.999999999999bp-4, 0x1.999999999999bp-4, 0x1.999999999999bp-4,
        0x1.999999999999bp-4, 0x1.999999999999bp-4, 0x1.999999999999bp-4,
        0x1.999999999999bp-4, 0x1.999999999999bp-4, 0x1.999999999999bp-4,
        0x1.999999999999bp-4, 0x1.999999999999bp-4, 0x1.999999999999bp-4,
        0x1.999999999999bp-4}},
      {"WarmupStep",
       {3, 0x1.0000000000000p-2, LrDecay::Step, 4, 0x0.0p+0, 0x0.0p+0,
        0x1.3333333333333p-2},
       0x1.999999999999ap-5,
       {0x1.999999999999ap-7,  0x1.999999999999ap-6,  0x1.3333333333334p-5,
        0x1.999999999999ap-5,  0x1.999999999999ap-5,  0x1.999999999999ap-5,
        0x1.999999999999ap-5,  0x1.eb851eb851eb8p-7,  0x1.eb851eb851eb8p-7,
        0x1.eb851eb851eb8p-7,  0x1.eb851eb851eb8p-7,  0x1.26e978d4fdf3bp-8,
        0x1.26e978d4fdf3bp-8,  0x1.26e978d4fdf3bp-8,  0x1.26e978d4fdf3bp-8,
        0x1.61e4f765fd8adp-10, 0x1.61e4f765fd8adp-10, 0x1.61e4f765fd8adp-10,
        0x1.61e4f765fd8adp-10, 0x1.a8ac5c13fd0cfp-12, 0x1.a8ac5c13fd0cfp-12,
        0x1.a8ac5c13fd0cfp-12, 0x1.a8ac5c13fd0cfp-12, 0x1.fd9ba1b1960f8p-14,
        0x1.fd9ba1b1960f8p-14}},
      {"Exponential",
       {0, 0x1.5555555555555p-2, LrDecay::Exponential, 0, 0x0.0p+0, 0x0.0p+0,
        0x1.b333333333333p-1},
       0x1.47ae147ae147bp-6,
       {0x1.47ae147ae147bp-6,  0x1.16872b020c49cp-6,  0x1.d97f62b6ae7d6p-7,
        0x1.927913e81450fp-7,  0x1.561a1db877ab3p-7,  0x1.22c9660fff518p-7,
        0x1.ee5660b4cba42p-8,  0x1.a42fd23346b1ep-8,  0x1.6528a5dec8e40p-8,
        0x1.2f95c03091283p-8,  0x1.020c168fae956p-8,  0x1.b6ae265aa8cacp-9,
        0x1.74e0d3cd0f792p-9,  0x1.3cf24da1805a2p-9,  0x1.0d678ec946b30p-9,
        0x1.c9fcd922f8305p-10, 0x1.854a1ef752f5ep-10, 0x1.4ae5671f06843p-10,
        0x1.1942fe0d9256cp-10, 0x1.de25164a45937p-11, 0x1.966c52f254bd5p-11,
        0x1.5975ace794d42p-11, 0x1.25a4062b3e812p-11, 0x1.f33070e31d752p-12,
        0x1.a84f932772a39p-12}},
      {"WarmupExponential",
       {2, 0x1.0000000000000p-1, LrDecay::Exponential, 0, 0x0.0p+0, 0x0.0p+0,
        0x1.ccccccccccccdp-1},
       0x1.999999999999ap-4,
       {0x1.999999999999ap-5, 0x1.3333333333334p-4, 0x1.999999999999ap-4,
        0x1.70a3d70a3d70bp-4, 0x1.4bc6a7ef9db24p-4, 0x1.2a9930be0ded4p-4,
        0x1.0cbd1244a6225p-4, 0x1.e3baba7b91710p-5, 0x1.b35b416f3618fp-5,
        0x1.87d2214a7d7cep-5, 0x1.60a3845ca423ap-5, 0x1.3d5ff7202d534p-5,
        0x1.1da32b368f315p-5, 0x1.0112da1780df9p-5, 0x1.cebb8890b4c5ap-6,
        0x1.a07594823c4b8p-6, 0x1.76d038db9caa6p-6, 0x1.5154fff8d9cc9p-6,
        0x1.2f994cc65d9e8p-6, 0x1.113d2b7f5441ep-6, 0x1.ebd4817ecadd0p-7,
        0x1.baa5a7bee9c6fp-7, 0x1.8e61e3c56bffep-7, 0x1.668b4cfe7accbp-7,
        0x1.42b092183b51dp-7}},
      {"StepOnly",
       {0, 0x1.5555555555555p-2, LrDecay::Step, 5, 0x0.0p+0, 0x0.0p+0,
        0x1.999999999999ap-4},
       0x1.47ae147ae147bp-7,
       {0x1.47ae147ae147bp-7,  0x1.47ae147ae147bp-7,  0x1.47ae147ae147bp-7,
        0x1.47ae147ae147bp-7,  0x1.47ae147ae147bp-7,  0x1.0624dd2f1a9fcp-10,
        0x1.0624dd2f1a9fcp-10, 0x1.0624dd2f1a9fcp-10, 0x1.0624dd2f1a9fcp-10,
        0x1.0624dd2f1a9fcp-10, 0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14,
        0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14,
        0x1.4f8b588e368f1p-17, 0x1.4f8b588e368f1p-17, 0x1.4f8b588e368f1p-17,
        0x1.4f8b588e368f1p-17, 0x1.4f8b588e368f1p-17, 0x1.0c6f7a0b5ed8ep-20,
        0x1.0c6f7a0b5ed8ep-20, 0x1.0c6f7a0b5ed8ep-20, 0x1.0c6f7a0b5ed8ep-20,
        0x1.0c6f7a0b5ed8ep-20}},
      {"WarmupMultiStep",
       {3,
        0x1.0000000000000p-2,
        LrDecay::MultiStep,
        0,
        0x0.0p+0,
        0x0.0p+0,
        0x1.3333333333333p-2,
        {2, 5, 11},
        0x0.0p+0},
       0x1.999999999999ap-5,
       {0x1.999999999999ap-7,  0x1.999999999999ap-6,  0x1.3333333333334p-5,
        0x1.999999999999ap-5,  0x1.999999999999ap-5,  0x1.eb851eb851eb8p-7,
        0x1.eb851eb851eb8p-7,  0x1.eb851eb851eb8p-7,  0x1.26e978d4fdf3bp-8,
        0x1.26e978d4fdf3bp-8,  0x1.26e978d4fdf3bp-8,  0x1.26e978d4fdf3bp-8,
        0x1.26e978d4fdf3bp-8,  0x1.26e978d4fdf3bp-8,  0x1.61e4f765fd8adp-10,
        0x1.61e4f765fd8adp-10, 0x1.61e4f765fd8adp-10, 0x1.61e4f765fd8adp-10,
        0x1.61e4f765fd8adp-10, 0x1.61e4f765fd8adp-10, 0x1.61e4f765fd8adp-10,
        0x1.61e4f765fd8adp-10, 0x1.61e4f765fd8adp-10, 0x1.61e4f765fd8adp-10,
        0x1.61e4f765fd8adp-10}},
      {"MultiStepOnly",
       {0,
        0x1.5555555555555p-2,
        LrDecay::MultiStep,
        0,
        0x0.0p+0,
        0x0.0p+0,
        0x1.999999999999ap-4,
        {1, 4, 20},
        0x0.0p+0},
       0x1.47ae147ae147bp-7,
       {0x1.47ae147ae147bp-7,  0x1.0624dd2f1a9fcp-10, 0x1.0624dd2f1a9fcp-10,
        0x1.0624dd2f1a9fcp-10, 0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14,
        0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14,
        0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14,
        0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14,
        0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14,
        0x1.a36e2eb1c432dp-14, 0x1.a36e2eb1c432dp-14, 0x1.4f8b588e368f1p-17,
        0x1.4f8b588e368f1p-17, 0x1.4f8b588e368f1p-17, 0x1.4f8b588e368f1p-17,
        0x1.4f8b588e368f1p-17}},
      {"WarmupPolynomial",
       {4,
        0x1.999999999999ap-4,
        LrDecay::Polynomial,
        15,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        {},
        0x1.0000000000000p+1},
       0x1.999999999999ap-4,
       {0x1.47ae147ae147cp-7,
        0x1.0a3d70a3d70a5p-5,
        0x1.c28f5c28f5c2bp-5,
        0x1.3d70a3d70a3d9p-4,
        0x1.999999999999ap-4,
        0x1.64ce9ed57275fp-4,
        0x1.33a7b55c9d780p-4,
        0x1.0624dd2f1a9fep-4,
        0x1.b88c2c99d3db0p-5,
        0x1.6c16c16c16c1cp-5,
        0x1.26e978d4fdf3fp-5,
        0x1.d208a5a912e38p-6,
        0x1.64ce9ed572763p-6,
        0x1.0624dd2f1aa01p-6,
        0x1.6c16c16c16c1fp-7,
        0x1.d208a5a912e3ep-8,
        0x1.0624dd2f1a9ffp-8,
        0x1.d208a5a912e37p-10,
        0x1.d208a5a912e37p-12,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0}},
      {"PolynomialOnly",
       {0,
        0x1.5555555555555p-2,
        LrDecay::Polynomial,
        12,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        {},
        0x1.ccccccccccccdp-1},
       0x1.47ae147ae147bp-6,
       {0x1.47ae147ae147bp-6,
        0x1.2eff9257086d2p-6,
        0x1.161746ba790afp-6,
        0x1.f9dd91e0022adp-7,
        0x1.c6fc5a49aac04p-7,
        0x1.9376d83fcee1dp-7,
        0x1.5f32dfda0082dp-7,
        0x1.2a0cebb1f321bp-7,
        0x1.e7a44389dec72p-8,
        0x1.7867cd56a1cbdp-8,
        0x1.055218ecd1725p-8,
        0x1.18139afeab1a1p-9,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0,
        0x0.0p+0}},
      {"WarmupRestarts",
       {3,
        0x1.0000000000000p-2,
        LrDecay::CosineRestarts,
        3,
        0x1.a36e2eb1c432dp-14,
        0x0.0p+0,
        0x0.0p+0,
        {},
        0x0.0p+0,
        2},
       0x1.999999999999ap-5,
       {0x1.999999999999ap-7, 0x1.999999999999ap-6, 0x1.3333333333334p-5,
        0x1.999999999999ap-5, 0x1.3367a0f9096bcp-5, 0x1.9c0ebedfa4401p-7,
        0x1.999999999999ap-5, 0x1.7e37855c9f4d4p-5, 0x1.3367a0f9096bcp-5,
        0x1.9a6b50b0f27bbp-6, 0x1.9c0ebedfa4401p-7, 0x1.c33cb54532e79p-9,
        0x1.999999999999ap-5, 0x1.92a2b474284cep-5, 0x1.7e37855c9f4d4p-5,
        0x1.5dbc45a7a78bep-5, 0x1.3367a0f9096bcp-5, 0x1.021c1724f9feep-5,
        0x1.9a6b50b0f27bbp-6, 0x1.309e7317f0f9cp-6, 0x1.9c0ebedfa4401p-7,
        0x1.e578584a577ecp-8, 0x1.c33cb54532e79p-9, 0x1.f2270f328bb65p-11,
        0x1.999999999999ap-5}},
      {"RestartsOnly",
       {0,
        0x1.5555555555555p-2,
        LrDecay::CosineRestarts,
        5,
        0x1.0624dd2f1a9fcp-10,
        0x0.0p+0,
        0x0.0p+0,
        {},
        0x0.0p+0,
        1},
       0x1.47ae147ae147bp-7,
       {0x1.47ae147ae147cp-7,  0x1.2b84b6833f48cp-7,  0x1.c394b09bff978p-8,
        0x1.0d50afa5899fep-8,  0x1.e76fccec2a982p-10, 0x1.47ae147ae147cp-7,
        0x1.2b84b6833f48cp-7,  0x1.c394b09bff978p-8,  0x1.0d50afa5899fep-8,
        0x1.e76fccec2a982p-10, 0x1.47ae147ae147cp-7,  0x1.2b84b6833f48cp-7,
        0x1.c394b09bff978p-8,  0x1.0d50afa5899fep-8,  0x1.e76fccec2a982p-10,
        0x1.47ae147ae147cp-7,  0x1.2b84b6833f48cp-7,  0x1.c394b09bff978p-8,
        0x1.0d50afa5899fep-8,  0x1.e76fccec2a982p-10, 0x1.47ae147ae147cp-7,
        0x1.2b84b6833f48cp-7,  0x1.c394b09bff978p-8,  0x1.0d50afa5899fep-8,
        0x1.e76fccec2a982p-10}},
  };
  for (const LrScheduleCase &c : cases) {
    LrSchedule schedule(c.spec);
    for (size_t k = 0; k < c.lrs.size(); ++k)
      EXPECT_EQ(schedule.lr(c.baseLr, int64_t(k)), c.lrs[k])
          << c.name << " step " << k;
    // A second group of the same schedule (another initial lr) has its
    // own sequence; the first is unchanged.
    EXPECT_EQ(schedule.lr(c.baseLr / 2, 0) == c.lrs[0], c.lrs[0] == 0);
    EXPECT_EQ(schedule.lr(c.baseLr, 3), c.lrs[3]) << c.name;
  }
}
