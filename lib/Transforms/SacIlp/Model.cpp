//===- Model.cpp - loom-sac-ilp's MILPs over the step's memory profile ----===//
//
// Memory, in MiB, over the profile of the finished program (positions p): a
// node's outputs live from their allocation to their last read there.
// Recomputing a backward-read node frees them between its last forward read
// and the point q where its block's recompute region runs (the first
// backward read of any node of that block); saving a node that only forward
// reads keeps it alive until q instead. While the region runs, its
// intermediates need room: the largest of the block's recomputed nodes that
// backward does not read (they are computed one after another, and the
// outputs it recomputes are already counted from q on). The profile is cut
// into segments where the same terms apply; each gives one row
//     max base(segment) + sum(terms) <= P,  P <= budget - persistent.
// The objective is the recompute time in milliseconds, plus a tie-break of
// 1e-9 ms per MiB of peak, so that of equally fast decisions the lower peak
// wins. Segments that read the same terms are one row (the largest base),
// and the rows are lazy constraints (Milp.h), given to CBC as they bind:
// the 8B step's profile has about 3,400 of them, a handful of which decide
// the peak.
//
// Three programs share these terms:
//
// - solveUniform: per decision d, save s_d and recompute r_d in {0,1},
//   shared by identical blocks. A node that backward reads is saved or
//   recomputed (s + r >= 1); recomputing a node needs each node of its block
//   it reads to be saved or recomputed too (s_j + r_j >= r_i); random and
//   in-place nodes are saved (s = 1). Identical blocks share these rules
//   and their region's room variable, so each is stated once.
// - traceTradeOffCurves: the same choices for one distinct block alone:
//   the corners of the lower convex hull of its trade-off between recompute
//   time and MiB kept from forward to backward, from keeping everything to
//   the least the block can keep, found exactly by a dichotomic search on
//   the price per MiB (each corner one CBC solve, plus one per segment).
// - Solver::solve: per block b and point k of its curve, x_bk in {0,1},
//   one point per block. A block's terms are constants per point, so a row
//   reads sum_k c_bk x_bk; where all of a block copy's terms apply (between
//   its forward and its region, most of the profile) the row reads one
//   variable g_b = sum_k gap_bk x_bk instead, which keeps rows short.
//
//===----------------------------------------------------------------------===//

#include "SacIlp.h"

#include "loom/Analysis/Milp.h"

#include "llvm/ADT/MapVector.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

using namespace mlir;
using namespace loom;
using namespace loom::sacilp;

static constexpr double kMiB = 1024.0 * 1024.0;
/// Milliseconds of objective per MiB of peak: breaks ties between equally
/// fast decisions towards the lower peak, too small to buy a slower one.
static constexpr double kTieBreak = 1e-9;
/// Corners of a trade-off curve closer than this (in MiB kept) are one:
/// half a byte, so that points that keep different bytes are different
/// corners however small the model, and sums of the same bytes in another
/// order are not.
static constexpr double kMinCurveStepMiB = 0.5 / (1024 * 1024);
/// The most CBC solves one curve may take (two per corner; a Llama block's
/// lower hull has about 20 corners, its Pareto front more than 60 points).
static constexpr unsigned kMaxCurveSolves = 96;
/// How many corners of its curve on either side of the uniform optimum a
/// block may take in the per-block program (Solver::solve).
static constexpr size_t kCornersAround = 3;
/// The per-block program's least relative gap (see Solver::solve).
static constexpr double kPerBlockGap = 1e-2;

namespace {
/// A term that applies on the positions [from, to).
struct Term {
  int64_t from, to;
  unsigned var;
  double coef;
  double constant;
};

/// One copy (microbatch) of a block whose region runs somewhere.
struct BlockCopy {
  unsigned block;
  int64_t copy;
  /// Where its region runs (q).
  int64_t region;
};

/// What one node instance adds to the profile, as a function of its
/// decision: a backward-read node frees `mib` on [from, to) unless saved; a
/// forward-only node keeps `mib` there if saved.
struct HeldTerm {
  int64_t from, to;
  unsigned instance;
  unsigned blockCopy;
  double mib;
  bool backwardUsed;
};

/// The terms both programs share: the block copies with a region, and what
/// each node instance holds.
struct Terms {
  SmallVector<BlockCopy> copies;
  SmallVector<HeldTerm> held;
  /// Per block copy, the forward-only node instances (for the room its
  /// region needs).
  SmallVector<SmallVector<unsigned>> forwardOnly;
};
} // namespace

static Terms collectTerms(const Problem &problem, const Liveness &liveness) {
  Terms terms;
  std::map<std::pair<unsigned, int64_t>, unsigned> copyIndex;
  // Where each block copy's region runs: its first backward read.
  for (const Instance &inst : liveness.instances) {
    const Node &node = problem.nodes[inst.node];
    if (!node.backwardUsed || inst.firstBackward < 0)
      continue;
    auto [it, inserted] = copyIndex.try_emplace(
        std::make_pair(node.block, inst.copy), terms.copies.size());
    if (inserted)
      terms.copies.push_back({node.block, inst.copy, inst.firstBackward});
    else
      terms.copies[it->second].region =
          std::min(terms.copies[it->second].region, inst.firstBackward);
  }
  terms.forwardOnly.resize(terms.copies.size());
  for (auto [i, inst] : llvm::enumerate(liveness.instances)) {
    const Node &node = problem.nodes[inst.node];
    auto it = copyIndex.find({node.block, inst.copy});
    if (it == copyIndex.end())
      continue;
    int64_t q = terms.copies[it->second].region;
    double mib = inst.bytes / kMiB;
    unsigned index = i;
    if (node.backwardUsed) {
      if (inst.lastForward + 1 < q)
        terms.held.push_back(
            {inst.lastForward + 1, q, index, it->second, mib, true});
      continue;
    }
    if (inst.lastForward + 1 <= q)
      terms.held.push_back(
          {inst.lastForward + 1, q + 1, index, it->second, mib, false});
    terms.forwardOnly[it->second].push_back(index);
  }
  return terms;
}

/// The positions where the set of applying terms changes.
static SmallVector<int64_t> getCuts(const Terms &terms, int64_t end) {
  SmallVector<int64_t> cuts = {0, end};
  for (const HeldTerm &t : terms.held) {
    cuts.push_back(t.from);
    cuts.push_back(t.to);
  }
  for (const BlockCopy &c : terms.copies) {
    cuts.push_back(c.region);
    cuts.push_back(c.region + 1);
  }
  llvm::sort(cuts);
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  while (!cuts.empty() && cuts.back() > end)
    cuts.pop_back();
  return cuts;
}

static int64_t maxBase(const Liveness &liveness, int64_t from, int64_t to) {
  int64_t base = 0;
  for (int64_t p = from; p < to; ++p)
    base = std::max(base, liveness.activationBytesAt[p]);
  return base;
}

static MilpOptions toMilpOptions(const SolveOptions &options) {
  MilpOptions milpOptions;
  milpOptions.timeLimitSeconds = options.timeLimitSeconds;
  milpOptions.relativeGap = options.relativeGap;
  return milpOptions;
}

namespace {
/// The profile's rows, `sum(coef * var) + constant <= peak`: one per set of
/// terms, with the largest constant of the segments that read it.
using ProfileRows = std::map<std::vector<std::pair<unsigned, double>>, double>;
} // namespace

/// Adds a segment's row to `rows`; segments that read the same terms keep
/// the largest constant only.
static void addProfileRow(ProfileRows &rows,
                          std::vector<std::pair<unsigned, double>> row,
                          double constant) {
  llvm::sort(row);
  auto [it, inserted] = rows.try_emplace(std::move(row), constant);
  if (!inserted)
    it->second = std::max(it->second, constant);
}

/// The highest row of `rows` at `values`: the modelled peak, in MiB.
static double getProfilePeak(const ProfileRows &rows, ArrayRef<double> values) {
  double peak = -std::numeric_limits<double>::infinity();
  for (const auto &[row, constant] : rows) {
    double value = constant;
    for (auto [var, c] : row)
      value += c * values[var];
    peak = std::max(peak, value);
  }
  return peak;
}

/// Adds `rows` to `lp` as lazy constraints `sum(coef * var) - peak <=
/// -constant`: of the thousands of segments, a handful decide the peak.
static void addProfileRows(MilpProblem &lp, unsigned peak,
                           const ProfileRows &rows) {
  for (const auto &[row, constant] : rows) {
    std::vector<MilpProblem::Term> terms = {{peak, -1}};
    for (auto [var, c] : row)
      terms.push_back({var, c});
    lp.addLazyLessEqual(terms, -constant);
  }
}

/// The save/recompute variables of decisions [first, first + count) and the
/// rules every decision obeys.
static void addChoices(MilpProblem &lp, const Problem &problem,
                       ArrayRef<unsigned> nodes, unsigned first, unsigned count,
                       SmallVectorImpl<unsigned> &save,
                       SmallVectorImpl<unsigned> &recompute) {
  for (unsigned d = 0; d < count; ++d) {
    save.push_back(lp.addBinary(("s" + Twine(first + d)).str()));
    recompute.push_back(lp.addBinary(("r" + Twine(first + d)).str()));
  }
  // Identical blocks share decisions, and so their rules: each rule once.
  std::set<std::tuple<unsigned, unsigned, unsigned>> rules;
  auto addRule = [&](unsigned kind, unsigned decision, unsigned other,
                     auto add) {
    if (rules.insert({kind, decision, other}).second)
      add();
  };
  for (unsigned n : nodes) {
    const Node &node = problem.nodes[n];
    unsigned d = node.decision - first;
    unsigned s = save[d], r = recompute[d];
    if (node.mustSave)
      addRule(0, d, 0, [&] { lp.addConstraint({{s, 1}}, 1, 1); });
    if (node.backwardUsed)
      addRule(1, d, 0, [&] {
        lp.addConstraint({{s, 1}, {r, 1}}, 1, kMilpInfinity);
      });
    for (unsigned in : node.inputs) {
      unsigned i = problem.nodes[in].decision - first;
      addRule(2, d, i, [&] {
        lp.addConstraint({{save[i], 1}, {recompute[i], 1}, {r, -1}}, 0,
                         kMilpInfinity);
      });
    }
  }
}

FailureOr<Decision> sacilp::solveUniform(const Problem &problem,
                                         const Liveness &liveness,
                                         int64_t budget,
                                         const SolveOptions &options,
                                         std::string &error) {
  MilpProblem lp;
  SmallVector<unsigned> save, recompute;
  auto allNodes = llvm::to_vector(
      llvm::seq<unsigned>(0, static_cast<unsigned>(problem.nodes.size())));
  addChoices(lp, problem, allNodes, 0, problem.numDecisions, save, recompute);
  // Recompute seconds: each node pays for its decision.
  llvm::MapVector<unsigned, double> seconds;
  for (const Node &node : problem.nodes)
    seconds[recompute[node.decision]] += node.seconds;

  Terms held = collectTerms(problem, liveness);
  SmallVector<Term> terms;
  for (const HeldTerm &t : held.held) {
    const Node &node = problem.nodes[liveness.instances[t.instance].node];
    unsigned s = save[node.decision];
    if (t.backwardUsed)
      terms.push_back({t.from, t.to, s, t.mib, -t.mib});
    else
      terms.push_back({t.from, t.to, s, t.mib, 0});
  }
  // The room a block copy's region needs: at least each recomputed
  // forward-only node. Copies that recompute the same nodes of the same
  // sizes (identical blocks) share one variable.
  std::map<std::vector<std::pair<unsigned, int64_t>>, unsigned> room;
  for (auto [c, copy] : llvm::enumerate(held.copies)) {
    if (held.forwardOnly[c].empty())
      continue;
    std::vector<std::pair<unsigned, int64_t>> key;
    for (unsigned i : held.forwardOnly[c]) {
      const Instance &inst = liveness.instances[i];
      key.push_back({recompute[problem.nodes[inst.node].decision], inst.bytes});
    }
    llvm::sort(key);
    auto [it, inserted] = room.try_emplace(key, 0);
    if (inserted) {
      it->second = lp.addContinuous(
          ("t" + Twine(copy.block) + "_" + Twine(copy.copy)).str());
      for (auto [r, bytes] : key)
        lp.addConstraint({{it->second, 1}, {r, -bytes / kMiB}}, 0,
                         kMilpInfinity);
    }
    terms.push_back({copy.region, copy.region + 1, it->second, 1, 0});
  }

  double limit = (budget - liveness.persistentBytes) / kMiB;
  unsigned peak = lp.addContinuous("peak", 0, std::max(limit, 0.0));
  std::vector<MilpProblem::Term> objective = {{peak, kTieBreak}};
  for (auto [var, s] : seconds)
    objective.push_back({var, s * 1e3});
  lp.setObjective(MilpProblem::Sense::Minimize, objective);

  // One row per segment of positions where the same terms apply.
  ProfileRows rows;
  int64_t end = liveness.activationBytesAt.size();
  SmallVector<int64_t> cuts = getCuts(held, end);
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    int64_t from = cuts[k], to = cuts[k + 1];
    double constant = maxBase(liveness, from, to) / kMiB;
    std::map<unsigned, double> coefs;
    for (const Term &t : terms)
      if (t.from <= from && to <= t.to) {
        coefs[t.var] += t.coef;
        constant += t.constant;
      }
    addProfileRow(rows, {coefs.begin(), coefs.end()}, constant);
  }

  addProfileRows(lp, peak, rows);
  MilpSolution result = solveMilp(lp, toMilpOptions(options));
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
      liveness.persistentBytes +
      std::llround(getProfilePeak(rows, result.values) * kMiB);
  decision.policyOfBlock.assign(problem.blocks.size(), 0);
  return decision;
}

/// The seconds `policy` recomputes on a block with `nodes`.
static double recomputeSeconds(const Problem &problem, ArrayRef<unsigned> nodes,
                               const BlockPolicy &policy) {
  double seconds = 0;
  for (auto [i, n] : llvm::enumerate(nodes))
    seconds += policy.recompute[i] ? problem.nodes[n].seconds : 0;
  return seconds;
}

/// The fastest policy of `distinct`'s block for `perMs` per millisecond
/// recomputed plus `perMiB` per MiB (`mib` per node) kept from forward to
/// backward: one CBC solve.
static FailureOr<CurveCorner>
cheapestPoint(const Problem &problem, const DistinctBlock &distinct,
              ArrayRef<double> mib, double perMs, double perMiB,
              const SolveOptions &options, std::string &error) {
  ArrayRef<unsigned> nodes = problem.blocks[distinct.representative].nodes;
  MilpProblem lp;
  SmallVector<unsigned> save, recompute;
  addChoices(lp, problem, nodes, distinct.firstDecision, nodes.size(), save,
             recompute);
  std::vector<MilpProblem::Term> objective;
  for (auto [i, n] : llvm::enumerate(nodes)) {
    objective.push_back({recompute[i], perMs * problem.nodes[n].seconds * 1e3});
    objective.push_back({save[i], perMiB * mib[n]});
  }
  lp.setObjective(MilpProblem::Sense::Minimize, objective);
  MilpSolution result = solveMilp(lp, toMilpOptions(options));
  if (!result.hasSolution()) {
    error = stringifyMilpStatus(result.status).str();
    return failure();
  }
  CurveCorner point;
  for (auto [i, n] : llvm::enumerate(nodes)) {
    point.policy.save.push_back(result.values[save[i]] > 0.5);
    point.policy.recompute.push_back(result.values[recompute[i]] > 0.5);
    point.keptMiB += point.policy.save.back() ? mib[n] : 0;
  }
  point.recomputeMs = recomputeSeconds(problem, nodes, point.policy) * 1e3;
  return point;
}

/// The corners of `distinct`'s lower convex hull of time against MiB kept,
/// from keeping most to keeping least, by the dichotomic search: the two
/// ends, then between two adjacent corners a and b the cheapest point at
/// the chord's price per MiB, which is a new corner if it lies below the
/// chord a-b; none exists between them otherwise.
static FailureOr<SmallVector<CurveCorner>>
traceLowerHull(const Problem &problem, const DistinctBlock &distinct,
               ArrayRef<double> mib, const SolveOptions &options,
               std::string &error) {
  unsigned solves = 0;
  auto solve = [&](double perMs, double perMiB) {
    ++solves;
    return cheapestPoint(problem, distinct, mib, perMs, perMiB, options, error);
  };
  // Fastest (of those, keeping least), and keeping least (of those,
  // fastest).
  FailureOr<CurveCorner> fastest = solve(1, kTieBreak);
  FailureOr<CurveCorner> leanest = solve(kTieBreak, 1);
  if (failed(fastest) || failed(leanest))
    return failure();
  SmallVector<CurveCorner> corners = {std::move(*fastest)};
  SmallVector<CurveCorner> pending = {std::move(*leanest)};
  while (!pending.empty()) {
    CurveCorner &a = corners.back(), &b = pending.back();
    double slope =
        a.keptMiB - b.keptMiB > kMinCurveStepMiB
            ? (b.recomputeMs - a.recomputeMs) / (a.keptMiB - b.keptMiB)
            : -1;
    std::optional<CurveCorner> between;
    if (slope > 0 && solves < kMaxCurveSolves) {
      FailureOr<CurveCorner> c = solve(1, slope);
      if (failed(c))
        return failure();
      double chord = a.recomputeMs + slope * a.keptMiB;
      double value = c->recomputeMs + slope * c->keptMiB;
      if (value < chord - 1e-6 * (1 + std::abs(chord)) &&
          c->keptMiB < a.keptMiB - kMinCurveStepMiB &&
          c->keptMiB > b.keptMiB + kMinCurveStepMiB)
        between = std::move(*c);
    }
    if (between) {
      pending.push_back(std::move(*between));
      continue;
    }
    // No corner between a and b: b is the next one.
    if (b.keptMiB < a.keptMiB - kMinCurveStepMiB ||
        b.recomputeMs < a.recomputeMs)
      corners.push_back(std::move(b));
    pending.pop_back();
  }
  return corners;
}

FailureOr<SmallVector<SmallVector<CurveCorner>>>
sacilp::traceTradeOffCurves(const Problem &problem, const Liveness &liveness,
                            const SolveOptions &options, std::string &error) {
  SmallVector<double> mib;
  for (int64_t bytes : getKeptBytes(problem, liveness))
    mib.push_back(bytes / kMiB);
  SmallVector<SmallVector<CurveCorner>> curves;
  for (const DistinctBlock &distinct : problem.distinct) {
    FailureOr<SmallVector<CurveCorner>> curve =
        traceLowerHull(problem, distinct, mib, options, error);
    if (failed(curve))
      return failure();
    curves.push_back(std::move(*curve));
  }
  return curves;
}

FailureOr<Decision> Solver::solve(int64_t budget, std::string &error) {
  if (!traced) {
    auto corners = traceTradeOffCurves(problem, liveness, options, error);
    if (failed(corners))
      return failure();
    curves = std::move(*corners);
    uniforms.resize(problem.distinct.size());
    traced = true;
  }
  // The uniform optimum under this bound is a candidate too: its points are
  // best where a block's own forward or region sets the peak, which the
  // curves, traced on what a block keeps across the gap, do not see.
  std::string uniformError;
  FailureOr<Decision> uniform =
      solveUniform(problem, liveness, budget, options, uniformError);
  policies.assign(problem.distinct.size(), {});
  for (auto [d, distinct] : llvm::enumerate(problem.distinct)) {
    // The corners around the uniform optimum (all without one): blocks
    // spread over a few neighbouring points, and every further candidate
    // multiplies the symmetric choices CBC branches over.
    ArrayRef<CurveCorner> curve = curves[d];
    ArrayRef<unsigned> nodes = problem.blocks[distinct.representative].nodes;
    size_t from = 0, to = curve.size();
    if (succeeded(uniform)) {
      BlockPolicy policy;
      for (unsigned n : nodes) {
        policy.save.push_back(uniform->save[n]);
        policy.recompute.push_back(uniform->recompute[n]);
      }
      double seconds = recomputeSeconds(problem, nodes, policy);
      size_t at = llvm::count_if(curve, [&](const CurveCorner &corner) {
        return recomputeSeconds(problem, nodes, corner.policy) < seconds;
      });
      from = at > kCornersAround ? at - kCornersAround : 0;
      to = std::min(curve.size(), at + kCornersAround);
      if (!llvm::is_contained(uniforms[d], policy))
        uniforms[d].push_back(std::move(policy));
    }
    for (const CurveCorner &corner : curve.slice(from, to - from))
      policies[d].push_back(corner.policy);
    for (const BlockPolicy &policy : uniforms[d])
      if (!llvm::is_contained(policies[d], policy))
        policies[d].push_back(policy);
  }

  MilpProblem lp;
  // x[b][k]: block b takes point k of its distinct block's curve.
  SmallVector<SmallVector<unsigned>> choose(problem.blocks.size());
  SmallVector<SmallVector<double>> secondsOf(problem.blocks.size());
  std::vector<MilpProblem::Term> objective;
  for (auto [b, block] : llvm::enumerate(problem.blocks)) {
    std::vector<MilpProblem::Term> one;
    for (auto [k, policy] : llvm::enumerate(policies[block.distinct])) {
      unsigned x = lp.addBinary(("x" + Twine(b) + "_" + Twine(k)).str());
      double seconds = recomputeSeconds(problem, block.nodes, policy);
      choose[b].push_back(x);
      secondsOf[b].push_back(seconds);
      one.push_back({x, 1});
      objective.push_back({x, seconds * 1e3});
    }
    lp.addEqual(one, 1);
  }

  // Per held term, its coefficient at each point of its block.
  Terms held = collectTerms(problem, liveness);
  auto positionOf = [&](const HeldTerm &t) {
    const Node &node = problem.nodes[liveness.instances[t.instance].node];
    return node.decision -
           problem.distinct[problem.blocks[node.block].distinct].firstDecision;
  };
  auto coefficients = [&](const HeldTerm &t, SmallVectorImpl<double> &into) {
    const BlockChoice &block = problem.blocks[held.copies[t.blockCopy].block];
    unsigned position = positionOf(t);
    for (auto [k, policy] : llvm::enumerate(policies[block.distinct])) {
      bool save = policy.save[position];
      into[k] += t.backwardUsed ? (save ? 0 : -t.mib) : (save ? t.mib : 0);
    }
  };
  // Per block copy: its terms, the span they cover, the span all of them
  // cover (its gap), and the room its region needs at each point.
  struct CopyTerms {
    SmallVector<unsigned> terms;
    int64_t from = INT64_MAX, to = INT64_MIN;
    int64_t gapFrom = INT64_MIN, gapTo = INT64_MAX;
    SmallVector<double> region, gap;
    std::optional<unsigned> gapVar;
  };
  SmallVector<CopyTerms> copies(held.copies.size());
  for (auto [i, t] : llvm::enumerate(held.held)) {
    CopyTerms &c = copies[t.blockCopy];
    c.terms.push_back(i);
    c.from = std::min(c.from, t.from);
    c.to = std::max(c.to, t.to);
    c.gapFrom = std::max(c.gapFrom, t.from);
    c.gapTo = std::min(c.gapTo, t.to);
  }
  for (auto [ci, copy] : llvm::enumerate(held.copies)) {
    CopyTerms &c = copies[ci];
    const BlockChoice &block = problem.blocks[copy.block];
    unsigned numPoints = policies[block.distinct].size();
    c.region.assign(numPoints, 0);
    for (unsigned i : held.forwardOnly[ci]) {
      const Instance &inst = liveness.instances[i];
      const Node &node = problem.nodes[inst.node];
      unsigned position =
          node.decision - problem.distinct[block.distinct].firstDecision;
      for (auto [k, policy] : llvm::enumerate(policies[block.distinct]))
        if (policy.recompute[position])
          c.region[k] = std::max(c.region[k], inst.bytes / kMiB);
    }
    c.from = std::min(c.from, copy.region);
    c.to = std::max(c.to, copy.region + 1);
    c.gap.assign(numPoints, 0);
    for (unsigned i : c.terms)
      coefficients(held.held[i], c.gap);
  }

  double limit = (budget - liveness.persistentBytes) / kMiB;
  unsigned peak = lp.addContinuous("peak", 0, std::max(limit, 0.0));
  objective.push_back({peak, kTieBreak});
  lp.setObjective(MilpProblem::Sense::Minimize, objective);

  // One row per segment; segments whose rows read the same terms keep the
  // largest base only.
  ProfileRows rows;
  int64_t end = liveness.activationBytesAt.size();
  SmallVector<int64_t> cuts = getCuts(held, end);
  SmallVector<double> coef;
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    int64_t from = cuts[s], to = cuts[s + 1];
    double constant = maxBase(liveness, from, to) / kMiB;
    std::vector<std::pair<unsigned, double>> row;
    for (auto [ci, copy] : llvm::enumerate(held.copies)) {
      CopyTerms &c = copies[ci];
      if (to <= c.from || from >= c.to)
        continue;
      bool inRegion = from == copy.region;
      if (!inRegion && !c.terms.empty() && c.gapFrom <= from && to <= c.gapTo) {
        if (!c.gapVar) {
          c.gapVar = lp.addContinuous(
              ("g" + Twine(copy.block) + "_" + Twine(copy.copy)).str(),
              -kMilpInfinity, kMilpInfinity);
          std::vector<MilpProblem::Term> define = {{*c.gapVar, 1}};
          for (auto [k, x] : llvm::enumerate(choose[copy.block]))
            define.push_back({x, -c.gap[k]});
          lp.addEqual(define, 0);
        }
        row.push_back({*c.gapVar, 1});
        continue;
      }
      coef.assign(choose[copy.block].size(), 0);
      for (unsigned i : c.terms) {
        const HeldTerm &t = held.held[i];
        if (t.from <= from && to <= t.to)
          coefficients(t, coef);
      }
      if (inRegion)
        for (auto [k, r] : llvm::enumerate(c.region))
          coef[k] += r;
      // One point per block: the least coefficient is a constant.
      double least = *llvm::min_element(coef);
      constant += least;
      for (auto [k, x] : llvm::enumerate(choose[copy.block]))
        if (coef[k] != least)
          row.push_back({x, coef[k] - least});
    }
    addProfileRow(rows, std::move(row), constant);
  }

  // Blocks in the same state (between their forward and their region) are
  // nearly interchangeable, so proving the last fraction of a percent
  // optimal takes CBC seconds of symmetric branching; a decision within
  // kPerBlockGap of the bound is as good as the model is exact.
  MilpOptions milpOptions = toMilpOptions(options);
  milpOptions.relativeGap = std::max(milpOptions.relativeGap, kPerBlockGap);
  addProfileRows(lp, peak, rows);
  MilpSolution result = solveMilp(lp, milpOptions);
  if (!result.hasSolution()) {
    error = stringifyMilpStatus(result.status).str();
    return failure();
  }
  Decision decision;
  decision.save.assign(problem.nodes.size(), false);
  decision.recompute.assign(problem.nodes.size(), false);
  for (auto [b, block] : llvm::enumerate(problem.blocks)) {
    unsigned k = 0;
    for (auto [i, x] : llvm::enumerate(choose[b]))
      if (result.values[x] > 0.5)
        k = i;
    const BlockPolicy &policy = policies[block.distinct][k];
    for (auto [i, n] : llvm::enumerate(block.nodes)) {
      decision.save[n] = policy.save[i];
      decision.recompute[n] = policy.recompute[i];
    }
    decision.recomputeSeconds += secondsOf[b][k];
    decision.policyOfBlock.push_back(k);
  }
  // The peak of the decision, from the rows: at a nonzero gap CBC may leave
  // the peak variable anywhere between it and the bound.
  decision.modelPeakBytes =
      liveness.persistentBytes +
      std::llround(std::max(getProfilePeak(rows, result.values), 0.0) * kMiB);
  return decision;
}
