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
  BackwardUnshard(ShardingState &s, int64_t mb, ArrayRef<Operation *> ops,
                  const ForwardGathers &forward)
      : s(s), mb(mb), ops(ops), forward(forward), b(s.func.getContext()) {}

  FailureOr<BackwardGathers> run();

private:
  void findDerivedValues();
  void findBackwardOps();
  void ensureGather(unsigned u, Operation *before);
  bool needsBackwardValue(Value v) const;
  Value recompute(Value v, Operation *before);
  void enterCall(Operation *op);
  bool needsPreBackwardGather(unsigned u) const;

  ShardingState &s;
  int64_t mb;
  /// The microbatch's ops, in order.
  ArrayRef<Operation *> ops;
  const ForwardGathers &forward;
  OpBuilder b;
  /// The unsharded parameter values of the forward, to their parameter.
  DenseMap<Value, unsigned> paramOfFull;
  /// Forward values computed only from gathered parameters, and the units
  /// whose parameters they are computed from.
  DenseMap<Value, SmallVector<unsigned, 1>> derived;
  SmallVector<Operation *> backwardOps;
  /// Per unit, the first backward op of the call whose backward runs: FSDP2
  /// unshards in the unit's pre-backward hook, before any of its backward
  /// ops runs.
  SmallVector<Operation *> firstBackwardOp;
  /// Per unit, what FSDP2's hooks have left so far in this backward.
  struct UnitState {
    /// The module call whose backward runs (-1: none yet) and those before.
    int64_t call = -1;
    SmallVector<int64_t> callsDone;
    /// Whether backward reads the parameters from a backward gather (the
    /// unit resharded after forward or after a call's backward), and
    /// whether that gather is built.
    bool fromBackwardGather = false;
    bool gathered = false;
    /// Whether the unit is still resharded to its post-forward group
    /// (reshard-after-forward=k); a post-backward reshards it fully.
    bool postForward = true;
  };
  SmallVector<UnitState> state;
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
  for (auto [value, p] : forward.laterCalls)
    paramOfFull[value] = p;
  for (auto [value, p] : paramOfFull)
    derived[value] = {s.params[p].unit};
  for (Operation *op : ops) {
    if (getPhase(op) != Phase::forward || !isRecomputable(op))
      continue;
    SmallVector<unsigned, 1> units;
    bool all = true;
    for (Value v : op->getOperands()) {
      auto it = derived.find(v);
      if (it == derived.end()) {
        all = false;
        break;
      }
      for (unsigned u : it->second)
        if (!llvm::is_contained(units, u))
          units.push_back(u);
    }
    if (!all)
      continue;
    for (Value r : op->getResults())
      derived[r] = units;
  }
}

bool BackwardUnshard::needsBackwardValue(Value v) const {
  auto it = derived.find(v);
  return it != derived.end() && llvm::any_of(it->second, [&](unsigned u) {
           return state[u].fromBackwardGather;
         });
}

void BackwardUnshard::findBackwardOps() {
  firstBackwardOp.assign(s.units.size(), nullptr);
  for (Operation *op : ops) {
    if (getPhase(op) != Phase::backward)
      continue;
    backwardOps.push_back(op);
    Operation *&first = firstBackwardOp[s.unitOfPath(getModulePath(op))];
    if (!first)
      first = op;
  }
}

void BackwardUnshard::ensureGather(unsigned u, Operation *before) {
  if (state[u].gathered)
    return;
  state[u].gathered = true;
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
  Value postForward = state[u].postForward ? forward.postForward[u] : Value();
  // The gather serves the call whose backward starts at the unit's first
  // backward op.
  if (firstBackwardOp[u])
    s.tagger.calls = getUnitCalls(unit, firstBackwardOp[u]);
  SmallVector<Value> values =
      buildGather(s, b, loc, unit, postForward, gathers.flat[u]);
  s.tagger.calls = nullptr;
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
    if (!state[s.params[p].unit].fromBackwardGather)
      return v;
    ensureGather(s.params[p].unit, before);
    if (failedUnshard)
      return v;
    recomputed.map(v, gathers.full[p]);
    return gathers.full[p];
  }
  Operation *def = v.getDefiningOp();
  for (Value operand : def->getOperands())
    if (needsBackwardValue(operand))
      recompute(operand, before);
  b.setInsertionPoint(before);
  Operation *clone = b.clone(*def, recomputed);
  clone->setAttr(LoomDialect::kPhaseAttrName,
                 PhaseAttr::get(b.getContext(), Phase::backward));
  return recomputed.lookup(v);
}

/// A unit whose outputs get gradients is unsharded by its pre-backward
/// hook even when no backward op reads its parameters (an input layer),
/// as FSDP2 does unless set_unshard_in_backward(False).
bool BackwardUnshard::needsPreBackwardGather(unsigned u) const {
  const Unit &unit = s.units[u];
  return state[u].fromBackwardGather && unit.unshardInBackward &&
         !unit.params.empty() && firstBackwardOp[u] &&
         llvm::any_of(unit.params,
                      [&](unsigned p) { return bool(forward.full[p]); });
}

/// Runs FSDP2's hooks between the backward of one call of `op`'s unit and
/// the next: the previous call's post-backward reshards the unit when its
/// inputs required gradients (and the unit reshards after backward), so the
/// next call's pre-backward gathers it again and backward reads the
/// forward values recomputed from that gather.
void BackwardUnshard::enterCall(Operation *op) {
  unsigned u = s.unitOfPath(getModulePath(op));
  const Unit &unit = s.units[u];
  UnitState &st = state[u];
  int64_t call = callOf(unit, op);
  if (st.call < 0)
    st.call = call;
  if (call == st.call || llvm::is_contained(st.callsDone, call))
    return;
  bool lastMicrobatch = mb + 1 == s.microbatches.count;
  bool resharded = s.postBackwardCalls.count({u, mb, st.call}) &&
                   (lastMicrobatch || !unit.keepAfterBackward);
  st.callsDone.push_back(st.call);
  st.call = call;
  if (!resharded)
    return;
  // The previous call's pre-backward gather, if nothing read it.
  if (needsPreBackwardGather(u))
    ensureGather(u, firstBackwardOp[u]);
  st.fromBackwardGather = true;
  st.gathered = false;
  st.postForward = false;
  for (auto &[value, units] : derived)
    if (llvm::is_contained(units, u))
      recomputed.erase(value);
  firstBackwardOp[u] = op;
  if (needsPreBackwardGather(u))
    ensureGather(u, op);
}

FailureOr<BackwardGathers> BackwardUnshard::run() {
  gathers.full.resize(s.params.size());
  gathers.flat.resize(s.units.size());
  gathers.gathered.assign(s.units.size(), false);
  state.resize(s.units.size());
  for (auto [u, unit] : llvm::enumerate(s.units))
    state[u].fromBackwardGather = unit.reshard;
  findDerivedValues();
  findBackwardOps();
  for (Operation *op : backwardOps) {
    enterCall(op);
    if (failedUnshard)
      return failure();
    for (OpOperand &operand : op->getOpOperands()) {
      if (needsBackwardValue(operand.get()))
        operand.set(recompute(operand.get(), op));
      if (failedUnshard)
        return failure();
    }
  }
  for (unsigned u = 0, e = s.units.size(); u < e; ++u)
    if (needsPreBackwardGather(u))
      ensureGather(u, firstBackwardOp[u]);
  return std::move(gathers);
}

FailureOr<BackwardGathers>
fsdp::gatherForBackward(ShardingState &s, int64_t mb,
                        ArrayRef<Operation *> ops,
                        const ForwardGathers &forward) {
  return BackwardUnshard(s, mb, ops, forward).run();
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
