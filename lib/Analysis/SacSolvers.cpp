//===- SacSolvers.cpp - PyTorch's two SAC MILPs over statistics -----------===//

#include "loom/Analysis/SacSolvers.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace loom;
using llvm::json::Path;
using llvm::json::Value;
using Term = MilpProblem::Term;

namespace {
llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Python's `round(x, digits)` for the values the solvers report (ties are
/// measure-zero for solver output, so round-half-even does not matter).
double roundTo(double x, int digits) {
  double scale = std::pow(10.0, digits);
  return std::round(x * scale) / scale;
}
} // namespace

//===----------------------------------------------------------------------===//
// Per-op knapsack
//===----------------------------------------------------------------------===//

llvm::Expected<std::vector<int>>
loom::solveSacKnapsack(const SacStats &stats, double memoryBudget,
                       const MilpOptions &options) {
  if (!(memoryBudget >= 0 && memoryBudget <= 1))
    return error(llvm::formatv(
        "memory budget must be a fraction between 0 and 1, got {0}",
        memoryBudget));
  unsigned numOps = stats.funcNames.size();
  if (stats.runtimes.size() != numOps || stats.memory.size() != numOps)
    return error(llvm::formatv("{0} ops but {1} runtimes and {2} memory sizes",
                               numOps, stats.runtimes.size(),
                               stats.memory.size()));
  auto checkIndex = [&](unsigned op, llvm::StringRef list) -> llvm::Error {
    if (op >= numOps)
      return error(llvm::formatv("{0} names op {1}, but there are {2} ops",
                                 list, op, numOps));
    return llvm::Error::success();
  };
  for (unsigned op : stats.viewLikeOps)
    if (llvm::Error e = checkIndex(op, "view_like_ops"))
      return std::move(e);
  for (unsigned op : stats.randOps)
    if (llvm::Error e = checkIndex(op, "rand_ops"))
      return std::move(e);
  for (auto [op, parent] : stats.inplaceOps) {
    if (llvm::Error e = checkIndex(op, "inplace_ops"))
      return std::move(e);
    if (llvm::Error e = checkIndex(parent, "inplace_ops"))
      return std::move(e);
  }

  MilpProblem problem;
  std::vector<unsigned> x;
  for (unsigned i = 0; i < numOps; ++i)
    x.push_back(problem.addBinary(llvm::formatv("x_{0}", i).str()));
  constexpr double save = static_cast<double>(SacDecision::Save);
  constexpr double recompute = static_cast<double>(SacDecision::Recompute);

  // Replaying a random op draws new numbers, so either every random op is
  // saved (when the module has no tensor inputs to replay from) or they are
  // all replayed together from the same RNG state.
  if (stats.forceStoreRandom) {
    for (unsigned op : stats.randOps)
      problem.fix(x[op], save);
  } else {
    for (size_t k = 1; k < stats.randOps.size(); ++k)
      problem.addEqual(
          {{x[stats.randOps[k - 1]], 1}, {x[stats.randOps[k]], -1}}, 0);
  }
  // A view costs no memory to save but aliases its base: replay it.
  for (unsigned op : stats.viewLikeOps)
    problem.fix(x[op], recompute);
  // Replaying an in-place op without its parent would mutate a saved
  // tensor; one that mutates a module input cannot be replayed at all.
  for (auto [op, parent] : stats.inplaceOps) {
    if (op != parent)
      problem.addEqual({{x[op], 1}, {x[parent], -1}}, 0);
    else
      problem.fix(x[op], save);
  }
  int64_t totalMemory = 0;
  std::vector<Term> memoryTerms, runtimeTerms;
  for (unsigned i = 0; i < numOps; ++i) {
    totalMemory += stats.memory[i];
    memoryTerms.push_back({x[i], static_cast<double>(stats.memory[i])});
    runtimeTerms.push_back({x[i], stats.runtimes[i]});
  }
  problem.addLessEqual(
      memoryTerms, std::ceil(memoryBudget * static_cast<double>(totalMemory)),
      "memory_budget");
  // Saving the most runtime is recomputing the least.
  problem.setObjective(MilpProblem::Sense::Maximize, runtimeTerms);

  MilpSolution solution = solveMilp(problem, options);
  std::vector<int> decisions;
  if (!solution.hasSolution())
    return decisions;
  for (unsigned i = 0; i < numOps; ++i)
    decisions.push_back(static_cast<int>(std::lround(solution.value(x[i]))));
  return decisions;
}

bool loom::fromJSON(const Value &value, SacStats &stats, Path path) {
  llvm::json::ObjectMapper o(value, path);
  if (!o || !o.map("func_names", stats.funcNames) ||
      !o.map("runtimes", stats.runtimes) || !o.map("memory", stats.memory) ||
      !o.map("view_like_ops", stats.viewLikeOps) ||
      !o.map("rand_ops", stats.randOps) ||
      !o.mapOptional("saved_autograd_ops", stats.savedAutogradOps) ||
      !o.map("force_store_random", stats.forceStoreRandom))
    return false;
  const llvm::json::Array *pairs = value.getAsObject()->getArray("inplace_ops");
  Path pairsPath = path.field("inplace_ops");
  if (!pairs) {
    pairsPath.report("expected an array of [op, parent] pairs");
    return false;
  }
  stats.inplaceOps.clear();
  for (auto [k, pair] : llvm::enumerate(*pairs)) {
    std::vector<unsigned> ops;
    if (!fromJSON(pair, ops, pairsPath.index(k)))
      return false;
    if (ops.size() != 2) {
      pairsPath.index(k).report("expected an [op, parent] pair");
      return false;
    }
    stats.inplaceOps.emplace_back(ops[0], ops[1]);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Module-level MILP
//===----------------------------------------------------------------------===//

namespace {
/// `ilp_utils.is_self_or_submodule`. PyTorch tests containment, not a
/// prefix; so does Loom, to build the same tree from the same names.
bool isSelfOrSubmodule(llvm::StringRef descendant, llvm::StringRef ancestor) {
  return descendant == ancestor || descendant.contains((ancestor + ".").str());
}

bool isSubmodule(llvm::StringRef descendant, llvm::StringRef ancestor) {
  return descendant.contains((ancestor + ".").str());
}
} // namespace

namespace {
/// finalizeSacModuleGraph, reporting at the field that is wrong.
bool finalize(SacModuleGraph &graph, Path path) {
  size_t n = graph.nodes.size();
  if (n == 0) {
    path.field("nodes").report("the module graph has no nodes");
    return false;
  }
  llvm::StringMap<unsigned> postPos;
  for (auto [pos, fqn] : llvm::enumerate(graph.fwPostOrder))
    if (!postPos.try_emplace(fqn, pos).second) {
      path.field("fw_post_order").index(pos).report("module listed twice");
      return false;
    }
  llvm::StringSet<> seen;
  for (auto [i, node] : llvm::enumerate(graph.nodes)) {
    // A Path points at its parent: report in one expression, while the
    // temporaries of the chain are alive.
    if (!seen.insert(node.fqn).second) {
      path.field("nodes").index(i).field("fqn").report("module listed twice");
      return false;
    }
    auto it = postPos.find(node.fqn);
    if (it == postPos.end()) {
      path.field("nodes").index(i).field("fqn").report(
          "module missing from fw_post_order");
      return false;
    }
    node.posFwPostOrder = it->second;
  }
  for (auto [pos, fqn] : llvm::enumerate(graph.fwPostOrder))
    if (!seen.contains(fqn)) {
      path.field("fw_post_order").index(pos).report("module is not a node");
      return false;
    }
  graph.adMatrix.assign(n, std::vector<uint8_t>(n, 0));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i; j < n; ++j) {
      if (!isSelfOrSubmodule(graph.nodes[j].fqn, graph.nodes[i].fqn))
        break;
      graph.adMatrix[i][j] = 1;
    }
  return true;
}
} // namespace

llvm::Error loom::finalizeSacModuleGraph(SacModuleGraph &graph) {
  Path::Root root("graph");
  if (!finalize(graph, root))
    return root.getError();
  return llvm::Error::success();
}

bool loom::fromJSON(const Value &value, SacModuleNode &node, Path path) {
  llvm::json::ObjectMapper o(value, path);
  if (!o || !o.map("fqn", node.fqn) ||
      !o.map("param_per_module", node.paramPerModule) ||
      !o.map("grad_total", node.gradTotal) ||
      !o.map("act_fw_per_module", node.actFwPerModule) ||
      !o.map("act_grad_per_module", node.actGradPerModule) ||
      !o.map("act_total", node.actTotal) ||
      !o.mapOptional("fw_runtime_per_module", node.fwRuntimePerModule) ||
      !o.mapOptional("bw_runtime_per_module", node.bwRuntimePerModule) ||
      !o.map("is_leaf", node.isLeaf) ||
      !o.map("sac_runtime", node.sacRuntime) ||
      !o.map("sac_memory", node.sacMemory) ||
      !o.map("n_segments", node.nSegments) || !o.map("slopes", node.slopes) ||
      !o.map("intercepts", node.intercepts))
    return false;
  if (node.slopes.size() < node.nSegments ||
      node.intercepts.size() < node.nSegments) {
    path.report("n_segments is larger than the number of slopes or "
                "intercepts");
    return false;
  }
  return true;
}

bool loom::fromJSON(const Value &value, SacModuleGraph &graph, Path path) {
  llvm::json::ObjectMapper o(value, path);
  if (!o || !o.map("nodes", graph.nodes) ||
      !o.map("fw_post_order", graph.fwPostOrder))
    return false;
  if (!finalize(graph, path))
    return false;
  const llvm::json::Object *object = value.getAsObject();
  const llvm::json::Array *nodes = object->getArray("nodes");
  for (auto [i, nodeValue] : llvm::enumerate(*nodes)) {
    const llvm::json::Object *node = nodeValue.getAsObject();
    if (std::optional<int64_t> index = node->getInteger("index");
        index && *index != static_cast<int64_t>(i)) {
      path.field("nodes").index(i).field("index").report(
          "must be the node's position in nodes");
      return false;
    }
    if (std::optional<int64_t> pos = node->getInteger("pos_fw_post_order");
        pos && *pos != graph.nodes[i].posFwPostOrder) {
      path.field("nodes")
          .index(i)
          .field("pos_fw_post_order")
          .report("disagrees with the module's position in fw_post_order");
      return false;
    }
  }
  // A graph written by PyTorch carries its ancestor matrix; it must be the
  // one the names give, or the two solvers would see different trees.
  if (const Value *matrix = object->get("ad_matrix")) {
    std::vector<std::vector<double>> given;
    if (!fromJSON(*matrix, given, path.field("ad_matrix")))
      return false;
    size_t n = graph.nodes.size();
    if (given.size() != n) {
      path.field("ad_matrix").report("must have one row per node");
      return false;
    }
    for (size_t i = 0; i < n; ++i) {
      if (given[i].size() != n) {
        path.field("ad_matrix").index(i).report("must have one entry per node");
        return false;
      }
      for (size_t j = 0; j < n; ++j)
        if ((given[i][j] != 0) != (graph.adMatrix[i][j] != 0)) {
          path.field("ad_matrix")
              .index(i)
              .index(j)
              .report(
                  "disagrees with the ancestor relation of the modules' names");
          return false;
        }
    }
  }
  return true;
}

llvm::Expected<SacMilpResult>
loom::solveSacMilp(const SacModuleGraph &graph, double memoryBudgetGiB,
                   unsigned worldSize,
                   std::optional<std::vector<std::string>> acUnits,
                   std::optional<std::vector<std::string>> fsdpUnits,
                   const MilpOptions &options) {
  size_t n = graph.nodes.size();
  if (n == 0 || graph.adMatrix.size() != n)
    return error("the module graph is not finalized "
                 "(finalizeSacModuleGraph)");
  if (worldSize < 1)
    return error("world size must be at least 1");
  // A big-M that bounds every module's recomputation time (ms); PyTorch's
  // value, which keeps the problem well scaled.
  constexpr double bigM = 100;
  constexpr double bytesPerGiB = 1u << 30;

  // PyTorch trusts the memory tracker over the SAC estimator when they
  // disagree: a module saves at least what it saves without AC.
  std::vector<double> acm(n), ia(n);
  for (size_t i = 0; i < n; ++i) {
    const SacModuleNode &node = graph.nodes[i];
    int64_t sacMemory = node.sacMemory;
    if (!node.isLeaf && sacMemory < node.actFwPerModule)
      sacMemory = node.actFwPerModule;
    if (!node.isLeaf && sacMemory == 0)
      return error(llvm::formatv("module '{0}' (nodes[{1}]) is not a leaf but "
                                 "has no activation memory to discard",
                                 node.fqn, i));
    acm[i] = sacMemory / bytesPerGiB;
    ia[i] = node.actFwPerModule / bytesPerGiB;
  }

  MilpProblem problem;
  auto vars = [&](const char *name, MilpProblem::VarKind kind, double lower,
                  double upper) {
    std::vector<unsigned> v;
    for (size_t i = 0; i < n; ++i)
      v.push_back(problem.addVariable(llvm::formatv("{0}_{1}", name, i).str(),
                                      kind, lower, upper));
    return v;
  };
  using Kind = MilpProblem::VarKind;
  // y: checkpointed; r: fraction of activation memory discarded; d: memory
  // discarded (GiB); a: activations in backward; m: all memory; rcp: fraction
  // of the forward recomputed; rct: recomputation time (ms).
  std::vector<unsigned> y = vars("y", Kind::Binary, 0, 1);
  std::vector<unsigned> r = vars("r", Kind::Continuous, 0, 1);
  std::vector<unsigned> d = vars("d", Kind::Continuous, 0, kMilpInfinity);
  std::vector<unsigned> a = vars("a", Kind::Continuous, 0, kMilpInfinity);
  std::vector<unsigned> m = vars("m", Kind::Continuous, 0, kMilpInfinity);
  std::vector<unsigned> rcp = vars("rcp", Kind::Continuous, 0, kMilpInfinity);
  std::vector<unsigned> rct = vars("rct", Kind::Continuous, 0, kMilpInfinity);
  unsigned maxM = problem.addContinuous("max_m");

  // 1. Only the modules the user allows.
  if (acUnits && !acUnits->empty()) {
    llvm::StringSet<> allowed;
    for (const std::string &unit : *acUnits)
      allowed.insert(unit);
    for (size_t i = 0; i < n; ++i)
      if (!allowed.contains(graph.nodes[i].fqn))
        problem.fix(y[i], 0);
  }
  // 2. An AC unit cannot contain an FSDP unit: recomputing it would need
  // the inner unit's parameters gathered again.
  if (fsdpUnits && !fsdpUnits->empty())
    for (size_t i = 0; i < n; ++i)
      if (llvm::any_of(*fsdpUnits, [&](const std::string &unit) {
            return isSubmodule(unit, graph.nodes[i].fqn);
          }))
        problem.fix(y[i], 0);
  // 3. No nested AC units.
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if (graph.adMatrix[i][j])
        problem.addLessEqual({{y[i], 1}, {y[j], 1}}, 1);
  // 4. A leaf has no trade-off curve to checkpoint with.
  for (size_t i = 0; i < n; ++i)
    if (graph.nodes[i].isLeaf)
      problem.fix(y[i], 0);
  // 5. Discarding a fraction r of the SAC memory ACM frees r*ACM minus what
  // AC keeps that no-AC would not (ACM - IA).
  for (size_t i = 0; i < n; ++i)
    problem.addEqual({{d[i], 1}, {r[i], -acm[i]}, {y[i], acm[i] - ia[i]}}, 0);
  // 6. Discard only in AC units, and at least enough to pay for ACM - IA.
  for (size_t i = 0; i < n; ++i) {
    problem.addGreaterEqual({{y[i], 1}, {r[i], -1}}, 0);
    if (graph.nodes[i].isLeaf)
      continue;
    problem.addGreaterEqual({{r[i], 1}, {y[i], -(acm[i] - ia[i]) / acm[i]}}, 0);
  }
  // 7. In backward at module i, what modules finished before i's forward
  // discarded is not alive.
  llvm::StringMap<unsigned> indexOf;
  for (auto [i, node] : llvm::enumerate(graph.nodes))
    indexOf[node.fqn] = i;
  for (size_t i = 0; i < n; ++i) {
    const SacModuleNode &node = graph.nodes[i];
    std::vector<Term> terms = {{a[i], 1}};
    for (unsigned p = 0; p < node.posFwPostOrder; ++p)
      terms.push_back({d[indexOf.lookup(graph.fwPostOrder[p])], 1});
    problem.addEqual(terms,
                     (node.actTotal + node.actGradPerModule) / bytesPerGiB);
  }
  // 8. Parameters and gradients are sharded over the world; unsharded
  // copies in flight are not counted (PyTorch's model).
  double params = graph.nodes[0].paramPerModule / bytesPerGiB;
  for (size_t i = 0; i < n; ++i)
    problem.addEqual({{m[i], 1}, {a[i], -1}},
                     (params + graph.nodes[i].gradTotal / bytesPerGiB) /
                         worldSize);
  // 9. The peak.
  for (size_t i = 0; i < n; ++i)
    problem.addGreaterEqual({{maxM, 1}, {m[i], -1}}, 0);
  // 10. The recomputed fraction is above every segment of the convex fit.
  for (size_t i = 0; i < n; ++i)
    for (unsigned s = 0; s < graph.nodes[i].nSegments; ++s)
      problem.addGreaterEqual({{rcp[i], 1}, {r[i], -graph.nodes[i].slopes[s]}},
                              graph.nodes[i].intercepts[s]);
  // 11. rct = rcp * ACT in AC units and 0 elsewhere, linearized with big-M.
  for (size_t i = 0; i < n; ++i) {
    double act = graph.nodes[i].sacRuntime;
    problem.addLessEqual({{rct[i], 1}, {y[i], -bigM}}, 0);
    problem.addLessEqual({{rct[i], 1}, {rcp[i], -act}}, 0);
    problem.addGreaterEqual({{rct[i], 1}, {rcp[i], -act}, {y[i], -bigM}},
                            -bigM);
  }
  // 12. The budget.
  problem.addLessEqual({{maxM, 1}}, memoryBudgetGiB, "memory_budget");

  std::vector<Term> objective;
  for (size_t i = 0; i < n; ++i)
    objective.push_back({rct[i], 1});
  problem.setObjective(MilpProblem::Sense::Minimize, objective);

  MilpSolution solution = solveMilp(problem, options);
  SacMilpResult result;
  result.status = solution.status;
  if (!solution.hasSolution())
    return result;
  for (size_t i = 0; i < n; ++i)
    if (std::lround(solution.value(y[i])) == 1)
      result.acDecisions.emplace_back(graph.nodes[i].fqn,
                                      roundTo(solution.value(r[i]), 4));
  result.recomputationTime = roundTo(solution.objective, 2);
  result.peakMemory =
      static_cast<int64_t>(std::llround(solution.value(maxM) * bytesPerGiB));
  return result;
}

llvm::json::Value loom::toJSON(const SacMilpResult &result) {
  llvm::json::Object decisions;
  for (const auto &[fqn, ratio] : result.acDecisions)
    decisions[fqn] = ratio;
  return llvm::json::Object{
      {"ac_decisions", std::move(decisions)},
      {"recomputation_time", result.recomputationTime},
      {"peak_memory", result.peakMemory},
      {"status", stringifyMilpStatus(result.status)},
  };
}

std::pair<int64_t, double> loom::sacBaseline(const SacModuleGraph &graph) {
  if (graph.nodes.empty())
    return {0, 0};
  int64_t params = graph.nodes[0].paramPerModule;
  int64_t peak = 0;
  for (const SacModuleNode &node : graph.nodes)
    peak = std::max(peak, params + node.gradTotal + node.actGradPerModule +
                              node.actTotal);
  return {peak, graph.nodes[0].fwRuntimePerModule +
                    graph.nodes[0].bwRuntimePerModule};
}
