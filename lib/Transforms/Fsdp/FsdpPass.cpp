//===- FsdpPass.cpp - Shard a step's parameters as FSDP2 fully_shard does -===//
//
// The pass driver: it runs the steps declared in Fsdp.h in order on every
// step function of the module.
//
//===----------------------------------------------------------------------===//

#include "Fsdp.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"

namespace loom {
#define GEN_PASS_DEF_LOOMFSDP
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::fsdp;

/// Gives every parameter argument its local shard type and `loom.shard`.
static void shardArguments(ShardingState &s) {
  MLIRContext *ctx = s.func.getContext();
  for (ParamInfo &info : s.params) {
    BlockArgument arg = s.func.getArgument(info.argIndex);
    arg.setType(info.localType);
    s.func.setArgAttr(info.argIndex, LoomDialect::kShardAttrName,
                      ShardAttr::get(ctx, s.mesh().ref, s.mesh().shardAxes,
                                     info.shardDim, info.fullType.getShape()));
  }
}

/// Casts results back to their traced dtype (the loss is reported in it),
/// marks the loss partial and the batch inputs split over the data-parallel
/// axes, as for DDP, and retypes the function.
static void finishSignature(ShardingState &s) {
  func::FuncOp func = s.func;
  MLIRContext *ctx = func.getContext();
  const MeshLayout &mesh = s.mesh();
  auto ret = cast<func::ReturnOp>(s.body().getTerminator());
  OpBuilder b(ctx);
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto role =
        func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role)
      continue;
    Type declared = func.getResultTypes()[i];
    Value value = ret.getOperand(i);
    if (value.getType() != declared) {
      auto type = cast<RankedTensorType>(declared);
      s.tagger.module = b.getStringAttr("");
      s.tagger.phase = Phase::forward;
      b.setInsertionPoint(ret);
      ret.setOperand(
          i, s.tagger.castTo(b, value.getLoc(), value, type.getElementType()));
    }
    if (role.getValue() == Role::loss)
      func.setResultAttr(
          i, LoomDialect::kPartialAttrName,
          PartialAttr::get(ctx, mesh.ref, mesh.dpAxes, ReduceKind::avg));
  }
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto role = func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    std::optional<int64_t> dim = getBatchDim(func, i);
    if (role && role.getValue() == Role::input && dim &&
        cast<RankedTensorType>(func.getArgument(i).getType()).getRank() > 0)
      func.setArgAttr(i, LoomDialect::kSplitAttrName,
                      SplitAttr::get(ctx, mesh.ref, mesh.dpAxes, *dim));
  }
  func.setType(FunctionType::get(ctx, s.body().getArgumentTypes(),
                                 ret.getOperandTypes()));
}

namespace {
struct LoomFsdpPass : public loom::impl::LoomFsdpBase<LoomFsdpPass> {
  using LoomFsdpBase::LoomFsdpBase;

  void runOnOperation() override;

private:
  LoomFsdpOptions getOptions() const;
  LogicalResult shardStep(func::FuncOp func);
  LogicalResult checkUnitsUsed(ArrayRef<func::FuncOp> steps);
  /// The listed units some step formed (a pipelined step forms only those
  /// of its own stages).
  llvm::StringSet<> formedUnits;
};
} // namespace

LoomFsdpOptions LoomFsdpPass::getOptions() const {
  LoomFsdpOptions options;
  options.units.assign(units.begin(), units.end());
  options.meshShape.assign(meshShape.begin(), meshShape.end());
  options.meshName = meshName;
  options.shardAxes.assign(shardAxes.begin(), shardAxes.end());
  options.replicateAxes.assign(replicateAxes.begin(), replicateAxes.end());
  options.reshardAfterForward = reshardAfterForward;
  options.reshardAfterBackward = reshardAfterBackward;
  options.paramDtype = paramDtype;
  options.reduceDtype = reduceDtype;
  options.gradientDivideFactor = gradientDivideFactor;
  options.unitSettings.assign(unitSettings.begin(), unitSettings.end());
  options.shardDims.assign(shardDims.begin(), shardDims.end());
  return options;
}

LogicalResult LoomFsdpPass::shardStep(func::FuncOp func) {
  FailureOr<Config> config = resolveOptions(func, getOptions());
  if (failed(config))
    return failure();
  ShardingState s(func, *config);
  if (failed(collectParams(s)) || failed(formUnits(s)))
    return failure();
  for (const Unit &unit : s.units)
    if (!unit.isRoot)
      formedUnits.insert(unit.prefix);
  s.microbatches = Microbatches::find(s.body());
  if (failed(declareMesh(getOperation(), func, s.mesh())))
    return failure();
  // A pipeline rank without parameters still splits its batch inputs.
  if (s.params.empty()) {
    // Its transfers would keep the traced dtype while its neighbours send
    // and expect the compute dtype.
    if (s.config.computeDtype)
      return emitFsdpError(func)
             << "holds no parameters; param-dtype needs every pipeline rank "
                "to hold some";
    finishSignature(s);
    return success();
  }

  shardArguments(s);
  if (failed(unshardPerMicrobatch(s)))
    return failure();
  applyMixedPrecision(s);
  if (failed(reduceGradients(s)))
    return failure();
  finishSignature(s);
  return success();
}

/// Each program of a pipelined step forms the listed units it holds; a
/// unit no program holds is a typo, reported as on a single step.
LogicalResult LoomFsdpPass::checkUnitsUsed(ArrayRef<func::FuncOp> steps) {
  for (const std::string &prefix : units)
    if (!formedUnits.contains(prefix))
      return emitFsdpError(steps.front())
             << "unit '" << prefix
             << "' matches no parameter of any pipeline rank (none is owned "
                "or used by a module under it)";
  return success();
}

void LoomFsdpPass::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<func::FuncOp> steps = getStepFunctions(module);
  if (steps.empty()) {
    module.emitError("--loom-fsdp: no step function (func.func with '")
        << LoomDialect::kStepAttrName << "') to shard";
    return signalPassFailure();
  }
  for (func::FuncOp func : steps)
    if (failed(shardStep(func)))
      return signalPassFailure();
  if (failed(checkUnitsUsed(steps)))
    return signalPassFailure();
  if (failed(verify(module))) {
    module.emitError("--loom-fsdp produced an invalid module");
    return signalPassFailure();
  }
}
