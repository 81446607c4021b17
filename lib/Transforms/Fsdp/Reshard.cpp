//===- Reshard.cpp - loom-fsdp's backward re-gathers and reshards ---------===//
//
// A unit that resharded after forward is gathered again in backward, and
// the forward values computed only from its parameters that backward reads
// are recomputed from the second gather, so that no unsharded parameter
// lives from forward into backward. After backward every unit reshards,
// unless reshard-after-backward=false keeps it for the next microbatch.
//
//===----------------------------------------------------------------------===//

#include "Fsdp.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace loom;
using namespace loom::fsdp;

namespace {
/// Re-gathers and recomputes for the backward of one microbatch.
class BackwardUnshard {
public:
  BackwardUnshard(ShardingState &s, int64_t mb, const ForwardGathers &forward)
      : s(s), mb(mb), forward(forward), b(s.func.getContext()) {}

  FailureOr<BackwardGathers> run();

private:
  bool inMicrobatch(Operation *op) const { return s.microbatches.of(op) == mb; }
  void findDerivedValues();
  void findBackwardOps();
  void ensureGather(unsigned u, Operation *before);
  Value recompute(Value v, Operation *before);

  ShardingState &s;
  int64_t mb;
  const ForwardGathers &forward;
  OpBuilder b;
  /// The unsharded parameter values of the forward, to their parameter.
  DenseMap<Value, unsigned> paramOfFull;
  /// Forward values computed only from gathered parameters, and whether
  /// they depend on a unit that resharded.
  DenseMap<Value, bool> derived;
  SmallVector<Operation *> backwardOps;
  /// Per unit, its first backward op: FSDP2 unshards in the unit's
  /// pre-backward hook, before any of its backward ops runs.
  SmallVector<Operation *> firstBackwardOp;
  IRMapping recomputed;
  BackwardGathers gathers;
  /// Set once a backward op needed a unit that does not unshard in
  /// backward (the error is emitted).
  bool failedUnshard = false;
};
} // namespace

void BackwardUnshard::findDerivedValues() {
  for (auto [p, value] : llvm::enumerate(forward.full))
    if (value)
      paramOfFull[value] = p;
  for (auto [value, p] : paramOfFull)
    derived[value] = s.reshardsAfterForward(p);
  for (Operation &op : s.body()) {
    if (getPhase(&op) != Phase::forward || !inMicrobatch(&op) ||
        !isRecomputable(&op))
      continue;
    bool all = true, anyRaf = false;
    for (Value v : op.getOperands()) {
      auto it = derived.find(v);
      if (it == derived.end()) {
        all = false;
        break;
      }
      anyRaf |= it->second;
    }
    if (!all)
      continue;
    for (Value r : op.getResults())
      derived[r] = anyRaf;
  }
}

void BackwardUnshard::findBackwardOps() {
  firstBackwardOp.assign(s.units.size(), nullptr);
  for (Operation &op : s.body()) {
    if (getPhase(&op) != Phase::backward || !inMicrobatch(&op))
      continue;
    backwardOps.push_back(&op);
    Operation *&first = firstBackwardOp[s.unitOfPath(getModulePath(&op))];
    if (!first)
      first = &op;
  }
}

void BackwardUnshard::ensureGather(unsigned u, Operation *before) {
  if (gathers.gathered[u])
    return;
  gathers.gathered[u] = true;
  const Unit &unit = s.units[u];
  if (!unit.unshardInBackward) {
    // FSDP2 would run this backward op on freed storage; say which op
    // needs the parameters instead.
    before->emitOpError("--loom-fsdp: reads the parameters of unit '")
        << unit.label()
        << "' in backward, but its unit-settings say unshard-in-backward="
           "false; only a unit whose backward needs none of its parameters "
           "(an embedding) may skip the backward all-gather";
    failedUnshard = true;
    return;
  }
  s.tagger.module = b.getStringAttr(unit.prefix);
  s.tagger.phase = Phase::backward;
  Operation *at = before;
  if (firstBackwardOp[u] && firstBackwardOp[u]->isBeforeInBlock(at))
    at = firstBackwardOp[u];
  b.setInsertionPoint(at);
  Location loc = NameLoc::get(
      b.getStringAttr("fsdp.all_gather:" + unit.label()), at->getLoc());
  SmallVector<Value> values =
      buildGather(s, b, loc, unit, forward.postForward[u], gathers.flat[u]);
  s.gatheredValues.insert(values.begin(), values.end());
  for (auto [q, value] : llvm::zip(unit.params, values))
    gathers.full[q] = value;
}

/// `v` for a backward use before `before`: a parameter of a unit that
/// resharded comes from the backward gather, a value derived from one is
/// cloned (with its operands) into backward.
Value BackwardUnshard::recompute(Value v, Operation *before) {
  if (Value done = recomputed.lookupOrNull(v))
    return done;
  auto full = paramOfFull.find(v);
  if (full != paramOfFull.end()) {
    unsigned p = full->second;
    if (!s.reshardsAfterForward(p))
      return v;
    ensureGather(s.params[p].unit, before);
    if (failedUnshard)
      return v;
    recomputed.map(v, gathers.full[p]);
    return gathers.full[p];
  }
  Operation *def = v.getDefiningOp();
  for (Value operand : def->getOperands()) {
    auto it = derived.find(operand);
    if (it != derived.end() && it->second)
      recompute(operand, before);
  }
  b.setInsertionPoint(before);
  Operation *clone = b.clone(*def, recomputed);
  clone->setAttr(LoomDialect::kPhaseAttrName,
                 PhaseAttr::get(b.getContext(), Phase::backward));
  return recomputed.lookup(v);
}

FailureOr<BackwardGathers> BackwardUnshard::run() {
  gathers.full.resize(s.params.size());
  gathers.flat.resize(s.units.size());
  gathers.gathered.assign(s.units.size(), false);
  findDerivedValues();
  findBackwardOps();
  for (Operation *op : backwardOps)
    for (OpOperand &operand : op->getOpOperands()) {
      auto it = derived.find(operand.get());
      if (it != derived.end() && it->second)
        operand.set(recompute(operand.get(), op));
      if (failedUnshard)
        return failure();
    }
  // A unit whose outputs get gradients is unsharded by its pre-backward
  // hook even when no backward op reads its parameters (an input layer),
  // as FSDP2 does unless set_unshard_in_backward(False).
  for (auto [u, unit] : llvm::enumerate(s.units))
    if (unit.reshard && unit.unshardInBackward && !unit.params.empty() &&
        firstBackwardOp[u] && llvm::any_of(unit.params, [&](unsigned p) {
          return bool(forward.full[p]);
        }))
      ensureGather(u, firstBackwardOp[u]);
  return std::move(gathers);
}

FailureOr<BackwardGathers>
fsdp::gatherForBackward(ShardingState &s, int64_t mb,
                        const ForwardGathers &forward) {
  return BackwardUnshard(s, mb, forward).run();
}

void fsdp::reshardAfterBackward(ShardingState &s, int64_t mb,
                                const BackwardGathers &backward,
                                Unsharded &unsharded) {
  // FSDP2's set_reshard_after_backward(False) keeps a unit unsharded on all
  // but the last microbatch.
  bool lastMicrobatch = mb + 1 == s.microbatches.count;
  for (auto [u, unit] : llvm::enumerate(s.units)) {
    if (lastMicrobatch || !unit.keepAfterBackward) {
      unsharded.params[u].clear();
      unsharded.flat[u] = Value();
      continue;
    }
    if (backward.gathered[u]) {
      for (unsigned p : unit.params)
        unsharded.params[u].push_back(backward.full[p]);
      unsharded.flat[u] = backward.flat[u];
    }
  }
}
