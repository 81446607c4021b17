//===- AttachOptimizer.cpp - Apply SGD/Adam/AdamW inside the step ---------===//

#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_LOOMATTACHOPTIMIZER
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

StringRef loom::stringifyOptimizerKind(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::None:
    return "none";
  case OptimizerKind::SGD:
    return "sgd";
  case OptimizerKind::Adam:
    return "adam";
  case OptimizerKind::AdamW:
    return "adamw";
  }
  llvm_unreachable("unknown optimizer kind");
}

double loom::resolveWeightDecay(OptimizerKind kind, double weightDecay) {
  // The one place where PyTorch's defaults differ between the algorithms.
  if (weightDecay >= 0)
    return weightDecay;
  return kind == OptimizerKind::AdamW ? 1e-2 : 0.0;
}

FailureOr<Attribute>
loom::buildOptimizerAttr(MLIRContext *ctx,
                         const LoomAttachOptimizerOptions &options,
                         function_ref<InFlightDiagnostic()> emitError) {
  auto f = [](double v) { return APFloat(v); };
  OptimizerKind kind = options.optimizer;
  double weightDecay = resolveWeightDecay(kind, options.weightDecay);
  Attribute attr;
  switch (kind) {
  case OptimizerKind::None:
    return emitError() << "optimizer 'none' attaches no optimizer";
  case OptimizerKind::SGD:
    attr =
        SGDAttr::getChecked(emitError, ctx, f(options.lr), f(options.momentum),
                            f(options.dampening), f(weightDecay),
                            options.nesterov, options.maximize);
    break;
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW:
    if (options.nesterov || options.momentum != 0 || options.dampening != 0)
      return emitError() << "'momentum', 'dampening' and 'nesterov' are SGD "
                            "options; "
                         << stringifyOptimizerKind(kind)
                         << " does not take them";
    attr = kind == OptimizerKind::Adam
               ? Attribute(AdamAttr::getChecked(
                     emitError, ctx, f(options.lr), f(options.beta1),
                     f(options.beta2), f(options.eps), f(weightDecay),
                     options.maximize))
               : Attribute(AdamWAttr::getChecked(
                     emitError, ctx, f(options.lr), f(options.beta1),
                     f(options.beta2), f(options.eps), f(weightDecay),
                     options.maximize));
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
    FailureOr<Attribute> config = buildOptimizerAttr(ctx, options, [&] {
      return func.emitOpError("--loom-attach-optimizer: ");
    });
    if (failed(config))
      return failure();
    std::optional<OptimizerConfig> info = getOptimizerConfig(*config);

    llvm::StringMap<unsigned> paramArgs;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      auto role =
          func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
      auto name =
          func.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName);
      if (role && name && role.getValue() == Role::parameter)
        paramArgs[name.getValue()] = i;
    }

    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    OpBuilder builder(ret);
    auto roleAttr = [&](Role r) { return RoleAttr::get(ctx, r); };
    SmallVector<Value> stateResults;
    SmallVector<DictionaryAttr> stateResultAttrs;
    unsigned numResults = func.getNumResults();
    for (unsigned i = 0; i < numResults; ++i) {
      auto role =
          func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
      if (!role || role.getValue() != Role::grad)
        continue;
      // The step verifier guarantees a grad targets a parameter argument.
      StringAttr target =
          func.getResultAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName);
      unsigned argIndex = paramArgs.lookup(target.getValue());
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
      auto update = OptimizerUpdateOp::create(
          builder, loc, resultTypes, *config, param, ret.getOperand(i), state);
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
};
} // namespace
