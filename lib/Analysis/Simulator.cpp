//===- Simulator.cpp - Replay a scheduled step on compute and comm streams ===//

#include "loom/Analysis/Simulator.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace loom;

/// The comm stream names for `count` streams, and the stream of each kind.
static SmallVector<std::string> commStreamNames(unsigned count) {
  if (count == 1)
    return {"comm"};
  if (count == 2)
    return {"comm.all_gather", "comm.reduce_scatter"};
  return {"comm.all_gather", "comm.reduce_scatter", "comm.all_reduce"};
}

static unsigned commStreamOf(Operation *start, CollectiveKind kind,
                             unsigned count) {
  if (count == 1)
    return 1;
  bool gatherLike = kind == CollectiveKind::allGather ||
                    kind == CollectiveKind::broadcast ||
                    isa<RecvStartOp>(start);
  if (gatherLike)
    return 1;
  if (count >= 3 &&
      (kind == CollectiveKind::allReduce || isa<SendStartOp>(start)))
    return 3;
  return 2;
}

FailureOr<StepSimulator> StepSimulator::create(func::FuncOp step,
                                               const CostModel &model,
                                               const SimOptions &options) {
  if (options.commStreams < 1 || options.commStreams > 3)
    return step.emitError("comm-streams must be 1, 2 or 3, got ")
           << options.commStreams;
  if (!step.getBody().hasOneBlock())
    return step.emitError("the simulator needs a function with one block");
  StepSimulator sim(step, options);
  sim.streams.push_back("compute");
  for (std::string &name : commStreamNames(options.commStreams))
    sim.streams.push_back(std::move(name));
  SymbolTableCollection symbols;
  for (Operation &op : step.getBody().front()) {
    if (std::optional<CollectiveKind> kind = getCollectiveKind(&op)) {
      FailureOr<CollectiveCost> cost = model.collectiveCost(&op, symbols);
      if (failed(cost))
        return failure();
      sim.collectiveCosts[&op] = *cost;
      sim.streamOf[&op] = commStreamOf(&op, *kind, options.commStreams);
      continue;
    }
    if (auto region = dyn_cast<RecomputeOp>(op))
      for (Operation &inner : region.getBodyBlock().without_terminator())
        sim.opCosts[&inner] = model.opCost(&inner);
    else if (op.getNumRegions())
      return op.emitOpError("has regions; the simulator replays flat steps "
                            "and 'loom.recompute' regions");
    sim.opCosts[&op] = model.opCost(&op);
  }
  return sim;
}

const OpCost &StepSimulator::getOpCost(Operation *op) const {
  static const OpCost none;
  auto it = opCosts.find(op);
  return it == opCosts.end() ? none : it->second;
}

const CollectiveCost &StepSimulator::getCollectiveCost(Operation *start) const {
  static const CollectiveCost none;
  auto it = collectiveCosts.find(start);
  return it == collectiveCosts.end() ? none : it->second;
}

unsigned StepSimulator::getStream(Operation *start) const {
  auto it = streamOf.find(start);
  return it == streamOf.end() ? 0 : it->second;
}

SimulationResult StepSimulator::run() const {
  func::FuncOp f = step; // FuncOp's accessors are not const
  SmallVector<Operation *> order;
  for (Operation &op : f.getBody().front())
    if (!op.hasTrait<OpTrait::IsTerminator>())
      order.push_back(&op);
  return replay(order);
}

FailureOr<SimulationResult>
StepSimulator::run(ArrayRef<Operation *> order) const {
  func::FuncOp f = step;
  Block &block = f.getBody().front();
  DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(order)) {
    if (!op || op->getBlock() != &block)
      return f.emitError("simulation order entry ")
             << i << " is not an op of the step's body";
    if (op->hasTrait<OpTrait::IsTerminator>())
      return op->emitOpError("is the terminator; a simulation order lists "
                             "the ops before it");
    if (!position.try_emplace(op, i).second)
      return op->emitOpError("appears twice in the simulation order");
  }
  size_t expected =
      block.getOperations().size() - (block.mightHaveTerminator() ? 1 : 0);
  if (order.size() != expected)
    return f.emitError("simulation order has ")
           << order.size() << " ops, the body has " << expected;
  for (Operation *op : order)
    for (OpOperand &operand : op->getOpOperands())
      if (Operation *def = operand.get().getDefiningOp())
        if (position.lookup(def) >= position.lookup(op)) {
          InFlightDiagnostic diag = op->emitOpError("is ordered before the '")
                                    << def->getName()
                                    << "' that defines its operand #"
                                    << operand.getOperandNumber();
          diag.attachNote(def->getLoc()) << "defined here";
          return diag;
        }
  return replay(order);
}

SimulationResult StepSimulator::replay(ArrayRef<Operation *> order) const {
  SimulationResult result;
  result.streams = streams;
  result.streamBusy.assign(streams.size(), 0);
  SmallVector<double> streamFree(streams.size(), 0);
  DenseMap<Operation *, double> collectiveEnd;
  double clock = 0; // the compute stream
  for (Operation *op : order) {
    if (collectiveCosts.count(op)) {
      const CollectiveCost &cost = collectiveCosts.lookup(op);
      unsigned s = streamOf.lookup(op);
      // Enqueued when compute reaches it (its input is ready by then); runs
      // once the earlier collectives of its stream are done.
      double begin = std::max(clock, streamFree[s]);
      double end = begin + cost.seconds;
      streamFree[s] = end;
      collectiveEnd[op] = end;
      result.streamBusy[s] += cost.seconds;
      result.commTime += cost.seconds;
      result.numCollectives++;
      SimulationResult::KindStats &kind =
          result.byKind[static_cast<size_t>(cost.kind)];
      kind.count++;
      kind.time += cost.seconds;
      if (options.recordTimeline)
        result.timeline.push_back({op, s, begin, end, 0, 0, cost.bytes});
      continue;
    }
    if (auto wait = dyn_cast<WaitOp>(op)) {
      double ready = 0;
      Operation *start = wait.getFuture().getDefiningOp();
      if (start)
        ready = collectiveEnd.lookup(start);
      double blocked = std::max(0.0, ready - clock);
      result.exposedCommTime += blocked;
      if (start && collectiveCosts.count(start))
        result.byKind[static_cast<size_t>(collectiveCosts.lookup(start).kind)]
            .exposed += blocked;
      if (options.recordTimeline && blocked > 0)
        result.timeline.push_back({op, 0, clock, clock + blocked, blocked});
      clock += blocked;
      continue;
    }
    const OpCost &cost = getOpCost(op);
    if (auto region = dyn_cast<RecomputeOp>(op)) {
      result.numRecomputeRegions++;
      result.recomputeTime += cost.seconds;
      result.recomputeFlops += cost.flops;
      double at = clock;
      for (Operation &inner : region.getBodyBlock().without_terminator()) {
        const OpCost &c = getOpCost(&inner);
        result.numOps++;
        result.numRecomputeOps++;
        if (options.recordTimeline)
          result.timeline.push_back(
              {&inner, 0, at, at + c.seconds, 0, c.flops, c.bytes, op});
        at += c.seconds;
      }
    } else {
      result.numOps++;
    }
    if (options.recordTimeline && !isa<RecomputeOp>(op))
      result.timeline.push_back(
          {op, 0, clock, clock + cost.seconds, 0, cost.flops, cost.bytes});
    clock += cost.seconds;
    result.computeTime += cost.seconds;
    result.streamBusy[0] += cost.seconds;
  }
  result.stepTime = clock;
  for (double t : streamFree)
    result.stepTime = std::max(result.stepTime, t);
  if (options.computeMemory)
    result.memory.emplace(func::FuncOp(step), order);
  return result;
}

FailureOr<SimulationResult> loom::simulate(func::FuncOp step,
                                           const CostModel &model,
                                           const SimOptions &options) {
  FailureOr<StepSimulator> sim = StepSimulator::create(step, model, options);
  if (failed(sim))
    return failure();
  return sim->run();
}

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

/// Seconds as microseconds with three decimals (nanosecond resolution).
static std::string us(double seconds) {
  return llvm::formatv("{0:f3} us", seconds * 1e6).str();
}

static double percent(double part, double whole) {
  return whole > 0 ? 100 * part / whole : 0;
}

void SimulationResult::print(raw_ostream &os) const {
  os << llvm::format("  %-22s %s\n", "step time", us(stepTime).c_str());
  os << llvm::format("  %-22s %s (%lld ops)\n", "compute",
                     us(computeTime).c_str(), (long long)numOps);
  if (numRecomputeRegions)
    os << llvm::format("  %-22s %s (%lld ops in %lld regions, %.0f FLOP)\n",
                       "of which recompute", us(recomputeTime).c_str(),
                       (long long)numRecomputeOps,
                       (long long)numRecomputeRegions, recomputeFlops);
  os << llvm::format("  %-22s %s (%lld collectives)\n", "communication",
                     us(commTime).c_str(), (long long)numCollectives);
  os << llvm::format("  %-22s %s (%.1f%% of communication)\n",
                     "exposed communication", us(exposedCommTime).c_str(),
                     percent(exposedCommTime, commTime));
  os << llvm::format("  %-22s %s\n", "hidden communication",
                     us(hiddenCommTime()).c_str());
  os << "  streams (busy):\n";
  for (auto [name, busy] : llvm::zip(streams, streamBusy))
    os << llvm::format("    %-20s %s (%.1f%% of the step)\n", name.c_str(),
                       us(busy).c_str(), percent(busy, stepTime));
  if (numCollectives) {
    os << "  collectives (count, time, exposed):\n";
    for (auto [i, k] : llvm::enumerate(byKind))
      if (k.count)
        os << llvm::format(
            "    %-20s %4lld  %s  %s\n",
            stringifyCollectiveKind(CollectiveKind(i)).str().c_str(),
            (long long)k.count, us(k.time).c_str(), us(k.exposed).c_str());
  }
  if (memory)
    os << "  peak memory per rank  " << memory->peakBytes
       << " bytes (persistent " << memory->persistentBytes << " + activations "
       << memory->peakActivationBytes << ")\n";
}

llvm::json::Value SimulationResult::toJSON() const {
  llvm::json::Object streamObj;
  for (auto [name, busy] : llvm::zip(streams, streamBusy))
    streamObj[name] = busy;
  llvm::json::Object obj{{"step_time", stepTime},
                         {"compute_time", computeTime},
                         {"comm_time", commTime},
                         {"exposed_comm_time", exposedCommTime},
                         {"hidden_comm_time", hiddenCommTime()},
                         {"ops", numOps},
                         {"recompute_time", recomputeTime},
                         {"recompute_flops", recomputeFlops},
                         {"recompute_ops", numRecomputeOps},
                         {"collectives", numCollectives},
                         {"stream_busy", std::move(streamObj)}};
  llvm::json::Object kinds;
  for (auto [i, k] : llvm::enumerate(byKind))
    if (k.count)
      kinds[stringifyCollectiveKind(CollectiveKind(i))] = llvm::json::Object{
          {"count", k.count}, {"time", k.time}, {"exposed", k.exposed}};
  obj["collectives_by_kind"] = std::move(kinds);
  if (memory)
    obj["memory"] = memory->toJSON();
  return std::move(obj);
}

/// The name of an event: the ATen kernel, the collective kind, or the op.
static std::string eventName(Operation *op) {
  if (auto aten = dyn_cast<AtenOp>(op))
    return aten.getKernel().str();
  if (std::optional<CollectiveKind> kind = getCollectiveKind(op))
    return stringifyCollectiveKind(*kind).str();
  StringRef name = op->getName().getStringRef();
  name.consume_front("loom.");
  return name.str();
}

llvm::json::Value SimulationResult::toChromeTrace(int64_t pid,
                                                  StringRef processName) const {
  llvm::json::Array events;
  for (auto [i, name] : llvm::enumerate(streams)) {
    events.push_back(
        llvm::json::Object{{"name", "thread_name"},
                           {"ph", "M"},
                           {"pid", pid},
                           {"tid", static_cast<int64_t>(i)},
                           {"args", llvm::json::Object{{"name", name}}}});
    events.push_back(llvm::json::Object{
        {"name", "thread_sort_index"},
        {"ph", "M"},
        {"pid", pid},
        {"tid", static_cast<int64_t>(i)},
        {"args", llvm::json::Object{{"sort_index", static_cast<int64_t>(i)}}}});
  }
  events.push_back(llvm::json::Object{
      {"name", "process_name"},
      {"ph", "M"},
      {"pid", pid},
      {"args", llvm::json::Object{{"name", processName.str()}}}});
  for (const TimelineEvent &e : timeline) {
    llvm::json::Object args;
    if (!getModulePath(e.op).empty())
      args["module"] = getModulePath(e.op).str();
    // A recomputed op runs in its region's phase (backward).
    if (std::optional<Phase> phase = getPhase(e.region ? e.region : e.op))
      args["phase"] = stringifyPhase(*phase).str();
    if (e.region)
      args["recompute"] = getModulePath(e.region).str();
    if (isa<WaitOp>(e.op))
      args["blocked_us"] = e.blocked * 1e6;
    if (e.flops > 0)
      args["flops"] = e.flops;
    if (e.bytes > 0)
      args["bytes"] = e.bytes;
    events.push_back(llvm::json::Object{{"name", eventName(e.op)},
                                        {"cat", isa<WaitOp>(e.op) ? "wait"
                                                : e.region        ? "recompute"
                                                : e.stream == 0   ? "compute"
                                                                  : "comm"},
                                        {"ph", "X"},
                                        {"pid", pid},
                                        {"tid", static_cast<int64_t>(e.stream)},
                                        {"ts", e.start * 1e6},
                                        {"dur", (e.end - e.start) * 1e6},
                                        {"args", std::move(args)}});
  }
  return llvm::json::Object{{"traceEvents", std::move(events)},
                            {"displayTimeUnit", "ns"}};
}
