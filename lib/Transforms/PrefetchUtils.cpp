//===- PrefetchUtils.cpp - Helpers shared by loom-prefetch and loom-bucket ===//

#include "PrefetchUtils.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace loom;

bool ProgramPoint::isAfter(Operation *x) const {
  if (after)
    return x == op || x->isBeforeInBlock(op);
  return x->isBeforeInBlock(op);
}

bool ProgramPoint::operator<(const ProgramPoint &other) const {
  if (op == other.op)
    return !after && other.after;
  return op->isBeforeInBlock(other.op);
}

bool loom::isMovableAten(Operation *op) {
  return isa<AtenOp>(op) && op->getNumRegions() == 0 && !isRandomAtenOp(op) &&
         !isInPlaceAtenOp(op);
}

FailureOr<SmallVector<Operation *>>
loom::collectInputSlice(Operation *op, ProgramPoint point,
                        Operation **culprit) {
  Block *block = op->getBlock();
  DenseSet<Operation *> seen;
  SmallVector<Operation *> slice;
  SmallVector<Operation *> work{op};
  while (!work.empty()) {
    Operation *current = work.pop_back_val();
    for (Value operand : current->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || def->getBlock() != block || point.isAfter(def))
        continue;
      if (!seen.insert(def).second)
        continue;
      if (!isMovableAten(def)) {
        if (culprit)
          *culprit = def;
        return failure();
      }
      slice.push_back(def);
      work.push_back(def);
    }
  }
  llvm::sort(slice,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return slice;
}

FailureOr<SmallVector<Operation *>> loom::collectUserSlice(Value value,
                                                           Operation *point) {
  Block *block = point->getBlock();
  DenseSet<Operation *> seen;
  SmallVector<Operation *> slice;
  SmallVector<Value> work{value};
  while (!work.empty()) {
    Value current = work.pop_back_val();
    for (Operation *user : current.getUsers()) {
      // Uses in nested regions move with their ancestor in this block.
      Operation *owner = block->findAncestorOpInBlock(*user);
      if (!owner || !owner->isBeforeInBlock(point) || owner == point)
        continue;
      if (!seen.insert(owner).second)
        continue;
      std::optional<CollectiveKind> kind = getCollectiveKind(owner);
      bool collective =
          isa<WaitOp>(owner) || (kind && isGroupCollective(*kind));
      if (!collective && !isMovableAten(owner))
        return failure();
      slice.push_back(owner);
      for (Value result : owner->getResults())
        work.push_back(result);
    }
  }
  llvm::sort(slice,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return slice;
}

WaitOp loom::getWaitOf(Operation *start) {
  if (start->getNumResults() != 1 || !start->getResult(0).hasOneUse())
    return nullptr;
  return dyn_cast<WaitOp>(*start->getResult(0).getUsers().begin());
}
