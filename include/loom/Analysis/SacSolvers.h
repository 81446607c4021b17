//===- SacSolvers.h - PyTorch's two SAC MILPs over statistics ---*- C++ -*-===//
//
// PyTorch's two formulations of selective activation checkpointing, as
// modes of Loom's MILP layer (Milp.h), over the same statistics PyTorch's
// estimators produce, so that they can be compared on equal inputs:
//
// - the per-op knapsack of `get_optimal_checkpointing_policy_per_module`:
//   which ops of one module to save under a fraction of its activation
//   memory;
// - the module-level `sac_milp`: which modules to checkpoint, and how much of
//   their activation memory to discard, under a per-rank budget in GiB.
//
// Neither needs IR. The JSON readers take the field names of PyTorch's
// `SACStats` and of `ilp_utils`' `Graph`/`Node`, and report a malformed
// document with the path of the offending field.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_SACSOLVERS_H
#define LOOM_ANALYSIS_SACSOLVERS_H

#include "loom/Analysis/Milp.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom {

//===----------------------------------------------------------------------===//
// Per-op knapsack
//===----------------------------------------------------------------------===//

/// The operators of one module's forward, as PyTorch's `SACStats` lists them.
struct SacStats {
  std::vector<std::string> funcNames;
  /// Per op, in ms.
  std::vector<double> runtimes;
  /// Per op: bytes of its outputs.
  std::vector<int64_t> memory;
  std::vector<unsigned> viewLikeOps;
  std::vector<unsigned> randOps;
  std::vector<unsigned> savedAutogradOps;
  /// (in-place op, the op whose output it mutates); an op that is its own
  /// parent mutates a module input.
  std::vector<std::pair<unsigned, unsigned>> inplaceOps;
  bool forceStoreRandom = false;
};

/// PyTorch's `SACDecision`: what the knapsack decides per op.
enum class SacDecision : int { Recompute = 0, Save = 1 };

/// Options of the per-op knapsack: PyTorch's own (gap 5%, 10 s).
inline MilpOptions defaultKnapsackOptions() {
  MilpOptions options;
  options.relativeGap = 0.05;
  options.timeLimitSeconds = 10;
  return options;
}

/// The per-op knapsack: maximize the runtime of the saved ops while their
/// memory stays within `ceil(memoryBudget * sum(memory))`; view-like ops are
/// recomputed, an in-place op follows its parent (or is saved when it is its
/// own parent), random ops are all saved or all recomputed (all saved under
/// `forceStoreRandom`). Returns one `SacDecision` per op, or an empty vector
/// when the MILP has no solution, as PyTorch does. Fails for a budget
/// outside [0, 1] or statistics whose indices or lengths disagree.
llvm::Expected<std::vector<int>>
solveSacKnapsack(const SacStats &stats, double memoryBudget,
                 const MilpOptions &options = defaultKnapsackOptions());

bool fromJSON(const llvm::json::Value &value, SacStats &stats,
              llvm::json::Path path);

//===----------------------------------------------------------------------===//
// Module-level MILP
//===----------------------------------------------------------------------===//

/// One module, as `ilp_utils.parse_module_info` makes a `Node`. Memory is in
/// bytes, times in ms.
struct SacModuleNode {
  std::string fqn;
  /// The module's parameters (the root's are all of the model's).
  int64_t paramPerModule = 0;
  /// Gradients accumulated when the module's backward starts.
  int64_t gradTotal = 0;
  /// Activations the module saves without checkpointing.
  int64_t actFwPerModule = 0;
  /// Activation gradients at the module's backward peak.
  int64_t actGradPerModule = 0;
  /// Activations alive when the module's forward ends.
  int64_t actTotal = 0;
  double fwRuntimePerModule = 0;
  double bwRuntimePerModule = 0;
  /// A module without a recompute trade-off curve cannot be checkpointed.
  bool isLeaf = true;
  /// Forward runtime and activation memory of the module's ops under SAC.
  double sacRuntime = 0;
  int64_t sacMemory = 0;
  /// The piecewise-linear fit of recompute time over discarded memory,
  /// both as fractions: `nSegments` slopes and intercepts.
  unsigned nSegments = 0;
  std::vector<double> slopes, intercepts;
  /// Position of the module in `fwPostOrder`.
  unsigned posFwPostOrder = 0;
};

/// The module tree, nodes in forward pre-order (as `ilp_utils.Graph`).
struct SacModuleGraph {
  std::vector<SacModuleNode> nodes;
  std::vector<std::string> fwPostOrder;
  /// adMatrix[i][j] == 1 when node j is node i or one of its descendants.
  std::vector<std::vector<uint8_t>> adMatrix;
};

/// Fills `posFwPostOrder` and `adMatrix` from the fqns as
/// `parse_module_info` does (a descendant contains "<ancestor fqn>." and
/// descendants follow their ancestor contiguously in pre-order), and checks
/// that every name of `fwPostOrder` is a node.
llvm::Error finalizeSacModuleGraph(SacModuleGraph &graph);

bool fromJSON(const llvm::json::Value &value, SacModuleNode &node,
              llvm::json::Path path);

/// Reads the fields of `ilp_utils`' `Graph` (`nodes`, `fw_post_order`, and
/// an optional `ad_matrix`) and finalizes the graph; a node's
/// `pos_fw_post_order` and `index`, when given, must agree with the graph.
bool fromJSON(const llvm::json::Value &value, SacModuleGraph &graph,
              llvm::json::Path path);

/// Options of the module-level MILP: PyTorch's own (gap 5%, 180 s).
inline MilpOptions defaultSacMilpOptions() {
  MilpOptions options;
  options.relativeGap = 0.05;
  options.timeLimitSeconds = 180;
  return options;
}

struct SacMilpResult {
  MilpStatus status = MilpStatus::Error;
  /// Checkpointed modules in node order, with the fraction of their
  /// activation memory discarded, rounded to 4 digits.
  std::vector<std::pair<std::string, double>> acDecisions;
  /// Sum of the recomputation times (ms), rounded to 2 digits.
  double recomputationTime = 0;
  /// The MILP's peak memory in bytes, or -1 when it has no solution.
  int64_t peakMemory = -1;
};

/// PyTorch's `sac_milp(graph, memory_budget, world_size, ac_units,
/// fsdp_units)`: minimize the recomputation time subject to every module's
/// memory (activations left after discards, plus parameters and gradients
/// divided over `worldSize`) being within `memoryBudgetGiB`. Without a
/// solution the result is ({}, 0, -1), as PyTorch returns it. Fails for
/// statistics PyTorch would crash on (a non-leaf module with no SAC memory,
/// too few slopes) or a world size below 1.
llvm::Expected<SacMilpResult>
solveSacMilp(const SacModuleGraph &graph, double memoryBudgetGiB,
             unsigned worldSize = 1,
             std::optional<std::vector<std::string>> acUnits = std::nullopt,
             std::optional<std::vector<std::string>> fsdpUnits = std::nullopt,
             const MilpOptions &options = defaultSacMilpOptions());

/// `{"ac_decisions": {fqn: r}, "recomputation_time": ms, "peak_memory":
/// bytes, "status": ...}`, PyTorch's triple with names.
llvm::json::Value toJSON(const SacMilpResult &result);

/// `ilp_utils.get_peak_memory_runtime_baseline`: the peak without FSDP or
/// checkpointing (bytes), and the root's forward plus backward time (ms).
std::pair<int64_t, double> sacBaseline(const SacModuleGraph &graph);

} // namespace loom

#endif // LOOM_ANALYSIS_SACSOLVERS_H
