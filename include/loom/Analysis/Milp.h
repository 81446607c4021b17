//===- Milp.h - Mixed-integer linear programs solved with CBC ---*- C++ -*-===//
//
// A small modelling layer over COIN-OR CBC: variables with bounds and
// integrality, linear constraints, a linear objective, and one deterministic
// solve. CBC's headers stay in Milp.cpp, so code that builds problems (the
// activation-checkpointing solvers, their tests) compiles without them.
//
// Lazy constraints are for programs with many rows of which few bind (one
// row per point of a memory profile): CBC's preprocessing and cuts pay for
// every row it is given, so it is given only those that a solution breaks.
// solveMilp solves without them, adds the ones the solution breaks (the
// most broken first, a few at a time) and solves again, until a solution
// breaks none. The optimum of a relaxation that meets every row is the
// optimum of the whole program, so the answer is the whole program's
// (within the gap, since the relaxation's bound is at most the program's).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_MILP_H
#define LOOM_ANALYSIS_MILP_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <limits>
#include <string>
#include <vector>

namespace loom {

/// Bounds that mean "no bound" on either side.
inline constexpr double kMilpInfinity = std::numeric_limits<double>::infinity();

/// A linear program with some integer variables. Variables and constraints
/// are numbered in the order they are added.
class MilpProblem {
public:
  enum class VarKind { Continuous, Integer, Binary };
  enum class Sense { Minimize, Maximize };

  /// One `coeff * x[var]` term of a linear expression.
  struct Term {
    unsigned var;
    double coeff;
  };

  struct Variable {
    std::string name;
    VarKind kind;
    double lower, upper;
  };

  /// `lower <= sum(terms) <= upper`; an equality has lower == upper.
  struct Constraint {
    std::string name;
    std::vector<Term> terms;
    double lower, upper;
  };

  unsigned addVariable(llvm::StringRef name, VarKind kind, double lower,
                       double upper);
  unsigned addContinuous(llvm::StringRef name, double lower = 0,
                         double upper = kMilpInfinity) {
    return addVariable(name, VarKind::Continuous, lower, upper);
  }
  unsigned addInteger(llvm::StringRef name, double lower, double upper) {
    return addVariable(name, VarKind::Integer, lower, upper);
  }
  unsigned addBinary(llvm::StringRef name) {
    return addVariable(name, VarKind::Binary, 0, 1);
  }

  /// Terms on the same variable are summed. `lower`/`upper` may be
  /// -/+kMilpInfinity.
  void addConstraint(llvm::ArrayRef<Term> terms, double lower, double upper,
                     llvm::StringRef name = "");
  void addLessEqual(llvm::ArrayRef<Term> terms, double rhs,
                    llvm::StringRef name = "") {
    addConstraint(terms, -kMilpInfinity, rhs, name);
  }
  void addGreaterEqual(llvm::ArrayRef<Term> terms, double rhs,
                       llvm::StringRef name = "") {
    addConstraint(terms, rhs, kMilpInfinity, name);
  }
  void addEqual(llvm::ArrayRef<Term> terms, double rhs,
                llvm::StringRef name = "") {
    addConstraint(terms, rhs, rhs, name);
  }
  /// A constraint given to CBC only once a solution breaks it (above).
  void addLazyConstraint(llvm::ArrayRef<Term> terms, double lower, double upper,
                         llvm::StringRef name = "");
  void addLazyLessEqual(llvm::ArrayRef<Term> terms, double rhs,
                        llvm::StringRef name = "") {
    addLazyConstraint(terms, -kMilpInfinity, rhs, name);
  }
  /// Fixes one variable, as a constraint (PuLP's `prob += x == v`), so the
  /// model keeps the same rows as a PuLP model of the same formulation.
  void fix(unsigned var, double value, llvm::StringRef name = "") {
    addEqual({{var, 1.0}}, value, name);
  }

  void setObjective(Sense sense, llvm::ArrayRef<Term> terms,
                    double constant = 0);

  llvm::ArrayRef<Variable> getVariables() const { return variables; }
  llvm::ArrayRef<Constraint> getConstraints() const { return constraints; }
  llvm::ArrayRef<Constraint> getLazyConstraints() const {
    return lazyConstraints;
  }
  llvm::ArrayRef<Term> getObjective() const { return objective; }
  double getObjectiveConstant() const { return objectiveConstant; }
  Sense getSense() const { return sense; }

private:
  std::vector<Variable> variables;
  std::vector<Constraint> constraints, lazyConstraints;
  std::vector<Term> objective;
  double objectiveConstant = 0;
  Sense sense = Sense::Minimize;
};

struct MilpOptions {
  /// Wall-clock limit of the branch and bound, in seconds.
  double timeLimitSeconds = 60;
  /// Stop once (best - bound) / |best| is at most this (CBC's ratioGap).
  double relativeGap = 1e-4;
  /// CBC's and CLP's random seeds; CBC runs without threads, so the same
  /// problem and seed give the same answer on every run and every rank
  /// (unless the time limit stops it).
  int seed = 1;
};

enum class MilpStatus {
  /// Proven optimal within `relativeGap`.
  Optimal,
  /// The time limit stopped the search with a solution that is not proven
  /// within the gap.
  Feasible,
  /// No solution exists.
  Infeasible,
  /// The time limit stopped the search before any solution was found.
  TimeLimitNoSolution,
  /// The objective is unbounded, or CBC failed for another reason.
  Error,
};

llvm::StringRef stringifyMilpStatus(MilpStatus status);

struct MilpSolution {
  MilpStatus status = MilpStatus::Error;
  /// Objective value of `values` (including the constant), in the problem's
  /// own sense.
  double objective = 0;
  /// The best bound CBC proved; |objective - bound| is the remaining gap.
  double bound = 0;
  /// One value per variable, in the order they were added; empty without a
  /// solution.
  std::vector<double> values;
  /// Why CBC failed, for MilpStatus::Error.
  std::string message;
  /// How many times CBC ran, and how many lazy constraints it had the last
  /// time.
  unsigned solves = 0, lazyConstraintsUsed = 0;

  bool hasSolution() const {
    return status == MilpStatus::Optimal || status == MilpStatus::Feasible;
  }
  double value(unsigned var) const { return values[var]; }
};

/// Solves `problem` with CBC on one thread with its log off; with lazy
/// constraints, as often as they need (above). The time limit is for all
/// the solves together.
MilpSolution solveMilp(const MilpProblem &problem,
                       const MilpOptions &options = {});

} // namespace loom

#endif // LOOM_ANALYSIS_MILP_H
