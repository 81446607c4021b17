//===- Model.cpp - loom-sac-ilp's MILP over the step's memory profile -----===//
//
// Per decision d: save s_d in {0,1} and recompute r_d in {0,1}. A node that
// backward reads is saved or recomputed (s + r >= 1); recomputing a node
// needs each node of its block it reads to be saved or recomputed too
// (s_j + r_j >= r_i); random and in-place nodes are saved (s = 1).
//
// Memory, in MiB, over the profile of the finished program (positions p):
// a node's outputs live from their allocation to their last read there.
// Recomputing a backward-read node frees them between its last forward read
// and the point q where its block's recompute region runs (the first
// backward read of any node of that block); saving a node that only forward
// reads keeps it alive until q instead. While the region runs, its
// intermediates need room: t_b >= bytes_i * r_i for the block's nodes that
// backward does not read (they are computed one after another, and the
// outputs it recomputes are already counted from q on). The profile is cut
// into segments where the same terms apply; each gives one row
//     max base(segment) + sum(terms) <= P,  P <= budget - persistent.
//
// Objective: the recompute time in milliseconds, plus a tie-break of 1e-9 ms
// per MiB of peak, so that of equally fast decisions the lower peak wins.
//
//===----------------------------------------------------------------------===//

#include "SacIlp.h"

#include "loom/Analysis/Milp.h"

#include "llvm/ADT/MapVector.h"

#include <cmath>
#include <map>

using namespace mlir;
using namespace loom;
using namespace loom::sacilp;

static constexpr double kMiB = 1024.0 * 1024.0;
/// Milliseconds of objective per MiB of peak: breaks ties between equally
/// fast decisions towards the lower peak, too small to buy a slower one.
static constexpr double kTieBreak = 1e-9;

namespace {
/// A term that applies on the positions [from, to).
struct Term {
  int64_t from, to;
  unsigned var;
  double coef;
  double constant;
};
} // namespace

FailureOr<Decision> sacilp::solve(const Problem &problem,
                                  const Liveness &liveness, int64_t budget,
                                  const SolveOptions &options,
                                  std::string &error) {
  MilpProblem lp;
  SmallVector<unsigned> save, recompute;
  for (unsigned d = 0; d < problem.numDecisions; ++d) {
    save.push_back(lp.addBinary(("s" + Twine(d)).str()));
    recompute.push_back(lp.addBinary(("r" + Twine(d)).str()));
  }
  // Recompute seconds: each node pays for its decision.
  llvm::MapVector<unsigned, double> seconds;
  for (const Node &node : problem.nodes)
    seconds[recompute[node.decision]] += node.seconds;

  for (const Node &node : problem.nodes) {
    unsigned s = save[node.decision], r = recompute[node.decision];
    if (node.mustSave)
      lp.addConstraint({{s, 1}}, 1, 1);
    if (node.backwardUsed)
      lp.addConstraint({{s, 1}, {r, 1}}, 1, kMilpInfinity);
    for (unsigned in : node.inputs) {
      const Node &input = problem.nodes[in];
      lp.addConstraint({{save[input.decision], 1},
                 {recompute[input.decision], 1},
                 {r, -1}},
                0, kMilpInfinity);
    }
  }

  // Where each block copy's region runs.
  std::map<std::pair<unsigned, int64_t>, int64_t> regionAt;
  for (const Instance &inst : liveness.instances) {
    const Node &node = problem.nodes[inst.node];
    if (!node.backwardUsed || inst.firstBackward < 0)
      continue;
    auto key = std::make_pair(node.block, inst.copy);
    auto [it, inserted] = regionAt.try_emplace(key, inst.firstBackward);
    if (!inserted)
      it->second = std::min(it->second, inst.firstBackward);
  }

  int64_t end = liveness.activationBytesAt.size();
  SmallVector<Term> terms;
  std::map<std::pair<unsigned, int64_t>, unsigned> transient;
  for (const Instance &inst : liveness.instances) {
    const Node &node = problem.nodes[inst.node];
    auto it = regionAt.find({node.block, inst.copy});
    if (it == regionAt.end())
      continue;
    int64_t q = it->second;
    double mib = inst.bytes / kMiB;
    unsigned s = save[node.decision];
    if (node.backwardUsed) {
      if (inst.lastForward + 1 < q)
        terms.push_back({inst.lastForward + 1, q, s, mib, -mib});
      continue;
    }
    if (inst.lastForward + 1 <= q)
      terms.push_back({inst.lastForward + 1, q + 1, s, mib, 0});
    auto [t, inserted] = transient.try_emplace(it->first, 0);
    if (inserted)
      t->second = lp.addContinuous(
          ("t" + Twine(node.block) + "_" + Twine(inst.copy)).str());
    lp.addConstraint({{t->second, 1}, {recompute[node.decision], -mib}}, 0,
              kMilpInfinity);
  }
  for (auto &[key, t] : transient)
    terms.push_back({regionAt[key], regionAt[key] + 1, t, 1, 0});

  double limit = (budget - liveness.persistentBytes) / kMiB;
  unsigned peak = lp.addContinuous("peak", 0, std::max(limit, 0.0));
  std::vector<MilpProblem::Term> objective = {{peak, kTieBreak}};
  for (auto [var, s] : seconds)
    objective.push_back({var, s * 1e3});
  lp.setObjective(MilpProblem::Sense::Minimize, objective);

  // One row per segment of positions where the same terms apply.
  SmallVector<int64_t> cuts = {0, end};
  for (const Term &t : terms) {
    cuts.push_back(t.from);
    cuts.push_back(t.to);
  }
  llvm::sort(cuts);
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    int64_t from = cuts[k], to = std::min(cuts[k + 1], end);
    if (from >= to)
      continue;
    int64_t base = 0;
    for (int64_t p = from; p < to; ++p)
      base = std::max(base, liveness.activationBytesAt[p]);
    double constant = base / kMiB;
    std::vector<MilpProblem::Term> row = {{peak, -1}};
    for (const Term &t : terms)
      if (t.from <= from && to <= t.to) {
        row.push_back({t.var, t.coef});
        constant += t.constant;
      }
    lp.addConstraint(row, -kMilpInfinity, -constant);
  }

  MilpOptions milpOptions;
  milpOptions.timeLimitSeconds = options.timeLimitSeconds;
  milpOptions.relativeGap = options.relativeGap;
  MilpSolution result = solveMilp(lp, milpOptions);
  if (!result.hasSolution()) {
    error = stringifyMilpStatus(result.status).str();
    return failure();
  }
  Decision decision;
  for (const Node &node : problem.nodes) {
    decision.save.push_back(result.values[save[node.decision]] > 0.5);
    decision.recompute.push_back(result.values[recompute[node.decision]] >
                                 0.5);
  }
  for (auto [var, s] : seconds)
    decision.recomputeSeconds += s * (result.values[var] > 0.5);
  decision.modelPeakBytes =
      liveness.persistentBytes + std::llround(result.values[peak] * kMiB);
  return decision;
}
