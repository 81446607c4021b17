//===- Model.cpp - loom-sac-ilp's MILPs over the step's memory profile ----===//
//
// Memory, in MiB, over the profile of the finished program (positions p): a
// node's outputs live from their allocation to their last read there.
// Recomputing a backward-read node frees them between its last forward read
// and the point q where its block's recompute region runs. loom-remat puts
// the region before the first backward read of what it recomputes, so q
// depends on the decision: it is the earliest first backward read of the
// block's nodes that are not saved (a block whose output the next block's
// backward reads first runs there only if it recomputes that output), or
// earlier, where backward first reads a view every region of the block
// takes again of a value from outside it (Instance::regionBy).
// Saving a node that only forward reads keeps it alive until q instead.
// While the region runs it needs room beyond what it leaves alive for
// backward: computing a node, that node if only forward reads it and its
// recomputed forward-only inputs are alive, while the backward-read nodes
// it recomputes after it are not back yet; the room is the most of that
// over its nodes, none below 0. getModelPeak evaluates this for one
// decision; the programs below are exact formulations of it. The profile
// is cut into segments where the same terms apply; each gives one row
//     max base(segment) + sum(terms) <= P,  P <= budget - persistent.
// The objective is the recompute time in milliseconds, plus a tie-break of
// 1e-9 ms per MiB of peak, so that of equally fast decisions the lower peak
// wins. Segments that read the same terms are one row (the largest base),
// and the rows are lazy constraints (Milp.h), given to CBC as they bind:
// the 8B step's profile has several thousand of them, a handful of which
// decide the peak.
//
// Three programs share these terms:
//
// - solveUniform: per decision d, save s_d and recompute r_d in {0,1},
//   shared by identical blocks. A node that backward reads is saved or
//   recomputed (s + r >= 1); recomputing a node needs each node of its block
//   it reads to be saved or recomputed too (s_j + r_j >= r_i); random and
//   in-place nodes are saved (s = 1). Where the region runs is a variable
//   per candidate point (RegionTerms). Identical blocks share these rules
//   and variables, so each is stated once. On a small step it also runs
//   with a decision per node (Solver::addOwnOptimum).
// - traceTradeOffCurves: the same choices for one distinct block alone:
//   the corners of the lower convex hull of its trade-off between recompute
//   time and MiB kept from forward to backward, from keeping everything to
//   the least the block can keep, found exactly by a dichotomic search on
//   the price per MiB (each corner one CBC solve, plus one per segment).
// - Solver::solve (PerBlockProgram): per block b and point k of its curve,
//   x_bk in {0,1}, one point per block. A block's terms, where its region runs
//   included, are constants per point, so a row reads sum_k c_bk x_bk; where
//   all of a block copy's terms apply (between its forward and its region, most
//   of the profile) the row reads one variable g_b = sum_k gap_bk x_bk instead,
//   which keeps rows short.
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
/// block may take in the per-block program (Solver::chooseCandidates).
static constexpr size_t kCornersAround = 3;
/// The per-block program's least relative gap (see PerBlockProgram::solve).
static constexpr double kPerBlockGap = 1e-2;
/// Steps with at most this many nodes also solve the program in which every
/// block decides on its own (Solver::addOwnOptimum), at kPerBlockGap: 0.2 s
/// on ViT's 34 nodes; on the bench's small Llama (144) it took 0.1-0.5 s
/// more per budget (up to 10 s at a gap of 0) for at most 0.7% less
/// recompute.
static constexpr size_t kOwnDecisionNodes = 128;

namespace {
/// A term that applies on the positions [from, to).
struct Term {
  int64_t from, to;
  unsigned var;
  double coef;
  double constant;
};

/// One copy (microbatch) of a block whose region may run.
struct BlockCopy {
  unsigned block;
  int64_t copy;
  /// Where its region may run, ascending: the first backward reads of the
  /// nodes it can recompute. It runs at the first of them whose node is not
  /// saved (loom-remat puts a region before the first backward read of what
  /// it recomputes), so a block whose output the next block's backward reads
  /// first runs its region there only if it recomputes that output.
  SmallVector<int64_t> points;
  /// The instances of the nodes that move it.
  SmallVector<unsigned> movers;
};

/// What one node instance adds to the profile, as a function of its
/// decision: a backward-read node frees `mib` from `from` until its block
/// copy's region runs, unless saved; a forward-only node keeps `mib` from
/// `from` until the region has read it, if saved (and a region runs). On
/// [from, to) that holds whatever the decision: `to` is the copy's first
/// point (+1 for a forward-only node, which the region reads there).
struct HeldTerm {
  int64_t from, to;
  unsigned instance;
  unsigned blockCopy;
  double mib;
  bool backwardUsed;
  /// A backward-read node's Instance::regionBy(): where the region runs at
  /// the latest when the node is recomputed.
  int64_t regionBy;
};

/// What a region needs while it recomputes the node `instance`, beyond
/// what it leaves alive for backward: that node if only forward reads it,
/// and its recomputed forward-only inputs, are alive; the backward-read
/// nodes the region recomputes after it (`later`) are not yet.
struct RoomTerm {
  unsigned instance;
  bool forwardOnly;
  SmallVector<unsigned> inputs, later;
};

/// The terms every program shares: the block copies with a region, and
/// what each node instance holds.
struct Terms {
  SmallVector<BlockCopy> copies;
  SmallVector<HeldTerm> held;
  /// Per block copy, its held terms (indices into `held`).
  SmallVector<SmallVector<unsigned>> heldOf;
  /// Per block copy, the room its region needs (the most of these).
  SmallVector<SmallVector<RoomTerm>> room;
};
} // namespace

/// Whether `node`, unless saved, sets where its block's region runs.
static bool movesRegion(const Node &node) {
  return node.backwardUsed && !node.mustSave;
}

static Terms collectTerms(const Problem &problem, const Liveness &liveness) {
  Terms terms;
  std::map<std::pair<unsigned, int64_t>, unsigned> copyIndex;
  // Where each block copy's region may run: the first backward reads of
  // the nodes that may be recomputed.
  for (auto [i, inst] : llvm::enumerate(liveness.instances)) {
    const Node &node = problem.nodes[inst.node];
    if (!movesRegion(node) || inst.regionBy() < 0)
      continue;
    auto [it, inserted] = copyIndex.try_emplace(
        std::make_pair(node.block, inst.copy), terms.copies.size());
    if (inserted)
      terms.copies.push_back({node.block, inst.copy, {}, {}});
    terms.copies[it->second].points.push_back(inst.regionBy());
    terms.copies[it->second].movers.push_back(i);
  }
  for (BlockCopy &copy : terms.copies) {
    llvm::sort(copy.points);
    copy.points.erase(std::unique(copy.points.begin(), copy.points.end()),
                      copy.points.end());
  }
  // Per block copy, the forward-only node instances.
  SmallVector<SmallVector<unsigned>> forwardOnly(terms.copies.size());
  terms.heldOf.resize(terms.copies.size());
  auto hold = [&](HeldTerm term) {
    terms.heldOf[term.blockCopy].push_back(terms.held.size());
    terms.held.push_back(term);
  };
  for (auto [i, inst] : llvm::enumerate(liveness.instances)) {
    const Node &node = problem.nodes[inst.node];
    auto it = copyIndex.find({node.block, inst.copy});
    if (it == copyIndex.end())
      continue;
    int64_t q = terms.copies[it->second].points.front();
    double mib = inst.bytes / kMiB;
    unsigned index = i;
    if (node.backwardUsed) {
      if (inst.lastForward + 1 < q)
        hold({inst.lastForward + 1, q, index, it->second, mib, true,
              inst.regionBy()});
      continue;
    }
    if (inst.lastForward + 1 <= q)
      hold({inst.lastForward + 1, q + 1, index, it->second, mib, false, -1});
    forwardOnly[it->second].push_back(index);
  }
  terms.room.resize(terms.copies.size());
  for (auto [c, copy] : llvm::enumerate(terms.copies)) {
    DenseMap<unsigned, unsigned> forwardOnlyOf;
    for (unsigned i : forwardOnly[c])
      forwardOnlyOf[liveness.instances[i].node] = i;
    SmallVector<unsigned> computed(copy.movers);
    llvm::append_range(computed, forwardOnly[c]);
    for (unsigned i : computed) {
      unsigned node = liveness.instances[i].node;
      RoomTerm room{i, !problem.nodes[node].backwardUsed, {}, {}};
      for (unsigned in : problem.nodes[node].inputs)
        if (auto it = forwardOnlyOf.find(in); it != forwardOnlyOf.end())
          room.inputs.push_back(it->second);
      // Nodes come in forward order, which the region keeps.
      for (unsigned m : copy.movers)
        if (liveness.instances[m].node > node)
          room.later.push_back(m);
      if (room.forwardOnly || !room.inputs.empty())
        terms.room[c].push_back(std::move(room));
    }
  }
  return terms;
}

/// The room `terms`' region of copy `c` needs (bytes): the most any node it
/// recomputes needs, none below 0.
static int64_t
getRoomBytes(const Terms &terms, unsigned c, const Liveness &liveness,
             llvm::function_ref<bool(unsigned node)> saved,
             llvm::function_ref<bool(unsigned node)> recomputed) {
  auto bytesOf = [&](unsigned i) { return liveness.instances[i].bytes; };
  auto nodeOf = [&](unsigned i) { return liveness.instances[i].node; };
  int64_t most = 0;
  for (const RoomTerm &room : terms.room[c]) {
    if (!recomputed(nodeOf(room.instance)))
      continue;
    int64_t bytes = room.forwardOnly ? bytesOf(room.instance) : 0;
    for (unsigned i : room.inputs)
      bytes += recomputed(nodeOf(i)) ? bytesOf(i) : 0;
    for (unsigned i : room.later)
      bytes -= saved(nodeOf(i)) ? 0 : bytesOf(i);
    most = std::max(most, bytes);
  }
  return most;
}

/// Where `copy`'s region runs when the nodes for which `saved` is false
/// are recomputed: the first backward read of those that move it, or -1
/// when none of them is recomputed.
static int64_t getRegionPoint(const BlockCopy &copy, const Liveness &liveness,
                              llvm::function_ref<bool(unsigned node)> saved) {
  int64_t point = -1;
  for (unsigned i : copy.movers) {
    const Instance &inst = liveness.instances[i];
    if (!saved(inst.node) && (point < 0 || inst.regionBy() < point))
      point = inst.regionBy();
  }
  return point;
}

/// The positions where the set of applying terms changes.
static SmallVector<int64_t> getCuts(const Terms &terms, int64_t end) {
  SmallVector<int64_t> cuts = {0, end};
  for (const HeldTerm &t : terms.held) {
    cuts.push_back(t.from);
    cuts.push_back(t.to);
  }
  for (const BlockCopy &c : terms.copies)
    for (int64_t point : c.points) {
      cuts.push_back(point);
      cuts.push_back(point + 1);
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

/// getModelPeak over `terms`, collected once by the caller.
static int64_t getModelPeak(const Terms &terms, const Liveness &liveness,
                            ArrayRef<bool> save, ArrayRef<bool> recompute) {
  auto saved = [&](unsigned node) { return save[node]; };
  int64_t end = liveness.activationBytesAt.size();
  SmallVector<int64_t> delta(end + 1, 0);
  auto add = [&](int64_t from, int64_t to, int64_t bytes) {
    from = std::max<int64_t>(from, 0);
    to = std::min(to, end);
    if (from < to) {
      delta[from] += bytes;
      delta[to] -= bytes;
    }
  };
  SmallVector<int64_t> points;
  for (auto [c, copy] : llvm::enumerate(terms.copies)) {
    int64_t q = getRegionPoint(copy, liveness, saved);
    points.push_back(q);
    if (q < 0)
      continue;
    add(q, q + 1, getRoomBytes(terms, c, liveness, saved, [&](unsigned node) {
          return recompute[node];
        }));
  }
  for (const HeldTerm &t : terms.held) {
    const Instance &inst = liveness.instances[t.instance];
    int64_t q = points[t.blockCopy];
    if (t.backwardUsed && !save[inst.node] && q >= 0)
      add(t.from, q, -inst.bytes);
    else if (!t.backwardUsed && save[inst.node] && q >= 0)
      add(t.from, q + 1, inst.bytes);
  }
  int64_t peak = 0, running = 0;
  for (int64_t p = 0; p < end; ++p) {
    running += delta[p];
    peak = std::max(peak, liveness.activationBytesAt[p] + running);
  }
  return liveness.persistentBytes + peak;
}

int64_t sacilp::getModelPeak(const Problem &problem, const Liveness &liveness,
                             ArrayRef<bool> save, ArrayRef<bool> recompute) {
  return ::getModelPeak(collectTerms(problem, liveness), liveness, save,
                        recompute);
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

namespace {
/// The uniform program's terms for where each block copy's region runs, at
/// its points p_1 < ... < p_m:
/// - z_j = 1 when the region has run by p_j: some node whose first backward
///   read is at or before p_j is not saved (z_j >= 1 - s_n, and z_j at most
///   z_{j-1} plus the sum of those, so it is exactly their "or");
/// - on [p_j, p_j+1): a backward-read node read after p_j is freed while
///   the region has not run: A_j <= sum mib_n (1 - s_n), A_j <= M (1 - z_j);
/// - on [p_j + 1, p_j+1 + 1): a saved forward-only node is held until the
///   region reads it: H_j >= sum mib_n s_n - M z_j (none after the last
///   point: a block that never runs its region does not read it);
/// - at p_j: the region's room t if it runs there: R_j >= t - T (1 - z_j +
///   z_{j-1}).
/// Before p_1 the terms do not depend on where the region runs (the held
/// terms have them); A_j and R_j are at most, H_j at least what they stand
/// for, and the peak is least where they are exact. Variables are keyed by
/// the constraints that define them (kind first): identical blocks state
/// the same ones, so they share them.
class RegionTerms {
public:
  RegionTerms(MilpProblem &lp, const Problem &problem, const Liveness &liveness,
              const Terms &held, ArrayRef<unsigned> save,
              ArrayRef<unsigned> recompute, SmallVectorImpl<Term> &terms)
      : lp(lp), problem(problem), liveness(liveness), held(held), save(save),
        recompute(recompute), terms(terms) {}

  void addCopy(unsigned c) {
    const BlockCopy &copy = held.copies[c];
    suffix = (Twine(copy.block) + "_" + Twine(copy.copy)).str();
    std::optional<unsigned> room = addRoom(c);
    std::optional<unsigned> previous;
    for (auto [j, point] : llvm::enumerate(copy.points)) {
      unsigned z = addRegionRan(copy, j, previous);
      if (room)
        terms.push_back(
            {point, point + 1, addRoomAt(*room, z, previous, j), 1, 0});
      previous = z;
      if (j + 1 == copy.points.size())
        break;
      int64_t next = copy.points[j + 1];
      if (std::optional<unsigned> a = addFreed(c, point, z, j))
        terms.push_back({point, next, *a, -1, 0});
      if (std::optional<unsigned> h = addHeld(c, z, j))
        terms.push_back({point + 1, next + 1, *h, 1, 0});
    }
  }

private:
  /// The variable of `key`, calling `define(var)` when new.
  unsigned get(std::vector<double> key, const Twine &name, double upper,
               llvm::function_ref<void(unsigned)> define) {
    auto [it, inserted] = vars.try_emplace(std::move(key), 0);
    if (inserted) {
      it->second = lp.addContinuous(name.str(), 0, upper);
      define(it->second);
    }
    return it->second;
  }
  double mibOf(unsigned instance) const {
    return liveness.instances[instance].bytes / kMiB;
  }
  unsigned varOf(ArrayRef<unsigned> vars, unsigned instance) const {
    return vars[problem.nodes[liveness.instances[instance].node].decision];
  }
  /// Appends `sign * mib * s` for each saved-variable pair of `key` from
  /// `from` on.
  static void appendSaved(std::vector<MilpProblem::Term> &row,
                          ArrayRef<double> key, size_t from, double sign) {
    for (size_t k = from; k < key.size(); k += 2)
      row.push_back({static_cast<unsigned>(key[k]), sign * key[k + 1]});
  }

  /// The room t: per node f the region computes, f if only forward reads
  /// it and its recomputed forward-only inputs g, less the backward-read
  /// nodes n recomputed after it:
  ///   t >= [mib_f r_f] + sum mib_g (r_g + r_f - 1) - sum mib_n (1 - s_n)
  /// (r_g + r_f - 1 is r_g r_f where r_f is 1, and leaves the row below 0
  /// where it is 0). Sets roomMax, the most t can be.
  std::optional<unsigned> addRoom(unsigned c) {
    std::vector<std::pair<std::vector<MilpProblem::Term>, double>> rows;
    std::vector<double> key = {0};
    roomMax = 0;
    for (const RoomTerm &f : held.room[c]) {
      double most = f.forwardOnly ? mibOf(f.instance) : 0, rhs = 0;
      std::vector<MilpProblem::Term> row;
      for (unsigned g : f.inputs) {
        most += mibOf(g);
        rhs -= mibOf(g);
        row.push_back({varOf(recompute, g), -mibOf(g)});
      }
      row.push_back({varOf(recompute, f.instance), -most});
      for (unsigned n : f.later) {
        rhs -= mibOf(n);
        row.push_back({varOf(save, n), -mibOf(n)});
      }
      roomMax = std::max(roomMax, most);
      key.push_back(std::numeric_limits<double>::max());
      for (MilpProblem::Term term : row) {
        key.push_back(term.var);
        key.push_back(term.coeff);
      }
      key.push_back(rhs);
      rows.push_back({std::move(row), rhs});
    }
    if (roomMax <= 0)
      return std::nullopt;
    return get(key, "t" + suffix, kMilpInfinity, [&](unsigned t) {
      for (auto &[row, rhs] : rows) {
        row.push_back({t, 1});
        lp.addConstraint(row, rhs, kMilpInfinity);
      }
    });
  }

  /// z_j: whether the region has run by the copy's j-th point.
  unsigned addRegionRan(const BlockCopy &copy, size_t j,
                        std::optional<unsigned> previous) {
    std::vector<double> key = {1, previous ? double(*previous) : -1.0};
    for (unsigned i : copy.movers)
      if (liveness.instances[i].regionBy() == copy.points[j])
        key.push_back(varOf(save, i));
    std::sort(key.begin() + 2, key.end());
    return get(key, "z" + suffix + "_" + Twine(j), 1, [&](unsigned z) {
      std::vector<MilpProblem::Term> most = {{z, 1}};
      if (previous) {
        lp.addConstraint({{z, 1}, {*previous, -1}}, 0, kMilpInfinity);
        most.push_back({*previous, -1});
      }
      for (size_t k = 2; k < key.size(); ++k) {
        unsigned s = key[k];
        lp.addConstraint({{z, 1}, {s, 1}}, 1, kMilpInfinity);
        most.push_back({s, 1});
      }
      lp.addConstraint(most, -kMilpInfinity, key.size() - 2);
    });
  }

  /// R_j: the room t where the region runs at the j-th point.
  unsigned addRoomAt(unsigned t, unsigned z, std::optional<unsigned> previous,
                     size_t j) {
    return get(
        {2, double(t), double(z), previous ? double(*previous) : -1.0, roomMax},
        "R" + suffix + "_" + Twine(j), kMilpInfinity, [&](unsigned r) {
          std::vector<MilpProblem::Term> row = {{r, 1}, {t, -1}, {z, -roomMax}};
          if (previous)
            row.push_back({*previous, roomMax});
          lp.addConstraint(row, -roomMax, kMilpInfinity);
        });
  }

  /// The (save variable, MiB) pairs of copy `c`'s held terms that `pick`
  /// selects, after `key`'s first two entries; returns their MiB.
  double collectSaved(unsigned c, std::vector<double> &key,
                      llvm::function_ref<bool(const HeldTerm &)> pick) {
    double total = 0;
    for (unsigned i : held.heldOf[c])
      if (const HeldTerm &t = held.held[i]; pick(t)) {
        key.push_back(varOf(save, t.instance));
        key.push_back(t.mib);
        total += t.mib;
      }
    return total;
  }

  /// A_j: what is freed after the j-th point while the region has not run.
  std::optional<unsigned> addFreed(unsigned c, int64_t point, unsigned z,
                                   size_t j) {
    std::vector<double> key = {3, double(z)};
    double most = collectSaved(c, key, [&](const HeldTerm &t) {
      return t.backwardUsed && t.regionBy > point &&
             movesRegion(problem.nodes[liveness.instances[t.instance].node]);
    });
    if (most <= 0)
      return std::nullopt;
    return get(key, "A" + suffix + "_" + Twine(j), kMilpInfinity,
               [&](unsigned a) {
                 std::vector<MilpProblem::Term> row = {{a, 1}};
                 appendSaved(row, key, 2, 1);
                 lp.addConstraint(row, -kMilpInfinity, most);
                 lp.addConstraint({{a, 1}, {z, most}}, -kMilpInfinity, most);
               });
  }

  /// H_j: the saved forward-only nodes held after the j-th point while the
  /// region has not run.
  std::optional<unsigned> addHeld(unsigned c, unsigned z, size_t j) {
    std::vector<double> key = {4, double(z)};
    double kept =
        collectSaved(c, key, [](const HeldTerm &t) { return !t.backwardUsed; });
    if (kept <= 0)
      return std::nullopt;
    return get(key, "H" + suffix + "_" + Twine(j), kMilpInfinity,
               [&](unsigned h) {
                 std::vector<MilpProblem::Term> row = {{h, 1}, {z, kept}};
                 appendSaved(row, key, 2, -1);
                 lp.addConstraint(row, 0, kMilpInfinity);
               });
  }

  MilpProblem &lp;
  const Problem &problem;
  const Liveness &liveness;
  const Terms &held;
  ArrayRef<unsigned> save, recompute;
  SmallVectorImpl<Term> &terms;
  std::map<std::vector<double>, unsigned> vars;
  std::string suffix;
  double roomMax = 0;
};
} // namespace

/// The uniform program: the cheapest decision whose modelled peak is at most
/// `budget`, or with `leastPeak` one of least modelled peak at most `budget`.
static FailureOr<Decision> solveUniformProgram(const Problem &problem,
                                               const Liveness &liveness,
                                               int64_t budget, bool leastPeak,
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
  RegionTerms regions(lp, problem, liveness, held, save, recompute, terms);
  for (unsigned c = 0; c < held.copies.size(); ++c)
    regions.addCopy(c);

  double limit = (budget - liveness.persistentBytes) / kMiB;
  unsigned peak = lp.addContinuous("peak", 0, std::max(limit, 0.0));
  std::vector<MilpProblem::Term> objective = {
      {peak, leastPeak ? 1 : kTieBreak}};
  for (auto [var, s] : seconds)
    objective.push_back({var, s * 1e3 * (leastPeak ? kTieBreak : 1)});
  lp.setObjective(MilpProblem::Sense::Minimize, objective);

  // One row per segment of positions where the same terms apply.
  ProfileRows rows;
  int64_t end = liveness.activationBytesAt.size();
  SmallVector<int64_t> cuts = getCuts(held, end);
  // Every term's ends are cuts: a term applies from the segment that starts
  // at its `from` to the one before its `to`, so the rows are kept as
  // running sums. Coefficients and constants are whole numbers of bytes
  // over a power of two, or +-1, so the sums are exact whatever the order.
  size_t segments = cuts.size() - 1;
  std::vector<SmallVector<unsigned>> starting(segments), ending(segments + 1);
  auto segmentAt = [&](int64_t point) -> size_t {
    return llvm::lower_bound(cuts, point) - cuts.begin();
  };
  for (auto [i, t] : llvm::enumerate(terms)) {
    size_t first = segmentAt(t.from);
    size_t last = std::min(segmentAt(t.to), segments);
    if (first >= last)
      continue;
    starting[first].push_back(i);
    ending[last].push_back(i);
  }
  std::vector<double> coefOf(lp.getVariables().size(), 0);
  std::vector<unsigned> termsOf(lp.getVariables().size(), 0);
  std::set<unsigned> applying;
  double termConstants = 0;
  auto apply = [&](const Term &t, int sign) {
    coefOf[t.var] += sign * t.coef;
    termConstants += sign * t.constant;
    if (sign > 0 && termsOf[t.var]++ == 0)
      applying.insert(t.var);
    if (sign < 0 && --termsOf[t.var] == 0) {
      applying.erase(t.var);
      coefOf[t.var] = 0;
    }
  };
  for (size_t k = 0; k < segments; ++k) {
    for (unsigned i : ending[k])
      apply(terms[i], -1);
    for (unsigned i : starting[k])
      apply(terms[i], +1);
    std::vector<std::pair<unsigned, double>> row;
    row.reserve(applying.size());
    for (unsigned var : applying)
      row.push_back({var, coefOf[var]});
    addProfileRow(rows, std::move(row),
                  maxBase(liveness, cuts[k], cuts[k + 1]) / kMiB +
                      termConstants);
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
      ::getModelPeak(held, liveness, decision.save, decision.recompute);
  decision.policyOfBlock.assign(problem.blocks.size(), 0);
  return decision;
}

FailureOr<Decision> sacilp::solveUniform(const Problem &problem,
                                         const Liveness &liveness,
                                         int64_t budget,
                                         const SolveOptions &options,
                                         std::string &error) {
  return solveUniformProgram(problem, liveness, budget, /*leastPeak=*/false,
                             options, error);
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

/// What `distinct`'s curve is traced from: its computation, and per node
/// its time and the MiB it keeps (exactly, as bits).
static std::string getCurveKey(const Problem &problem,
                               const DistinctBlock &distinct,
                               ArrayRef<double> mib) {
  std::string key = distinct.computation;
  llvm::raw_string_ostream os(key);
  for (unsigned n : problem.blocks[distinct.representative].nodes)
    os << llvm::bit_cast<uint64_t>(problem.nodes[n].seconds) << ':'
       << llvm::bit_cast<uint64_t>(mib[n]) << ';';
  return key;
}

FailureOr<SmallVector<SmallVector<CurveCorner>>>
sacilp::traceTradeOffCurves(const Problem &problem, const Liveness &liveness,
                            const SolveOptions &options, CurveCache &cache,
                            std::string &error) {
  SmallVector<double> mib;
  for (int64_t bytes : getKeptBytes(problem, liveness))
    mib.push_back(bytes / kMiB);
  SmallVector<SmallVector<CurveCorner>> curves;
  for (const DistinctBlock &distinct : problem.distinct) {
    std::string key = getCurveKey(problem, distinct, mib);
    if (auto it = cache.find(key); it != cache.end()) {
      curves.push_back(it->second);
      continue;
    }
    FailureOr<SmallVector<CurveCorner>> curve =
        traceLowerHull(problem, distinct, mib, options, error);
    if (failed(curve))
      return failure();
    cache[key] = *curve;
    curves.push_back(std::move(*curve));
  }
  return curves;
}

/// The policy `decision` gives `block`.
static BlockPolicy getPolicy(const BlockChoice &block,
                             const Decision &decision) {
  BlockPolicy policy;
  for (unsigned n : block.nodes) {
    policy.save.push_back(decision.save[n]);
    policy.recompute.push_back(decision.recompute[n]);
  }
  return policy;
}

/// `problem` with a decision per node: every block decides on its own.
static Problem withOwnDecisions(const Problem &problem) {
  Problem own = problem;
  for (auto [i, node] : llvm::enumerate(own.nodes))
    node.decision = i;
  own.numDecisions = own.nodes.size();
  return own;
}

void Solver::addOwnOptimum(int64_t budget) {
  // Mixing the curve's corners is as good as any point between them only
  // when many blocks share the curve: two blocks may do best at points
  // above the hull, or where their regions run later than the corner's.
  // A small step's program with a decision per node is small too, and
  // its optimum (within kPerBlockGap) is the model's; its blocks'
  // policies join the candidates.
  if (problem.nodes.size() > kOwnDecisionNodes)
    return;
  std::string error;
  SolveOptions ownOptions = options;
  ownOptions.relativeGap = std::max(ownOptions.relativeGap, kPerBlockGap);
  FailureOr<Decision> decision = solveUniform(
      withOwnDecisions(problem), liveness, budget, ownOptions, error);
  if (failed(decision))
    return;
  for (const BlockChoice &block : problem.blocks) {
    BlockPolicy policy = getPolicy(block, *decision);
    if (!llvm::is_contained(uniforms[block.distinct], policy))
      uniforms[block.distinct].push_back(std::move(policy));
  }
}

namespace {
/// The per-block program: x[b][k] is 1 when block b takes candidate k of
/// its distinct block; one row per segment of the profile bounds the peak.
class PerBlockProgram {
public:
  PerBlockProgram(const Problem &problem, const Liveness &liveness,
                  ArrayRef<SmallVector<BlockPolicy>> policies)
      : problem(problem), liveness(liveness), policies(policies),
        held(collectTerms(problem, liveness)) {}

  /// The cheapest choice whose modelled peak is at most `budget`; without
  /// a budget, one of least modelled peak (recompute time breaking ties).
  FailureOr<Decision> solve(std::optional<int64_t> budget,
                            const SolveOptions &options, std::string &error);

private:
  /// Per block copy: its terms, where its region runs at each candidate,
  /// the span they cover, the span all of them cover at every candidate
  /// (its gap), and the room its region needs at each candidate.
  struct CopyTerms {
    ArrayRef<unsigned> terms;
    SmallVector<int64_t> regionAt;
    int64_t from = INT64_MAX, to = INT64_MIN;
    int64_t gapFrom = INT64_MIN, gapTo = INT64_MAX;
    SmallVector<double> region, gap;
    std::optional<unsigned> gapVar;
  };

  /// The x variables (one candidate per block) and their recompute times.
  void addChoices();
  /// Where each copy's region runs and what its terms cover.
  void collectCopies();
  /// A node's position in its block.
  unsigned positionOf(unsigned node) const;
  /// Adds each candidate's coefficient of `t` on the segment [from, to) to
  /// `into`.
  void addCoefficients(const HeldTerm &t, int64_t from, int64_t to,
                       SmallVectorImpl<double> &into) const;
  /// The row of the segment [from, to): the blocks' variables, with what
  /// is the same at every candidate added to `constant`.
  std::vector<std::pair<unsigned, double>>
  getSegmentRow(int64_t from, int64_t to, double &constant);
  /// The decision of CBC's values.
  Decision decode(const MilpSolution &result) const;

  const Problem &problem;
  const Liveness &liveness;
  ArrayRef<SmallVector<BlockPolicy>> policies;
  Terms held;
  MilpProblem lp;
  SmallVector<SmallVector<unsigned>> choose;
  SmallVector<SmallVector<double>> secondsOf;
  std::vector<MilpProblem::Term> objective;
  std::vector<CopyTerms> copies;
  SmallVector<double> coef;
};
} // namespace

void PerBlockProgram::addChoices() {
  choose.resize(problem.blocks.size());
  secondsOf.resize(problem.blocks.size());
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
}

unsigned PerBlockProgram::positionOf(unsigned node) const {
  const Node &n = problem.nodes[node];
  return n.decision -
         problem.distinct[problem.blocks[n.block].distinct].firstDecision;
}

void PerBlockProgram::addCoefficients(const HeldTerm &t, int64_t from,
                                      int64_t to,
                                      SmallVectorImpl<double> &into) const {
  const BlockChoice &block = problem.blocks[held.copies[t.blockCopy].block];
  unsigned position = positionOf(liveness.instances[t.instance].node);
  const CopyTerms &c = copies[t.blockCopy];
  if (from < t.from)
    return;
  for (auto [k, policy] : llvm::enumerate(policies[block.distinct])) {
    bool save = policy.save[position];
    int64_t q = c.regionAt[k];
    if (t.backwardUsed && !save && q >= 0 && to <= q)
      into[k] -= t.mib;
    else if (!t.backwardUsed && save && q >= 0 && to <= q + 1)
      into[k] += t.mib;
  }
}

void PerBlockProgram::collectCopies() {
  copies.resize(held.copies.size());
  for (auto [ci, copy] : llvm::enumerate(held.copies)) {
    CopyTerms &c = copies[ci];
    c.terms = held.heldOf[ci];
    for (unsigned i : c.terms) {
      c.from = std::min(c.from, held.held[i].from);
      c.gapFrom = std::max(c.gapFrom, held.held[i].from);
    }
    const BlockChoice &block = problem.blocks[copy.block];
    for (const BlockPolicy &policy : policies[block.distinct]) {
      auto saved = [&](unsigned node) { return policy.save[positionOf(node)]; };
      auto recomputed = [&](unsigned node) {
        return policy.recompute[positionOf(node)];
      };
      int64_t q = getRegionPoint(copy, liveness, saved);
      c.regionAt.push_back(q);
      c.region.push_back(getRoomBytes(held, ci, liveness, saved, recomputed) /
                         kMiB);
      if (q < 0)
        continue;
      c.from = std::min(c.from, q);
      c.to = std::max(c.to, q + 1);
      c.gapTo = std::min(c.gapTo, q);
    }
    c.gap.assign(policies[block.distinct].size(), 0);
    if (c.gapFrom < c.gapTo)
      for (unsigned i : c.terms)
        addCoefficients(held.held[i], c.gapFrom, c.gapTo, c.gap);
  }
}

std::vector<std::pair<unsigned, double>>
PerBlockProgram::getSegmentRow(int64_t from, int64_t to, double &constant) {
  std::vector<std::pair<unsigned, double>> row;
  for (auto [ci, copy] : llvm::enumerate(held.copies)) {
    CopyTerms &c = copies[ci];
    if (to <= c.from || from >= c.to)
      continue;
    if (!c.terms.empty() && c.gapFrom <= from && to <= c.gapTo) {
      // Within its gap a copy's coefficients are the same on every
      // segment: one variable stands for them.
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
    for (unsigned i : c.terms)
      addCoefficients(held.held[i], from, to, coef);
    for (auto [k, r] : llvm::enumerate(c.region))
      if (from == c.regionAt[k])
        coef[k] += r;
    // One point per block: the least coefficient is a constant.
    double least = *llvm::min_element(coef);
    constant += least;
    for (auto [k, x] : llvm::enumerate(choose[copy.block]))
      if (coef[k] != least)
        row.push_back({x, coef[k] - least});
  }
  return row;
}

Decision PerBlockProgram::decode(const MilpSolution &result) const {
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
  // The peak of the decision, not CBC's peak variable: at a nonzero gap CBC
  // may leave it anywhere between the peak and the bound.
  decision.modelPeakBytes =
      ::getModelPeak(held, liveness, decision.save, decision.recompute);
  return decision;
}

FailureOr<Decision> PerBlockProgram::solve(std::optional<int64_t> budget,
                                           const SolveOptions &options,
                                           std::string &error) {
  addChoices();
  collectCopies();
  double limit =
      budget ? (*budget - liveness.persistentBytes) / kMiB : kMilpInfinity;
  unsigned peak = lp.addContinuous("peak", 0, std::max(limit, 0.0));
  if (budget) {
    objective.push_back({peak, kTieBreak});
  } else {
    // The least peak; recompute time only breaks ties, within CBC's
    // tolerance.
    for (MilpProblem::Term &term : objective)
      term.coeff *= kTieBreak;
    objective.push_back({peak, 1});
  }
  lp.setObjective(MilpProblem::Sense::Minimize, objective);

  // One row per segment; segments whose rows read the same terms keep the
  // largest base only.
  ProfileRows rows;
  int64_t end = liveness.activationBytesAt.size();
  SmallVector<int64_t> cuts = getCuts(held, end);
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    int64_t from = cuts[s], to = cuts[s + 1];
    double constant = maxBase(liveness, from, to) / kMiB;
    std::vector<std::pair<unsigned, double>> row =
        getSegmentRow(from, to, constant);
    addProfileRow(rows, std::move(row), constant);
  }

  // Blocks in the same state (between their forward and their region) are
  // nearly interchangeable, so proving the last fraction of a percent
  // optimal takes CBC seconds of symmetric branching; a decision within
  // kPerBlockGap of the bound is as good as the model is exact.
  // The least peak is sought exactly: it is the smallest budget named.
  MilpOptions milpOptions = toMilpOptions(options);
  if (budget)
    milpOptions.relativeGap = std::max(milpOptions.relativeGap, kPerBlockGap);
  addProfileRows(lp, peak, rows);
  MilpSolution result = solveMilp(lp, milpOptions);
  if (!result.hasSolution()) {
    error = stringifyMilpStatus(result.status).str();
    return failure();
  }
  return decode(result);
}

LogicalResult Solver::traceCurves(std::string &error) {
  if (traced)
    return success();
  auto corners = traceTradeOffCurves(problem, liveness, options, cache, error);
  if (failed(corners))
    return failure();
  curves = std::move(*corners);
  uniforms.resize(problem.distinct.size());
  traced = true;
  return success();
}

void Solver::chooseCandidates(int64_t budget) {
  // The uniform optimum under this bound is a candidate too: its points are
  // best where a block's own forward or region sets the peak, which the
  // curves, traced on what a block keeps across the gap, do not see.
  std::string uniformError;
  SolveOptions uniformOptions = options;
  uniformOptions.relativeGap =
      std::max(uniformOptions.relativeGap, kPerBlockGap);
  FailureOr<Decision> uniform =
      solveUniform(problem, liveness, budget, uniformOptions, uniformError);
  addOwnOptimum(budget);
  policies.assign(problem.distinct.size(), {});
  for (auto [d, distinct] : llvm::enumerate(problem.distinct)) {
    // The corners around the uniform optimum (all without one): blocks
    // spread over a few neighbouring points, and every further candidate
    // multiplies the symmetric choices CBC branches over.
    ArrayRef<CurveCorner> curve = curves[d];
    ArrayRef<unsigned> nodes = problem.blocks[distinct.representative].nodes;
    size_t from = 0, to = curve.size();
    if (succeeded(uniform)) {
      BlockPolicy policy =
          getPolicy(problem.blocks[distinct.representative], *uniform);
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
}

FailureOr<Decision> Solver::solve(int64_t budget, std::string &error) {
  if (failed(traceCurves(error)))
    return failure();
  chooseCandidates(budget);
  return PerBlockProgram(problem, liveness, policies)
      .solve(budget, options, error);
}

FailureOr<Decision> Solver::solveLeastPeak(std::string &error) {
  if (failed(traceCurves(error)))
    return failure();
  // The least peak is not always that of recomputing the most: a region
  // needs room to run, and a block recomputed whole can need more of it in
  // backward than it frees across the gap (a recurrent layer's many small
  // steps). First every block takes the corner of its curve (the leanest
  // is recomputing all it can) that gives the least peak: a small program.
  // (Only the curves, not the bounds solved so far, so that the answer
  // does not depend on the budget asked for.)
  policies.assign(problem.distinct.size(), {});
  for (auto [d, curve] : llvm::enumerate(curves))
    for (const CurveCorner &corner : curve)
      policies[d].push_back(corner.policy);
  FailureOr<Decision> least = PerBlockProgram(problem, liveness, policies)
                                  .solve(std::nullopt, options, error);
  if (failed(least))
    return failure();
  // Then the uniform program (per node on a small step) with the peak as
  // its objective, below that: the curves are traced on what a block keeps
  // across the gap and miss decisions whose regions need less room. Its
  // relaxation is weak, so the time limit may stop it (on two GRU blocks,
  // 328 nodes, at 10 s), with the best it found.
  Problem uniformProblem = problem.nodes.size() <= kOwnDecisionNodes
                               ? withOwnDecisions(problem)
                               : problem;
  std::string uniformError;
  FailureOr<Decision> uniform =
      solveUniformProgram(uniformProblem, liveness, least->modelPeakBytes,
                          /*leastPeak=*/true, options, uniformError);
  if (succeeded(uniform) && uniform->modelPeakBytes < least->modelPeakBytes)
    return uniform;
  return least;
}
