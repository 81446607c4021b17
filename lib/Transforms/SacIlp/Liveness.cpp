//===- Liveness.cpp - loom-sac-ilp's memory profile of the finished step --===//
//
// The solver bounds the peak of the program the runtime will run, not of the
// step as it stands: FSDP's gathered parameters, the gradients, the
// optimizer's state and collective buffers are only there once the rest of
// the pipeline has run. So the pipeline runs on a copy, and the same sweep
// that predicts the runtime's peak (PeakMemory) gives the profile, with each
// node's outputs located in it by a tag the copy keeps.
//
//===----------------------------------------------------------------------===//

#include "SacIlp.h"

#include "loom/Analysis/PeakMemory.h"
#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"

using namespace mlir;
using namespace loom;
using namespace loom::sacilp;

/// Where a reader keeps reading: a collective start until its wait.
static Operation *getHoldUntil(Operation *user) {
  if (auto start = dyn_cast<rt::CollectiveStartOp>(user))
    if (Operation *wait = start.getWait())
      return wait;
  if (getCollectiveKind(user))
    for (Operation *waitUser : user->getResult(0).getUsers())
      if (isa<WaitOp>(waitUser))
        return waitUser;
  return user;
}

/// Folds the readers of `v` and of views of it into `inst`.
static void addReaders(Value v, const DenseMap<Operation *, int64_t> &position,
                       int64_t end, Instance &inst) {
  for (Operation *user : v.getUsers()) {
    if (isa<rt::FreeOp>(user))
      continue;
    if (isa<func::ReturnOp, rt::OutputOp>(user)) {
      inst.last = end;
      continue;
    }
    auto it = position.find(getHoldUntil(user));
    if (it == position.end())
      it = position.find(user);
    if (it == position.end())
      continue;
    int64_t at = it->second;
    inst.last = std::max(inst.last, at);
    if (isForwardOp(user))
      inst.lastForward = std::max(inst.lastForward, at);
    else if (inst.firstBackward < 0 || at < inst.firstBackward)
      inst.firstBackward = at;
    // What reads a result that shares v's storage (a view, a split piece, a
    // reshape of a contiguous tensor) keeps v alive: the peak-memory sweep
    // this profile comes from says so with the same rule.
    if (getAliasedOperand(user) == v)
      for (Value r : user->getResults())
        addReaders(r, position, end, inst);
  }
}

static Liveness measure(const PeakMemory &peak) {
  Liveness out;
  out.persistentBytes = peak.persistentBytes;
  out.activationBytesAt = peak.activationBytesAt;
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(peak.order))
    position[op] = i;
  int64_t end = peak.activationBytesAt.size();
  for (auto [i, op] : llvm::enumerate(peak.order)) {
    auto tag = op->getAttrOfType<IntegerAttr>(kNodeAttrName);
    if (!tag)
      continue;
    Instance inst;
    inst.node = tag.getInt();
    inst.def = inst.lastForward = inst.last = i;
    if (auto copy = op->getAttrOfType<IntegerAttr>(
            LoomDialect::kMicrobatchAttrName))
      inst.copy = copy.getInt();
    for (Value r : op->getResults()) {
      if (auto type = dyn_cast<RankedTensorType>(r.getType()))
        inst.bytes += getTensorBytes(type);
      addReaders(r, position, end, inst);
    }
    out.instances.push_back(inst);
  }
  return out;
}

FailureOr<Liveness> sacilp::measureLiveness(
    ModuleOp module, func::FuncOp step, const Problem &problem,
    const std::function<LogicalResult(ModuleOp)> &downstream) {
  Builder b(module.getContext());
  for (auto [i, node] : llvm::enumerate(problem.nodes))
    node.op->setAttr(kNodeAttrName, b.getI64IntegerAttr(i));
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  for (const Node &node : problem.nodes)
    node.op->removeAttr(kNodeAttrName);
  if (downstream && failed(downstream(*copy)))
    return failure();
  for (auto program : copy->getOps<rt::ProgramOp>())
    return measure(PeakMemory(program));
  for (auto func : copy->getOps<func::FuncOp>())
    if (func.getSymName() == step.getSymName())
      return measure(PeakMemory(func));
  return mlir::emitError(step.getLoc(), "--loom-sac-ilp: the pipeline after "
                                        "it left no step to measure");
}
