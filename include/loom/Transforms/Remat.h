//===- Remat.h - Recompute regions from a choice of saved forward ops -----===//
//
// The core of activation checkpointing, shared by `loom-remat` (whose modes
// choose what to save by module and op kind) and any pass that chooses the
// saved ops itself (a memory-budget solver): given groups of forward ops and
// which of them keep their outputs, build one `loom.recompute` region per
// group that re-executes the rest where backward needs it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_REMAT_H
#define LOOM_TRANSFORMS_REMAT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace loom {

/// The forward ops of one recompute region and the ones among them whose
/// outputs are kept for backward.
struct RecomputeGroup {
  /// The region's `module` and `loom.module`.
  std::string module;
  /// Forward ops of the step's body (any order; none in two groups).
  llvm::SmallVector<mlir::Operation *> ops;
  /// The ops of `ops` whose outputs are kept; every other op of `ops` is
  /// recomputed, unless it cannot be (isRecomputable).
  llvm::SmallPtrSet<mlir::Operation *, 16> saved;
};

/// Whether `op` may run again in a recompute region: an ATen op that is not
/// random and not in place, whose results are ranked tensors. applyRecompute
/// saves the others whatever the group says, and also saves ops whose
/// outputs an in-place op overwrites (directly or through views).
bool isRecomputable(mlir::Operation *op);

/// Builds the regions of `groups`, in order, in the body of `step`. For each
/// group, the recomputed ops that some backward op (`loom.phase<backward>`)
/// of the original step reads, and the recomputed ops of the same group
/// those read in turn, are copied in program order into one
/// `loom.recompute` placed right before the first such backward op; its
/// inputs are everything else the copies read (saved ops, ops outside the
/// group, arguments) and its results replace the forward values in those
/// backward ops. Forward uses keep the forward values. Recomputed forward
/// ops left without uses are erased. A group that recomputes nothing
/// backward reads gets no region.
///
/// Any save set is valid. A recomputed value that a backward op of another
/// module reads is recomputed before that op, however early in backward;
/// callers that want the region next to the group's own backward save such
/// values. Fails, with a diagnostic at the offending op, when an op of a
/// group is not a forward op of the step's body, is in two groups, or when a
/// region's input would be defined after the region's place.
mlir::LogicalResult applyRecompute(mlir::func::FuncOp step,
                                   llvm::ArrayRef<RecomputeGroup> groups);

} // namespace loom

#endif // LOOM_TRANSFORMS_REMAT_H
