//===- Schedule.cpp - The loom-schedule latency-hiding list scheduler -----===//
//
// Reorders the ops of each step function so that collectives run while the
// compute stream works, under a per-rank memory limit. A top-down list
// scheduler over the step's dependence graph, driven by the cost model and
// the simulator's stream model:
//
// - a collective start is issued as soon as its input is ready, while fewer
//   than `max-in-flight` collectives are started and not yet waited (lowest
//   program position first);
// - a wait is placed as late as possible: right before the first op that
//   needs it, or earlier when its collective has (by the model's clock)
//   already finished or the in-flight bound needs the slot;
// - compute ops run in program order, except that a later ready op runs
//   ahead of one that waits on an unfinished collective.
//
// Memory: every choice that departs from "the rest in program order" must
// keep the peak of (the ops scheduled so far, the choice, the rest in
// program order with pending waits right before their first users) within
// the limit. The rest is always a valid completion, so the invariant "some
// completion stays within the limit" holds from the first op to the last
// and the final order never exceeds the limit. The check is exact but
// mostly cheap: an upper and a lower bound of that peak (the last exact
// sweep, raised or lowered by what the choices since may have added or
// freed; range-max trees) decide most choices, and only the others sweep
// the completion again (CompletionBound). The result is kept only if the
// simulator says it is faster than program order.
//
// Everything depends only on the IR and the options: the order is
// deterministic and identical on every rank.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/PeakMemory.h"
#include "loom/Analysis/Simulator.h"
#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Support/ByteSize.h"
#include "loom/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <limits>
#include <optional>
#include <set>

namespace loom {
#define GEN_PASS_DEF_LOOMSCHEDULE
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

/// The results of `region` that are views of its input `input`: the body
/// yields the argument bound to it, or a chain of views of it.
static SmallVector<Value> getRecomputeViewsOf(RecomputeOp region,
                                              OpOperand &input) {
  Value arg = region.getBodyBlock().getArgument(input.getOperandNumber());
  SmallVector<Value> views;
  for (auto [result, yielded] :
       llvm::zip(region.getResults(), region.getYield().getValues())) {
    Value v = yielded;
    while (v != arg) {
      Operation *def = v.getDefiningOp();
      if (!def || !isViewAtenOp(def) || def->getNumOperands() == 0)
        break;
      v = def->getOperand(0);
    }
    if (v == arg)
      views.push_back(result);
  }
  return views;
}

namespace {
/// Range addition and range maximum over a fixed array (a lazy segment
/// tree): both in O(log n).
class RangeMaxTree {
public:
  explicit RangeMaxTree(ArrayRef<int64_t> values)
      : size(values.size()), maxOf(4 * values.size() + 4, 0),
        addOf(4 * values.size() + 4, 0) {
    if (size)
      build(1, 0, size, values);
  }
  /// Adds `delta` to the entries [lo, hi).
  void add(size_t lo, size_t hi, int64_t delta) {
    if (lo < hi)
      add(1, 0, size, lo, std::min(hi, size), delta);
  }
  /// The largest entry of [lo, hi); kNone for an empty range.
  int64_t max(size_t lo, size_t hi) const {
    return lo < std::min(hi, size) ? max(1, 0, size, lo, std::min(hi, size))
                                   : kNone;
  }
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min() / 4;

private:
  void build(size_t node, size_t lo, size_t hi, ArrayRef<int64_t> values) {
    if (hi - lo == 1) {
      maxOf[node] = values[lo];
      return;
    }
    size_t mid = (lo + hi) / 2;
    build(2 * node, lo, mid, values);
    build(2 * node + 1, mid, hi, values);
    maxOf[node] = std::max(maxOf[2 * node], maxOf[2 * node + 1]);
  }
  void add(size_t node, size_t lo, size_t hi, size_t from, size_t to,
           int64_t delta) {
    if (to <= lo || hi <= from)
      return;
    if (from <= lo && hi <= to) {
      maxOf[node] += delta;
      addOf[node] += delta;
      return;
    }
    size_t mid = (lo + hi) / 2;
    add(2 * node, lo, mid, from, to, delta);
    add(2 * node + 1, mid, hi, from, to, delta);
    maxOf[node] = addOf[node] + std::max(maxOf[2 * node], maxOf[2 * node + 1]);
  }
  int64_t max(size_t node, size_t lo, size_t hi, size_t from, size_t to) const {
    if (to <= lo || hi <= from)
      return kNone;
    if (from <= lo && hi <= to)
      return maxOf[node];
    size_t mid = (lo + hi) / 2;
    return addOf[node] + std::max(max(2 * node, lo, mid, from, to),
                                  max(2 * node + 1, mid, hi, from, to));
  }

  size_t size;
  SmallVector<int64_t> maxOf, addOf;
};

/// Bytes `op` allocates that outlive its own step (a view's, an in-place
/// update's and a wait's results allocate nothing).
static int64_t getAllocatedBytes(Operation *op) {
  if (isa<WaitOp, OptimizerUpdateOp>(op) ||
      (isa<AtenOp>(op) && getAliasedOperand(op)))
    return 0;
  int64_t bytes = 0;
  for (Value result : op->getResults())
    bytes += getResultStorageBytes(result);
  return bytes;
}

/// Bytes live while `op` itself runs beyond those before it: its results
/// and kernel scratch, or for a recompute region everything its body
/// allocates (its body's frees not counted).
static int64_t getOwnStepBytes(Operation *op) {
  int64_t bytes = getAllocatedBytes(op) + getKernelScratchBytes(op);
  if (auto region = dyn_cast<RecomputeOp>(op))
    for (Operation &inner : region.getBodyBlock())
      bytes += getAllocatedBytes(&inner) + getKernelScratchBytes(&inner);
  return bytes;
}

/// The bytes of the storage `v` uses, or -1 where it cannot tell (a region
/// result may be a view of an input); 0 for a step argument, which the step
/// keeps throughout.
static int64_t getStorageBytes(Value v, Block &body) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return arg.getOwner() == &body ? 0 : -1;
    Operation *def = v.getDefiningOp();
    if (isa<OptimizerUpdateOp>(def))
      return 0;
    if (isa<RecomputeOp>(def))
      return -1;
    Value aliased = isa<AtenOp>(def) ? getAliasedOperand(def) : Value();
    if (!aliased)
      return getResultStorageBytes(v);
    v = aliased;
  }
}

/// Bounds, step by step, on the activation bytes of the scheduler's current
/// completion (the ops placed, then the rest in program order with the
/// waits of started collectives right before their first dependent). Both
/// start from an exact sweep of a completion (the reference) and follow the
/// moves made since without a sweep:
///
/// - the upper bound adds what a move may add: moving an op earlier
///   allocates its results earlier (and can only free its inputs earlier);
///   deferring a started collective's wait holds its input and buffer
///   longer. A move it admits keeps the true peak within the limit.
/// - the lower bound adds what a move surely adds and subtracts what it may
///   free: an op moved earlier holds its results that are read later over
///   the steps it crossed, and may free there the inputs nothing later
///   reads; a wait placed early may free its collective's input; a
///   collective started earlier holds its buffer until its wait. A move it
///   refuses would exceed the limit.
///
/// Only a move neither bound decides needs a sweep.
class CompletionBound {
public:
  enum class Verdict { Fits, Exceeds, Unknown };

  CompletionBound(Block &body, PeakMemory exact, int64_t limit)
      : body(body), limit(limit) {
    reset(std::move(exact));
  }

  /// Makes `exact` (a sweep of the current completion) the reference.
  void reset(PeakMemory exact) {
    activationLimit = limit - exact.persistentBytes;
    stepOf.clear();
    topLevel.clear();
    cursor = 0;
    for (auto [i, op] : llvm::enumerate(exact.order)) {
      if (op->getBlock() != &body)
        continue;
      stepOf[op] = i;
      topLevel.push_back(op);
    }
    steps = exact.order.size();
    upper.emplace(exact.activationBytesAt);
    lower.emplace(exact.activationBytesAt);
    lowerValid = true;
    moved = false;
  }

  /// Whether the bounds are still the reference sweep (no move since).
  bool isExact() const { return !moved; }

  /// Whether placing `op` now keeps the peak within the limit, by the
  /// bounds; on Fits the bounds follow the move. `wait` is `op`'s wait, if
  /// any, and `waitDependents` the ops that wait must precede.
  Verdict check(Operation *op, Operation *wait,
                ArrayRef<Operation *> waitDependents,
                const DenseSet<Operation *> &done) {
    size_t now = currentStep(done);
    size_t from = stepOf.lookup(op);
    int64_t alloc = getAllocatedBytes(op);
    // A started collective holds its buffer until its wait, after `from`;
    // another op's results that are read later live from now to `from`, and
    // it frees at most its inputs that nothing later reads.
    int64_t freeable = wait ? 0 : getFreeableBytes(op, from, done);
    int64_t surelyAdded = wait ? alloc : getKeptBytes(op) - freeable;
    if (lowerValid && freeable >= 0 &&
        lower->max(now, from) + surelyAdded > activationLimit)
      return Verdict::Exceeds;
    if (upper->max(now, now + 1) + getOwnStepBytes(op) > activationLimit ||
        upper->max(now, from) + alloc > activationLimit)
      return Verdict::Unknown;
    size_t waitFrom = 0, waitTo = 0;
    int64_t held = 0;
    if (wait) {
      waitFrom = stepOf.lookup(wait);
      waitTo = steps;
      for (Operation *dependent : waitDependents)
        if (!done.count(dependent))
          waitTo = std::min(waitTo, size_t(stepOf.lookup(dependent)));
      held = alloc;
      for (Value input : op->getOperands()) {
        int64_t bytes = getStorageBytes(input, body);
        if (bytes < 0)
          return Verdict::Unknown;
        held += bytes;
      }
      if (upper->max(waitFrom, waitTo) + held > activationLimit)
        return Verdict::Unknown;
    }
    moved = true;
    upper->add(now, from, alloc);
    upper->add(waitFrom, waitTo, held);
    if (!wait) {
      if (freeable < 0)
        lowerValid = false;
      else
        lower->add(now, from, surelyAdded);
    }
    return Verdict::Fits;
  }

  /// Follows a wait placed ahead of the completion's order: it may free its
  /// collective's input earlier.
  void placeWaitEarly(Operation *wait, Operation *start,
                      const DenseSet<Operation *> &done) {
    size_t until = stepOf.lookup(wait);
    size_t now = currentStep(done);
    if (now >= until)
      return; // in the completion's order: nothing moves
    moved = true;
    int64_t freeable = getFreeableBytes(start, until, done);
    if (freeable < 0)
      lowerValid = false;
    else
      lower->add(now, until, -freeable);
  }

private:
  /// Bytes of `op`'s results that are allocated and read later (an ATen
  /// op's; 0 for others, whose results may alias their inputs).
  static int64_t getKeptBytes(Operation *op) {
    if (!isa<AtenOp>(op) || getAliasedOperand(op))
      return 0;
    int64_t bytes = 0;
    for (Value result : op->getResults())
      if (!result.use_empty())
        bytes += getResultStorageBytes(result);
    return bytes;
  }
  /// The storage bytes of `op`'s inputs that running it before step `until`
  /// may free there (-1 when it cannot tell): not an input that another op
  /// not placed yet reads at or after `until`.
  int64_t getFreeableBytes(Operation *op, size_t until,
                           const DenseSet<Operation *> &done) {
    int64_t total = 0;
    for (Value input : op->getOperands()) {
      bool readLater = llvm::any_of(input.getUsers(), [&](Operation *user) {
        Operation *top = body.findAncestorOpInBlock(*user);
        return top && top != op && !done.count(top) &&
               stepOf.lookup(top) >= until;
      });
      if (readLater)
        continue;
      int64_t bytes = getStorageBytes(input, body);
      if (bytes < 0)
        return -1;
      total += bytes;
    }
    return total;
  }
  /// The reference step of the first op not placed yet.
  size_t currentStep(const DenseSet<Operation *> &done) {
    while (cursor < topLevel.size() && done.count(topLevel[cursor]))
      ++cursor;
    return cursor < topLevel.size() ? stepOf.lookup(topLevel[cursor]) : steps;
  }

  Block &body;
  int64_t limit;
  int64_t activationLimit = 0;
  DenseMap<Operation *, size_t> stepOf;
  SmallVector<Operation *> topLevel;
  size_t cursor = 0;
  size_t steps = 0;
  std::optional<RangeMaxTree> upper, lower;
  bool lowerValid = true;
  bool moved = false;
};

/// The dependence graph of one step body and the list scheduler over it.
class ListScheduler {
public:
  ListScheduler(func::FuncOp step, const StepSimulator &sim,
                int64_t memoryLimit, int64_t maxInFlight, bool sweepEveryCheck)
      : step(step), sim(sim), memoryLimit(memoryLimit),
        maxInFlight(maxInFlight), sweepEveryCheck(sweepEveryCheck) {}

  /// Builds the dependence graph: data, in-place optimizer updates, the
  /// random stream, and barriers at ops the scheduler does not model.
  void buildGraph();
  /// Runs the scheduler; the order it returns stays within the limit.
  SmallVector<Operation *> schedule();

  /// Program order (without the terminator).
  SmallVector<Operation *> program;

private:
  void addEdge(Operation *from, Operation *to) {
    if (from == to)
      return;
    if (succs[from].insert(to)) {
      indegree[to]++;
      preds[to].push_back(from);
    }
  }
  /// The sweep of prefix + `pick` (if any) + the rest in program order
  /// (pending waits just before their first remaining user).
  PeakMemory sweepWith(ArrayRef<Operation *> prefix, Operation *pick,
                       const DenseSet<Operation *> &done);
  /// Whether placing `pick` now keeps a completion within the limit; if so
  /// the bound follows the move.
  bool admit(Operation *pick, ArrayRef<Operation *> prefix,
             const DenseSet<Operation *> &done,
             const DenseSet<Operation *> &pendingWaits);
  /// The op the completion "rest in program order" would run next.
  Operation *nextInRestOrder(const DenseSet<Operation *> &done,
                             const DenseSet<Operation *> &pendingWaits);
  struct Run;

  func::FuncOp step;
  const StepSimulator &sim;
  int64_t memoryLimit;
  int64_t maxInFlight;
  bool sweepEveryCheck;
  DenseMap<Operation *, int64_t> position;
  DenseMap<Operation *, llvm::SetVector<Operation *>> succs;
  DenseMap<Operation *, SmallVector<Operation *>> preds;
  /// Program positions before this one are all scheduled.
  size_t cursor = 0;
  DenseMap<Operation *, int64_t> indegree;
  /// The wait of each collective start.
  DenseMap<Operation *, Operation *> waitOf;
  /// The bound on the current completion's memory (with a limit).
  std::optional<CompletionBound> bound;

public:
  /// Choices the bounds admitted and refused, and those a sweep decided.
  int64_t boundAdmits = 0, boundRefusals = 0, sweeps = 0;
};
} // namespace

void ListScheduler::buildGraph() {
  Block &body = step.getBody().front();
  for (Operation &op : body.without_terminator()) {
    position[&op] = program.size();
    program.push_back(&op);
    indegree[&op] = 0;
  }
  // Data dependences.
  for (Operation *op : program)
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (position.count(def))
          addEdge(def, op);
  for (Operation *op : program)
    if (auto wait = dyn_cast<WaitOp>(op))
      if (Operation *start = wait.getFuture().getDefiningOp())
        waitOf[start] = op;

  // An optimizer update writes its parameter and state in place: every
  // other reader of those values (through views, and a collective reading
  // one until its wait) runs before it.
  std::function<void(Value, Operation *)> readersBefore = [&](Value v,
                                                              Operation *update) {
    for (Operation *user : v.getUsers()) {
      if (user == update || !position.count(user))
        continue;
      addEdge(user, update);
      if (Operation *wait = waitOf.lookup(user))
        addEdge(wait, update);
      if (isViewAtenOp(user))
        for (Value r : user->getResults())
          readersBefore(r, update);
      // A region result that is a view of the input read here aliases it
      // too.
      if (auto region = dyn_cast<RecomputeOp>(user))
        for (OpOperand &input : region->getOpOperands())
          if (input.get() == v)
            for (Value r : getRecomputeViewsOf(region, input))
              readersBefore(r, update);
    }
  };
  // Fences: each op of a sequence that `isFence` picks stays where it is
  // among the sequence's ops (every one before it stays before, every one
  // after stays after).
  struct Fences {
    Operation *last = nullptr;
    SmallVector<Operation *> since;
  };
  auto sequence = [&](Fences &fences, Operation *op, bool isFence) {
    if (isFence) {
      for (Operation *before : fences.since)
        addEdge(before, op);
      fences.since.clear();
      fences.last = op;
    } else if (fences.last) {
      addEdge(fences.last, op);
    }
    fences.since.push_back(op);
  };
  // The collective a start or a wait belongs to (nullptr for other ops and
  // for a local loom.all_slice_start).
  auto collectiveOf = [](Operation *op) -> Operation * {
    if (auto wait = dyn_cast<WaitOp>(op))
      op = wait.getFuture().getDefiningOp();
    return op && getCollectiveKind(op) ? op : nullptr;
  };
  Operation *lastRandom = nullptr, *lastUpdate = nullptr;
  Fences barriers, transfers;
  for (Operation *op : program) {
    if (auto update = dyn_cast<OptimizerUpdateOp>(op)) {
      for (Value v : op->getOperands())
        readersBefore(v, op);
      // Updates keep their order (the optimizer's step counter and the
      // kernels' order are PyTorch's).
      if (lastUpdate)
        addEdge(lastUpdate, op);
      lastUpdate = op;
    }
    // Random ops keep their relative order, so the generator's stream is
    // consumed as in program order.
    if (isRandomAtenOp(op)) {
      if (lastRandom)
        addEdge(lastRandom, op);
      lastRandom = op;
    }
    // Ops the scheduler does not model stay where they are relative to
    // everything else. So does an in-place ATen op: the graph's edges do
    // not show who reads what it overwrites. A recompute region is one
    // node: its body is isolated (it reads only its inputs) and holds no
    // random or in-place op, so its operands are all its dependences; the
    // simulator prices it as its body and the peak counts the body's
    // transient.
    bool known =
        (isa<AtenOp>(op) && !isInPlaceAtenOp(op)) ||
        isa<OptimizerUpdateOp, WaitOp, AllSliceStartOp, RecomputeOp>(op) ||
        getCollectiveKind(op).has_value();
    sequence(barriers, op, !known);
    // A point-to-point transfer (a pipeline's send or receive, and its
    // wait) keeps its place among the rank's communication. Each rank is
    // scheduled on its own, so moving a receive's wait ahead of a send its
    // peer is waiting for (or a collective of this stage's data-parallel
    // group ahead of either) could deadlock the ranks, which program order
    // does not. Compute still moves across transfers as its data allow, and
    // collectives between two transfers reorder as elsewhere (identically
    // on the group's ranks, which run one program).
    if (Operation *collective = collectiveOf(op))
      sequence(transfers, op, isa<SendStartOp, RecvStartOp>(collective));
  }
}

Operation *
ListScheduler::nextInRestOrder(const DenseSet<Operation *> &done,
                               const DenseSet<Operation *> &pendingWaits) {
  while (cursor < program.size() && done.count(program[cursor]))
    ++cursor;
  for (size_t i = cursor; i < program.size(); ++i) {
    Operation *op = program[i];
    if (done.count(op) || pendingWaits.count(op))
      continue;
    // A pending wait goes right before its first remaining dependent.
    for (Operation *pred : preds[op])
      if (pendingWaits.count(pred))
        return pred;
    return op;
  }
  // Only pending waits remain (nothing depends on them): program order.
  for (size_t i = cursor; i < program.size(); ++i)
    if (pendingWaits.count(program[i]))
      return program[i];
  return nullptr;
}

PeakMemory ListScheduler::sweepWith(ArrayRef<Operation *> prefix,
                                    Operation *pick,
                                    const DenseSet<Operation *> &done) {
  SmallVector<Operation *> order(prefix.begin(), prefix.end());
  DenseSet<Operation *> placed(done);
  if (pick) {
    order.push_back(pick);
    placed.insert(pick);
  }
  // The rest in program order; a wait whose start is placed goes right
  // before its first user.
  DenseSet<Operation *> deferred;
  for (Operation *op : program) {
    if (placed.count(op))
      continue;
    if (auto wait = dyn_cast<WaitOp>(op)) {
      Operation *start = wait.getFuture().getDefiningOp();
      if (start && placed.count(start)) {
        deferred.insert(op);
        continue;
      }
    }
    for (Operation *pred : preds[op])
      if (deferred.erase(pred))
        order.push_back(pred);
    order.push_back(op);
  }
  for (Operation *op : program)
    if (deferred.count(op))
      order.push_back(op);
  return PeakMemory(step, order);
}

bool ListScheduler::admit(Operation *pick, ArrayRef<Operation *> prefix,
                          const DenseSet<Operation *> &done,
                          const DenseSet<Operation *> &pendingWaits) {
  // Taking the completion's next op leaves the completion as it is, but
  // for a collective start: its wait, at its own position until then, is
  // deferred to its first dependent once the start is placed, which holds
  // the collective's input and buffer longer.
  if (memoryLimit <= 0 ||
      (nextInRestOrder(done, pendingWaits) == pick && !waitOf.count(pick)))
    return true;
  if (sweepEveryCheck) {
    ++sweeps;
    return sweepWith(prefix, pick, done).peakBytes <= memoryLimit;
  }
  if (!bound)
    bound.emplace(step.getBody().front(), PeakMemory(step, program),
                  memoryLimit);
  Operation *wait = waitOf.lookup(pick);
  ArrayRef<Operation *> waitDependents;
  if (wait)
    waitDependents = succs[wait].getArrayRef();
  CompletionBound::Verdict verdict =
      bound->check(pick, wait, waitDependents, done);
  // Bounds loosened by the moves since the last sweep: tighten them with a
  // sweep of the current completion and ask again (the scheduler asks
  // about the same ops step after step, and tight bounds refuse them).
  if (verdict == CompletionBound::Verdict::Unknown && !bound->isExact()) {
    ++sweeps;
    bound->reset(sweepWith(prefix, nullptr, done));
    verdict = bound->check(pick, wait, waitDependents, done);
  }
  switch (verdict) {
  case CompletionBound::Verdict::Fits:
    ++boundAdmits;
    return true;
  case CompletionBound::Verdict::Exceeds:
    ++boundRefusals;
    return false;
  case CompletionBound::Verdict::Unknown:
    break;
  }
  ++sweeps;
  PeakMemory exact = sweepWith(prefix, pick, done);
  if (exact.peakBytes > memoryLimit)
    return false;
  bound->reset(std::move(exact));
  return true;
}

/// One run of the list scheduler: the order so far, the ready ops and the
/// model's clock (the compute stream and each comm stream).
struct ListScheduler::Run {
  explicit Run(ListScheduler &s) : s(s), remaining(s.indegree) {
    for (Operation *op : s.program)
      if (remaining[op] == 0)
        enqueue(op);
  }

  void enqueue(Operation *op) {
    int64_t pos = s.position[op];
    if (getCollectiveKind(op))
      readyStarts.insert(pos);
    else if (isa<WaitOp>(op))
      readyWaits.insert(pos);
    else
      readyCompute.insert(pos);
  }

  /// Appends `op` to the order and advances the model's clock.
  void place(Operation *op) {
    if (auto wait = dyn_cast<WaitOp>(op); wait && s.bound)
      s.bound->placeWaitEarly(op, wait.getFuture().getDefiningOp(), done);
    order.push_back(op);
    done.insert(op);
    int64_t pos = s.position[op];
    readyStarts.erase(pos);
    readyWaits.erase(pos);
    readyCompute.erase(pos);
    if (getCollectiveKind(op))
      issue(op);
    else if (auto wait = dyn_cast<WaitOp>(op))
      complete(wait);
    else
      clock += s.sim.getOpCost(op).seconds;
    for (Operation *succ : s.succs[op])
      if (--remaining[succ] == 0)
        enqueue(succ);
  }

  /// A collective starts on its stream once that stream is free.
  void issue(Operation *start) {
    unsigned stream = s.sim.getStream(start);
    if (stream >= streamFree.size())
      streamFree.resize(stream + 1, 0);
    double begin = std::max(clock, streamFree[stream]);
    streamFree[stream] = begin + s.sim.getCollectiveCost(start).seconds;
    finish[start] = streamFree[stream];
    ++inFlight;
    if (Operation *wait = s.waitOf.lookup(start))
      pendingWaits.insert(wait);
  }

  /// The compute stream waits for the collective to finish.
  void complete(WaitOp wait) {
    Operation *start = wait.getFuture().getDefiningOp();
    // Only the collectives the model knows count against the bound (a local
    // loom.all_slice_start is an ordinary op here).
    if (finish.count(start)) {
      clock = std::max(clock, finish.lookup(start));
      --inFlight;
    }
    pendingWaits.erase(wait);
  }

  /// Whether placing `op` now keeps a completion within the limit (the
  /// caller places it right after).
  bool fits(Operation *op) { return s.admit(op, order, done, pendingWaits); }

  static Operation *startOf(Operation *wait) {
    return cast<WaitOp>(wait).getFuture().getDefiningOp();
  }

  /// Places the first op of `ready` (by program position) that `accept`
  /// takes; whether there was one.
  template <typename Accept>
  bool placeFirst(const std::set<int64_t> &ready, Accept accept) {
    for (int64_t pos : ready) {
      Operation *op = s.program[pos];
      if (accept(op)) {
        place(op);
        return true;
      }
    }
    return false;
  }

  /// One choice: a finished collective's wait, then a collective start,
  /// then compute the bound admits, then the wait that finishes first,
  /// then the next op of the rest in program order.
  void placeNext() {
    // 1. Waits whose collective the model says is done cost nothing.
    if (placeFirst(readyWaits, [&](Operation *wait) {
          return finish.lookup(startOf(wait)) <= clock;
        }))
      return;
    // 2. Issue collectives while the bound allows.
    if (inFlight < s.maxInFlight &&
        placeFirst(readyStarts, [&](Operation *op) { return fits(op); }))
      return;
    // 3. Compute in program order; a ready op that runs ahead of the next
    // program-order op must keep a completion within the limit.
    if (placeFirst(readyCompute, [&](Operation *op) { return fits(op); }))
      return;
    // 4. Block on the collective that finishes first (program order on a
    // tie). Moving a wait earlier never adds memory.
    if (!readyWaits.empty())
      return place(firstToFinish());
    // 5. The rest in program order always fits (the invariant); take its
    // next op. A collective start whose wait may not be deferred is
    // waited at once: a wait earlier than in the completion never adds
    // memory.
    Operation *next = s.nextInRestOrder(done, pendingWaits);
    assert(next && remaining[next] == 0 && "rest order is topological");
    Operation *wait = s.waitOf.lookup(next);
    bool waitNow = wait && !fits(next);
    place(next);
    if (waitNow) {
      assert(remaining[wait] == 0 && "a wait depends on its start only");
      place(wait);
    }
  }

  /// The ready wait whose collective the model finishes first.
  Operation *firstToFinish() {
    Operation *best = nullptr;
    for (int64_t pos : readyWaits) {
      Operation *wait = s.program[pos];
      if (!best || finish.lookup(startOf(wait)) < finish.lookup(startOf(best)))
        best = wait;
    }
    return best;
  }

  ListScheduler &s;
  SmallVector<Operation *> order;
  DenseSet<Operation *> done;
  DenseMap<Operation *, int64_t> remaining;
  /// Ready ops by program position (deterministic tie-breaking).
  std::set<int64_t> readyStarts, readyWaits, readyCompute;
  double clock = 0;
  SmallVector<double> streamFree = SmallVector<double>(8, 0);
  /// Collective start -> its modelled end.
  DenseMap<Operation *, double> finish;
  /// The waits of started collectives.
  DenseSet<Operation *> pendingWaits;
  int64_t inFlight = 0;
};

SmallVector<Operation *> ListScheduler::schedule() {
  Run run(*this);
  while (run.order.size() < program.size())
    run.placeNext();
  return std::move(run.order);
}

namespace {
struct LoomSchedulePass
    : public loom::impl::LoomScheduleBase<LoomSchedulePass> {
  using LoomScheduleBase::LoomScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    CostModelConfig config{device,         deviceDir, algorithm, nodes,
                           devicesPerNode, tf32,      opTimes};
    FailureOr<CostModel> model =
        buildCostModel(config, module, "loom-schedule");
    if (failed(model))
      return signalPassFailure();
    if (maxInFlight < 1) {
      mlir::emitError(module.getLoc(), "loom-schedule: max-in-flight must be at least 1, got ")
          << int64_t(maxInFlight);
      return signalPassFailure();
    }
    int64_t limit = 0;
    if (!memoryLimit.empty() && memoryLimit != "none") {
      limit = parseByteSize(memoryLimit);
      if (limit <= 0) {
        mlir::emitError(module.getLoc(), "loom-schedule: memory-limit must be a positive "
                         "byte count such as 1073741824, 512MiB or 2GiB, or "
                         "'none'; got '")
            << memoryLimit << "'";
        return signalPassFailure();
      }
    }
    SimOptions simOptions;
    simOptions.commStreams = commStreams;

    for (func::FuncOp func : getStepFunctions(module)) {
      FailureOr<StepSimulator> sim =
          StepSimulator::create(func, *model, simOptions);
      if (failed(sim))
        return signalPassFailure();
      SimulationResult before = sim->run();
      int64_t programPeak = before.memory->peakBytes;
      if (limit > 0 && programPeak > limit) {
        // Reported at the op where program order peaks (for an imported
        // step, the model's source line).
        Operation *peakOp = before.memory->peakOp;
        mlir::emitError(peakOp ? peakOp->getLoc() : func.getLoc(),
                        "loom-schedule: memory limit of ")
            << limit << " bytes is below @" << func.getSymName()
            << "'s peak in program order (" << programPeak
            << " bytes, reached here at '" << before.memory->peakOpName()
            << "'); the scheduler reorders ops and cannot lower it";
        return signalPassFailure();
      }
      ListScheduler scheduler(func, *sim, limit, maxInFlight, sweepEveryCheck);
      scheduler.buildGraph();
      SmallVector<Operation *> order = scheduler.schedule();
      FailureOr<SimulationResult> after = sim->run(order);
      if (failed(after))
        return signalPassFailure();
      assert((limit <= 0 || after->memory->peakBytes <= limit) &&
             "the scheduler broke its memory invariant");
      bool keep = after->stepTime < before.stepTime;
      if (keep) {
        Operation *terminator = func.getBody().front().getTerminator();
        for (Operation *op : order)
          op->moveBefore(terminator);
      }
      if (report) {
        llvm::errs() << llvm::formatv(
            "=== loom-schedule @{0} on {1} ===\n"
            "  program order:  step {2:f3} us, exposed communication "
            "{3:f3} us, peak {4} B\n"
            "  scheduled:      step {5:f3} us, exposed communication "
            "{6:f3} us, peak {7} B\n"
            "  kept:           {8} (limit {9}, max-in-flight {10})\n"
            "  memory checks:  {11} admitted and {12} refused by the bounds, "
            "{13} swept\n",
            func.getSymName(), model->getSpec().name, before.stepTime * 1e6,
            before.exposedCommTime * 1e6, before.memory->peakBytes,
            after->stepTime * 1e6, after->exposedCommTime * 1e6,
            after->memory->peakBytes, keep ? "scheduled" : "program order",
            limit > 0 ? std::to_string(limit) + " B" : std::string("none"),
            int64_t(maxInFlight), scheduler.boundAdmits,
            scheduler.boundRefusals, scheduler.sweeps);
      }
    }
    if (limit > 0)
      recordMemoryBudget(module, limit);
  }
};
} // namespace
