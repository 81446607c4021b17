//===- AttachOptimizer.cpp - Apply the optimizer inside the step ---------===//

#include "loom/Transforms/Passes.h"
#include "loomrt/ArtifactSchema.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/GlobPattern.h"

#include <cmath>
#include <limits>
#include <vector>

namespace loom {
#define GEN_PASS_DEF_LOOMATTACHOPTIMIZER
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

bool loom::optimizerTakes(OptimizerKind kind, StringRef option) {
  bool sgd = kind == OptimizerKind::SGD;
  bool adam = kind == OptimizerKind::Adam || kind == OptimizerKind::AdamW;
  bool rmsprop = kind == OptimizerKind::RMSprop;
  bool radam = kind == OptimizerKind::RAdam;
  bool nadam = kind == OptimizerKind::NAdam;
  bool rprop = kind == OptimizerKind::Rprop;
  bool asgd = kind == OptimizerKind::ASGD;
  return llvm::StringSwitch<bool>(option)
      .Case("momentum", sgd || rmsprop)
      .Cases({"dampening", "nesterov"}, sgd)
      .Cases({"beta1", "beta2"},
             adam || radam || nadam || kind == OptimizerKind::Adamax)
      .Case("eps", !sgd && !rprop && !asgd)
      .Case("weight-decay", !rprop)
      .Case("amsgrad", adam)
      .Case("alpha", rmsprop || asgd)
      .Case("centered", rmsprop)
      .Cases({"adagrad-lr-decay", "initial-accumulator-value"},
             kind == OptimizerKind::Adagrad)
      .Case("decoupled-weight-decay", radam || nadam)
      .Case("momentum-decay", nadam)
      .Case("rho", kind == OptimizerKind::Adadelta)
      .Cases({"etaminus", "etaplus", "step-size-min", "step-size-max"}, rprop)
      .Cases({"lambd", "t0"}, asgd)
      .Default(true);
}

/// Whether torch.optim has a `fused=True` kernel for `kind`; the artifact
/// schema declares which (LOOMX_OPTIMIZER_FUSED), for the runtime too.
static bool hasFusedKernel(OptimizerKind kind) {
  return loomrt::schema::hasFusedKernel(
      stringifyOptimizerKind(kind).str().c_str());
}

StringRef loom::stringifyOptimizerImpl(OptimizerImpl impl) {
  switch (impl) {
  case OptimizerImpl::Forloop:
    return "forloop";
  case OptimizerImpl::Fused:
    return "fused";
  }
  llvm_unreachable("unknown optimizer implementation");
}

/// torch.optim's default learning rate of `kind`'s constructor.
static double getDefaultLr(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::RMSprop:
  case OptimizerKind::Adagrad:
  case OptimizerKind::Rprop:
  case OptimizerKind::ASGD:
    return 1e-2;
  case OptimizerKind::Adadelta:
    return 1.0;
  case OptimizerKind::Adamax:
  case OptimizerKind::NAdam:
    return 2e-3;
  case OptimizerKind::None:
  case OptimizerKind::SGD:
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW:
  case OptimizerKind::RAdam:
    break;
  }
  return 1e-3;
}

/// torch.optim's default eps of `kind`'s constructor (unused by SGD).
static double getDefaultEps(OptimizerKind kind) {
  if (kind == OptimizerKind::Adagrad)
    return 1e-10;
  return kind == OptimizerKind::Adadelta ? 1e-6 : 1e-8;
}

/// torch.optim's default alpha: RMSprop's smoothing constant, ASGD's power.
static double getDefaultAlpha(OptimizerKind kind) {
  return kind == OptimizerKind::ASGD ? 0.75 : 0.99;
}

void loom::resolveOptimizerDefaults(LoomAttachOptimizerOptions &options) {
  OptimizerKind kind = options.optimizer;
  if (std::isnan(options.lr))
    options.lr = getDefaultLr(kind);
  if (std::isnan(options.eps))
    options.eps = getDefaultEps(kind);
  if (std::isnan(options.alpha))
    options.alpha = getDefaultAlpha(kind);
  // The one place where the algorithms' default weight decays differ.
  if (options.weightDecay < 0)
    options.weightDecay = kind == OptimizerKind::AdamW ? 1e-2 : 0.0;
}

/// torch.optim's class of `kind`.

/// The first hyperparameter given a value that `kind` does not take (each
/// option away from its default), or "".
static StringRef
getForeignHyperparameter(OptimizerKind kind,
                         const LoomAttachOptimizerOptions &options) {
  LoomAttachOptimizerOptions defaults;
  std::pair<StringRef, bool> given[] = {
      {"eps", options.eps != getDefaultEps(kind)},
      {"weight-decay", options.weightDecay != 0},
      {"momentum", options.momentum != 0},
      {"dampening", options.dampening != 0},
      {"nesterov", options.nesterov},
      {"amsgrad", options.amsgrad},
      {"alpha", options.alpha != getDefaultAlpha(kind)},
      {"centered", options.centered},
      {"adagrad-lr-decay", options.adagradLrDecay != 0},
      {"initial-accumulator-value", options.initialAccumulatorValue != 0},
      {"decoupled-weight-decay", options.decoupledWeightDecay},
      {"rho", options.rho != defaults.rho},
      {"momentum-decay", options.momentumDecay != defaults.momentumDecay},
      {"etaminus", options.etaminus != defaults.etaminus},
      {"etaplus", options.etaplus != defaults.etaplus},
      {"step-size-min", options.stepSizeMin != defaults.stepSizeMin},
      {"step-size-max", options.stepSizeMax != defaults.stepSizeMax},
      {"lambd", options.lambd != defaults.lambd},
      {"t0", options.t0 != defaults.t0}};
  for (auto [name, isGiven] : given)
    if (isGiven && !optimizerTakes(kind, name))
      return name;
  return "";
}

FailureOr<Attribute>
loom::buildOptimizerAttr(MLIRContext *ctx,
                         const LoomAttachOptimizerOptions &given,
                         function_ref<InFlightDiagnostic()> emitError) {
  auto f = [](double v) { return APFloat(v); };
  LoomAttachOptimizerOptions options = given;
  resolveOptimizerDefaults(options);
  OptimizerKind kind = options.optimizer;
  if (kind == OptimizerKind::None)
    return emitError() << "optimizer 'none' attaches no optimizer";
  if (StringRef name = getForeignHyperparameter(kind, options); !name.empty())
    return emitError() << "'" << name << "' is not a hyperparameter of "
                       << stringifyOptimizerKind(kind) << " (torch.optim."
                       << getOptimizerClassName(kind) << " does not take it)";
  Attribute attr;
  switch (kind) {
  case OptimizerKind::None:
    llvm_unreachable("refused above");
  case OptimizerKind::SGD:
    attr =
        SGDAttr::getChecked(emitError, ctx, f(options.lr), f(options.momentum),
                            f(options.dampening), f(options.weightDecay),
                            options.nesterov, options.maximize);
    break;
  case OptimizerKind::Adam:
    attr = AdamAttr::getChecked(emitError, ctx, f(options.lr), f(options.beta1),
                                f(options.beta2), f(options.eps),
                                f(options.weightDecay), options.maximize,
                                options.amsgrad);
    break;
  case OptimizerKind::AdamW:
    attr = AdamWAttr::getChecked(emitError, ctx, f(options.lr),
                                 f(options.beta1), f(options.beta2),
                                 f(options.eps), f(options.weightDecay),
                                 options.maximize, options.amsgrad);
    break;
  case OptimizerKind::RMSprop:
    attr = RMSpropAttr::getChecked(emitError, ctx, f(options.lr),
                                   f(options.alpha), f(options.eps),
                                   f(options.weightDecay), f(options.momentum),
                                   options.centered, options.maximize);
    break;
  case OptimizerKind::Adamax:
    attr = AdamaxAttr::getChecked(
        emitError, ctx, f(options.lr), f(options.beta1), f(options.beta2),
        f(options.eps), f(options.weightDecay), options.maximize);
    break;
  case OptimizerKind::RAdam:
    attr = RAdamAttr::getChecked(
        emitError, ctx, f(options.lr), f(options.beta1), f(options.beta2),
        f(options.eps), f(options.weightDecay), options.decoupledWeightDecay,
        options.maximize);
    break;
  case OptimizerKind::Adagrad:
    attr = AdagradAttr::getChecked(
        emitError, ctx, f(options.lr), f(options.adagradLrDecay),
        f(options.weightDecay), f(options.initialAccumulatorValue),
        f(options.eps), options.maximize);
    break;
  case OptimizerKind::NAdam:
    attr = NAdamAttr::getChecked(
        emitError, ctx, f(options.lr), f(options.beta1), f(options.beta2),
        f(options.eps), f(options.weightDecay), f(options.momentumDecay),
        options.decoupledWeightDecay, options.maximize);
    break;
  case OptimizerKind::Rprop:
    attr = RpropAttr::getChecked(
        emitError, ctx, f(options.lr), f(options.etaminus), f(options.etaplus),
        f(options.stepSizeMin), f(options.stepSizeMax), options.maximize);
    break;
  case OptimizerKind::ASGD:
    attr = ASGDAttr::getChecked(emitError, ctx, f(options.lr), f(options.lambd),
                                f(options.alpha), f(options.t0),
                                f(options.weightDecay), options.maximize);
    break;
  case OptimizerKind::Adadelta:
    attr = AdadeltaAttr::getChecked(emitError, ctx, f(options.lr),
                                    f(options.rho), f(options.eps),
                                    f(options.weightDecay), options.maximize);
    break;
  }
  if (!attr)
    return failure();
  return attr;
}

/// The module that owns a parameter: its fully-qualified name without the
/// last component ("" for a parameter of the root module).
static StringRef getOwnerModule(StringRef param) {
  size_t dot = param.rfind('.');
  return dot == StringRef::npos ? StringRef() : param.take_front(dot);
}

/// An aten op of gradient clipping: phase optimizer, owned by the root
/// module (the norm spans every parameter).
static Value createClipAten(OpBuilder &b, Location loc, StringRef kernel,
                            Type type, ValueRange inputs,
                            ArrayRef<Attribute> args) {
  auto op = AtenOp::create(b, loc, TypeRange{type}, b.getStringAttr(kernel),
                           inputs, b.getArrayAttr(args),
                           b.getDictionaryAttr({}), ArrayAttr());
  op->setAttr(LoomDialect::kModuleAttrName, b.getStringAttr(""));
  op->setAttr(LoomDialect::kPhaseAttrName,
              PhaseAttr::get(b.getContext(), Phase::optimizer));
  return op->getResult(0);
}

/// linalg_vector_norm of `v` (any shape) to a 0-d tensor.
static Value createNorm(OpBuilder &b, Location loc, Value v, double normType) {
  auto element = cast<RankedTensorType>(v.getType()).getElementType();
  return createClipAten(
      b, loc, "aten::linalg_vector_norm.default",
      RankedTensorType::get({}, element), v,
      {OperandRefAttr::get(b.getContext(), 0), b.getF64FloatAttr(normType)});
}

/// linalg_vector_norm of the stack of the 0-d tensors `norms`.
static Value createNormOfNorms(OpBuilder &b, Location loc,
                               ArrayRef<Value> norms, double normType) {
  MLIRContext *ctx = b.getContext();
  auto element = cast<RankedTensorType>(norms[0].getType()).getElementType();
  SmallVector<Attribute> refs;
  for (unsigned k = 0; k < norms.size(); ++k)
    refs.push_back(OperandRefAttr::get(ctx, k));
  Value stacked =
      createClipAten(b, loc, "aten::stack.default",
                     RankedTensorType::get({(int64_t)norms.size()}, element),
                     norms, {b.getArrayAttr(refs), b.getI64IntegerAttr(0)});
  return createNorm(b, loc, stacked, normType);
}

/// The norm over a group of ranks of each rank's `local` norm: the sum of
/// p-th powers (max for inf) over `axes` of `mesh`, then the p-th root.
static Value completeNorm(OpBuilder &b, Location loc, Value local,
                          double normType, FlatSymbolRefAttr mesh,
                          ArrayAttr axes) {
  MLIRContext *ctx = b.getContext();
  bool inf = std::isinf(normType);
  Type type = local.getType();
  if (!inf)
    local = createClipAten(
        b, loc, "aten::pow.Tensor_Scalar", type, local,
        {OperandRefAttr::get(ctx, 0), b.getF64FloatAttr(normType)});
  auto start = AllReduceStartOp::create(
      b, loc, FutureType::get(ctx, type), local, mesh, axes,
      ReduceKindAttr::get(ctx, inf ? ReduceKind::max : ReduceKind::sum));
  auto wait = WaitOp::create(b, loc, type, start.getFuture());
  for (Operation *op : {start.getOperation(), wait.getOperation()}) {
    op->setAttr(LoomDialect::kModuleAttrName, b.getStringAttr(""));
    op->setAttr(LoomDialect::kPhaseAttrName,
                PhaseAttr::get(ctx, Phase::optimizer));
  }
  Value total = wait.getResult();
  if (!inf)
    total = createClipAten(
        b, loc, "aten::pow.Tensor_Scalar", type, total,
        {OperandRefAttr::get(ctx, 0), b.getF64FloatAttr(1.0 / normType)});
  return total;
}

/// One gradient result of a step and the parameter argument it targets.
struct GradientTarget {
  unsigned result;
  unsigned arg;
  StringAttr name;
};

/// The step's gradient results in result order, each with its parameter
/// argument (the step verifier guarantees a grad targets one).
static SmallVector<GradientTarget> getGradientTargets(func::FuncOp func) {
  llvm::StringMap<unsigned> paramArgs;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto role = func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    auto name =
        func.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName);
    if (role && name && role.getValue() == Role::parameter)
      paramArgs[name.getValue()] = i;
  }
  SmallVector<GradientTarget> targets;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto role =
        func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role || role.getValue() != Role::grad)
      continue;
    auto target =
        func.getResultAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName);
    targets.push_back({i, paramArgs.lookup(target.getValue()), target});
  }
  return targets;
}

namespace {
/// One rule of `param-groups`: which parameters it takes and the
/// hyperparameters it gives them.
struct ParamGroupRule {
  unsigned number; // 1-based, as messages count
  StringRef text;
  /// `ndim<N` (below) or `ndim>=N`.
  std::optional<int64_t> rank;
  bool rankBelow = false;
  /// Names and globs; a name without glob characters is exact.
  SmallVector<std::pair<StringRef, llvm::GlobPattern>> patterns;
  SmallVector<bool> patternUsed;
  std::optional<double> lr, weightDecay;

  bool matches(StringRef name, int64_t paramRank) {
    if (rank)
      return rankBelow ? paramRank < *rank : paramRank >= *rank;
    bool any = false;
    for (auto [i, p] : llvm::enumerate(patterns))
      if (p.second.match(name))
        any = patternUsed[i] = true;
    return any;
  }
};

bool isExactName(StringRef pattern) {
  return pattern.find_first_of("*?[]{}\\") == StringRef::npos;
}
} // namespace

/// Parses `param-groups` ("MATCH:KEY=VALUE[:KEY=VALUE];..."), reporting the
/// first problem through `fail` with the rule it is in.
static FailureOr<std::vector<ParamGroupRule>>
parseParamGroups(StringRef text, function_ref<InFlightDiagnostic()> fail) {
  std::vector<ParamGroupRule> rules;
  SmallVector<StringRef> parts;
  text.split(parts, ';', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  llvm::StringMap<unsigned> exactNames;
  for (StringRef part : parts) {
    ParamGroupRule rule;
    rule.number = rules.size() + 1;
    rule.text = part.trim();
    auto bad = [&]() -> InFlightDiagnostic {
      return fail() << "'param-groups' rule " << rule.number << " ('"
                    << rule.text << "'): ";
    };
    SmallVector<StringRef> fields;
    rule.text.split(fields, ':');
    StringRef match = fields[0].trim();
    if (match.empty())
      return bad() << "expected MATCH:KEY=VALUE, the match is empty";
    if (fields.size() < 2)
      return bad() << "expected MATCH:KEY=VALUE[:KEY=VALUE], found no "
                      "settings (keys: lr, weight-decay)";
    if (match.consume_front("ndim")) {
      rule.rankBelow = match.consume_front("<");
      if (!rule.rankBelow && !match.consume_front(">="))
        return bad() << "expected ndim<N or ndim>=N";
      int64_t n;
      if (match.trim().getAsInteger(10, n) || n < 0)
        return bad() << "'" << match << "' is not a rank (an integer >= 0)";
      rule.rank = n;
    } else {
      SmallVector<StringRef> names;
      match.split(names, '|', -1, /*KeepEmpty=*/false);
      for (StringRef name : names) {
        name = name.trim();
        llvm::Expected<llvm::GlobPattern> glob =
            llvm::GlobPattern::create(name);
        if (!glob)
          return bad() << "'" << name << "' is not a glob: "
                       << llvm::toString(glob.takeError());
        if (isExactName(name)) {
          auto [it, fresh] = exactNames.try_emplace(name, rule.number);
          if (!fresh)
            return bad() << "parameter '" << name
                         << "' is already in the group of rule " << it->second
                         << "; a parameter belongs to one group";
        }
        rule.patterns.push_back({name, std::move(*glob)});
        rule.patternUsed.push_back(false);
      }
    }
    for (StringRef field : llvm::drop_begin(fields)) {
      auto [key, value] = field.split('=');
      key = key.trim();
      value = value.trim();
      double v;
      if (value.getAsDouble(v))
        return bad() << "'" << key << "' needs a number, found '" << value
                     << "'";
      if (!std::isfinite(v) || v < 0)
        return bad() << "'" << key << "' is " << value
                     << ", expected a finite value >= 0 (as torch.optim)";
      std::optional<double> *slot = key == "lr"             ? &rule.lr
                                    : key == "weight-decay" ? &rule.weightDecay
                                                            : nullptr;
      if (!slot)
        return bad() << "unknown key '" << key
                     << "' (a group sets lr or weight-decay)";
      if (*slot)
        return bad() << "'" << key << "' is given twice";
      *slot = v;
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

namespace {
struct LoomAttachOptimizerPass
    : public loom::impl::LoomAttachOptimizerBase<LoomAttachOptimizerPass> {
  using LoomAttachOptimizerBase::LoomAttachOptimizerBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func->hasAttr(LoomDialect::kStepAttrName) ||
        optimizer == OptimizerKind::None)
      return markAllAnalysesPreserved();
    if (failed(attach(func)))
      signalPassFailure();
  }

  LogicalResult attach(func::FuncOp func) {
    MLIRContext *ctx = &getContext();
    if (Attribute existing = func->getAttr(LoomDialect::kOptimizerAttrName))
      return func.emitOpError("already has an optimizer attached (")
             << existing << "); attach one optimizer per step";
    LoomAttachOptimizerOptions options;
    options.optimizer = optimizer;
    options.lr = lr;
    options.momentum = momentum;
    options.dampening = dampening;
    options.nesterov = nesterov;
    options.weightDecay = weightDecay;
    options.beta1 = beta1;
    options.beta2 = beta2;
    options.eps = eps;
    options.maximize = maximize;
    options.amsgrad = amsgrad;
    options.alpha = alpha;
    options.centered = centered;
    options.adagradLrDecay = adagradLrDecay;
    options.initialAccumulatorValue = initialAccumulatorValue;
    options.decoupledWeightDecay = decoupledWeightDecay;
    options.rho = rho;
    options.momentumDecay = momentumDecay;
    options.etaminus = etaminus;
    options.lambd = lambd;
    options.t0 = t0;
    options.etaplus = etaplus;
    options.stepSizeMin = stepSizeMin;
    options.stepSizeMax = stepSizeMax;
    FailureOr<Attribute> config = buildOptimizerAttr(ctx, options, [&] {
      return func.emitOpError("--loom-attach-optimizer: ");
    });
    if (failed(config))
      return failure();
    std::optional<OptimizerConfig> info = getOptimizerConfig(*config);
    if (maxGradNorm != 0 && failed(clipGradients(func)))
      return failure();
    FailureOr<DenseMap<unsigned, Attribute>> groups =
        assignGroups(func, options);
    if (failed(groups) || failed(attachSchedule(func)))
      return failure();
    if (failed(attachImpl(func)))
      return failure();

    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    OpBuilder builder(ret);
    auto roleAttr = [&](Role r) { return RoleAttr::get(ctx, r); };
    SmallVector<Value> stateResults;
    SmallVector<DictionaryAttr> stateResultAttrs;
    unsigned numResults = func.getNumResults();
    for (auto [i, argIndex, target] : getGradientTargets(func)) {
      BlockArgument param = func.getArgument(argIndex);
      Type type = param.getType();

      SmallVector<Value> state;
      for (StringRef stateName : info->stateNames) {
        std::string name = (target.getValue() + "." + stateName).str();
        NamedAttrList attrs;
        attrs.set(LoomDialect::kNameAttrName, builder.getStringAttr(name));
        attrs.set(LoomDialect::kRoleAttrName, roleAttr(Role::optimizer_state));
        attrs.set(LoomDialect::kTargetAttrName, target);
        // State of a sharded parameter is sharded like it (loom-fsdp).
        if (Attribute shard =
                func.getArgAttr(argIndex, LoomDialect::kShardAttrName))
          attrs.set(LoomDialect::kShardAttrName, shard);
        unsigned index = func.getNumArguments();
        if (failed(func.insertArgument(index, type, attrs.getDictionary(ctx),
                                       param.getLoc())))
          return func.emitOpError("cannot add optimizer state argument '")
                 << name << "'";
        state.push_back(func.getArgument(index));
        NamedAttrList resultAttrs;
        resultAttrs.set(LoomDialect::kRoleAttrName,
                        roleAttr(Role::state_update));
        resultAttrs.set(LoomDialect::kTargetAttrName,
                        builder.getStringAttr(name));
        stateResultAttrs.push_back(resultAttrs.getDictionary(ctx));
      }

      // Named after the parameter, so traces and diagnostics say which
      // update it is; located where the parameter is.
      Location loc = NameLoc::get(target, param.getLoc());
      SmallVector<Type> resultTypes(1 + state.size(), type);
      Attribute hyper = groups->lookup(argIndex);
      auto update = OptimizerUpdateOp::create(builder, loc, resultTypes,
                                              hyper ? hyper : *config, param,
                                              ret.getOperand(i), state);
      update->setAttr(LoomDialect::kModuleAttrName,
                      builder.getStringAttr(getOwnerModule(target.getValue())));
      update->setAttr(LoomDialect::kPhaseAttrName,
                      PhaseAttr::get(ctx, Phase::optimizer));
      ret->setOperand(i, update.getNewParam());
      func.setResultAttr(i, LoomDialect::kRoleAttrName,
                         roleAttr(Role::param_update));
      llvm::append_range(stateResults, update.getNewState());
    }

    if (!stateResults.empty()) {
      SmallVector<unsigned> indices(stateResults.size(), numResults);
      SmallVector<Type> types = llvm::to_vector(
          llvm::map_range(stateResults, [](Value v) { return v.getType(); }));
      if (failed(func.insertResults(indices, types, stateResultAttrs)))
        return func.emitOpError("cannot add optimizer state results");
      ret.getOperandsMutable().append(stateResults);
    }
    func->setAttr(LoomDialect::kOptimizerAttrName, *config);
    return success();
  }

  /// The optimizer attribute of every parameter argument `param-groups`
  /// puts in a group (absent: the defaults).
  FailureOr<DenseMap<unsigned, Attribute>>
  assignGroups(func::FuncOp func, const LoomAttachOptimizerOptions &defaults) {
    DenseMap<unsigned, Attribute> byArg;
    if (StringRef(paramGroups).trim().empty())
      return byArg;
    auto fail = [&]() { return func.emitOpError("--loom-attach-optimizer: "); };
    FailureOr<std::vector<ParamGroupRule>> rules =
        parseParamGroups(paramGroups, fail);
    if (failed(rules))
      return failure();
    SmallVector<Attribute> attrs;
    for (ParamGroupRule &rule : *rules) {
      LoomAttachOptimizerOptions options = defaults;
      if (rule.lr)
        options.lr = *rule.lr;
      if (rule.weightDecay)
        options.weightDecay = *rule.weightDecay;
      FailureOr<Attribute> attr =
          buildOptimizerAttr(&getContext(), options, [&] {
            return fail() << "'param-groups' rule " << rule.number << " ('"
                          << rule.text << "'): ";
          });
      if (failed(attr))
        return failure();
      attrs.push_back(*attr);
    }
    for (const GradientTarget &target : getGradientTargets(func)) {
      int64_t rank =
          cast<RankedTensorType>(func.getArgument(target.arg).getType())
              .getRank();
      for (auto [rule, attr] : llvm::zip(*rules, attrs))
        if (rule.matches(target.name.getValue(), rank)) {
          byArg[target.arg] = attr;
          break;
        }
    }
    // A pipeline stage holds some of the parameters; the others' names are
    // not mistakes there.
    if (func->hasAttr(LoomDialect::kPipelineStageAttrName))
      return byArg;
    for (ParamGroupRule &rule : *rules)
      for (auto [pattern, used] : llvm::zip(rule.patterns, rule.patternUsed))
        if (!used)
          return fail() << "'param-groups' rule " << rule.number << " ('"
                        << rule.text << "'): '" << pattern.first
                        << "' matches no parameter of the step";
    return byArg;
  }

  /// The warm-up's options, checked as LinearLR checks its arguments.
  LogicalResult checkWarmup(func::FuncOp func) {
    auto fail = [&]() { return func.emitOpError("--loom-attach-optimizer: "); };
    if (lrWarmupSteps < 0)
      return fail() << "'lr-warmup-steps' is "
                    << static_cast<int64_t>(lrWarmupSteps)
                    << ", expected a step count >= 0 (0: no warm-up)";
    if (!(lrWarmupStartFactor > 0 && lrWarmupStartFactor <= 1))
      return fail() << "'lr-warmup-start-factor' is "
                    << static_cast<double>(lrWarmupStartFactor)
                    << ", expected a value in (0, 1] (LinearLR's "
                       "start_factor)";
    return success();
  }

  /// The decay's options, checked as its lr_scheduler class checks its
  /// arguments (each option belongs to the decays that take it); the
  /// resolved gamma of the step, exponential and multistep decays (StepLR's
  /// and MultiStepLR's 0.1 unless given), 0 for the others.
  FailureOr<double> checkDecay(func::FuncOp func) {
    auto fail = [&]() { return func.emitOpError("--loom-attach-optimizer: "); };
    bool restarts = lrDecay == LrDecay::CosineRestarts;
    bool cosine = lrDecay == LrDecay::Cosine || restarts;
    bool linear = lrDecay == LrDecay::Linear;
    bool multistep = lrDecay == LrDecay::MultiStep;
    bool polynomial = lrDecay == LrDecay::Polynomial;
    bool factored = lrDecay == LrDecay::Step ||
                    lrDecay == LrDecay::Exponential || multistep;
    bool stepped = cosine || linear || polynomial || lrDecay == LrDecay::Step;
    if (!stepped && lrDecaySteps != 0)
      return fail() << "'lr-decay-steps' needs lr-decay=cosine, linear, step, "
                       "polynomial or cosine-restarts";
    if (stepped && lrDecaySteps < 1)
      return fail() << "lr-decay=" << stringifyLrDecay(lrDecay)
                    << " needs 'lr-decay-steps' >= 1, found "
                    << static_cast<int64_t>(lrDecaySteps);
    if (!factored && lrGamma != 0)
      return fail() << "'lr-gamma' needs lr-decay=step, exponential or "
                       "multistep";
    if (lrDecay == LrDecay::Exponential && lrGamma == 0)
      return fail() << "lr-decay=exponential needs 'lr-gamma' (ExponentialLR "
                       "has no default gamma)";
    double gamma = factored && lrGamma == 0 ? 0.1 : lrGamma;
    if (factored && !(gamma > 0 && std::isfinite(gamma)))
      return fail() << "'lr-gamma' is " << gamma
                    << ", expected a finite value > 0";
    if (!multistep && !lrMilestones.empty())
      return fail() << "'lr-milestones' needs lr-decay=multistep";
    if (multistep && lrMilestones.empty())
      return fail() << "lr-decay=multistep needs 'lr-milestones' (the steps "
                       "after the warm-up at which the rate falls)";
    for (auto [i, milestone] : llvm::enumerate(lrMilestones)) {
      int64_t least = i ? lrMilestones[i - 1] + 1 : 1;
      if (milestone < least)
        return fail() << "'lr-milestones' entry " << i << " is " << milestone
                      << ", expected at least " << least
                      << " (increasing steps after the warm-up, from 1)";
    }
    if (!polynomial && lrPower != 1)
      return fail() << "'lr-power' needs lr-decay=polynomial";
    if (polynomial && !(lrPower >= 0 && std::isfinite(lrPower)))
      return fail() << "'lr-power' is " << static_cast<double>(lrPower)
                    << ", expected a finite value >= 0";
    if (!restarts && lrTMult != 1)
      return fail() << "'lr-t-mult' needs lr-decay=cosine-restarts";
    if (restarts && lrTMult < 1)
      return fail() << "'lr-t-mult' is " << static_cast<int64_t>(lrTMult)
                    << ", expected an integer >= 1 "
                       "(CosineAnnealingWarmRestarts' T_mult)";
    if (!cosine && lrEtaMin != 0)
      return fail() << "'lr-eta-min' needs lr-decay=cosine or cosine-restarts";
    if (cosine && !(lrEtaMin >= 0 && std::isfinite(lrEtaMin)))
      return fail() << "'lr-eta-min' is " << static_cast<double>(lrEtaMin)
                    << ", expected a finite value >= 0";
    if (!linear && lrEndFactor != 0)
      return fail() << "'lr-end-factor' needs lr-decay=linear";
    if (linear && !(lrEndFactor >= 0 && lrEndFactor <= 1))
      return fail() << "'lr-end-factor' is " << static_cast<double>(lrEndFactor)
                    << ", expected a value in [0, 1] (LinearLR's end_factor)";
    return gamma;
  }

  /// Checks the schedule options and records them on the step as
  /// `loom.lr_schedule` (nothing for a constant rate).
  LogicalResult attachSchedule(func::FuncOp func) {
    FailureOr<double> gamma = failure();
    if (failed(checkWarmup(func)) || failed(gamma = checkDecay(func)))
      return failure();
    if (lrWarmupSteps == 0 && lrDecay == LrDecay::Constant)
      return success();
    Builder b(&getContext());
    NamedAttrList fields;
    fields.set("warmup_steps", b.getI64IntegerAttr(lrWarmupSteps));
    fields.set("warmup_start_factor", b.getF64FloatAttr(lrWarmupStartFactor));
    fields.set("decay", b.getStringAttr(stringifyLrDecay(lrDecay)));
    fields.set("decay_steps", b.getI64IntegerAttr(lrDecaySteps));
    fields.set("eta_min", b.getF64FloatAttr(lrEtaMin));
    fields.set("end_factor", b.getF64FloatAttr(lrEndFactor));
    if (*gamma != 0)
      fields.set("gamma", b.getF64FloatAttr(*gamma));
    if (lrDecay == LrDecay::MultiStep)
      fields.set("milestones", b.getI64ArrayAttr(SmallVector<int64_t>(
                                   lrMilestones.begin(), lrMilestones.end())));
    if (lrDecay == LrDecay::Polynomial)
      fields.set("power", b.getF64FloatAttr(lrPower));
    if (lrDecay == LrDecay::CosineRestarts)
      fields.set("t_mult", b.getI64IntegerAttr(lrTMult));
    func->setAttr(LoomDialect::kLrScheduleAttrName,
                  fields.getDictionary(&getContext()));
    return success();
  }

  /// Records impl=fused on the step; forloop, the runtime's default, is
  /// recorded by leaving the attribute out, so existing steps are unchanged.
  LogicalResult attachImpl(func::FuncOp func) {
    if (impl == OptimizerImpl::Forloop)
      return success();
    if (!hasFusedKernel(optimizer))
      return func.emitOpError("--loom-attach-optimizer: impl=fused: ")
             << stringifyOptimizerKind(optimizer)
             << " has no fused implementation (torch.optim."
             << getOptimizerClassName(optimizer) << " takes no fused=True)";
    // PyTorch's fused optimizers refuse complex parameters (their kernels
    // have no complex instantiation): say so by name, before the update's
    // verifier gives its general refusal of non-float parameters.
    for (auto [i, argIndex, target] : getGradientTargets(func)) {
      auto type = dyn_cast<ShapedType>(func.getArgument(argIndex).getType());
      if (type && isa<ComplexType>(type.getElementType()))
        return func.emitOpError("--loom-attach-optimizer: impl=fused does not "
                                "support the complex parameter '")
               << target.getValue() << "' (" << type
               << "), as torch.optim's fused=True does not";
    }
    func->setAttr(LoomDialect::kOptimizerImplAttrName,
                  StringAttr::get(&getContext(), stringifyOptimizerImpl(impl)));
    return success();
  }

  /// Replaces every `grad` result by the gradient scaled as
  /// clip_grad_norm_ scales it.
  LogicalResult clipGradients(func::FuncOp func) {
    MLIRContext *ctx = &getContext();
    auto fail = [&]() { return func.emitOpError("--loom-attach-optimizer: "); };
    if (!(maxGradNorm > 0) || !std::isfinite(maxGradNorm))
      return fail() << "'max-grad-norm' is " << maxGradNorm
                    << ", expected a finite value > 0 (0: no clipping)";
    double normType;
    if (gradNormType == "2" || gradNormType == "2.0")
      normType = 2.0;
    else if (gradNormType == "inf")
      normType = std::numeric_limits<double>::infinity();
    else
      return fail() << "'grad-norm-type' is '" << gradNormType
                    << "', expected 2 or inf";
    if (func->hasAttr(LoomDialect::kPipelineStageAttrName))
      return fail() << "gradient clipping of a pipeline stage is not "
                       "supported: the norm spans every stage's gradients";
    // A pipeline rank's step completes its norm over the pipeline ranks,
    // the axes its transfers run over.
    std::optional<std::pair<FlatSymbolRefAttr, ArrayAttr>> pipeline;
    if (func->hasAttr(LoomDialect::kPipelineActionsAttrName)) {
      func.walk([&](Operation *op) {
        if (auto send = dyn_cast<SendStartOp>(op))
          pipeline = {send.getMeshAttr(), send.getAxesAttr()};
        else if (auto recv = dyn_cast<RecvStartOp>(op))
          pipeline = {recv.getMeshAttr(), recv.getAxesAttr()};
        return pipeline ? WalkResult::interrupt() : WalkResult::advance();
      });
    }

    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    Location loc =
        NameLoc::get(StringAttr::get(ctx, "clip_grad_norm"), func.getLoc());
    // In parameter order, the order of model.parameters() that PyTorch
    // stacks the norms in.
    SmallVector<GradientTarget> grads = getGradientTargets(func);
    llvm::stable_sort(grads,
                      [](const GradientTarget &a, const GradientTarget &c) {
                        return a.arg < c.arg;
                      });
    if (grads.empty()) {
      // The other ranks would wait for this one's norm.
      if (pipeline)
        return fail() << "pipeline rank holds no gradient to clip";
      return success();
    }

    OpBuilder b(ret);
    // The norm of each gradient, in result order as PyTorch takes
    // model.parameters(); shards apart from whole gradients.
    SmallVector<Value> whole, sharded;
    ShardAttr shardedOver;
    for (const GradientTarget &target : grads) {
      unsigned i = target.result;
      Value grad = ret.getOperand(i);
      if (!isa<FloatType>(
              cast<RankedTensorType>(grad.getType()).getElementType()))
        return fail() << "cannot clip the gradient of result " << i
                      << ": it is not a floating-point tensor";
      // A copy of a gradient another pipeline rank made counts there.
      if (func.getResultAttr(i, LoomDialect::kPipelineGradFromAttrName))
        continue;
      Value norm = createNorm(b, loc, grad, normType);
      auto shard = func.getArgAttrOfType<ShardAttr>(
          target.arg, LoomDialect::kShardAttrName);
      if (!shard) {
        whole.push_back(norm);
        continue;
      }
      if (shardedOver && (shardedOver.getMesh() != shard.getMesh() ||
                          shardedOver.getAxes() != shard.getAxes()))
        return fail() << "cannot clip gradients sharded over different mesh "
                         "axes ("
                      << shardedOver.getAxes() << " and " << shard.getAxes()
                      << ")";
      shardedOver = shard;
      sharded.push_back(norm);
    }
    if (!sharded.empty()) {
      // The norm over all shards: the shards' local norm, completed over
      // the shard group as DTensor completes a partial norm.
      Value local = createNormOfNorms(b, loc, sharded, normType);
      whole.insert(whole.begin(),
                   completeNorm(b, loc, local, normType, shardedOver.getMesh(),
                                shardedOver.getAxes()));
    }
    Value total;
    if (whole.empty()) {
      // Only copies here: this rank adds nothing to the pipeline's norm (a
      // zero, not the copy's norm times zero, which is nan for inf).
      Value like =
          createNorm(b, loc, ret.getOperand(grads.front().result), normType);
      total = createClipAten(b, loc, "aten::zeros_like.default", like.getType(),
                             like, {OperandRefAttr::get(ctx, 0)});
    } else if (whole.size() == 1 && !sharded.empty())
      // Only shards (FSDP): their completed norm is the total already.
      total = whole.front();
    else
      total = createNormOfNorms(b, loc, whole, normType);
    // Each pipeline rank's norm, completed over the pipeline ranks as
    // torchtitan's clip_grad_norm_ completes it over its pp mesh.
    if (pipeline)
      total = completeNorm(b, loc, total, normType, pipeline->first,
                           pipeline->second);
    Type type = total.getType();
    auto ref0 = OperandRefAttr::get(ctx, 0);
    // max_norm / (total + 1e-6), clamped to 1, computed as PyTorch's
    // `float / Tensor` does (reciprocal, then multiply).
    Value coef = createClipAten(b, loc, "aten::add.Tensor", type, total,
                                {ref0, b.getF64FloatAttr(1e-6)});
    coef =
        createClipAten(b, loc, "aten::reciprocal.default", type, coef, {ref0});
    coef = createClipAten(b, loc, "aten::mul.Tensor", type, coef,
                          {ref0, b.getF64FloatAttr(maxGradNorm)});
    coef = createClipAten(b, loc, "aten::clamp.default", type, coef,
                          {ref0, UnitAttr::get(ctx), b.getF64FloatAttr(1.0)});
    for (const GradientTarget &target : grads) {
      unsigned i = target.result;
      Value grad = ret.getOperand(i);
      Value clipped = createClipAten(b, loc, "aten::mul.Tensor", grad.getType(),
                                     ValueRange{grad, coef},
                                     {ref0, OperandRefAttr::get(ctx, 1)});
      ret->setOperand(i, clipped);
    }
    return success();
  }
};
} // namespace
