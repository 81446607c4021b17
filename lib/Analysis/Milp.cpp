//===- Milp.cpp - Mixed-integer linear programs solved with CBC -----------===//

#include "loom/Analysis/Milp.h"

#include "llvm/ADT/DenseMap.h"

#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinError.hpp>
#include <CoinPackedMatrix.hpp>
#include <CoinPackedVector.hpp>
#include <OsiClpSolverInterface.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>

using namespace loom;

unsigned MilpProblem::addVariable(llvm::StringRef name, VarKind kind,
                                  double lower, double upper) {
  variables.push_back({name.str(), kind, lower, upper});
  return variables.size() - 1;
}

/// `terms` with the terms on one variable summed: CBC's matrix must not
/// hold a column twice in a row, and a builder may then write `x_i - x_j`
/// without checking i != j.
static std::vector<MilpProblem::Term>
mergeTerms(llvm::ArrayRef<MilpProblem::Term> terms, size_t numVariables) {
  std::vector<MilpProblem::Term> merged;
  llvm::DenseMap<unsigned, unsigned> slot;
  for (const MilpProblem::Term &term : terms) {
    assert(term.var < numVariables && "term on an unknown variable");
    (void)numVariables;
    auto [it, inserted] = slot.try_emplace(term.var, merged.size());
    if (inserted)
      merged.push_back(term);
    else
      merged[it->second].coeff += term.coeff;
  }
  return merged;
}

void MilpProblem::addConstraint(llvm::ArrayRef<Term> terms, double lower,
                                double upper, llvm::StringRef name) {
  constraints.push_back(
      {name.str(), mergeTerms(terms, variables.size()), lower, upper});
}

void MilpProblem::addLazyConstraint(llvm::ArrayRef<Term> terms, double lower,
                                    double upper, llvm::StringRef name) {
  lazyConstraints.push_back(
      {name.str(), mergeTerms(terms, variables.size()), lower, upper});
}

void MilpProblem::setObjective(Sense newSense, llvm::ArrayRef<Term> terms,
                               double constant) {
  sense = newSense;
  objective.assign(terms.begin(), terms.end());
  objectiveConstant = constant;
}

llvm::StringRef loom::stringifyMilpStatus(MilpStatus status) {
  switch (status) {
  case MilpStatus::Optimal:
    return "optimal";
  case MilpStatus::Feasible:
    return "feasible";
  case MilpStatus::Infeasible:
    return "infeasible";
  case MilpStatus::TimeLimitNoSolution:
    return "time-limit-without-solution";
  case MilpStatus::Error:
    return "error";
  }
  llvm_unreachable("unknown MilpStatus");
}

namespace {
/// A number for CBC's command line, at full precision (std::to_string
/// prints 1e-7 as 0.000000).
std::string cbcNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

double toCoin(double bound, double infinity) {
  if (std::isinf(bound))
    return bound > 0 ? infinity : -infinity;
  return bound;
}

/// Solves `problem`'s variables, objective and constraints, plus `extra`.
MilpSolution solveWithCbc(const MilpProblem &problem,
                          llvm::ArrayRef<const MilpProblem::Constraint *> extra,
                          const MilpOptions &options) {
  llvm::ArrayRef<MilpProblem::Variable> vars = problem.getVariables();
  int numCols = vars.size();
  // CBC always minimizes here: a maximization is solved as the minimization
  // of the negated objective, so the solver's own sense handling (which
  // differs between CbcModel and the CbcMain driver) never matters.
  double sign = problem.getSense() == MilpProblem::Sense::Maximize ? -1 : 1;

  OsiClpSolverInterface solver;
  double inf = solver.getInfinity();
  std::vector<double> colLower(numCols), colUpper(numCols), cost(numCols, 0);
  for (int i = 0; i < numCols; ++i) {
    colLower[i] = toCoin(vars[i].lower, inf);
    colUpper[i] = toCoin(vars[i].upper, inf);
  }
  for (const MilpProblem::Term &term : problem.getObjective())
    cost[term.var] += sign * term.coeff;

  CoinPackedMatrix matrix(/*colordered=*/false, 0, 0);
  matrix.setDimensions(0, numCols);
  std::vector<double> rowLower, rowUpper;
  auto addRow = [&](const MilpProblem::Constraint &c) {
    CoinPackedVector row;
    for (const MilpProblem::Term &term : c.terms)
      if (term.coeff != 0)
        row.insert(term.var, term.coeff);
    matrix.appendRow(row);
    rowLower.push_back(toCoin(c.lower, inf));
    rowUpper.push_back(toCoin(c.upper, inf));
  };
  for (const MilpProblem::Constraint &c : problem.getConstraints())
    addRow(c);
  for (const MilpProblem::Constraint *c : extra)
    addRow(*c);
  solver.loadProblem(matrix, colLower.data(), colUpper.data(), cost.data(),
                     rowLower.data(), rowUpper.data());
  for (int i = 0; i < numCols; ++i)
    if (vars[i].kind != MilpProblem::VarKind::Continuous)
      solver.setInteger(i);
  solver.messageHandler()->setLogLevel(0);

  // The CbcMain driver runs CBC as its command line does (preprocessing,
  // cuts, heuristics), which PuLP's CBC binary also does; a bare
  // CbcModel::branchAndBound has none of that and is far slower.
  CbcModel model(solver);
  model.setLogLevel(0);
  CbcSolverUsefulData data;
  data.noPrinting_ = true;
  data.useSignalHandler_ = false;
  CbcMain0(model, data);
  // The time limit is wall-clock (`elapsed`), as PuLP sets it, not CBC's
  // default CPU time. No threads: CBC's `-threads 1` is not serial but one
  // worker thread, and its hand-off to the main thread
  // (CbcBaseModel::waitForThreadsInTree) now and then waited until the time
  // limit on a problem that solves in milliseconds (about 1 run in 10 of
  // the 226 solves of a 70B pipelined plan), which then returned another
  // answer; `-threads 0` runs the search in the calling thread.
  std::string seed = std::to_string(options.seed);
  std::pair<const char *, std::string> settings[] = {
      {"-log", "0"},
      {"-slog", "0"},
      {"-threads", "0"},
      {"-randomCbcSeed", seed},
      {"-randomSeed", seed},
      {"-timeMode", "elapsed"},
      {"-seconds", cbcNumber(std::min(options.timeLimitSeconds, 1e9))},
      {"-ratioGap", cbcNumber(options.relativeGap)},
  };
  std::vector<const char *> argv = {"loom"};
  for (const auto &[name, value] : settings) {
    argv.push_back(name);
    argv.push_back(value.c_str());
  }
  argv.push_back("-solve");
  argv.push_back("-quit");
  auto noCallback = [](CbcModel *, int) { return 0; };
  CbcMain1(argv.size(), argv.data(), model, noCallback, data);

  MilpSolution result;
  result.solves = 1;
  result.lazyConstraintsUsed = extra.size();
  const double *best = model.bestSolution();
  bool timeLimit = model.isSecondsLimitReached();
  if (best) {
    result.values.assign(best, best + numCols);
    // Integer variables come back as 0.999999...; the caller asked for an
    // integer, so give it one.
    for (int i = 0; i < numCols; ++i)
      if (vars[i].kind != MilpProblem::VarKind::Continuous)
        result.values[i] = std::round(result.values[i]);
    double objective = problem.getObjectiveConstant();
    for (const MilpProblem::Term &term : problem.getObjective())
      objective += term.coeff * result.values[term.var];
    result.objective = objective;
    result.bound =
        sign * model.getBestPossibleObjValue() + problem.getObjectiveConstant();
    result.status = timeLimit ? MilpStatus::Feasible : MilpStatus::Optimal;
    return result;
  }
  // A finished search without a solution proved infeasibility, unless the
  // relaxation was unbounded (secondary status 7).
  if (timeLimit)
    result.status = MilpStatus::TimeLimitNoSolution;
  else if (model.isProvenInfeasible() ||
           (model.status() == 0 && model.secondaryStatus() != 7 &&
            !model.isInitialSolveProvenDualInfeasible()))
    result.status = MilpStatus::Infeasible;
  else
    result.status = MilpStatus::Error;
  return result;
}

/// How far `values` are outside `c`'s bounds (0 inside), and the tolerance
/// below which that is CBC's rounding, not a broken row.
std::pair<double, double> getExcess(const MilpProblem::Constraint &c,
                                    llvm::ArrayRef<double> values) {
  double activity = 0, scale = 1;
  for (const MilpProblem::Term &term : c.terms) {
    activity += term.coeff * values[term.var];
    scale += std::abs(term.coeff * values[term.var]);
  }
  double excess = std::max({c.lower - activity, activity - c.upper, 0.0});
  return {excess, 1e-6 * scale};
}

/// The lazy-constraint loop (Milp.h). A solve that the time limit stopped
/// with constraints still broken, or without a solution, or a solution that
/// breaks only constraints CBC already had (beyond its tolerance), ends it
/// with one solve with every constraint in the time left.
MilpSolution solveWithLazyConstraints(const MilpProblem &problem,
                                      const MilpOptions &options) {
  /// How many broken constraints join per solve.
  constexpr size_t kPerSolve = 8;
  llvm::ArrayRef<MilpProblem::Constraint> lazy = problem.getLazyConstraints();
  auto start = std::chrono::steady_clock::now();
  auto remaining = [&] {
    MilpOptions left = options;
    std::chrono::duration<double> spent =
        std::chrono::steady_clock::now() - start;
    left.timeLimitSeconds =
        std::max(options.timeLimitSeconds - spent.count(), 1e-3);
    return left;
  };
  std::vector<const MilpProblem::Constraint *> active;
  std::vector<bool> isActive(lazy.size(), false);
  unsigned solves = 0;
  while (true) {
    MilpSolution result = solveWithCbc(problem, active, remaining());
    result.solves = ++solves;
    // With fewer rows infeasible, infeasible with all of them.
    if (result.status == MilpStatus::Infeasible)
      return result;
    if (!result.hasSolution())
      break;
    std::vector<std::pair<double, size_t>> broken;
    for (auto [i, c] : llvm::enumerate(lazy)) {
      auto [excess, tolerance] = getExcess(c, result.values);
      if (excess > tolerance)
        broken.push_back({excess, i});
    }
    // A solution that meets every row is the program's (proven optimal
    // within the gap, or the best the time limit left).
    if (broken.empty())
      return result;
    if (result.status != MilpStatus::Optimal)
      break;
    std::stable_sort(
        broken.begin(), broken.end(),
        [](const auto &a, const auto &b) { return a.first > b.first; });
    size_t before = active.size();
    for (auto [excess, i] : broken) {
      if (active.size() - before == kPerSolve)
        break;
      if (!isActive[i]) {
        isActive[i] = true;
        active.push_back(&lazy[i]);
      }
    }
    if (active.size() == before)
      break;
  }
  std::vector<const MilpProblem::Constraint *> all;
  for (const MilpProblem::Constraint &c : lazy)
    all.push_back(&c);
  MilpSolution result = solveWithCbc(problem, all, remaining());
  result.solves = ++solves;
  return result;
}
} // namespace

MilpSolution loom::solveMilp(const MilpProblem &problem,
                             const MilpOptions &options) {
  // CbcMain0/CbcMain1 keep their parameter table in static storage, so two
  // solves at once (a multithreaded pass manager) would share it.
  static std::mutex cbcMutex;
  std::lock_guard<std::mutex> lock(cbcMutex);
  // The rest of Loom has no exceptions: CBC's stop here.
  try {
    if (problem.getLazyConstraints().empty())
      return solveWithCbc(problem, {}, options);
    return solveWithLazyConstraints(problem, options);
  } catch (const CoinError &e) {
    MilpSolution result;
    result.status = MilpStatus::Error;
    result.message = e.className() + "::" + e.methodName() + ": " + e.message();
    return result;
  } catch (const std::exception &e) {
    MilpSolution result;
    result.status = MilpStatus::Error;
    result.message = e.what();
    return result;
  }
}
