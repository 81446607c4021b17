//===- PrefetchUtils.h - Helpers shared by loom-prefetch and loom-bucket --===//
//
// Moving collective starts within a step: where a point in a block is, which
// ops compute a start's input and may move with it, and which ops read a
// wait's result and may move after a later wait.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_PREFETCHUTILS_H
#define LOOM_LIB_TRANSFORMS_PREFETCHUTILS_H

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Dialect/Loom/IR/OpClassification.h"

#include "llvm/ADT/SmallVector.h"

namespace loom {

/// A point between two ops of a block: right after `op`, or right before it.
struct ProgramPoint {
  mlir::Operation *op = nullptr;
  bool after = false;

  static ProgramPoint before(mlir::Operation *op) { return {op, false}; }
  static ProgramPoint afterOp(mlir::Operation *op) { return {op, true}; }
  /// Whether `x` lies before this point.
  bool isAfter(mlir::Operation *x) const;
  /// Whether this point lies strictly before `other`.
  bool operator<(const ProgramPoint &other) const;
};

/// An op that may be moved: a `loom.aten` without regions that neither draws
/// random numbers (isRandomAtenOp, the ops loom-schedule keeps in order)
/// nor writes in place.
bool isMovableAten(mlir::Operation *op);

/// The ops that compute `op`'s operands and lie after `point`, in block
/// order, so that moving them (then `op`) to `point` keeps every use
/// dominated. Fails, naming the culprit in `culprit`, when one of them cannot
/// move.
mlir::FailureOr<llvm::SmallVector<mlir::Operation *>>
collectInputSlice(mlir::Operation *op, ProgramPoint point,
                  mlir::Operation **culprit = nullptr);

/// The ops that (transitively) use `value` and lie before `point`, in block
/// order, so that moving them after `point` keeps every use dominated.
/// Fails when one of them cannot move (a random op, a terminator, an op
/// with regions). Collective starts and waits may move: every rank runs the
/// same program, so every rank moves them alike.
mlir::FailureOr<llvm::SmallVector<mlir::Operation *>>
collectUserSlice(mlir::Value value, mlir::Operation *point);

/// The `loom.wait` of a collective start (its future's single user), or
/// null.
WaitOp getWaitOf(mlir::Operation *start);

} // namespace loom

#endif // LOOM_LIB_TRANSFORMS_PREFETCHUTILS_H
