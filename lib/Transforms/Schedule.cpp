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
// Memory: every choice that departs from "the rest in program order" is
// checked by computing the peak of (the ops scheduled so far, the choice,
// the rest in program order with pending waits right before their first
// users). The rest is always a valid completion, so the invariant "some
// completion stays within the limit" holds from the first op to the last
// and the final order never exceeds the limit. The result is kept only if
// the simulator says it is faster than program order.
//
// Everything depends only on the IR and the options: the order is
// deterministic and identical on every rank.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/Simulator.h"
#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Support/ByteSize.h"
#include "loom/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

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
/// The dependence graph of one step body and the list scheduler over it.
class ListScheduler {
public:
  ListScheduler(func::FuncOp step, const StepSimulator &sim,
                int64_t memoryLimit, int64_t maxInFlight)
      : step(step), sim(sim), memoryLimit(memoryLimit),
        maxInFlight(maxInFlight) {}

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
  /// The peak of prefix + `pick` + the rest in program order (pending
  /// waits just before their first remaining user).
  int64_t peakWith(ArrayRef<Operation *> prefix, Operation *pick,
                   const DenseSet<Operation *> &done);
  /// The op the completion "rest in program order" would run next.
  Operation *nextInRestOrder(const DenseSet<Operation *> &done,
                             const DenseSet<Operation *> &pendingWaits);

  func::FuncOp step;
  const StepSimulator &sim;
  int64_t memoryLimit;
  int64_t maxInFlight;
  DenseMap<Operation *, int64_t> position;
  DenseMap<Operation *, llvm::SetVector<Operation *>> succs;
  DenseMap<Operation *, SmallVector<Operation *>> preds;
  /// Program positions before this one are all scheduled.
  size_t cursor = 0;
  DenseMap<Operation *, int64_t> indegree;
  /// The wait of each collective start.
  DenseMap<Operation *, Operation *> waitOf;
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
  Operation *lastRandom = nullptr, *lastUpdate = nullptr,
            *lastBarrier = nullptr;
  SmallVector<Operation *> sinceBarrier;
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
    if (!known) {
      for (Operation *before : sinceBarrier)
        addEdge(before, op);
      sinceBarrier.clear();
      lastBarrier = op;
    } else if (lastBarrier) {
      addEdge(lastBarrier, op);
    }
    sinceBarrier.push_back(op);
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

int64_t ListScheduler::peakWith(ArrayRef<Operation *> prefix, Operation *pick,
                                const DenseSet<Operation *> &done) {
  SmallVector<Operation *> order(prefix.begin(), prefix.end());
  order.push_back(pick);
  DenseSet<Operation *> placed(done);
  placed.insert(pick);
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
  return PeakMemory(step, order).peakBytes;
}

SmallVector<Operation *> ListScheduler::schedule() {
  SmallVector<Operation *> order;
  DenseSet<Operation *> done;
  DenseMap<Operation *, int64_t> remaining(indegree);
  // Ready ops by program position (deterministic tie-breaking).
  std::set<int64_t> readyStarts, readyWaits, readyCompute;
  auto enqueue = [&](Operation *op) {
    int64_t pos = position[op];
    if (getCollectiveKind(op))
      readyStarts.insert(pos);
    else if (isa<WaitOp>(op))
      readyWaits.insert(pos);
    else
      readyCompute.insert(pos);
  };
  for (Operation *op : program)
    if (remaining[op] == 0)
      enqueue(op);

  // The model's clock: the compute stream and each comm stream.
  double clock = 0;
  SmallVector<double> streamFree(8, 0);
  DenseMap<Operation *, double> finish; // start -> modelled end
  DenseSet<Operation *> pendingWaits;   // waits of started collectives
  int64_t inFlight = 0;

  auto place = [&](Operation *op) {
    order.push_back(op);
    done.insert(op);
    int64_t pos = position[op];
    readyStarts.erase(pos);
    readyWaits.erase(pos);
    readyCompute.erase(pos);
    if (getCollectiveKind(op)) {
      unsigned s = sim.getStream(op);
      if (s >= streamFree.size())
        streamFree.resize(s + 1, 0);
      double begin = std::max(clock, streamFree[s]);
      streamFree[s] = begin + sim.getCollectiveCost(op).seconds;
      finish[op] = streamFree[s];
      ++inFlight;
      if (Operation *wait = waitOf.lookup(op))
        pendingWaits.insert(wait);
    } else if (auto wait = dyn_cast<WaitOp>(op)) {
      Operation *start = wait.getFuture().getDefiningOp();
      // Only the collectives the model knows count against the bound (a
      // local loom.all_slice_start is an ordinary op here).
      if (finish.count(start)) {
        clock = std::max(clock, finish.lookup(start));
        --inFlight;
      }
      pendingWaits.erase(op);
    } else {
      clock += sim.getOpCost(op).seconds;
    }
    for (Operation *succ : succs[op])
      if (--remaining[succ] == 0)
        enqueue(succ);
  };
  // Whether placing `op` now keeps a completion within the limit.
  auto fits = [&](Operation *op) {
    if (memoryLimit <= 0)
      return true;
    if (nextInRestOrder(done, pendingWaits) == op)
      return true;
    return peakWith(order, op, done) <= memoryLimit;
  };
  auto startOf = [](Operation *wait) {
    return cast<WaitOp>(wait).getFuture().getDefiningOp();
  };

  while (order.size() < program.size()) {
    // 1. Waits whose collective the model says is done cost nothing.
    bool progressed = false;
    for (int64_t pos : readyWaits) {
      Operation *wait = program[pos];
      if (finish.lookup(startOf(wait)) <= clock) {
        place(wait);
        progressed = true;
        break;
      }
    }
    if (progressed)
      continue;
    // 2. Issue collectives while the bound allows.
    if (inFlight < maxInFlight) {
      for (int64_t pos : readyStarts) {
        Operation *start = program[pos];
        if (fits(start)) {
          place(start);
          progressed = true;
          break;
        }
      }
      if (progressed)
        continue;
    }
    // 3. Compute in program order; a ready op that runs ahead of the next
    // program-order op must keep a completion within the limit.
    for (int64_t pos : readyCompute) {
      Operation *op = program[pos];
      if (fits(op)) {
        place(op);
        progressed = true;
        break;
      }
    }
    if (progressed)
      continue;
    // 4. Block on the collective that finishes first (program order on a
    // tie). Moving a wait earlier never adds memory.
    if (!readyWaits.empty()) {
      Operation *best = nullptr;
      for (int64_t pos : readyWaits) {
        Operation *wait = program[pos];
        if (!best || finish.lookup(startOf(wait)) <
                         finish.lookup(startOf(best)))
          best = wait;
      }
      place(best);
      continue;
    }
    // 5. The rest in program order always fits (the invariant); take its
    // next op.
    Operation *next = nextInRestOrder(done, pendingWaits);
    assert(next && remaining[next] == 0 && "rest order is topological");
    place(next);
  }
  return order;
}

namespace {
struct LoomSchedulePass
    : public loom::impl::LoomScheduleBase<LoomSchedulePass> {
  using LoomScheduleBase::LoomScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    CostModelConfig config{device,         deviceDir, algorithm, nodes,
                           devicesPerNode, tf32};
    FailureOr<CostModel> model =
        buildCostModel(config, module.getLoc(), "loom-schedule");
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
      ListScheduler scheduler(func, *sim, limit, maxInFlight);
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
            "  kept:           {8} (limit {9}, max-in-flight {10})\n",
            func.getSymName(), model->getSpec().name, before.stepTime * 1e6,
            before.exposedCommTime * 1e6, before.memory->peakBytes,
            after->stepTime * 1e6, after->exposedCommTime * 1e6,
            after->memory->peakBytes, keep ? "scheduled" : "program order",
            limit > 0 ? std::to_string(limit) + " B" : std::string("none"),
            int64_t(maxInFlight));
      }
    }
  }
};
} // namespace
