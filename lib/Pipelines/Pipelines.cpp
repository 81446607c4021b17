//===- Pipelines.cpp - Named Loom pass pipelines and their options --------===//

#include "loom/Pipelines/Pipelines.h"

#include "loom/Support/ByteSize.h"
#include "loom/Transforms/Pipeline/Schedule.h"

#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/LoomRT/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ManagedStatic.h"

#include <cstdlib>
#include <type_traits>

using namespace mlir;
using namespace loom;

//===----------------------------------------------------------------------===//
// The three forms of the options
//===----------------------------------------------------------------------===//

CompileOptions CompilePipelineOptions::getCompileOptions() const {
  CompileOptions options;
#define LOOM_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)                          \
  options.FIELD = FIELD;                                                       \
  if (FIELD.hasValue())                                                        \
    options.given.insert(FLAG);
#define LOOM_PASS_LIST_OPTION(PASS, TYPE, FIELD, FLAG, DESC)                   \
  options.FIELD.assign(FIELD.begin(), FIELD.end());                            \
  if (FIELD.hasValue())                                                        \
    options.given.insert(FLAG);
#include "loom/Pipelines/CompileOptions.def"
  return options;
}

namespace {
/// loom-compile's command line: the same list as plain `cl::opt`s.
struct CompileCLOptions {
#define LOOM_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)                          \
  llvm::cl::opt<TYPE> FIELD{FLAG, llvm::cl::desc(DESC),                        \
                            llvm::cl::init(DEFAULT),                           \
                            llvm::cl::cat(getCompileCLCategory())};
#define LOOM_ENUM_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC, VALUES)             \
  llvm::cl::opt<TYPE> FIELD{FLAG, llvm::cl::desc(DESC),                        \
                            llvm::cl::init(DEFAULT), VALUES,                   \
                            llvm::cl::cat(getCompileCLCategory())};
#define LOOM_PASS_LIST_OPTION(PASS, TYPE, FIELD, FLAG, DESC)                   \
  llvm::cl::list<TYPE> FIELD{FLAG, llvm::cl::desc(DESC),                       \
                             llvm::cl::CommaSeparated,                         \
                             llvm::cl::cat(getCompileCLCategory())};
#include "loom/Pipelines/CompileOptions.def"
};
} // namespace

static llvm::ManagedStatic<CompileCLOptions> clOptions;

llvm::cl::OptionCategory &loom::getCompileCLCategory() {
  static llvm::cl::OptionCategory category("loom-compile options");
  return category;
}

void loom::registerCompileCLOptions() { *clOptions; }

CompileOptions loom::getCompileOptionsFromCL() {
  assert(clOptions.isConstructed() && "registerCompileCLOptions not called");
  CompileOptions options;
#define LOOM_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)                          \
  options.FIELD = clOptions->FIELD;                                            \
  if (clOptions->FIELD.getNumOccurrences())                                    \
    options.given.insert(FLAG);
#define LOOM_PASS_LIST_OPTION(PASS, TYPE, FIELD, FLAG, DESC)                   \
  options.FIELD.assign(clOptions->FIELD.begin(), clOptions->FIELD.end());      \
  if (clOptions->FIELD.getNumOccurrences())                                    \
    options.given.insert(FLAG);
#include "loom/Pipelines/CompileOptions.def"
  return options;
}

/// The Loom<PASS>Options of one pass with every LOOM_PASS_* compile option
/// of that pass copied in: what makes a compile option of a pass one line in
/// CompileOptions.def.
template <typename PassOptions>
static PassOptions forwardToPass(const CompileOptions &options) {
  PassOptions pass;
#define LOOM_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)
#define LOOM_ENUM_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC, VALUES)
#define LOOM_PASS_OPTION(PASS, TYPE, FIELD, FLAG, DESC)                        \
  if constexpr (std::is_same_v<PassOptions, Loom##PASS##Options>)              \
    pass.FIELD = options.FIELD;
#define LOOM_PASS_ENUM_OPTION(PASS, TYPE, FIELD, FLAG, DESC, VALUES)           \
  LOOM_PASS_OPTION(PASS, TYPE, FIELD, FLAG, DESC)
#define LOOM_PASS_LIST_OPTION(PASS, TYPE, FIELD, FLAG, DESC)                   \
  if constexpr (std::is_same_v<PassOptions, Loom##PASS##Options>)              \
    pass.FIELD.assign(options.FIELD.begin(), options.FIELD.end());
#include "loom/Pipelines/CompileOptions.def"
  return pass;
}

//===----------------------------------------------------------------------===//
// Checking and completing the options
//===----------------------------------------------------------------------===//

LogicalResult loom::verifyCompileOptions(
    const CompileOptions &options,
    function_ref<LogicalResult(const Twine &)> emitError) {
  bool fsdp = options.dp == DataParallel::Fsdp;
  if (options.worldSize < 1)
    return emitError("world-size must be at least 1, got " +
                     Twine(options.worldSize));
  if (options.dp == DataParallel::None && options.worldSize != 1)
    return emitError("world-size " + Twine(options.worldSize) +
                     " needs a data parallelism (dp=replicate or fsdp)");
  if (options.replicateSize < 1 ||
      options.worldSize % options.replicateSize != 0)
    return emitError("replicate-size " + Twine(options.replicateSize) +
                     " must be at least 1 and divide world-size " +
                     Twine(options.worldSize));
  if (options.replicateSize != 1 && !fsdp)
    return emitError("replicate-size (HSDP) needs dp=fsdp");
  if (options.microbatches < 1)
    return emitError("microbatches must be at least 1, got " +
                     Twine(options.microbatches));
  if (options.ppRanks < 0)
    return emitError("pp must not be negative, got " + Twine(options.ppRanks));
  if (options.impl == OptimizerImpl::Fused && options.isGiven("optimizer") &&
      options.optimizer == OptimizerKind::None)
    return emitError("optimizer-impl=fused needs an optimizer (optimizer=none "
                     "returns the gradients)");
  if (options.ppRanks > 1) {
    llvm::Expected<pipeline::ScheduleKind> kind =
        pipeline::parseScheduleKind(options.ppSchedule);
    if (!kind)
      return emitError("pp-schedule: " + llvm::toString(kind.takeError()));
    // World-size counts every rank of the [pp, dp] mesh.
    if (options.dp != DataParallel::None &&
        options.worldSize % options.ppRanks != 0)
      return emitError("world-size " + Twine(options.worldSize) +
                       " must be a multiple of pp " + Twine(options.ppRanks) +
                       " (pp x data-parallel ranks)");
    // DDP over one rank per stage has nothing to do and is left out; FSDP
    // would shard nothing, and its mixed precision would change the step,
    // so say so rather than drop it.
    if (fsdp && options.worldSize == options.ppRanks)
      return emitError(
          "dp=fsdp with pp " + Twine(options.ppRanks) + " on " +
          Twine(options.worldSize) +
          " ranks leaves one data-parallel rank per stage, so FSDP has "
          "nothing to shard; capture with --split N for N data-parallel "
          "ranks per stage (world-size N x pp), or leave dp out");
    if (fsdp && options.reshardAfterForward != "auto" &&
        options.reshardAfterForward != "false" &&
        options.reshardAfterForward != "1")
      return emitError("reshard-after-forward=" + options.reshardAfterForward +
                       " with pp: a stage stays unsharded from its first "
                       "forward to REDUCE_GRAD; use auto or false");
  } else if (options.isGiven("pp-schedule") || options.isGiven("pp-stages") ||
             !options.ppBoundaries.empty()) {
    return emitError("pp-schedule, pp-stages and pp-boundaries need pp > 1");
  }
  if (!options.reshardAfterBackward && !fsdp)
    return emitError("reshard-after-backward=false needs dp=fsdp");
  if (options.bucketCapMb < 0)
    return emitError("bucket-cap-mb must not be negative");
  bool units = options.grouping == ReplicateGrouping::Units;
  if (units && options.dp != DataParallel::Replicate)
    return emitError("grouping=units needs dp=replicate (it groups "
                     "replicate's all-reduces; dp=fsdp always reduces per "
                     "unit)");
  if (units && (options.isGiven("bucket-cap-mb") ||
                options.isGiven("first-bucket-cap-mb")))
    return emitError("bucket-cap-mb and first-bucket-cap-mb size DDP's "
                     "buckets; grouping=units reduces one unit at a time");
  if (units && options.ppRanks > 1)
    return emitError("grouping=units with pp is not supported yet");
  if (options.commHook != CommHook::Allreduce &&
      (options.dp != DataParallel::Replicate || units))
    return emitError("comm-hook is a DDP communication hook: it needs "
                     "dp=replicate with grouping=buckets");
  if (options.commHook != CommHook::Allreduce && options.ppRanks > 1)
    return emitError("comm-hook with pp is not supported yet");
  if (options.broadcastBuffers &&
      (options.dp != DataParallel::Replicate || units))
    return emitError("broadcast-buffers is DDP's broadcast_buffers: it needs "
                     "dp=replicate with grouping=buckets (fully_shard and "
                     "FSDP2's replicate keep each rank's buffers)");
  if (options.broadcastBuffers && options.ppRanks > 1)
    return emitError("broadcast-buffers with pp is not supported yet");
  if (options.dp == DataParallel::Replicate && !units &&
      (!options.units.empty() || !options.unitSettings.empty()))
    return emitError("units and unit-settings with dp=replicate need "
                     "grouping=units");
  if (options.forwardPrefetch < 0)
    return emitError("forward-prefetch must not be negative, got " +
                     Twine(options.forwardPrefetch));
  if (options.bucketBytes < 0)
    return emitError("bucket-bytes must not be negative, got " +
                     Twine(options.bucketBytes));
  if (!fsdp && (options.forwardPrefetch != 0 ||
                options.backwardPrefetch != BackwardPrefetch::Bounded ||
                options.bucketBytes != 0 || !options.forwardTargets.empty() ||
                !options.backwardTargets.empty()))
    return emitError("forward-prefetch, backward-prefetch, forward-targets, "
                     "backward-targets and bucket-bytes need dp=fsdp");
  if (options.maxInFlight < 1)
    return emitError("max-in-flight must be at least 1, got " +
                     Twine(options.maxInFlight));
  if (options.firstBucketCapMb < 0)
    return emitError("first-bucket-cap-mb must not be negative");
  bool budget = !options.sacBudget.empty();
  if (budget && options.rematMode != RematMode::None)
    return emitError("recompute-budget chooses what to recompute itself; "
                     "leave remat at none");
  if (budget && parseByteSize(options.sacBudget) <= 0)
    return emitError("recompute-budget '" + options.sacBudget +
                     "' is not a byte count such as 1073741824, 512MiB or "
                     "1.6GiB");
  if (!budget && (options.isGiven("recompute-time-limit") ||
                  options.isGiven("recompute-gap") || options.sacReport))
    return emitError("recompute-time-limit, recompute-gap and "
                     "recompute-report need recompute-budget");
  if (!options.rematModules.empty() && !budget &&
      options.rematMode != RematMode::Full &&
      options.rematMode != RematMode::Selective)
    return emitError("remat-modules needs remat=full, remat=selective or "
                     "recompute-budget");
  if (!options.rematSaveOps.empty() && options.rematMode == RematMode::None)
    return emitError("remat-save-ops needs remat=full, selective or captured");
  // Only a cost model reads the measured times.
  if (!options.opTimes.empty() && !budget && !options.schedule)
    return emitError("op-times needs recompute-budget or schedule (the "
                     "passes that price ops)");
  return success();
}

namespace loom {
/// How a value appears in the contradiction error: as the flag takes it.
static std::string formatOptionValue(double v) {
  // The shortest text that reads back as `v`, as the flag would be typed.
  for (int digits = 6; digits < 17; ++digits) {
    std::string text = llvm::formatv("{0}", llvm::format("%.*g", digits, v));
    if (std::strtod(text.c_str(), nullptr) == v)
      return text;
  }
  return llvm::formatv("{0}", llvm::format("%.17g", v)).str();
}
static std::string formatOptionValue(int64_t v) { return std::to_string(v); }
static std::string formatOptionValue(bool v) { return v ? "true" : "false"; }
static std::string formatOptionValue(OptimizerKind v) {
  return stringifyOptimizerKind(v).str();
}
static std::string formatOptionValue(OptimizerImpl v) {
  return stringifyOptimizerImpl(v).str();
}
static std::string formatOptionValue(LrDecay v) {
  return stringifyLrDecay(v).str();
}
static std::string formatOptionValue(const std::string &v) { return v; }
static std::string formatOptionValue(const std::vector<int64_t> &v) {
  return llvm::join(
      llvm::map_range(v, [](int64_t i) { return std::to_string(i); }), ",");
}
} // namespace loom

namespace {
/// Fills options the user did not give from the run configuration and
/// reports those that contradict it.
class RunConfigApplier {
public:
  RunConfigApplier(CompileOptions &options, ModuleOp module)
      : options(options), module(module) {}

  template <typename T>
  LogicalResult take(StringRef flag, T &field, T captured, StringRef what) {
    if (!options.isGiven(flag)) {
      field = captured;
      return success();
    }
    if (field == captured)
      return success();
    std::string recorded = formatOptionValue(captured);
    return module.emitError()
           << "--" << flag << "=" << formatOptionValue(field)
           << " contradicts the run configuration captured with the step ("
           << what << " = " << recorded << "); compile with --" << flag << "="
           << recorded << " or capture again";
  }

  LogicalResult takeOptimizer(Attribute optimizer);
  LogicalResult takeLrSchedule(DictionaryAttr schedule);

private:
  CompileOptions &options;
  ModuleOp module;
};
} // namespace

LogicalResult RunConfigApplier::takeOptimizer(Attribute optimizer) {
  std::optional<OptimizerConfig> c = getOptimizerConfig(optimizer);
  // The attribute is an optimizer (the run configuration's verifier), so
  // its name parses.
  OptimizerKind kind = *parseOptimizerKind(c->name);
  if (failed(take("optimizer", options.optimizer, kind, "optimizer")))
    return failure();
  // The hyperparameters below are the captured algorithm's; the algorithm
  // itself matched above. Each is taken only by the algorithms that have it
  // (an option of another algorithm given on the command line is left for
  // loom-attach-optimizer to refuse), left to right, stopping at the first
  // contradiction.
  auto takeIf = [&](StringRef flag, auto &field, auto captured,
                    StringRef what) {
    return optimizerTakes(kind, flag) ? take(flag, field, captured, what)
                                      : success();
  };
  return success(
      succeeded(takeIf("lr", options.lr, c->lr, "lr")) &&
      succeeded(
          takeIf("momentum", options.momentum, c->momentum, "momentum")) &&
      succeeded(
          takeIf("dampening", options.dampening, c->dampening, "dampening")) &&
      succeeded(
          takeIf("nesterov", options.nesterov, c->nesterov, "nesterov")) &&
      succeeded(takeIf("beta1", options.beta1, c->beta1, "betas[0]")) &&
      succeeded(takeIf("beta2", options.beta2, c->beta2, "betas[1]")) &&
      succeeded(takeIf("eps", options.eps, c->eps, "eps")) &&
      succeeded(takeIf("amsgrad", options.amsgrad, c->amsgrad, "amsgrad")) &&
      succeeded(takeIf("alpha", options.alpha, c->alpha, "alpha")) &&
      succeeded(
          takeIf("centered", options.centered, c->centered, "centered")) &&
      succeeded(takeIf("adagrad-lr-decay", options.adagradLrDecay, c->lrDecay,
                       "lr_decay")) &&
      succeeded(
          takeIf("initial-accumulator-value", options.initialAccumulatorValue,
                 c->initialAccumulatorValue, "initial_accumulator_value")) &&
      succeeded(takeIf("decoupled-weight-decay", options.decoupledWeightDecay,
                       c->decoupledWeightDecay, "decoupled_weight_decay")) &&
      succeeded(takeIf("rho", options.rho, c->rho, "rho")) &&
      succeeded(takeIf("momentum-decay", options.momentumDecay,
                       c->momentumDecay, "momentum_decay")) &&
      succeeded(takeIf("etaminus", options.etaminus, c->etaminus, "etas[0]")) &&
      succeeded(takeIf("etaplus", options.etaplus, c->etaplus, "etas[1]")) &&
      succeeded(takeIf("step-size-min", options.stepSizeMin, c->stepSizeMin,
                       "step_sizes[0]")) &&
      succeeded(takeIf("step-size-max", options.stepSizeMax, c->stepSizeMax,
                       "step_sizes[1]")) &&
      succeeded(takeIf("lambd", options.lambd, c->lambd, "lambd")) &&
      succeeded(takeIf("t0", options.t0, c->t0, "t0")) &&
      succeeded(takeIf("weight-decay", options.weightDecay, c->weightDecay,
                       "weight_decay")) &&
      succeeded(takeIf("maximize", options.maximize, c->maximize, "maximize")));
}

LogicalResult RunConfigApplier::takeLrSchedule(DictionaryAttr schedule) {
  auto integer = [&](StringRef key) {
    auto attr = schedule.getAs<IntegerAttr>(key);
    return attr ? attr.getInt() : int64_t(0);
  };
  auto number = [&](StringRef key) {
    auto attr = schedule.getAs<FloatAttr>(key);
    return attr ? attr.getValueAsDouble() : 0.0;
  };
  auto milestones = [&](StringRef key) {
    std::vector<int64_t> steps;
    if (auto list = schedule.getAs<ArrayAttr>(key))
      for (auto step : list.getAsRange<IntegerAttr>())
        steps.push_back(step.getInt());
    return steps;
  };
  auto decayName = schedule.getAs<StringAttr>("decay");
  LrDecay decay =
      decayName ? parseLrDecay(decayName.getValue()).value_or(LrDecay::Constant)
                : LrDecay::Constant;
  return success(
      succeeded(take("lr-warmup-steps", options.lrWarmupSteps,
                     integer("warmup_steps"), "lr_schedule.warmup_steps")) &&
      succeeded(take("lr-warmup-start-factor", options.lrWarmupStartFactor,
                     number("warmup_start_factor"),
                     "lr_schedule.warmup_start_factor")) &&
      succeeded(
          take("lr-decay", options.lrDecay, decay, "lr_schedule.decay")) &&
      succeeded(take("lr-decay-steps", options.lrDecaySteps,
                     integer("decay_steps"), "lr_schedule.decay_steps")) &&
      succeeded(take("lr-eta-min", options.lrEtaMin, number("eta_min"),
                     "lr_schedule.eta_min")) &&
      succeeded(take("lr-end-factor", options.lrEndFactor, number("end_factor"),
                     "lr_schedule.end_factor")) &&
      succeeded(take("lr-gamma", options.lrGamma, number("gamma"),
                     "lr_schedule.gamma")) &&
      succeeded(take("lr-milestones", options.lrMilestones,
                     milestones("milestones"), "lr_schedule.milestones")) &&
      succeeded(take("lr-power", options.lrPower,
                     schedule.get("power") ? number("power") : 1.0,
                     "lr_schedule.power")) &&
      succeeded(take("lr-t-mult", options.lrTMult,
                     schedule.get("t_mult") ? integer("t_mult") : int64_t(1),
                     "lr_schedule.t_mult")));
}

LogicalResult loom::applyRunConfig(CompileOptions &options, ModuleOp module) {
  auto config =
      module->getAttrOfType<RunConfigAttr>(LoomDialect::kRunConfigAttrName);
  if (!config)
    return success();
  RunConfigApplier apply(options, module);
  // capture --split counts the data-parallel ranks; pipelining multiplies
  // them by the pipeline ranks.
  int64_t captured = config.getWorldSize();
  bool pipelined = options.ppRanks > 1 && options.dp != DataParallel::None;
  if (pipelined)
    captured *= options.ppRanks;
  if (failed(apply.take("world-size", options.worldSize, captured,
                        pipelined ? "world_size, capture --split, times pp"
                                  : "world_size, capture --split")) ||
      failed(apply.take("microbatches", options.microbatches,
                        config.getMicrobatches(),
                        "microbatches, capture --microbatches")))
    return failure();
  // A step that already carries its optimizer keeps it: the run
  // configuration's optimizer is what capture trained the reference with,
  // and the step's own attribute is checked by loom-attach-optimizer. An
  // explicit optimizer=none asks for the gradients instead of an update,
  // which contradicts no hyperparameter.
  bool attached = llvm::any_of(module.getOps<func::FuncOp>(), [](auto func) {
    return func->hasAttr(LoomDialect::kOptimizerAttrName);
  });
  bool gradients = options.isGiven("optimizer") &&
                   options.optimizer == OptimizerKind::None;
  if (!attached && !gradients && config.getOptimizer() &&
      failed(apply.takeOptimizer(config.getOptimizer())))
    return failure();
  // The reference trained with these groups and this schedule.
  if (!attached && !gradients && config.getParamGroups() &&
      failed(apply.take("param-groups", options.paramGroups,
                        config.getParamGroups().str(), "param_groups")))
    return failure();
  if (!attached && !gradients && config.getLrSchedule() &&
      failed(apply.takeLrSchedule(config.getLrSchedule())))
    return failure();
  // And clipped its gradients so (the verifier checked both fields).
  if (DictionaryAttr clip = config.getClipGradNorm();
      clip && !attached && !gradients &&
      (failed(apply.take("max-grad-norm", options.maxGradNorm,
                         clip.getAs<FloatAttr>("max_norm").getValueAsDouble(),
                         "clip_grad_norm.max_norm, capture --max-grad-norm")) ||
       failed(
           apply.take("grad-norm-type", options.gradNormType,
                      clip.getAs<StringAttr>("norm_type").str(),
                      "clip_grad_norm.norm_type, capture --grad-norm-type"))))
    return failure();
  // The kernels round differently, so the reference's implementation too.
  OptimizerImpl impl =
      config.getOptimizerImpl() ? OptimizerImpl::Fused : OptimizerImpl::Forloop;
  if (!attached && !gradients && config.getOptimizer() &&
      failed(apply.take("optimizer-impl", options.impl, impl,
                        "optimizer.impl, capture --optimizer-impl")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Building the pipeline
//===----------------------------------------------------------------------===//

/// Sets what the split takes from the schedule: the stage count (one or
/// two per rank) unless given, and whether backwards split into I and W. An
/// unknown name is left to loom-pipeline-schedule to report.
static void configureSplit(LoomPipelineSplitOptions &split,
                           const CompileOptions &options) {
  llvm::Expected<pipeline::ScheduleKind> kind =
      pipeline::parseScheduleKind(options.ppSchedule);
  if (!kind) {
    llvm::consumeError(kind.takeError());
    return;
  }
  if (!options.isGiven("pp-stages"))
    split.ppStages = options.ppRanks * (pipeline::isSingleStage(*kind) ? 1 : 2);
  split.ppSplitBackward = pipeline::splitsBackward(*kind);
}

/// The device spec the cost model prices the step with: the one asked for,
/// else the one the artifact runs on (an H100 for cuda).
static std::string costModelDevice(const CompileOptions &options) {
  if (!options.scheduleDevice.empty())
    return options.scheduleDevice;
  return options.device == TargetDevice::Cuda ? "h100" : "cpu";
}

/// Everything after recompute: accumulation, data parallelism, the
/// optimizer, scheduling and lowering.
static void buildDistributePipeline(OpPassManager &pm,
                                    const CompileOptions &options) {
  if (options.ppRanks > 1) {
    // The schedule runs the microbatches; no accumulation pass.
    auto split = forwardToPass<LoomPipelineSplitOptions>(options);
    auto schedule = forwardToPass<LoomPipelineScheduleOptions>(options);
    schedule.microbatches = options.microbatches;
    if (options.dp != DataParallel::None)
      schedule.dpRanks = options.worldSize / options.ppRanks;
    if (options.replicateSize > 1)
      schedule.replicas = options.replicateSize;
    configureSplit(split, options);
    pm.addPass(createLoomPipelineSplit(split));
    pm.addPass(createLoomPipelineSchedule(schedule));
  } else if (options.microbatches > 1)
    pm.addNestedPass<func::FuncOp>(createLoomAccumulateGradients(
        forwardToPass<LoomAccumulateGradientsOptions>(options)));
  // One data-parallel rank per pipeline rank: the schedule's mesh has no
  // "dp" axis and DDP has nothing to do.
  bool onePerRow = options.ppRanks > 1 && options.worldSize == options.ppRanks;
  if (options.dp == DataParallel::Replicate && !onePerRow) {
    auto replicate = forwardToPass<LoomReplicateOptions>(options);
    if (options.ppRanks > 1) {
      // The schedule's [pp, dp] mesh; DDP runs along each row.
      replicate.meshName = "pp";
      replicate.meshShape = {options.ppRanks,
                             options.worldSize / options.ppRanks};
      replicate.axes = {"pp", "dp"};
      replicate.reduceAxes = {"dp"};
    } else {
      replicate.meshShape = {options.worldSize};
      replicate.axes = {"dp"};
    }
    // DDP: first_bucket_bytes_cap is _DEFAULT_FIRST_BUCKET_BYTES (1 MiB)
    // when bucket_cap_mb is not given, else bucket_cap_mb.
    if (!options.isGiven("first-bucket-cap-mb") &&
        options.isGiven("bucket-cap-mb"))
      replicate.firstBucketCapMb = options.bucketCapMb;
    // The unit options are declared once, as loom-fsdp's.
    replicate.units.assign(options.units.begin(), options.units.end());
    replicate.unitSettings.assign(options.unitSettings.begin(),
                                  options.unitSettings.end());
    pm.addPass(createLoomReplicate(replicate));
  }
  if (options.dp == DataParallel::Fsdp) {
    auto fsdp = forwardToPass<LoomFsdpOptions>(options);
    if (options.ppRanks > 1) {
      // FSDP inside each stage: shard over the "dp" axis of the schedule's
      // [pp, dp] mesh.
      fsdp.meshName = "pp";
      fsdp.shardAxes = {options.replicateSize > 1 ? "shard" : "dp"};
      if (options.replicateSize > 1)
        fsdp.replicateAxes = {"replicate"};
      // What the pass does under pipelining anyway, shown in the pipeline
      // the artifact records.
      fsdp.reshardAfterBackward = false;
    } else if (options.replicateSize > 1)
      fsdp.meshShape = {options.replicateSize,
                        options.worldSize / options.replicateSize};
    else
      fsdp.meshShape = {options.worldSize};
    pm.addPass(createLoomFsdp(fsdp));
    pm.addPass(createLoomPrefetch(forwardToPass<LoomPrefetchOptions>(options)));
    if (options.bucketBytes > 0)
      pm.addPass(createLoomBucket(forwardToPass<LoomBucketOptions>(options)));
  }
  // nn.SyncBatchNorm's statistics span the ranks the batch is split over.
  if (options.dp != DataParallel::None)
    pm.addPass(createLoomSyncBatchNorm());
  if (options.optimizer != OptimizerKind::None) {
    auto attach = forwardToPass<LoomAttachOptimizerOptions>(options);
    // Resolved here so the pipeline recorded in the artifact shows the
    // lr, eps and weight decay the step really uses.
    resolveOptimizerDefaults(attach);
    pm.addNestedPass<func::FuncOp>(createLoomAttachOptimizer(attach));
  }
  if (options.schedule) {
    auto schedule = forwardToPass<LoomScheduleOptions>(options);
    // The cost model of the device the artifact runs on by default, with
    // the measured times recompute-budget uses (declared once, as
    // loom-sac-ilp's).
    schedule.device = costModelDevice(options);
    schedule.opTimes = options.opTimes;
    // Under a recompute budget the scheduler keeps the budget too: the
    // budget bounds the program in its order, and reordering may only use
    // what is left under it.
    // A malformed limit stays as given, for the pass to report.
    if (!options.sacBudget.empty()) {
      int64_t budget = parseByteSize(options.sacBudget);
      bool unlimited =
          options.memoryLimit.empty() || options.memoryLimit == "none";
      int64_t limit = unlimited ? 0 : parseByteSize(options.memoryLimit);
      if (budget > 0 && (unlimited || (limit > 0 && budget < limit)))
        schedule.memoryLimit = std::to_string(budget);
    }
    pm.addPass(createLoomSchedule(schedule));
  }
  pm.addPass(createLoomLowerToRT(forwardToPass<LoomLowerToRTOptions>(options)));
  buildFinishPipeline(pm);
}

void loom::buildCompilePipeline(OpPassManager &pm,
                                const CompileOptions &options) {
  if (!options.kernelWorkspaceFile.empty())
    pm.addPass(createLoomKernelWorkspace(
        forwardToPass<LoomKernelWorkspaceOptions>(options)));
  // Checkpointing first, as checkpoint_wrapper comes before fully_shard: the
  // distribution passes and the microbatch copies then carry the regions.
  if (options.rematMode != RematMode::None)
    pm.addNestedPass<func::FuncOp>(
        createLoomRemat(forwardToPass<LoomRematOptions>(options)));
  if (!options.sacBudget.empty()) {
    auto sac = forwardToPass<LoomSacIlpOptions>(options);
    sac.sacModules.assign(options.rematModules.begin(),
                          options.rematModules.end());
    // Recompute time on the device the artifact runs on, as the scheduler
    // prices it.
    sac.device = costModelDevice(options);
    // The budget bounds the program the rest of this pipeline makes, in
    // program order: the scheduler that may follow keeps it (its limit is
    // at most the budget), and could not start from the step without
    // recompute the decision is measured against.
    CompileOptions unscheduled = options;
    unscheduled.schedule = false;
    pm.addPass(createLoomSacIlp(sac, [unscheduled](OpPassManager &downstream) {
      buildDistributePipeline(downstream, unscheduled);
    }));
  }
  buildDistributePipeline(pm, options);
}

void loom::buildFinishPipeline(OpPassManager &pm) {
  OpPassManager &programPm = pm.nest<rt::ProgramOp>();
  programPm.addPass(rt::createLoomRTInsertFrees());
  programPm.addPass(rt::createLoomRTAssignSlots());
}

void loom::registerLoomPipelines() {
  // Registered by hand (not PassPipelineRegistration) so that options the
  // pipeline cannot build report an error instead of being ignored.
  registerPassPipeline(
      "loom-compile-pipeline",
      "Compile a loom step into a loomrt program for the artifact: "
      "distribute it (dp=replicate: DDP, dp=fsdp: FSDP2/HSDP over "
      "world-size ranks), attach the "
      "optimizer, lower to loomrt, free values after their last use, assign "
      "slots",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        CompilePipelineOptions pipelineOptions;
        if (failed(pipelineOptions.parseFromString(text)))
          return failure();
        CompileOptions options = pipelineOptions.getCompileOptions();
        if (failed(verifyCompileOptions(options, errorHandler)))
          return failure();
        buildCompilePipeline(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(CompilePipelineOptions());
      });
  PassPipelineRegistration<>(
      "loomrt-finish-pipeline",
      "Make loomrt programs ready to write: free values after their last "
      "use, assign slots (for programs lowered or written by other means)",
      buildFinishPipeline);
}
