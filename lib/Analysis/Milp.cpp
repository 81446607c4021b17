//===- Milp.cpp - Mixed-integer linear programs solved with CBC -----------===//

#include "loom/Analysis/Milp.h"

#include "llvm/ADT/DenseMap.h"

#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinError.hpp>
#include <CoinPackedMatrix.hpp>
#include <CoinPackedVector.hpp>
#include <OsiClpSolverInterface.hpp>

#include <cmath>
#include <mutex>
#include <string>

using namespace loom;

unsigned MilpProblem::addVariable(llvm::StringRef name, VarKind kind,
                                  double lower, double upper) {
  variables.push_back({name.str(), kind, lower, upper});
  return variables.size() - 1;
}

void MilpProblem::addConstraint(llvm::ArrayRef<Term> terms, double lower,
                                double upper, llvm::StringRef name) {
  // CBC's matrix must not hold a column twice in a row, so merge here; a
  // builder may then write `x_i - x_j` without checking i != j.
  std::vector<Term> merged;
  llvm::DenseMap<unsigned, unsigned> slot;
  for (const Term &term : terms) {
    assert(term.var < variables.size() && "term on an unknown variable");
    auto [it, inserted] = slot.try_emplace(term.var, merged.size());
    if (inserted)
      merged.push_back(term);
    else
      merged[it->second].coeff += term.coeff;
  }
  constraints.push_back({name.str(), std::move(merged), lower, upper});
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
double toCoin(double bound, double infinity) {
  if (std::isinf(bound))
    return bound > 0 ? infinity : -infinity;
  return bound;
}
} // namespace

namespace {
MilpSolution solveWithCbc(const MilpProblem &problem,
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
  for (const MilpProblem::Constraint &c : problem.getConstraints()) {
    CoinPackedVector row;
    for (const MilpProblem::Term &term : c.terms)
      if (term.coeff != 0)
        row.insert(term.var, term.coeff);
    matrix.appendRow(row);
    rowLower.push_back(toCoin(c.lower, inf));
    rowUpper.push_back(toCoin(c.upper, inf));
  }
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
  std::string seconds = std::to_string(options.timeLimitSeconds);
  std::string gap = std::to_string(options.relativeGap);
  std::string seed = std::to_string(options.seed);
  const char *argv[] = {"loom",
                        "-log",
                        "0",
                        "-slog",
                        "0",
                        "-threads",
                        "1",
                        "-randomCbcSeed",
                        seed.c_str(),
                        "-randomSeed",
                        seed.c_str(),
                        "-seconds",
                        seconds.c_str(),
                        "-ratioGap",
                        gap.c_str(),
                        "-solve",
                        "-quit"};
  int argc = sizeof(argv) / sizeof(argv[0]);
  CbcMain1(
      argc, argv, model, [](CbcModel *, int) { return 0; }, data);

  MilpSolution result;
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
} // namespace

MilpSolution loom::solveMilp(const MilpProblem &problem,
                             const MilpOptions &options) {
  // CbcMain0/CbcMain1 keep their parameter table in static storage, so two
  // solves at once (a multithreaded pass manager) would share it.
  static std::mutex cbcMutex;
  std::lock_guard<std::mutex> lock(cbcMutex);
  // The rest of Loom has no exceptions: CBC's stop here.
  try {
    return solveWithCbc(problem, options);
  } catch (const CoinError &e) {
    MilpSolution result;
    result.status = MilpStatus::Error;
    result.message = e.className() + "::" + e.methodName() + ": " + e.message();
    return result;
  }
}
