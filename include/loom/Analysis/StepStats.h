//===- StepStats.h - Op counts, bytes and FLOPs of a training step --------===//

#ifndef LOOM_ANALYSIS_STEPSTATS_H
#define LOOM_ANALYSIS_STEPSTATS_H

#include "loom/Analysis/PeakMemory.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

namespace loom {

/// FLOPs of one op as `torch.utils.flop_counter` counts them: matmuls,
/// convolutions (and their backward) and scaled-dot-product attention
/// (and its backward); every other op is 0.
int64_t countFlops(AtenOp op);

/// Everything `--loom-stats` reports about one step function.
struct StepStats {
  struct Group {
    int64_t count = 0, elements = 0, bytes = 0;
  };
  /// FLOPs by where they run. `recompute` is the forward work that
  /// `loom.recompute` regions run again in backward; `backward` is the
  /// gradient computation alone, so checkpointing leaves `forward` and
  /// `backward` as they were and adds `recompute`.
  struct ModuleFlops {
    int64_t forward = 0, backward = 0, other = 0, recompute = 0;
    int64_t total() const { return forward + backward + other + recompute; }
  };

  explicit StepStats(mlir::func::FuncOp step);

  std::string name;
  /// Op counts per phase name ("forward", "backward", "optimizer",
  /// "untagged"), in first-seen order. An op inside a recompute region
  /// counts in the region's phase (it runs there), the region and its
  /// yield not at all.
  llvm::MapVector<llvm::StringRef, int64_t> opsByPhase;
  /// Op counts per ATen kernel, for the report's top list.
  llvm::StringMap<int64_t> opsByKernel;
  /// Collective starts per op name.
  llvm::StringMap<int64_t> collectives;
  /// Arguments by role ("parameter", "buffer", "constant", "input").
  llvm::MapVector<llvm::StringRef, Group> argsByRole;
  /// FLOPs per exact module path ("" is the root).
  llvm::MapVector<llvm::StringRef, ModuleFlops> flopsByModule;
  ModuleFlops totalFlops;
  /// `loom.recompute` regions and the ops inside them.
  int64_t recomputeRegions = 0, recomputeOps = 0;
  /// Predicted peak memory in program order.
  PeakMemory memory;

  /// FLOPs of `path` and everything under it.
  ModuleFlops inclusiveFlops(llvm::StringRef path) const;

  void print(llvm::raw_ostream &os) const;
  llvm::json::Value toJSON() const;
};

} // namespace loom

#endif // LOOM_ANALYSIS_STEPSTATS_H
