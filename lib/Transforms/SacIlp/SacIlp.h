//===- SacIlp.h - State shared by the steps of loom-sac-ilp -----*- C++ -*-===//
//
// Private to lib/Transforms/SacIlp/. The pass decides, for the whole step,
// which forward values of the recompute blocks are saved and which are
// recomputed in backward, so that the per-rank peak stays within a budget at
// the least recompute time. It runs in four steps, one file each:
//
// - Problem.cpp: the choices. Every forward op of a block that allocates
//   (not an alias of its operand) is a node; identical blocks are one
//   distinct block, whose trade-off curve is traced once.
// - Liveness.cpp: where each node's outputs live once the rest of the
//   pipeline (sharding, optimizer, schedule, lowering) has run, measured on a
//   copy of the module with the same liveness sweep as the peak-memory
//   analysis, so FSDP's gathered parameters, gradients, optimizer state and
//   collective buffers are all in the profile; and what each node costs to
//   recompute there, priced as the simulator prices it.
// - Model.cpp: the MILPs over that profile, solved with CBC: each distinct
//   block's trade-off curve, then one point of it per block.
// - SacIlpPass.cpp: the pass, which applies the decision with loom-remat's
//   machinery and checks the result against the budget on a second copy.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_SACILP_SACILP_H
#define LOOM_LIB_TRANSFORMS_SACILP_SACILP_H

#include "loom/Analysis/CostModel.h"
#include "loom/Analysis/PeakMemory.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <functional>
#include <optional>
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
/// The attribute that names the block of a view op (BlockChoice::views) on
/// a copy of the step.
constexpr llvm::StringLiteral kViewAttrName = "sac_ilp.view";

/// One forward op of a recompute block whose outputs are allocated.
struct Node {
  Operation *op = nullptr;
  /// Index into Problem::blocks.
  unsigned block = 0;
  /// The decision it takes: nodes at the same position of identical blocks
  /// have the same one (`distinct block's first decision + position`), so
  /// that one trade-off curve serves them all; each block still picks its
  /// own point of it.
  unsigned decision = 0;
  /// Read (directly or through aliases) by a backward op: it must be saved
  /// or recomputed.
  bool backwardUsed = false;
  /// Random or in place: recomputing it would not give the same values, so
  /// it is saved.
  bool mustSave = false;
  /// What recomputing it costs: its op in the finished program on the cost
  /// model's device, as the simulator prices it (priceNodes), once per
  /// microbatch copy.
  double seconds = 0;
  /// The nodes of the same block it reads (directly or through aliases).
  llvm::SmallVector<unsigned> inputs;
};

/// One block (a module path prefix, as `checkpoint_wrapper` wraps a module).
struct BlockChoice {
  std::string module;
  llvm::SmallVector<unsigned> nodes;
  /// The block's forward ops that alias an operand (views, split pieces):
  /// positions in the step body. They cost nothing to recompute, and are
  /// where what they alias is (applyRecompute), so that an alias backward
  /// reads does not keep a recomputed base alive.
  llvm::SmallVector<size_t> views;
  /// Index into Problem::distinct.
  unsigned distinct = 0;
};

/// Blocks that run the same ops on the same shapes.
struct DistinctBlock {
  /// The first of them, whose nodes stand for all.
  unsigned representative = 0;
  /// The decisions of its nodes are firstDecision + position in the block.
  unsigned firstDecision = 0;
  llvm::SmallVector<unsigned> blocks;
  /// What makes blocks identical: each node's kernel, arguments, types and
  /// inputs by position in the block.
  std::string computation;
};

struct Problem {
  llvm::SmallVector<Node> nodes;
  llvm::SmallVector<BlockChoice> blocks;
  llvm::SmallVector<DistinctBlock> distinct;
  unsigned numDecisions = 0;
};

/// The nodes and blocks of `step` for the blocks `modules`. Errors name the
/// module.
FailureOr<Problem> buildProblem(func::FuncOp step,
                                llvm::ArrayRef<std::string> modules);

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
  /// Its op's time on the cost model's device in the finished program
  /// (before lowering, where the simulator reads it).
  double seconds = 0;
  /// Where backward first reads a view that every region of its block copy
  /// takes again of a value from outside the block (a transposed weight):
  /// the region runs there at the latest.
  std::optional<int64_t> viewPoint;

  /// Where its block copy's region runs at the latest when it is recomputed
  /// (-1 when backward does not read it): its first backward read, or the
  /// view point when that comes first.
  int64_t regionBy() const {
    if (firstBackward < 0 || !viewPoint)
      return firstBackward;
    return std::min(firstBackward, *viewPoint);
  }
};

struct Liveness {
  /// Bytes live throughout (parameters, state, inputs).
  int64_t persistentBytes = 0;
  /// Activation bytes live at each position.
  llvm::SmallVector<int64_t> activationBytesAt;
  llvm::SmallVector<Instance> instances;
};

/// Runs the rest of the pipeline on a module; calls `afterPass` with the
/// module or the op each of its passes ran on, after that pass.
using Downstream = std::function<LogicalResult(
    ModuleOp, const std::function<void(Operation *)> &afterPass)>;

/// The programs the rest of the pipeline made of the step, in order: the
/// `loomrt.program`s once lowered, else the step functions (one per
/// pipeline rank once pipelined). Each runs on its own ranks, so each has
/// its own peak.
SmallVector<Operation *> getPrograms(ModuleOp module);

/// The peak-memory sweep of one of them.
PeakMemory getProgramPeak(Operation *program);

/// A problem and the program (getPrograms' number) whose blocks it decides.
struct ProgramProblem {
  const Problem *problem;
  unsigned program = 0;
};

/// Tags every node's op in `step` (of `module`) with kNodeAttrName, copies the
/// module, runs `downstream` (the rest of the compile pipeline) on the copy
/// once and measures each problem's program in it; the tags are removed from
/// `step` again. The programs of a pipelined step are independent once its
/// cut is pinned, so one copy serves them all. Each instance is
/// priced with `costs` on its op as the last pass that still had `loom.aten`
/// ops left it: the op the simulator and scheduler price (after FSDP's
/// mixed-precision casts, say), not the one in the step as it stands.
FailureOr<llvm::SmallVector<Liveness>>
measureLiveness(ModuleOp module, func::FuncOp step,
                llvm::ArrayRef<ProgramProblem> problems, const CostModel &costs,
                const Downstream &downstream);

/// Sets each node's recompute time: the sum of its instances' in
/// `liveness`, or its op as it stands when the finished program has none.
void priceNodes(Problem &problem, const Liveness &liveness,
                const CostModel &costs);

/// What each node keeps while saved: its bytes in the finished program (the
/// first copy's; the copies of a microbatched block are alike), 0 for a
/// node the finished program does not have.
llvm::SmallVector<int64_t> getKeptBytes(const Problem &problem,
                                        const Liveness &liveness);

/// The model's peak of a decision (per node: saved, recomputed), in bytes:
/// the profile with what the decision frees, keeps and recomputes where its
/// regions run. Both programs (solveUniform, Solver) are exact formulations
/// of it; the measured peak of the decision applied is what it estimates.
int64_t getModelPeak(const Problem &problem, const Liveness &liveness,
                     llvm::ArrayRef<bool> save, llvm::ArrayRef<bool> recompute);

struct SolveOptions {
  double timeLimitSeconds = 10;
  double relativeGap = 0;
};

/// One point of a distinct block's trade-off curve: per node position in
/// the block, saved and/or recomputed.
struct BlockPolicy {
  llvm::SmallVector<bool> save, recompute;
  bool operator==(const BlockPolicy &other) const {
    return save == other.save && recompute == other.recompute;
  }
};

/// A corner of a distinct block's trade-off curve: the policy, the MiB it
/// keeps from forward to backward and the milliseconds it recomputes.
struct CurveCorner {
  BlockPolicy policy;
  double keptMiB = 0, recomputeMs = 0;
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
  /// Per block, its policy (index into the distinct block's policies of the
  /// Solver that made it; for solveUniform, 0).
  llvm::SmallVector<unsigned> policyOfBlock;
};

/// The cheapest decision in which identical blocks share one policy, whose
/// modelled peak is at most `budget` bytes, or failure (no diagnostic) when
/// the model finds none.
FailureOr<Decision> solveUniform(const Problem &problem,
                                 const Liveness &liveness, int64_t budget,
                                 const SolveOptions &options,
                                 std::string &error);

/// Trade-off curves already traced, by what they were traced from: the
/// block's computation and each node's time and kept bytes. Identical
/// blocks of different pipeline programs share one.
using CurveCache = llvm::StringMap<llvm::SmallVector<CurveCorner>>;

/// Each distinct block's trade-off curve: the policies at which its
/// recompute time is least for the bytes it keeps from its forward to its
/// backward (the Pareto points, from keeping everything to the least it
/// can keep), one CBC solve each; taken from `cache` when there, and added
/// to it.
FailureOr<llvm::SmallVector<llvm::SmallVector<CurveCorner>>>
traceTradeOffCurves(const Problem &problem, const Liveness &liveness,
                    const SolveOptions &options, CurveCache &cache,
                    std::string &error);

/// The decision of the whole step, block by block: every block takes one
/// point of its distinct block's curve, chosen by one MILP over the step's
/// whole profile, so that a block whose saved values live across the peak
/// can recompute more than one whose values do not, and two identical
/// blocks can sit at two points where sharing would force the dearer for
/// both. The uniform optimum of each bound solved is added to the
/// candidates, so the result is never worse in the model than
/// solveUniform's.
class Solver {
public:
  Solver(const Problem &problem, const Liveness &liveness, SolveOptions options)
      : Solver(problem, liveness, options, ownCache) {}
  /// `cache` holds the curves traced so far (shared by the Solvers of a
  /// pipelined step's programs) and outlives the Solver.
  Solver(const Problem &problem, const Liveness &liveness, SolveOptions options,
         CurveCache &cache)
      : problem(problem), liveness(liveness), options(options), cache(cache) {}
  Solver(const Solver &) = delete;
  Solver &operator=(const Solver &) = delete;

  /// The cheapest decision whose modelled peak is at most `budget` bytes,
  /// or failure (no diagnostic; `error` says why) when the model finds
  /// none.
  FailureOr<Decision> solve(int64_t budget, std::string &error);

  /// A decision of least modelled peak: the smallest budget the model can
  /// meet. Recompute time only breaks ties, as finely as CBC's tolerance
  /// tells them apart (it may recompute more than the cheapest such one).
  FailureOr<Decision> solveLeastPeak(std::string &error);

  /// The candidates per distinct block of the last solve.
  llvm::ArrayRef<llvm::SmallVector<BlockPolicy>> getPolicies() const {
    return policies;
  }
  /// Per distinct block, its curve's corners, from keeping most to keeping
  /// least (empty before the first solve).
  llvm::ArrayRef<llvm::SmallVector<CurveCorner>> getCurves() const {
    return curves;
  }

private:
  /// Traces each distinct block's curve, once.
  LogicalResult traceCurves(std::string &error);
  /// Sets `policies` for `budget`.
  void chooseCandidates(int64_t budget);
  /// On a small step, adds each block's policy in the optimum of the
  /// program where every block decides on its own to its candidates.
  void addOwnOptimum(int64_t budget);

  const Problem &problem;
  const Liveness &liveness;
  SolveOptions options;
  CurveCache ownCache;
  CurveCache &cache;
  /// Per distinct block: its trade-off curve's corners (traced once), the
  /// uniform optima of the bounds solved so far, and the points the blocks
  /// choose from in the current solve (the corners around this bound's
  /// uniform optimum, and every uniform optimum).
  llvm::SmallVector<llvm::SmallVector<CurveCorner>> curves;
  llvm::SmallVector<llvm::SmallVector<BlockPolicy>> uniforms, policies;
  bool traced = false;
};

} // namespace loom::sacilp

#endif // LOOM_LIB_TRANSFORMS_SACILP_SACILP_H
