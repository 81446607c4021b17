//===- Calls.cpp - loom-fsdp's view of modules called more than once ------===//
//
// FSDP2 runs a unit's hooks per call of its module: a module called twice in
// one forward is unsharded before each call and resharded after it, gets a
// pre-backward hook per call, and a post-backward hook per call whose
// forward inputs require gradients (registered on those inputs; without
// one, only the root's final callback runs it). Capture records the call
// each op ran in (`loom.calls`); this file answers which calls' backward
// ends in a post-backward hook.
//
//===----------------------------------------------------------------------===//

#include "Fsdp.h"

using namespace mlir;
using namespace loom;
using namespace loom::fsdp;

/// Whether `type` can carry a gradient (autograd's requires_grad holds
/// only for floating-point tensors).
static bool canHaveGradient(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType, ComplexType>(tensor.getElementType());
}

void fsdp::findPostBackwardCalls(ShardingState &s) {
  // Forward values that require gradients: those computed from a trained
  // parameter (data inputs never do).
  DenseSet<Value> needGrad;
  for (const ParamInfo &info : s.params)
    if (info.gradResult)
      needGrad.insert(s.func.getArgument(info.argIndex));
  for (Operation &op : s.body()) {
    if (getPhase(&op) != Phase::forward ||
        llvm::none_of(op.getOperands(),
                      [&](Value v) { return needGrad.contains(v); }))
      continue;
    for (Value r : op.getResults())
      if (canHaveGradient(r.getType()))
        needGrad.insert(r);
  }
  // A call's inputs are the values its ops read from outside the call (a
  // parameter is the module's state, not an input).
  for (Operation &op : s.body()) {
    if (getPhase(&op) != Phase::forward)
      continue;
    std::optional<int64_t> mb = s.microbatches.of(&op);
    for (auto [u, unit] : llvm::enumerate(s.units)) {
      if (unit.isRoot || !isInModule(getModulePath(&op), unit.prefix))
        continue;
      int64_t call = callOf(unit, &op);
      for (Value v : op.getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || !needGrad.contains(v))
          continue;
        bool inCall = getPhase(def) == Phase::forward &&
                      isInModule(getModulePath(def), unit.prefix) &&
                      callOf(unit, def) == call && s.microbatches.of(def) == mb;
        if (!inCall)
          s.postBackwardCalls.insert({unsigned(u), mb.value_or(0), call});
      }
    }
  }
}

DictionaryAttr fsdp::getUnitCalls(const Unit &unit, Operation *op) {
  auto calls = op->getAttrOfType<DictionaryAttr>(LoomDialect::kCallsAttrName);
  if (!calls || unit.isRoot)
    return nullptr;
  SmallVector<NamedAttribute> kept;
  for (NamedAttribute call : calls)
    if (isInModule(unit.prefix, call.getName().getValue()))
      kept.push_back(call);
  if (kept.empty())
    return nullptr;
  return DictionaryAttr::get(op->getContext(), kept);
}
