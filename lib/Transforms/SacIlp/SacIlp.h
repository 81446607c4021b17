//===- SacIlp.h - State shared by the steps of loom-sac-ilp -----*- C++ -*-===//
//
// Private to lib/Transforms/SacIlp/. The pass decides, for the whole step,
// which forward values of the recompute blocks are saved and which are
// recomputed in backward, so that the per-rank peak stays within a budget at
// the least recompute time. It runs in four steps, one file each:
//
// - Problem.cpp: the choices. Every forward op of a block that allocates
//   (not a view) is a node; identical blocks share their decisions, so a
//   block is solved once and the solution reused.
// - Liveness.cpp: where each node's outputs live once the rest of the
//   pipeline (sharding, optimizer, schedule, lowering) has run, measured on a
//   copy of the module with the same liveness sweep as the peak-memory
//   analysis, so FSDP's gathered parameters, gradients, optimizer state and
//   collective buffers are all in the profile.
// - Model.cpp: the MILP over that profile, solved with CBC.
// - SacIlpPass.cpp: the pass, which applies the decision with loom-remat's
//   machinery and checks the result against the budget on a second copy.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_SACILP_SACILP_H
#define LOOM_LIB_TRANSFORMS_SACILP_SACILP_H

#include "loom/Analysis/CostModel.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace loom::sacilp {

using namespace mlir;

/// Whether `op` runs in forward (`loom.phase<forward>`).
inline bool isForwardOp(Operation *op) {
  return getPhase(op) == Phase::forward;
}

/// The attribute that names a node on the op of a copy of the step, so that
/// the node can be found again after the rest of the pipeline has run.
constexpr llvm::StringLiteral kNodeAttrName = "sac_ilp.node";

/// One forward op of a recompute block whose outputs are allocated.
struct Node {
  Operation *op = nullptr;
  /// Index into Problem::blocks.
  unsigned block = 0;
  /// The decision it takes (nodes at the same position of identical blocks
  /// share one).
  unsigned decision = 0;
  /// Read (directly or through views) by a backward op: it must be saved or
  /// recomputed.
  bool backwardUsed = false;
  /// Random or in place: recomputing it would not give the same values, so
  /// it is saved.
  bool mustSave = false;
  /// What recomputing it costs on the cost model's device.
  double seconds = 0;
  /// The nodes of the same block it reads (directly or through views).
  llvm::SmallVector<unsigned> inputs;
};

/// One block (a module path prefix, as `checkpoint_wrapper` wraps a module).
struct BlockChoice {
  std::string module;
  llvm::SmallVector<unsigned> nodes;
  /// The block's forward view ops (positions in the step body): they cost
  /// nothing to recompute, and are, so that a view backward reads does not
  /// keep its base alive.
  llvm::SmallVector<size_t> views;
};

struct Problem {
  llvm::SmallVector<Node> nodes;
  llvm::SmallVector<BlockChoice> blocks;
  unsigned numDecisions = 0;
  /// How many distinct blocks were solved (identical ones share).
  unsigned numDistinctBlocks = 0;
};

/// The nodes and blocks of `step` for the blocks `modules`, with their
/// recompute times from `costs`. Errors name the module.
FailureOr<Problem> buildProblem(func::FuncOp step,
                                llvm::ArrayRef<std::string> modules,
                                const CostModel &costs);

/// Where one node's outputs live in the finished program (one instance per
/// microbatch copy).
struct Instance {
  unsigned node = 0;
  int64_t bytes = 0;
  /// Positions in the profile: allocation, last forward read, first and
  /// last backward read.
  int64_t def = 0, lastForward = 0, firstBackward = -1, last = 0;
  /// Which copy of the block (microbatch) it belongs to.
  int64_t copy = 0;
};

struct Liveness {
  /// Bytes live throughout (parameters, state, inputs).
  int64_t persistentBytes = 0;
  /// Activation bytes live at each position.
  llvm::SmallVector<int64_t> activationBytesAt;
  llvm::SmallVector<Instance> instances;
};

/// Tags every node's op in `step` (of `module`) with kNodeAttrName, copies the
/// module, runs `downstream` (the rest of the compile pipeline) on the copy
/// and measures it; the tags are removed from `step` again.
FailureOr<Liveness> measureLiveness(ModuleOp module, func::FuncOp step,
                                    const Problem &problem,
                                    const std::function<LogicalResult(ModuleOp)>
                                        &downstream);

struct SolveOptions {
  double timeLimitSeconds = 10;
  double relativeGap = 0;
};

struct Decision {
  /// Per node: saved (true) or recomputed when backward needs it.
  llvm::SmallVector<bool> save;
  /// Per node: run again in backward (some nodes neither: only forward
  /// reads them).
  llvm::SmallVector<bool> recompute;
  /// The model's recompute time and peak.
  double recomputeSeconds = 0;
  int64_t modelPeakBytes = 0;
};

/// The cheapest decision whose modelled peak is at most `budget` bytes, or
/// failure (no diagnostic) when the model finds none.
FailureOr<Decision> solve(const Problem &problem, const Liveness &liveness,
                          int64_t budget, const SolveOptions &options,
                          std::string &error);

} // namespace loom::sacilp

#endif // LOOM_LIB_TRANSFORMS_SACILP_SACILP_H
