//===- Simulator.cpp - Replay a scheduled step on compute and comm streams ===//

#include "loom/Analysis/Simulator.h"

#include "loom/Dialect/Loom/IR/Transfers.h"

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

/// Issues collective `op` on stream `s` when compute reaches it at
/// `clock`: it runs once the earlier collectives of its stream are done.
/// Records its end, its stream's busy time and its kind's count and time.
static void issueCollective(SimulationResult &result, bool recordTimeline,
                            Operation *op, unsigned s,
                            const CollectiveCost &cost, double clock,
                            SmallVectorImpl<double> &streamFree,
                            DenseMap<Operation *, double> &collectiveEnd) {
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
  if (recordTimeline)
    result.timeline.push_back({op, s, begin, end, 0, 0, cost.bytes});
}

/// The compute stream blocks at `wait` from `clock` until `ready`; the
/// exposed time is charged to the collective's kind, if it has one.
/// Returns the clock after the wait.
static double blockOnWait(SimulationResult &result, bool recordTimeline,
                          WaitOp wait, std::optional<CollectiveKind> kind,
                          double clock, double ready) {
  double blocked = std::max(0.0, ready - clock);
  result.exposedCommTime += blocked;
  if (kind)
    result.byKind[static_cast<size_t>(*kind)].exposed += blocked;
  if (recordTimeline && blocked > 0)
    result.timeline.push_back({wait, 0, clock, clock + blocked, blocked});
  return clock + blocked;
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
      // Enqueued when compute reaches it (its input is ready by then).
      issueCollective(result, options.recordTimeline, op, streamOf.lookup(op),
                      collectiveCosts.lookup(op), clock, streamFree,
                      collectiveEnd);
      continue;
    }
    if (auto wait = dyn_cast<WaitOp>(op)) {
      double ready = 0;
      std::optional<CollectiveKind> kind;
      if (Operation *start = wait.getFuture().getDefiningOp()) {
        ready = collectiveEnd.lookup(start);
        if (collectiveCosts.count(start))
          kind = collectiveCosts.lookup(start).kind;
      }
      clock =
          blockOnWait(result, options.recordTimeline, wait, kind, clock, ready);
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
        result.numMeasuredOps += c.measured;
        if (options.recordTimeline)
          result.timeline.push_back(
              {&inner, 0, at, at + c.seconds, 0, c.flops, c.bytes, op});
        at += c.seconds;
      }
    } else {
      result.numOps++;
      result.numMeasuredOps += cost.measured;
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
// Pipelined (MPMD) steps
//===----------------------------------------------------------------------===//

namespace {
/// One program's replay state in the joint simulation.
struct Cursor {
  const StepSimulator *sim;
  SmallVector<Operation *> order;
  size_t next = 0;
  double clock = 0;
  SmallVector<double> streamFree;
  DenseMap<Operation *, double> collectiveEnd;
  SimulationResult result;
  bool done() const { return next == order.size(); }
};
} // namespace

static std::string programName(func::FuncOp f) {
  return ("@" + f.getSymName()).str();
}

FailureOr<PipelineSimulationResult>
loom::simulatePipeline(ArrayRef<func::FuncOp> programs, const CostModel &model,
                       const SimOptions &options) {
  SmallVector<StepSimulator> sims;
  for (func::FuncOp f : programs) {
    FailureOr<StepSimulator> sim = StepSimulator::create(f, model, options);
    if (failed(sim))
      return failure();
    sims.push_back(std::move(*sim));
  }

  PipelineSimulationResult out;
  for (func::FuncOp f : programs) {
    ProgramTimeline &p = out.programs.emplace_back();
    p.step = f;
    if (auto ranks = f->getAttrOfType<DenseI64ArrayAttr>(
            LoomDialect::kProgramRanksAttrName))
      p.ranks.assign(ranks.asArrayRef().begin(), ranks.asArrayRef().end());
  }
  FailureOr<DenseMap<Operation *, TransferEnd>> matched =
      matchTransfers(programs);
  if (failed(matched))
    return failure();
  DenseMap<Operation *, TransferEnd> &endpoints = *matched;

  // The joint replay. Each program advances in its order until a wait needs
  // a transfer whose other end has not been posted; posting resolves a
  // transfer once both ends are in, so the times do not depend on the
  // order in which programs are advanced.
  SmallVector<std::string> streams{"compute"};
  for (std::string &name : commStreamNames(options.commStreams))
    streams.push_back(std::move(name));
  unsigned sendStream = streams.size(), recvStream = sendStream + 1;
  streams.push_back("p2p.send");
  streams.push_back("p2p.recv");
  std::vector<Cursor> cursors;
  cursors.reserve(sims.size());
  for (StepSimulator &sim : sims) {
    Cursor &c = cursors.emplace_back();
    c.sim = &sim;
    func::FuncOp f = sim.getStep();
    for (Operation &op : f.getBody().front())
      if (!op.hasTrait<OpTrait::IsTerminator>())
        c.order.push_back(&op);
    c.streamFree.assign(streams.size(), 0);
    c.result.streams = streams;
    c.result.streamBusy.assign(streams.size(), 0);
  }
  DenseMap<Operation *, double> posted;
  DenseMap<Operation *, size_t> eventOf;

  // Records one end of a resolved transfer in its program's result.
  auto finish = [&](Operation *op, double begin, double end) {
    Cursor &c = cursors[endpoints[op].program];
    const CollectiveCost &cost = c.sim->getCollectiveCost(op);
    unsigned s = isa<SendStartOp>(op) ? sendStream : recvStream;
    c.collectiveEnd[op] = end;
    c.streamFree[s] = std::max(c.streamFree[s], end);
    c.result.streamBusy[s] += end - begin;
    c.result.commTime += end - begin;
    SimulationResult::KindStats &kind =
        c.result.byKind[static_cast<size_t>(cost.kind)];
    kind.time += end - begin;
    if (options.recordTimeline) {
      TimelineEvent &e = c.result.timeline[eventOf[op]];
      e.start = begin;
      e.end = end;
    }
  };

  // Issues the next op of `c`; false when it must wait for another program.
  auto advance = [&](Cursor &c) -> bool {
    Operation *op = c.order[c.next];
    SimulationResult &result = c.result;
    if (endpoints.count(op)) {
      const CollectiveCost &cost = c.sim->getCollectiveCost(op);
      posted[op] = c.clock;
      result.numCollectives++;
      result.byKind[static_cast<size_t>(cost.kind)].count++;
      if (options.recordTimeline) {
        eventOf[op] = result.timeline.size();
        result.timeline.push_back(
            {op, isa<SendStartOp>(op) ? sendStream : recvStream, c.clock,
             c.clock, 0, 0, cost.bytes});
      }
      Operation *match = endpoints[op].match;
      auto other = posted.find(match);
      if (other != posted.end()) {
        double begin = std::max(c.clock, other->second);
        // The sender's price: both ends see the same buffer.
        Operation *send = isa<SendStartOp>(op) ? op : match;
        double end = begin + cursors[endpoints[send].program]
                                 .sim->getCollectiveCost(send)
                                 .seconds;
        finish(op, begin, end);
        finish(match, begin, end);
      }
      c.next++;
      return true;
    }
    if (unsigned s = c.sim->getStream(op)) {
      issueCollective(result, options.recordTimeline, op, s,
                      c.sim->getCollectiveCost(op), c.clock, c.streamFree,
                      c.collectiveEnd);
      c.next++;
      return true;
    }
    if (auto wait = dyn_cast<WaitOp>(op)) {
      Operation *start = wait.getFuture().getDefiningOp();
      double ready = 0;
      if (start) {
        auto it = c.collectiveEnd.find(start);
        if (it == c.collectiveEnd.end() && endpoints.count(start))
          return false; // the other end is not posted yet
        if (it != c.collectiveEnd.end())
          ready = it->second;
      }
      c.clock = blockOnWait(result, options.recordTimeline, wait,
                            start ? getCollectiveKind(start) : std::nullopt,
                            c.clock, ready);
      c.next++;
      return true;
    }
    const OpCost &cost = c.sim->getOpCost(op);
    if (auto region = dyn_cast<RecomputeOp>(op)) {
      result.numRecomputeRegions++;
      result.recomputeTime += cost.seconds;
      result.recomputeFlops += cost.flops;
      double at = c.clock;
      for (Operation &inner : region.getBodyBlock().without_terminator()) {
        const OpCost &ic = c.sim->getOpCost(&inner);
        result.numOps++;
        result.numRecomputeOps++;
        result.numMeasuredOps += ic.measured;
        if (options.recordTimeline)
          result.timeline.push_back(
              {&inner, 0, at, at + ic.seconds, 0, ic.flops, ic.bytes, op});
        at += ic.seconds;
      }
    } else {
      result.numOps++;
      result.numMeasuredOps += cost.measured;
      if (options.recordTimeline)
        result.timeline.push_back({op, 0, c.clock, c.clock + cost.seconds, 0,
                                   cost.flops, cost.bytes});
    }
    c.clock += cost.seconds;
    result.computeTime += cost.seconds;
    result.streamBusy[0] += cost.seconds;
    c.next++;
    return true;
  };

  for (bool progress = true; progress;) {
    progress = false;
    for (Cursor &c : cursors)
      while (!c.done() && advance(c))
        progress = true;
  }

  // Programs still blocked wait on each other (a cycle) or on an end that
  // comes only after their own wait: a deadlock, reported at each wait.
  SmallVector<unsigned> blocked;
  for (auto [i, c] : llvm::enumerate(cursors))
    if (!c.done())
      blocked.push_back(i);
  if (!blocked.empty()) {
    auto describe = [&](unsigned i) {
      Operation *wait = cursors[i].order[cursors[i].next];
      Operation *start = cast<WaitOp>(wait).getFuture().getDefiningOp();
      const TransferEnd &e = endpoints[start];
      return std::make_tuple(wait, start, e);
    };
    auto [wait, start, e] = describe(blocked.front());
    std::string names;
    for (unsigned i : blocked)
      names += (names.empty() ? "" : ", ") + programName(programs[i]);
    InFlightDiagnostic diag =
        wait->emitError("deadlock in the pipelined step: ")
        << programName(programs[blocked.front()]) << " waits here for its '"
        << start->getName() << "' (tag "
        << start->getAttrOfType<IntegerAttr>("tag").getInt() << ") whose '"
        << e.match->getName() << "' in "
        << programName(programs[e.matchProgram])
        << " is never reached; blocked programs: " << names;
    diag.attachNote(e.match->getLoc())
        << "the matching '" << e.match->getName() << "' in "
        << programName(programs[e.matchProgram]);
    for (unsigned i : ArrayRef(blocked).drop_front()) {
      auto [w, st, ep] = describe(i);
      diag.attachNote(w->getLoc())
          << programName(programs[i]) << " is blocked here, waiting for '"
          << ep.match->getName() << "' in "
          << programName(programs[ep.matchProgram]);
    }
    return diag;
  }

  for (auto [p, c] : llvm::zip(out.programs, cursors)) {
    c.result.stepTime = c.clock;
    for (double t : c.streamFree)
      c.result.stepTime = std::max(c.result.stepTime, t);
    if (options.computeMemory)
      c.result.memory.emplace(func::FuncOp(p.step), c.order);
    p.result = std::move(c.result);
    out.stepTime = std::max(out.stepTime, p.result.stepTime);
    out.computeTime += p.result.computeTime;
  }
  for (ProgramTimeline &p : out.programs)
    p.idleTime = out.stepTime - p.result.computeTime;
  double capacity = static_cast<double>(out.programs.size()) * out.stepTime;
  out.bubbleFraction = capacity > 0 ? 1 - out.computeTime / capacity : 0;
  return out;
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
  if (numMeasuredOps)
    os << llvm::format("  %-22s %lld of %lld ops (op-times)\n",
                       "measured op times", (long long)numMeasuredOps,
                       (long long)numOps);
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
  if (memory) {
    os << "  peak memory per rank  " << memory->peakBytes
       << " bytes (persistent " << memory->persistentBytes << " + activations "
       << memory->peakActivationBytes << ")\n";
    if (memory->peakOp) {
      os << "  ";
      memory->printLiveAtPeak(os);
    }
  }
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
                         {"measured_ops", numMeasuredOps},
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

/// "rank 1" or "ranks 0, 1".
static std::string rankList(ArrayRef<int64_t> ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (auto [i, r] : llvm::enumerate(ranks))
    s += (i ? ", " : "") + std::to_string(r);
  return s;
}

void PipelineSimulationResult::print(raw_ostream &os) const {
  os << llvm::format("  %-22s %s\n", "step time", us(stepTime).c_str());
  os << llvm::format("  %-22s %.1f%% (%zu pipeline ranks)\n", "bubble fraction",
                     100 * bubbleFraction, programs.size());
  os << "  per program (rank): step time, compute busy, idle\n";
  for (const ProgramTimeline &p : programs) {
    func::FuncOp f = p.step;
    std::string name =
        ("@" + f.getSymName() + " (" + rankList(p.ranks) + ")").str();
    os << llvm::format(
        "    %-24s %s  %s  %s\n", name.c_str(), us(p.result.stepTime).c_str(),
        us(p.result.computeTime).c_str(), us(p.idleTime).c_str());
  }
  for (const ProgramTimeline &p : programs) {
    func::FuncOp f = p.step;
    os << "  --- @" << f.getSymName() << " ---\n";
    p.result.print(os);
  }
}

llvm::json::Value PipelineSimulationResult::toJSON() const {
  llvm::json::Array list;
  for (const ProgramTimeline &p : programs) {
    func::FuncOp f = p.step;
    llvm::json::Object obj{{"function", f.getSymName().str()},
                           {"ranks", llvm::json::Array(p.ranks)},
                           {"idle_time", p.idleTime}};
    llvm::json::Value report = p.result.toJSON();
    for (auto &kv : *report.getAsObject())
      obj[kv.first] = std::move(kv.second);
    list.push_back(std::move(obj));
  }
  return llvm::json::Object{
      {"step_time", stepTime},
      {"compute_time", computeTime},
      {"pipeline_ranks", static_cast<int64_t>(programs.size())},
      {"bubble_fraction", bubbleFraction},
      {"programs", std::move(list)}};
}

llvm::json::Value PipelineSimulationResult::toChromeTrace() const {
  llvm::json::Array events;
  for (auto [i, p] : llvm::enumerate(programs)) {
    func::FuncOp f = p.step;
    int64_t pid = static_cast<int64_t>(i);
    std::string name =
        ("@" + f.getSymName() + " (" + rankList(p.ranks) + ")").str();
    llvm::json::Value trace = p.result.toChromeTrace(pid, name);
    for (llvm::json::Value &e : *trace.getAsObject()->getArray("traceEvents"))
      events.push_back(std::move(e));
    // Perfetto orders processes by this index: rank order, so the pipeline's
    // staircase reads top to bottom.
    events.push_back(
        llvm::json::Object{{"name", "process_sort_index"},
                           {"ph", "M"},
                           {"pid", pid},
                           {"args", llvm::json::Object{{"sort_index", pid}}}});
  }
  return llvm::json::Object{{"traceEvents", std::move(events)},
                            {"displayTimeUnit", "ns"}};
}
