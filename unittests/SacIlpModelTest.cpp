//===- SacIlpModelTest.cpp - loom-sac-ilp's MILP on a profile by hand -----===//
//
// One block of three nodes over a ten-position profile (MiB):
//
//   position      0    1    2    3    4    5    6    7    8    9
//   base        100  200  250  250  200  200  200  200  100    0
//
// n0 (mm, 100 MiB, 2 ms): allocated at 0, last forward read 1, backward
// reads 6..8. n1 (relu of n0, 100 MiB, 0.5 ms): allocated at 1, last forward
// read 2, backward reads 5..7. n2 (50 MiB, 1 ms): allocated at 2, read at 3
// only. The block's region runs at 5 (the first backward read).
// Recomputing n0 frees 100 MiB at 2..4; recomputing n1 frees 100 MiB at 3..4.
// So a budget of 250 MiB needs nothing, 220 MiB needs n0 recomputed (2 ms;
// peak 200 MiB, at 1 and 5..7, where nothing can be freed), and 199 MiB is
// infeasible.
//
//===----------------------------------------------------------------------===//

#include "../lib/Transforms/SacIlp/SacIlp.h"

#include <gtest/gtest.h>

using namespace loom;
using namespace loom::sacilp;

namespace {
constexpr int64_t MiB = 1024 * 1024;

Problem makeProblem() {
  Problem p;
  p.blocks.push_back({"layers.0", {0, 1, 2}, {}, 0});
  p.distinct.push_back({0, 0, {0}});
  Node n0, n1, n2;
  n0.decision = 0;
  n0.backwardUsed = true;
  n0.seconds = 2e-3;
  n1.decision = 1;
  n1.backwardUsed = true;
  n1.seconds = 0.5e-3;
  n1.inputs = {0};
  n2.decision = 2;
  n2.seconds = 1e-3;
  n2.inputs = {1};
  p.nodes = {n0, n1, n2};
  p.numDecisions = 3;
  return p;
}

Liveness makeLiveness() {
  Liveness l;
  for (int64_t mib : {100, 200, 250, 250, 200, 200, 200, 200, 100, 0})
    l.activationBytesAt.push_back(mib * MiB);
  l.instances.push_back({0, 100 * MiB, 0, 1, 6, 8, 0});
  l.instances.push_back({1, 100 * MiB, 1, 2, 5, 7, 0});
  l.instances.push_back({2, 50 * MiB, 2, 3, -1, 3, 0});
  return l;
}

FailureOr<Decision> solveAt(int64_t budget) {
  std::string error;
  Problem problem = makeProblem();
  Liveness liveness = makeLiveness();
  return Solver(problem, liveness, SolveOptions{}).solve(budget, error);
}
} // namespace

TEST(SacIlpModelTest, BudgetAtThePeakRecomputesNothing) {
  FailureOr<Decision> d = solveAt(250 * MiB);
  ASSERT_TRUE(succeeded(d));
  EXPECT_EQ(d->save[0], true);
  EXPECT_EQ(d->save[1], true);
  EXPECT_EQ(d->recomputeSeconds, 0);
  EXPECT_EQ(d->modelPeakBytes, 250 * MiB);
}

TEST(SacIlpModelTest, TighterBudgetRecomputesTheCheapestSufficientNode) {
  FailureOr<Decision> d = solveAt(220 * MiB);
  ASSERT_TRUE(succeeded(d));
  EXPECT_EQ(d->save[0], false);
  EXPECT_EQ(d->save[1], true);
  EXPECT_DOUBLE_EQ(d->recomputeSeconds, 2e-3);
  EXPECT_EQ(d->modelPeakBytes, 200 * MiB);
}

TEST(SacIlpModelTest, BudgetBelowTheForwardPeakIsInfeasible) {
  EXPECT_TRUE(failed(solveAt(199 * MiB)));
}

TEST(SacIlpModelTest, PersistentBytesCountAgainstTheBudget) {
  Liveness l = makeLiveness();
  l.persistentBytes = 30 * MiB;
  std::string error;
  Problem p = makeProblem();
  FailureOr<Decision> d = Solver(p, l, SolveOptions{}).solve(250 * MiB, error);
  ASSERT_TRUE(succeeded(d));
  EXPECT_EQ(d->save[0], false);
  EXPECT_EQ(d->modelPeakBytes, 230 * MiB);
}
