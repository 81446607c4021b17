//===- ArtifactTest.cpp - The .loomx reader refuses bad artifacts ---------===//
//
// Each test starts from the valid linear artifact of TestUtil and breaks one
// thing, checking that the message names what is wrong and where.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "loomrt/Artifact.h"

#include <ATen/ops/zeros.h>

using namespace loomrt;
using namespace loomrt::test;

namespace {

std::string validProgram() { return linearProgram(sgdOptimizer()).dump(); }
std::string validWeights() { return safetensorsBytes(linearWeights()); }

std::string loadError(const json &program,
                      const NamedTensors &weights = linearWeights()) {
  std::string path = writeArtifact("a.loomx", program, weights);
  return errorOf([&] { Artifact::load(path); });
}

std::string sessionError(const json &program) {
  std::string path = writeArtifact("a.loomx", program, linearWeights());
  return errorOf([&] { Session::load(path); });
}

json &instruction(json &program, size_t i) {
  return program["programs"][0]["instructions"][i];
}

TEST(Artifact, ValidLinearArtifactLoads) {
  std::string path =
      writeArtifact("ok.loomx", linearProgram(sgdOptimizer()), linearWeights());
  Artifact a = Artifact::load(path);
  EXPECT_EQ(a.programs[0].numSlots, 16);
  EXPECT_EQ(a.worldSize, 1);
  ASSERT_EQ(a.programs[0].inputs.size(), 5u);
  EXPECT_EQ(a.programs[0].inputs[0].name, "fc.weight");
  EXPECT_EQ(a.programs[0].inputs[0].role, InputRole::Parameter);
  EXPECT_EQ(a.programs[0].inputs[0].shape, (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(a.programs[0].inputs[2].dtype, c10::ScalarType::Long);
  EXPECT_EQ(a.programs[0].inputs[4].batchIndex, 1);
  ASSERT_TRUE(a.optimizer);
  EXPECT_EQ(a.optimizer->kind, OptimizerKind::SGD);
  EXPECT_DOUBLE_EQ(a.optimizer->momentum, 0.9);
  ASSERT_EQ(a.programs.size(), 1u);
  const Instruction &sum = a.programs[0].instructions[8];
  EXPECT_EQ(sum.qualifiedKernel(), "aten::sum.dim_IntList");
  ASSERT_EQ(sum.args.size(), 3u);
  EXPECT_EQ(sum.args[1].kind, ArgValue::Kind::Ints);
  EXPECT_EQ(sum.args[2].kind, ArgValue::Kind::Bool);
  EXPECT_EQ(a.programs[0].instructions[9].op, OpKind::Free);
  EXPECT_EQ(a.programs[0].instructions[10].op, OpKind::Optimizer);
  EXPECT_EQ(a.programs[0].outputs[1].role, OutputRole::BufferMutation);
}

// --- Container -------------------------------------------------------------

TEST(Artifact, WrongMagic) {
  ArtifactBytes b;
  b.magic = std::string("PK\x03\x04zzzz", 8);
  std::string path =
      writeFile("a.loomx", b.build(validProgram(), validWeights()));
  EXPECT_CONTAINS(errorOf([&] { Artifact::load(path); }),
                  "not a Loom artifact");
}

TEST(Artifact, ShorterThanMagic) {
  std::string path = writeFile("a.loomx", "LOO");
  EXPECT_CONTAINS(errorOf([&] { Artifact::load(path); }),
                  "not a Loom artifact");
}

TEST(Artifact, WrongVersion) {
  ArtifactBytes b;
  b.version = 9;
  std::string path =
      writeFile("a.loomx", b.build(validProgram(), validWeights()));
  EXPECT_CONTAINS(errorOf([&] { Artifact::load(path); }),
                  "artifact format version 9; this runtime reads "
                  "versions 1 to 8 — recompile with the matching "
                  "loom-compile");
}

TEST(Artifact, ContainerAndProgramVersionsDiffer) {
  ArtifactBytes b;
  b.version = 2;
  std::string path =
      writeFile("a.loomx", b.build(validProgram(), validWeights()));
  EXPECT_CONTAINS(errorOf([&] { Artifact::load(path); }),
                  "version: the program says version 1 but the container "
                  "header says 2");
}

TEST(Artifact, NonZeroFlags) {
  ArtifactBytes b;
  b.flags = 4;
  std::string path =
      writeFile("a.loomx", b.build(validProgram(), validWeights()));
  EXPECT_CONTAINS(errorOf([&] { Artifact::load(path); }), "header flags are 4");
}

TEST(Artifact, TruncatedInWeights) {
  std::string bytes = ArtifactBytes().build(validProgram(), validWeights());
  std::string path = writeFile("a.loomx", bytes.substr(0, bytes.size() - 7));
  EXPECT_CONTAINS(errorOf([&] { Artifact::load(path); }), "truncated");
}

TEST(Artifact, TruncatedInHeader) {
  std::string bytes = ArtifactBytes().build(validProgram(), validWeights());
  std::string path = writeFile("a.loomx", bytes.substr(0, 20));
  EXPECT_CONTAINS(errorOf([&] { Artifact::load(path); }),
                  "truncated: 20 bytes, shorter than the 32-byte header");
}

TEST(Artifact, TrailingData) {
  std::string bytes = ArtifactBytes().build(validProgram(), validWeights());
  std::string path = writeFile("a.loomx", bytes + "xyz");
  EXPECT_CONTAINS(errorOf([&] { Artifact::load(path); }),
                  "3 bytes of trailing data");
}

TEST(Artifact, MissingFile) {
  EXPECT_CONTAINS(errorOf([] { Artifact::load("/nonexistent/step.loomx"); }),
                  "/nonexistent/step.loomx: cannot open");
}

// --- Program JSON ----------------------------------------------------------

TEST(Artifact, ProgramIsNotJson) {
  std::string path = writeFile(
      "a.loomx", ArtifactBytes().build("{\"format\": loomx", validWeights()));
  EXPECT_CONTAINS(errorOf([&] { Artifact::load(path); }),
                  "the program is not valid JSON");
}

TEST(Artifact, ProgramVersion) {
  json p = linearProgram(sgdOptimizer());
  p["version"] = 9;
  EXPECT_CONTAINS(loadError(p), "version: program version 9");
}

// The step and exponential decays (version 5) carry a gamma; the others
// none, and the exponential decay counts no steps.
TEST(Artifact, LrScheduleGamma) {
  json p = linearProgram(sgdOptimizer());
  p["lr_schedule"] = {{"warmup_steps", 2}, {"warmup_start_factor", 0.5},
                      {"decay", "step"},   {"decay_steps", 3},
                      {"eta_min", 0.0},    {"end_factor", 0.0}};
  p["version"] = 5;
  EXPECT_CONTAINS(loadError(p),
                  "lr_schedule.gamma: missing: the step decay needs its gamma");
  p["lr_schedule"]["gamma"] = 0.0;
  EXPECT_CONTAINS(loadError(p), "lr_schedule.gamma: must be greater than 0");
  p["lr_schedule"]["gamma"] = 0.25;
  std::string path = writeArtifact("a.loomx", p, linearWeights());
  Artifact a = Artifact::load(path);
  ASSERT_TRUE(a.lrSchedule.has_value());
  EXPECT_EQ(a.lrSchedule->decay, LrDecay::Step);
  EXPECT_EQ(a.lrSchedule->gamma, 0.25);

  p["lr_schedule"]["decay"] = "exponential";
  EXPECT_CONTAINS(
      loadError(p),
      "lr_schedule.decay_steps: must be 0 for the exponential decay");
  p["lr_schedule"]["decay"] = "cosine";
  EXPECT_CONTAINS(loadError(p), "lr_schedule.gamma: only the step, "
                                "exponential and multistep decays take a "
                                "gamma");
  p["lr_schedule"]["decay"] = "step";
  p["version"] = 4;
  EXPECT_CONTAINS(loadError(p), "'gamma' needs format version 5");
}

// The multistep decay (version 8) takes a gamma and its milestones,
// increasing from 1, and counts no steps; the polynomial decay (version 8)
// its power and steps.
TEST(Artifact, LrScheduleMilestonesAndPower) {
  json p = linearProgram(sgdOptimizer());
  p["lr_schedule"] = {{"warmup_steps", 2},    {"warmup_start_factor", 0.5},
                      {"decay", "multistep"}, {"decay_steps", 0},
                      {"eta_min", 0.0},       {"end_factor", 0.0},
                      {"gamma", 0.5}};
  p["version"] = 7;
  EXPECT_CONTAINS(loadError(p), "lr_schedule.decay: 'multistep' needs format "
                                "version 8 (this program is version 7)");
  p["version"] = 8;
  EXPECT_CONTAINS(
      loadError(p),
      "lr_schedule.milestones: missing: the multistep decay needs its "
      "milestones");
  p["lr_schedule"]["milestones"] = {3, 3};
  EXPECT_CONTAINS(loadError(p), "lr_schedule.milestones[1]: must be at least "
                                "4 (milestones increase from 1), found 3");
  p["lr_schedule"]["milestones"] = json::array();
  EXPECT_CONTAINS(loadError(p),
                  "lr_schedule.milestones: must list at least one step");
  p["lr_schedule"]["milestones"] = {2, 7};
  p["lr_schedule"]["decay_steps"] = 4;
  EXPECT_CONTAINS(
      loadError(p),
      "lr_schedule.decay_steps: must be 0 for the multistep decay, found 4");
  p["lr_schedule"]["decay_steps"] = 0;
  Artifact a = Artifact::load(writeArtifact("a.loomx", p, linearWeights()));
  ASSERT_TRUE(a.lrSchedule.has_value());
  EXPECT_EQ(a.lrSchedule->decay, LrDecay::MultiStep);
  EXPECT_EQ(a.lrSchedule->milestones, (std::vector<int64_t>{2, 7}));

  p["lr_schedule"]["decay"] = "polynomial";
  p["lr_schedule"]["decay_steps"] = 5;
  p["lr_schedule"].erase("gamma");
  EXPECT_CONTAINS(loadError(p), "lr_schedule.milestones: only the multistep "
                                "decay takes milestones");
  p["lr_schedule"].erase("milestones");
  EXPECT_CONTAINS(
      loadError(p),
      "lr_schedule.power: missing: the polynomial decay needs its power");
  p["lr_schedule"]["power"] = -1.0;
  EXPECT_CONTAINS(loadError(p), "lr_schedule.power: must be in [");
  p["lr_schedule"]["power"] = 0.9;
  a = Artifact::load(writeArtifact("b.loomx", p, linearWeights()));
  EXPECT_EQ(a.lrSchedule->decay, LrDecay::Polynomial);
  EXPECT_EQ(a.lrSchedule->power, 0.9);
  EXPECT_EQ(a.lrSchedule->decaySteps, 5);

  // CosineAnnealingWarmRestarts: T_0 is decay_steps, T_mult its own.
  p["lr_schedule"]["decay"] = "cosine-restarts";
  EXPECT_CONTAINS(loadError(p), "lr_schedule.power: only the polynomial "
                                "decay takes a power");
  p["lr_schedule"].erase("power");
  EXPECT_CONTAINS(loadError(p), "lr_schedule.t_mult: missing: the "
                                "cosine-restarts decay needs its t_mult");
  p["lr_schedule"]["t_mult"] = 0;
  EXPECT_CONTAINS(loadError(p),
                  "lr_schedule.t_mult: must be at least 1, found 0");
  p["lr_schedule"]["t_mult"] = 2;
  a = Artifact::load(writeArtifact("c.loomx", p, linearWeights()));
  EXPECT_EQ(a.lrSchedule->decay, LrDecay::CosineRestarts);
  EXPECT_EQ(a.lrSchedule->tMult, 2);
}

// Rprop (version 6) and its `etas` and `step_sizes`, checked as
// torch.optim.Rprop's constructor checks them, and only Rprop's.
TEST(Artifact, RpropKeys) {
  json p = linearProgram(sgdOptimizer());
  p["version"] = 6;
  p["optimizer"]["etas"] = {0.5, 1.2};
  EXPECT_CONTAINS(loadError(p),
                  "optimizer.etas: 'etas' is not a hyperparameter "
                  "of sgd (torch.optim does not take it)");
  p["optimizer"].erase("etas");
  p["optimizer"]["name"] = "rprop";
  p["version"] = 5;
  EXPECT_CONTAINS(loadError(p), "optimizer.name: 'rprop' needs format version "
                                "6 (this program is version 5)");
  p["version"] = 6;
  p["optimizer"]["etas"] = {0.5, 0.9};
  EXPECT_CONTAINS(loadError(p), "optimizer.etas: must satisfy 0 < etaminus < "
                                "1 < etaplus, found [0.500000, 0.900000]");
  p["optimizer"]["etas"] = {0.5};
  EXPECT_CONTAINS(loadError(p),
                  "optimizer.etas: expected two numbers, found [0.5]");
  p["optimizer"]["etas"] = {0.4, 1.3};
  p["optimizer"]["step_sizes"] = {1.0, 0.5};
  EXPECT_CONTAINS(loadError(p), "optimizer.step_sizes: must satisfy 0 <= min "
                                "<= max, found [1.000000, 0.500000]");
}

TEST(Artifact, ASGDKeys) {
  json p = linearProgram(sgdOptimizer());
  p["version"] = 7;
  p["optimizer"]["t0"] = 10.0;
  EXPECT_CONTAINS(loadError(p), "optimizer.t0: 't0' is not a hyperparameter "
                                "of sgd (torch.optim does not take it)");
  p["optimizer"].erase("t0");
  p["optimizer"]["name"] = "asgd";
  p["version"] = 6;
  EXPECT_CONTAINS(loadError(p), "optimizer.name: 'asgd' needs format version "
                                "7 (this program is version 6)");
  p["version"] = 7;
  p["optimizer"]["lambd"] = "0.1";
  EXPECT_CONTAINS(loadError(p), "optimizer.lambd: expected a number");
  p["optimizer"]["lambd"] = -0.5; // torch.optim.ASGD takes it
  p["optimizer"]["alpha"] = nullptr;
  EXPECT_CONTAINS(loadError(p), "optimizer.alpha: expected a number");
}

TEST(Artifact, MissingField) {
  json p = linearProgram(sgdOptimizer());
  p.erase("num_slots");
  EXPECT_CONTAINS(loadError(p), "num_slots: missing");
}

TEST(Artifact, UnknownFieldInInstruction) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 1)["kwarg"] = json::object();
  EXPECT_CONTAINS(loadError(p),
                  "programs[0].instructions[1].kwarg: unknown field");
}

TEST(Artifact, SlotOutOfRange) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 1)["args"][1] = {{"tensor", 912}};
  EXPECT_CONTAINS(loadError(p),
                  "programs[0].instructions[1].args[1] (in 'addmm'): "
                  "slot 912 out of range (16 slots)");
}

TEST(Artifact, NegativeSlotInResults) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 0)["results"] = {-1};
  EXPECT_CONTAINS(loadError(p),
                  "programs[0].instructions[0].results[0] (in 't'): "
                  "slot -1 out of range");
}

TEST(Artifact, SlotOutOfRangeInInputs) {
  json p = linearProgram(sgdOptimizer());
  p["inputs"][3]["slot"] = 16;
  EXPECT_CONTAINS(loadError(p),
                  "inputs[3].slot: slot 16 out of range (16 slots)");
}

TEST(Artifact, ReadBeforeWrite) {
  json p = linearProgram(sgdOptimizer());
  std::swap(instruction(p, 0), instruction(p, 1));
  EXPECT_CONTAINS(loadError(p),
                  "programs[0].instructions[0].args[2] (in 'addmm'): "
                  "slot 5 is read before it is written");
}

TEST(Artifact, ReadAfterFree) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 9)["slots"] = {5, 6, 9, 10, 11, 12};
  EXPECT_CONTAINS(loadError(p),
                  "programs[0].instructions[10].grad: slot 12 is read "
                  "before it is written (or after it is freed)");
}

TEST(Artifact, FreeTwice) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 9)["slots"] = {5, 5};
  EXPECT_CONTAINS(loadError(p),
                  "programs[0].instructions[9].slots[1]: slot 5 holds "
                  "no value to free");
}

TEST(Artifact, UnknownDtype) {
  json p = linearProgram(sgdOptimizer());
  p["inputs"][0]["dtype"] = "float32";
  EXPECT_CONTAINS(loadError(p), "inputs[0].dtype: unknown dtype "
                                "'float32'");
}

TEST(Artifact, NegativeDimension) {
  json p = linearProgram(sgdOptimizer());
  p["inputs"][0]["shape"] = {3, -6};
  EXPECT_CONTAINS(loadError(p), "inputs[0].shape[1]: dimension -6 is "
                                "negative");
}

TEST(Artifact, BatchIndexOnParameter) {
  json p = linearProgram(sgdOptimizer());
  p["inputs"][0]["batch_index"] = 0;
  EXPECT_CONTAINS(loadError(p), "inputs[0].batch_index: only inputs "
                                "with role 'input'");
}

TEST(Artifact, TwoInputsOneSlot) {
  json p = linearProgram(sgdOptimizer());
  p["inputs"][1]["slot"] = 0;
  EXPECT_CONTAINS(loadError(p), "inputs[1].slot: slot 0 is also bound "
                                "by inputs[0]");
}

TEST(Artifact, ProgramsPerRank) {
  json p = linearProgram(sgdOptimizer());
  p["world_size"] = 2;
  EXPECT_CONTAINS(loadError(p), "programs: has 1 programs for "
                                "world_size 2");
}

TEST(Artifact, NoLoss) {
  json p = linearProgram(sgdOptimizer());
  p["outputs"].erase(0);
  EXPECT_CONTAINS(loadError(p), "expected exactly one output with "
                                "role 'loss', found 0");
}

TEST(Artifact, GradTargetIsNotAParameter) {
  json p = linearProgram(sgdOptimizer());
  p["outputs"][2]["target"] = "calls";
  EXPECT_CONTAINS(loadError(p), "outputs[2].target: 'calls' is not a "
                                "parameter input");
}

TEST(Artifact, OutputOfFreedSlot) {
  json p = linearProgram(sgdOptimizer());
  p["outputs"][0]["slot"] = 6;
  EXPECT_CONTAINS(loadError(p), "outputs[0].slot: slot 6 holds no "
                                "value after the last instruction");
}

TEST(Artifact, ArgWithTwoKinds) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 2)["args"][2] = {{"int", 1}, {"float", 1.0}};
  EXPECT_CONTAINS(loadError(p),
                  "programs[0].instructions[2].args[2] (in "
                  "'mse_loss'): an ARG is an object with exactly one "
                  "key");
}

TEST(Artifact, UnknownArgKind) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 2)["args"][2] = {{"integer", 1}};
  EXPECT_CONTAINS(loadError(p), "unknown ARG kind 'integer'");
}

TEST(Artifact, IntArgMustBeIntegral) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 2)["args"][2] = {{"int", 1.5}};
  EXPECT_CONTAINS(loadError(p), "args[2].int (in 'mse_loss'): expected "
                                "an integer, found 1.5");
}

TEST(Artifact, FloatArgStrings) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 2)["args"][2] = {{"float", "Infinity"}};
  EXPECT_CONTAINS(loadError(p), "expected a number or \"inf\", "
                                "\"-inf\", \"nan\", found "
                                "\"Infinity\"");
}

TEST(Artifact, UnknownInstruction) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 9)["op"] = "all_reduce";
  EXPECT_CONTAINS(loadError(p), "programs[0].instructions[9].op: "
                                "unknown instruction 'all_reduce'");
}

TEST(Artifact, StreamOutOfRange) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 0)["stream"] = 1;
  EXPECT_CONTAINS(loadError(p), "programs[0].instructions[0].stream (in "
                                "'t'): stream 1 out of range (1 "
                                "streams)");
}

TEST(Artifact, OneStreamInVersion1) {
  json p = linearProgram(sgdOptimizer());
  p["programs"][0]["streams"] = {"compute", "comm"};
  EXPECT_CONTAINS(loadError(p),
                  "programs[0].streams: has 2 streams; a version 1 program "
                  "has exactly one");
}

TEST(Artifact, UnknownPhase) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 0)["phase"] = "recompute";
  EXPECT_CONTAINS(loadError(p), "unknown phase 'recompute'");
}

// --- Optimizer -------------------------------------------------------------

TEST(Artifact, UnknownOptimizer) {
  json o = sgdOptimizer();
  o["name"] = "lion";
  json p = linearProgram(o);
  p["version"] = 6;
  EXPECT_CONTAINS(loadError(p),
                  "optimizer.name: unknown optimizer 'lion' (version 6 has "
                  "sgd, adam, adamw, rmsprop, adagrad, adadelta, adamax, "
                  "radam, nadam, rprop)");
  p["version"] = 7;
  EXPECT_CONTAINS(loadError(p), "(version 7 has sgd, adam, adamw, rmsprop, "
                                "adagrad, adadelta, adamax, radam, nadam, "
                                "rprop, asgd)");
  p["version"] = 1;
  EXPECT_CONTAINS(loadError(p), "unknown optimizer 'lion' (version 1 has sgd, "
                                "adam, adamw)");
}

TEST(Artifact, OptimizerHyperparameterMissing) {
  json p = linearProgram(sgdOptimizer());
  p["optimizer"].erase("dampening");
  EXPECT_CONTAINS(loadError(p), "optimizer.dampening: missing");
}

TEST(Artifact, NesterovWithoutMomentum) {
  json o = sgdOptimizer(0.0);
  o["nesterov"] = true;
  EXPECT_CONTAINS(loadError(linearProgram(o)),
                  "Nesterov momentum requires a momentum");
}

TEST(Artifact, BetaOutOfRange) {
  json o = sgdOptimizer();
  o["betas"] = {0.9, 1.0};
  EXPECT_CONTAINS(loadError(linearProgram(o)),
                  "optimizer.betas[1]: must be in [0, 1)");
}

/// The linear program with a format-4 optimizer: `name`, SGD's keys and
/// `extra`.
json programOf(const std::string &name, json extra = json::object()) {
  json o = sgdOptimizer(0.0);
  o["name"] = name;
  o.update(extra);
  json p = linearProgram(o);
  p["version"] = 4;
  return p;
}

TEST(Artifact, RMSpropAndAdagradLoad) {
  Artifact a = Artifact::load(writeArtifact(
      "a.loomx",
      programOf("rmsprop",
                {{"momentum", 0.9}, {"centered", true}, {"alpha", 0.9}}),
      linearWeights()));
  ASSERT_TRUE(a.optimizer);
  EXPECT_EQ(a.optimizer->kind, OptimizerKind::RMSprop);
  EXPECT_EQ(a.optimizer->alpha, 0.9);
  EXPECT_EQ(
      a.optimizer->stateNames(),
      (std::vector<std::string>{"square_avg", "momentum_buffer", "grad_avg"}));
  Artifact b = Artifact::load(
      writeArtifact("b.loomx",
                    programOf("adagrad", {{"initial_accumulator_value", 0.5},
                                          {"lr_decay", 0.1}}),
                    linearWeights()));
  EXPECT_EQ(b.optimizer->initialAccumulatorValue, 0.5);
  EXPECT_EQ(b.programs[0].state[0].init, StateInit::InitialAccumulatorValue);
}

TEST(Artifact, AdadeltaRhoIsChecked) {
  Artifact a = Artifact::load(writeArtifact(
      "a.loomx", programOf("adadelta", {{"rho", 0.5}}), linearWeights()));
  EXPECT_EQ(a.optimizer->kind, OptimizerKind::Adadelta);
  EXPECT_EQ(a.optimizer->rho, 0.5);
  EXPECT_EQ(a.optimizer->stateNames(),
            (std::vector<std::string>{"square_avg", "acc_delta"}));
  // torch.optim.Adadelta's constructor: 0 <= rho <= 1.
  EXPECT_CONTAINS(loadError(programOf("adadelta", {{"rho", 1.5}})),
                  "optimizer.rho: must be in [0, 1], found 1.5");
}

TEST(Artifact, AnotherAlgorithmsKeyIsRefused) {
  // Each optional key belongs to the algorithms that take it
  // (LOOMX_OPTIMIZER_KEY); elsewhere it would be silently ignored.
  EXPECT_CONTAINS(loadError(programOf("adam", {{"rho", 0.5}})),
                  "optimizer.rho: 'rho' is not a hyperparameter of adam");
  EXPECT_CONTAINS(
      loadError(programOf("sgd", {{"amsgrad", false}})),
      "optimizer.amsgrad: 'amsgrad' is not a hyperparameter of sgd");
  EXPECT_CONTAINS(
      loadError(programOf("adamw", {{"decoupled_weight_decay", true}})),
      "optimizer.decoupled_weight_decay: 'decoupled_weight_decay' is not a "
      "hyperparameter of adamw");
}

TEST(Artifact, AmsgradTakesThreeStateSlots) {
  json p = programOf("adam", {{"amsgrad", true}});
  EXPECT_EQ(Artifact::load(writeArtifact("a.loomx", p, linearWeights()))
                .optimizer->numStateSlots(),
            3u);
  // The same program read as plain Adam has one state slot too many.
  p["optimizer"].erase("amsgrad");
  EXPECT_CONTAINS(loadError(p),
                  "programs[0].instructions[10].state: adam with these "
                  "hyperparameters takes [exp_avg, exp_avg_sq], found 3 "
                  "slots");
}

TEST(Artifact, FusedRMSpropIsRefused) {
  json p = programOf("rmsprop", {{"impl", "fused"}});
  EXPECT_CONTAINS(loadError(p),
                  "optimizer.impl: rmsprop has no fused implementation");
}

TEST(Artifact, AccumulatorInitNeedsAdagrad) {
  json p = programOf("rmsprop");
  p["state"][0]["init"] = "initial_accumulator_value";
  EXPECT_CONTAINS(loadError(p),
                  "state[0].init: unknown init 'initial_accumulator_value' "
                  "(expected \"zeros\", or \"initial_accumulator_value\" "
                  "with adagrad)");
}

TEST(Artifact, Version4IsNeeded) {
  json p = programOf("adam", {{"amsgrad", false}});
  p["version"] = 3;
  EXPECT_CONTAINS(loadError(p), "optimizer.amsgrad: 'amsgrad' needs format "
                                "version 4 (this program is version 3)");
  p = programOf("adagrad");
  p["version"] = 3;
  EXPECT_CONTAINS(loadError(p), "optimizer.name: 'adagrad' needs format "
                                "version 4 (this program is version 3)");
}

TEST(Artifact, OptimizerStateCount) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 10)["state"] = json::array();
  EXPECT_CONTAINS(loadError(p),
                  "programs[0].instructions[10].state: sgd with these "
                  "hyperparameters takes [momentum_buffer], found 0 slots");
}

TEST(Artifact, OptimizerStateOfAnotherParameter) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 10)["state"] = {15};
  EXPECT_CONTAINS(loadError(p), "state 'fc.bias.s0' belongs to "
                                "'fc.bias', not 'fc.weight'");
}

TEST(Artifact, OptimizerInstructionWithoutOptimizer) {
  json p = linearProgram(sgdOptimizer());
  p["optimizer"] = nullptr;
  EXPECT_CONTAINS(loadError(p), "programs[0].instructions[10]: an "
                                "optimizer instruction, but the "
                                "artifact's optimizer is null");
}

TEST(Artifact, OptimizerParamSlot) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 10)["param_slot"] = 1;
  EXPECT_CONTAINS(loadError(p), "param_slot: slot 1 is not the slot of "
                                "'fc.weight'");
}

TEST(Artifact, NoOptimizerLoads) {
  std::string path =
      writeArtifact("a.loomx", linearProgram(nullptr), linearWeights());
  Artifact a = Artifact::load(path);
  EXPECT_FALSE(a.optimizer);
  EXPECT_TRUE(a.programs[0].state.empty());
}

// --- Weights ---------------------------------------------------------------

TEST(Artifact, WeightMissing) {
  NamedTensors w = linearWeights();
  w.erase(w.begin() + 1);
  EXPECT_CONTAINS(loadError(linearProgram(sgdOptimizer()), w),
                  "weights section has no tensor 'fc.bias' (inputs[1], "
                  "a parameter)");
}

TEST(Artifact, WeightDtypeMismatch) {
  NamedTensors w = linearWeights();
  w[0].second = w[0].second.to(at::kDouble);
  EXPECT_CONTAINS(loadError(linearProgram(sgdOptimizer()), w),
                  "weights section has 'fc.weight' as f64 [3, 6] but "
                  "inputs[0] declares f32 [3, 6]");
}

TEST(Artifact, WeightShapeMismatch) {
  NamedTensors w = linearWeights();
  w[0].second = w[0].second.t();
  EXPECT_CONTAINS(loadError(linearProgram(sgdOptimizer()), w),
                  "'fc.weight' as f32 [6, 3] but inputs[0] declares "
                  "f32 [3, 6]");
}

TEST(Artifact, ExtraWeight) {
  NamedTensors w = linearWeights();
  w.emplace_back("head.weight", at::zeros({2}));
  EXPECT_CONTAINS(loadError(linearProgram(sgdOptimizer()), w),
                  "weights section has tensor 'head.weight', which no "
                  "parameter, buffer or constant input names");
}

TEST(Artifact, WeightsSectionCorrupt) {
  std::string weights = validWeights();
  weights[0] = char(0xff); // header length now exceeds the section
  std::string path =
      writeFile("a.loomx", ArtifactBytes().build(validProgram(), weights));
  EXPECT_CONTAINS(errorOf([&] { Artifact::load(path); }), "weights section");
}

// --- Binding against the dispatcher (Session::load) ------------------------

TEST(Artifact, UnknownKernel) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 1)["kernel"] = "aten::addmmm";
  EXPECT_CONTAINS(sessionError(p),
                  "programs[0].instructions[1] (in 'addmm'): unknown "
                  "kernel aten::addmmm.default");
}

TEST(Artifact, UnknownOverload) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 8)["overload"] = "dim_Intlist";
  EXPECT_CONTAINS(sessionError(p),
                  "programs[0].instructions[8] (in 'sum'): unknown "
                  "kernel aten::sum.dim_Intlist");
}

TEST(Artifact, UnqualifiedKernel) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 1)["kernel"] = "addmm";
  EXPECT_CONTAINS(loadError(p), "is not a qualified operator name");
}

TEST(Artifact, ResultsCountMismatch) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 1)["results"] = {6, nullptr};
  EXPECT_CONTAINS(sessionError(p),
                  "programs[0].instructions[1] (in 'addmm') "
                  "aten::addmm.default: results has 2 entries, but the "
                  "operator returns 1");
}

TEST(Artifact, ArgKindMismatch) {
  json p = linearProgram(sgdOptimizer());
  instruction(p, 2)["args"][2] = {{"float", 1.0}};
  EXPECT_CONTAINS(sessionError(p),
                  "aten::mse_loss.default args[2]: a 'float' ARG cannot "
                  "fill argument 'reduction' of type int");
}

TEST(Artifact, WorldSizeTwoIsRefusedBySession) {
  json p = linearProgram(sgdOptimizer());
  p["world_size"] = 2;
  json second = p["programs"][0];
  second["rank"] = 1;
  p["programs"].push_back(second);
  std::string path = writeArtifact("a.loomx", p, linearWeights());
  EXPECT_NO_THROW(Artifact::load(path));
  EXPECT_CONTAINS(errorOf([&] { Session::load(path); }),
                  "world_size is 2 but this process is a single rank (run "
                  "it with loom-run --nproc 2)");
}

} // namespace

TEST(Artifact, DeviceDefaultsToCpu) {
  json p = linearProgram(sgdOptimizer());
  std::string path = writeArtifact("a.loomx", p, linearWeights());
  EXPECT_EQ(Artifact::load(path).device, DeviceKind::Cpu);
}

TEST(Artifact, DeviceIsRead) {
  for (auto [name, kind] : {std::pair{"cpu", DeviceKind::Cpu},
                            std::pair{"cuda", DeviceKind::Cuda}}) {
    json p = linearProgram(sgdOptimizer());
    p["version"] = 3;
    p["device"] = name;
    std::string path = writeArtifact("a.loomx", p, linearWeights());
    Artifact a = Artifact::load(path);
    EXPECT_EQ(a.device, kind) << name;
    EXPECT_STREQ(toString(a.device), name);
  }
}

TEST(Artifact, UnknownDevice) {
  json p = linearProgram(sgdOptimizer());
  p["version"] = 3;
  p["device"] = "cuda:0";
  EXPECT_CONTAINS(loadError(p),
                  "device: unknown device 'cuda:0' (expected cpu or cuda)");
  p["device"] = 1;
  EXPECT_CONTAINS(loadError(p), "device: ");
}

TEST(Artifact, KernelWorkspaceThreads) {
  json p = linearProgram(sgdOptimizer());
  p["version"] = 3;
  EXPECT_FALSE(Artifact::load(writeArtifact("a.loomx", p, linearWeights()))
                   .kernelWorkspaceThreads);
  p["kernel_workspace_threads"] = 4;
  EXPECT_EQ(Artifact::load(writeArtifact("a.loomx", p, linearWeights()))
                .kernelWorkspaceThreads,
            4);
  p["kernel_workspace_threads"] = 0;
  EXPECT_CONTAINS(loadError(p), "kernel_workspace_threads: must be at least 1");
  p["kernel_workspace_threads"] = "two";
  EXPECT_CONTAINS(loadError(p), "kernel_workspace_threads: ");
}

TEST(Artifact, MemoryBudget) {
  json p = linearProgram(sgdOptimizer());
  p["version"] = 3;
  EXPECT_FALSE(
      Artifact::load(writeArtifact("a.loomx", p, linearWeights())).memoryBudget);
  p["memory_budget"] = 1 << 20;
  EXPECT_EQ(
      Artifact::load(writeArtifact("a.loomx", p, linearWeights())).memoryBudget,
      1 << 20);
  p["memory_budget"] = 0;
  EXPECT_CONTAINS(loadError(p), "memory_budget: must be at least 1");
  p["memory_budget"] = "lots";
  EXPECT_CONTAINS(loadError(p), "memory_budget: ");
  p["version"] = 2;
  p["memory_budget"] = 1024;
  EXPECT_CONTAINS(loadError(p), "'memory_budget' needs format version 3");
}

TEST(Artifact, DeviceNeedsVersion3) {
  json p = linearProgram(sgdOptimizer());
  p["version"] = 2;
  p["device"] = "cuda";
  EXPECT_CONTAINS(loadError(p), "device: 'device' needs format version 3");
}
