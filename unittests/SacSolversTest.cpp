//===- SacSolversTest.cpp - The CBC layer and PyTorch's two SAC MILPs -----===//

#include "loom/Analysis/SacSolvers.h"
#include "loom/Analysis/Milp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace loom;

namespace {
//===----------------------------------------------------------------------===//
// Milp
//===----------------------------------------------------------------------===//

TEST(MilpTest, IntegerOptimumIsNotTheRelaxation) {
  // max 5x + 4y s.t. 6x + 4y <= 24, x + 2y <= 6, integers: the LP optimum
  // is (3, 1.5) at 21, the integer one (4, 0) at 20.
  MilpProblem problem;
  unsigned x = problem.addInteger("x", 0, 10);
  unsigned y = problem.addInteger("y", 0, 10);
  problem.addLessEqual({{x, 6}, {y, 4}}, 24);
  problem.addLessEqual({{x, 1}, {y, 2}}, 6);
  problem.setObjective(MilpProblem::Sense::Maximize, {{x, 5}, {y, 4}});
  MilpSolution solution = solveMilp(problem);
  ASSERT_EQ(solution.status, MilpStatus::Optimal);
  EXPECT_EQ(solution.value(x), 4);
  EXPECT_EQ(solution.value(y), 0);
  EXPECT_DOUBLE_EQ(solution.objective, 20);
}

TEST(MilpTest, ContinuousBoundsConstantAndMergedTerms) {
  // min 2a - b + 3 with a in [1, 4], b <= 2 given as b + b <= 4.
  MilpProblem problem;
  unsigned a = problem.addContinuous("a", 1, 4);
  unsigned b = problem.addContinuous("b");
  problem.addLessEqual({{b, 1}, {b, 1}}, 4);
  problem.setObjective(MilpProblem::Sense::Minimize, {{a, 2}, {b, -1}}, 3);
  MilpSolution solution = solveMilp(problem);
  ASSERT_EQ(solution.status, MilpStatus::Optimal);
  EXPECT_NEAR(solution.value(a), 1, 1e-9);
  EXPECT_NEAR(solution.value(b), 2, 1e-9);
  EXPECT_NEAR(solution.objective, 3, 1e-9);
}

TEST(MilpTest, InfeasibleHasNoValues) {
  MilpProblem problem;
  unsigned x = problem.addBinary("x");
  unsigned y = problem.addBinary("y");
  problem.addGreaterEqual({{x, 1}, {y, 1}}, 3);
  problem.setObjective(MilpProblem::Sense::Minimize, {{x, 1}});
  MilpSolution solution = solveMilp(problem);
  EXPECT_EQ(solution.status, MilpStatus::Infeasible);
  EXPECT_FALSE(solution.hasSolution());
  EXPECT_TRUE(solution.values.empty());
}

TEST(MilpTest, UnboundedIsNotInfeasible) {
  MilpProblem problem;
  unsigned x = problem.addInteger("x", 0, kMilpInfinity);
  problem.setObjective(MilpProblem::Sense::Maximize, {{x, 1}});
  MilpSolution solution = solveMilp(problem);
  EXPECT_NE(solution.status, MilpStatus::Infeasible);
  EXPECT_NE(solution.status, MilpStatus::Optimal);
}

/// A market-split problem (Cornuejols and Dawande): 4 equality rows over 30
/// binaries, which branch and bound cannot settle in seconds. With slacks
/// and their sum as the objective a solution is found at once and never
/// proved optimal; without them none is found.
MilpProblem marketSplit(bool withSlacks) {
  MilpProblem problem;
  std::vector<unsigned> x;
  for (int j = 0; j < 30; ++j)
    x.push_back(problem.addBinary("x"));
  std::vector<MilpProblem::Term> objective;
  uint32_t state = 12345;
  for (int i = 0; i < 4; ++i) {
    std::vector<MilpProblem::Term> row;
    double sum = 0;
    for (int j = 0; j < 30; ++j) {
      state = state * 1103515245u + 12345u;
      double coeff = (state >> 16) % 100;
      row.push_back({x[j], coeff});
      sum += coeff;
    }
    if (withSlacks) {
      unsigned over = problem.addContinuous("over");
      unsigned under = problem.addContinuous("under");
      row.push_back({over, -1});
      row.push_back({under, 1});
      objective.push_back({over, 1});
      objective.push_back({under, 1});
    }
    problem.addEqual(row, std::floor(sum / 2));
  }
  problem.setObjective(MilpProblem::Sense::Minimize, objective);
  return problem;
}

TEST(MilpTest, TimeLimitWithAndWithoutASolution) {
  MilpOptions options;
  options.timeLimitSeconds = 0.5;
  MilpSolution feasible = solveMilp(marketSplit(/*withSlacks=*/true), options);
  EXPECT_EQ(feasible.status, MilpStatus::Feasible);
  EXPECT_EQ(feasible.values.size(), 38u);
  EXPECT_LE(feasible.bound, feasible.objective);
  MilpSolution none = solveMilp(marketSplit(/*withSlacks=*/false), options);
  EXPECT_EQ(none.status, MilpStatus::TimeLimitNoSolution);
  EXPECT_TRUE(none.values.empty());
}

/// A memory profile like loom-sac-ilp's: 16 values, each kept (x = 1) or
/// dropped at a cost, live over a stretch of 240 positions on top of a base;
/// the peak variable is at least every position's row and at most `cap`.
/// The rows are lazy or ordinary constraints.
MilpProblem profileProblem(bool lazy, double cap) {
  MilpProblem problem;
  std::vector<unsigned> keep;
  std::vector<double> size, cost;
  std::vector<std::pair<int, int>> live;
  uint32_t state = 12345;
  auto next = [&](uint32_t range) {
    state = state * 1664525u + 1013904223u;
    return (state >> 8) % range;
  };
  for (int i = 0; i < 16; ++i) {
    keep.push_back(problem.addBinary("x" + std::to_string(i)));
    size.push_back(10 + next(90));
    cost.push_back(1 + next(20));
    int from = next(200);
    live.push_back({from, from + 10 + static_cast<int>(next(30))});
  }
  unsigned peak = problem.addContinuous("peak", 0, cap);
  std::vector<MilpProblem::Term> objective = {{peak, 1e-6}};
  for (int i = 0; i < 16; ++i)
    objective.push_back({keep[i], -cost[i]});
  problem.setObjective(MilpProblem::Sense::Minimize, objective, 0);
  for (int p = 0; p < 240; ++p) {
    std::vector<MilpProblem::Term> row = {{peak, -1}};
    for (int i = 0; i < 16; ++i)
      if (live[i].first <= p && p < live[i].second)
        row.push_back({keep[i], size[i]});
    double base = 50 + 30 * std::sin(p / 17.0);
    if (lazy)
      problem.addLazyLessEqual(row, -base);
    else
      problem.addLessEqual(row, -base);
  }
  return problem;
}

TEST(MilpTest, LazyConstraintsGiveTheWholeProgramsOptimum) {
  MilpOptions exact;
  exact.relativeGap = 0;
  for (double cap : {150.0, 200.0, 260.0}) {
    MilpSolution eager = solveMilp(profileProblem(false, cap), exact);
    MilpSolution lazy = solveMilp(profileProblem(true, cap), exact);
    ASSERT_EQ(eager.status, MilpStatus::Optimal) << cap;
    ASSERT_EQ(lazy.status, MilpStatus::Optimal) << cap;
    EXPECT_NEAR(lazy.objective, eager.objective, 1e-9) << cap;
    // Its solution meets every row (the optimum may be another of equal
    // cost).
    MilpProblem whole = profileProblem(false, cap);
    for (const MilpProblem::Constraint &row : whole.getConstraints()) {
      double activity = 0;
      for (const MilpProblem::Term &term : row.terms)
        activity += term.coeff * lazy.value(term.var);
      EXPECT_LE(activity, row.upper + 1e-6) << cap;
    }
    // A few rows decide it; CBC saw only those.
    EXPECT_GE(lazy.solves, 2u) << cap;
    EXPECT_LT(lazy.lazyConstraintsUsed, 60u) << cap;
    EXPECT_EQ(eager.solves, 1u);
    // The rows bind: without them every value would be kept.
    MilpProblem unconstrained = profileProblem(true, cap);
    MilpProblem bare;
    for (const auto &v : unconstrained.getVariables())
      bare.addVariable(v.name, v.kind, v.lower, v.upper);
    bare.setObjective(unconstrained.getSense(), unconstrained.getObjective());
    EXPECT_LT(solveMilp(bare, exact).objective, eager.objective - 1) << cap;
  }
}

TEST(MilpTest, LazyConstraintsOnBothSidesAndInfeasible) {
  // min x + y, lazily x + y >= 3 and x - y <= 1 (integers in [0, 5]): the
  // first solve (0, 0) breaks the first, then (3, 0) breaks the second.
  MilpProblem problem;
  unsigned x = problem.addInteger("x", 0, 5);
  unsigned y = problem.addInteger("y", 0, 5);
  problem.addLazyConstraint({{x, 1}, {y, 1}}, 3, kMilpInfinity);
  problem.addLazyLessEqual({{x, 1}, {y, -1}}, 1);
  problem.setObjective(MilpProblem::Sense::Minimize, {{x, 1}, {y, 1.001}});
  MilpSolution solution = solveMilp(problem);
  ASSERT_EQ(solution.status, MilpStatus::Optimal);
  EXPECT_EQ(solution.value(x), 2);
  EXPECT_EQ(solution.value(y), 1);
  EXPECT_EQ(solution.lazyConstraintsUsed, 2u);

  problem.addLazyLessEqual({{x, 1}, {y, 1}}, 2);
  MilpSolution none = solveMilp(problem);
  EXPECT_EQ(none.status, MilpStatus::Infeasible);
  EXPECT_TRUE(none.values.empty());
}

//===----------------------------------------------------------------------===//
// Per-op knapsack: PyTorch's test_get_optimial_checkpointing_policy_per_module
//===----------------------------------------------------------------------===//

SacStats pytorchKnapsackStats() {
  SacStats stats;
  stats.funcNames = {
      "aten.copy_",          "aten.add",    "aten.div", "aten.mm",
      "aten.native_dropout", "aten.linear", "aten.t",   "aten.relu_"};
  stats.runtimes = {5, 5, 8, 15, 15, 9, 1, 5};
  stats.memory = {0, 100, 100, 120, 0, 100, 0, 0};
  stats.viewLikeOps = {6};
  stats.randOps = {4};
  stats.inplaceOps = {{0, 0}, {7, 5}};
  stats.forceStoreRandom = false;
  return stats;
}

TEST(SacKnapsackTest, PyTorchsSevenBudgets) {
  SacStats stats = pytorchKnapsackStats();
  struct Case {
    double budget;
    std::vector<int> expected;
  };
  Case cases[] = {
      {0, {1, 0, 0, 0, 1, 0, 0, 0}},
      {100.0 / 420, {1, 0, 0, 0, 1, 1, 0, 1}},
      {120.0 / 420, {1, 0, 0, 1, 1, 0, 0, 0}},
      {200.0 / 420, {1, 0, 1, 0, 1, 1, 0, 1}},
      {220.0 / 420, {1, 0, 0, 1, 1, 1, 0, 1}},
      {320.0 / 420, {1, 0, 1, 1, 1, 1, 0, 1}},
      {420.0 / 420, {1, 1, 1, 1, 1, 1, 0, 1}},
  };
  for (const Case &c : cases) {
    llvm::Expected<std::vector<int>> decisions =
        solveSacKnapsack(stats, c.budget);
    ASSERT_TRUE(bool(decisions)) << llvm::toString(decisions.takeError());
    EXPECT_EQ(*decisions, c.expected) << "budget " << c.budget;
  }
}

TEST(SacKnapsackTest, BudgetOutsideUnitIntervalFails) {
  for (double budget : {-0.1, 1.01, std::nan("")}) {
    llvm::Expected<std::vector<int>> decisions =
        solveSacKnapsack(pytorchKnapsackStats(), budget);
    ASSERT_FALSE(bool(decisions));
    EXPECT_NE(llvm::toString(decisions.takeError()).find("between 0 and 1"),
              std::string::npos);
  }
}

TEST(SacKnapsackTest, ForcedRandomOpsAreSavedAndTiedOnesMoveTogether) {
  SacStats stats;
  stats.funcNames = {"aten.bernoulli", "aten.mm", "aten.rand"};
  stats.runtimes = {1, 50, 1};
  stats.memory = {10, 10, 10};
  stats.randOps = {0, 2};
  // A third of the memory: the mm alone fits, the two tied random ops not.
  llvm::Expected<std::vector<int>> tied = solveSacKnapsack(stats, 0.34);
  ASSERT_TRUE(bool(tied));
  EXPECT_EQ(*tied, (std::vector<int>{0, 1, 0}));
  stats.forceStoreRandom = true;
  llvm::Expected<std::vector<int>> forced = solveSacKnapsack(stats, 0.34);
  ASSERT_TRUE(bool(forced));
  // Saving both random ops exceeds the budget: no solution, PyTorch's [].
  EXPECT_TRUE(forced->empty());
}

TEST(SacKnapsackTest, IndexOutOfRangeFails) {
  SacStats stats = pytorchKnapsackStats();
  stats.inplaceOps.push_back({7, 8});
  llvm::Expected<std::vector<int>> decisions = solveSacKnapsack(stats, 0.5);
  ASSERT_FALSE(bool(decisions));
  EXPECT_EQ(llvm::toString(decisions.takeError()),
            "inplace_ops[2] names op 8, but there are 8 ops");
}

//===----------------------------------------------------------------------===//
// Module-level MILP
//===----------------------------------------------------------------------===//

constexpr int64_t GiB = int64_t(1) << 30;

/// A root that cannot be checkpointed, holding 1 GiB of parameters, and two
/// blocks that each save 1 GiB and recompute linearly (rct = sac_runtime * r):
/// at the end of `M.b`'s forward 2 GiB of activations are alive, and only
/// what `M.a` discards (it finished first) lowers that.
SacModuleGraph twoBlockGraph() {
  auto block = [](const char *fqn, double runtime, int64_t actTotal) {
    SacModuleNode node;
    node.fqn = fqn;
    node.actFwPerModule = GiB;
    node.actTotal = actTotal;
    node.isLeaf = false;
    node.sacRuntime = runtime;
    node.sacMemory = GiB;
    node.nSegments = 1;
    node.slopes = {1};
    node.intercepts = {0};
    return node;
  };
  SacModuleGraph graph;
  SacModuleNode root;
  root.fqn = "M";
  root.paramPerModule = GiB;
  root.actTotal = 2 * GiB;
  root.fwRuntimePerModule = 30;
  root.bwRuntimePerModule = 60;
  graph.nodes = {root, block("M.a", 10, GiB), block("M.b", 20, 2 * GiB)};
  graph.fwPostOrder = {"M.a", "M.b", "M"};
  llvm::cantFail(finalizeSacModuleGraph(graph));
  return graph;
}

TEST(SacMilpTest, AncestorMatrixAndPostOrderFromNames) {
  SacModuleGraph graph = twoBlockGraph();
  EXPECT_EQ(graph.adMatrix, (std::vector<std::vector<uint8_t>>{
                                {1, 1, 1}, {0, 1, 0}, {0, 0, 1}}));
  EXPECT_EQ(graph.nodes[0].posFwPostOrder, 2u);
  EXPECT_EQ(graph.nodes[2].posFwPostOrder, 1u);
  auto [peak, computeTime] = sacBaseline(graph);
  EXPECT_EQ(peak, 3 * GiB);
  EXPECT_EQ(computeTime, 90);
}

TEST(SacMilpTest, BindingBudgetDiscardsFromTheEarlierBlock) {
  llvm::Expected<SacMilpResult> result =
      solveSacMilp(twoBlockGraph(), /*memoryBudgetGiB=*/2.5);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  ASSERT_EQ(result->acDecisions.size(), 1u);
  EXPECT_EQ(result->acDecisions[0].first, "M.a");
  EXPECT_DOUBLE_EQ(result->acDecisions[0].second, 0.5);
  EXPECT_DOUBLE_EQ(result->recomputationTime, 5);
  EXPECT_EQ(result->peakMemory, 5 * GiB / 2);
}

TEST(SacMilpTest, WorldSizeShardsParameters) {
  // Over two ranks the parameters take 0.5 GiB: 2.5 GiB fits as is.
  llvm::Expected<SacMilpResult> result =
      solveSacMilp(twoBlockGraph(), 2.5, /*worldSize=*/2);
  ASSERT_TRUE(bool(result));
  EXPECT_TRUE(result->acDecisions.empty());
  EXPECT_EQ(result->recomputationTime, 0);
  EXPECT_EQ(result->peakMemory, 5 * GiB / 2);
}

TEST(SacMilpTest, InfeasibleReturnsPyTorchsEmptyTriple) {
  // M.a's own forward needs 2 GiB with the parameters.
  llvm::Expected<SacMilpResult> result = solveSacMilp(twoBlockGraph(), 1.9);
  ASSERT_TRUE(bool(result));
  EXPECT_EQ(result->status, MilpStatus::Infeasible);
  EXPECT_TRUE(result->acDecisions.empty());
  EXPECT_EQ(result->recomputationTime, 0);
  EXPECT_EQ(result->peakMemory, -1);
}

TEST(SacMilpTest, UserAndFsdpUnitsRestrictTheChoice) {
  std::vector<std::string> onlyB = {"M.b"};
  llvm::Expected<SacMilpResult> acOnlyB =
      solveSacMilp(twoBlockGraph(), 2.5, 1, onlyB);
  ASSERT_TRUE(bool(acOnlyB));
  EXPECT_EQ(acOnlyB->peakMemory, -1);
  // M.a containing an FSDP unit cannot be checkpointed.
  std::vector<std::string> fsdp = {"M.a.inner"};
  llvm::Expected<SacMilpResult> fsdpInA =
      solveSacMilp(twoBlockGraph(), 2.5, 1, std::nullopt, fsdp);
  ASSERT_TRUE(bool(fsdpInA));
  EXPECT_EQ(fsdpInA->peakMemory, -1);
}

TEST(SacMilpTest, SameAnswerEveryRun) {
  SacModuleGraph graph = twoBlockGraph();
  llvm::Expected<SacMilpResult> first = solveSacMilp(graph, 2.2);
  llvm::Expected<SacMilpResult> second = solveSacMilp(graph, 2.2);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->acDecisions, second->acDecisions);
  EXPECT_EQ(first->recomputationTime, second->recomputationTime);
  EXPECT_EQ(first->peakMemory, second->peakMemory);
}

TEST(SacMilpTest, MalformedGraphJsonNamesTheField) {
  llvm::Expected<llvm::json::Value> document = llvm::json::parse(R"({
    "nodes": [{"fqn": "M", "param_per_module": 1, "grad_total": 0,
               "act_fw_per_module": 0, "act_grad_per_module": 0,
               "act_total": "big", "is_leaf": true, "sac_runtime": 0,
               "sac_memory": 0, "n_segments": 0, "slopes": [],
               "intercepts": []}],
    "fw_post_order": ["M"]})");
  ASSERT_TRUE(bool(document));
  SacModuleGraph graph;
  llvm::json::Path::Root root("graph");
  ASSERT_FALSE(fromJSON(*document, graph, root));
  EXPECT_EQ(llvm::toString(root.getError()),
            "expected integer at graph.nodes[0].act_total");
}

TEST(SacMilpTest, PostOrderMustNameEveryNode) {
  SacModuleGraph graph = twoBlockGraph();
  graph.fwPostOrder = {"M.a", "M"};
  EXPECT_EQ(llvm::toString(finalizeSacModuleGraph(graph)),
            "module missing from fw_post_order at graph.nodes[2].fqn");
}
} // namespace
