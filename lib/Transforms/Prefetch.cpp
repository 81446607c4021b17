//===- Prefetch.cpp - Issue FSDP all-gathers early (forward/backward) -----===//

#include "PrefetchUtils.h"
#include "loom/Analysis/PeakMemory.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"

#include <map>

namespace loom {
#define GEN_PASS_DEF_LOOMPREFETCH
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// One all-gather of a unit's parameters.
struct Gather {
  AllGatherStartOp start;
  WaitOp wait;
  Phase phase;
};

/// A unit as the collectives show it, with FSDP2's hook points.
struct UnitInfo {
  std::string name;
  SmallVector<Gather> gathers;
  Operation *firstReduceScatter = nullptr;
  Operation *lastForwardOp = nullptr;
  Operation *firstBackwardOp = nullptr;
  /// Per call of the unit's module (`loom.calls`; one entry for a module
  /// called once): its last forward op and its first backward op.
  llvm::MapVector<int64_t, Operation *> lastForwardOfCall, firstBackwardOfCall;
};

/// One entry of FSDP2's post-forward order: a call of a unit's module
/// (the order has one entry per call, so a module called twice is in it
/// twice).
struct PostForward {
  unsigned unit;
  int64_t call;
};

/// One start to move: to `point`, issued in the order of `sequence`.
struct Move {
  ProgramPoint point;
  unsigned sequence;
  AllGatherStartOp start;
  std::string issuer;
};

StringRef displayName(StringRef unit) {
  return unit.empty() ? StringRef("<root>") : unit;
}

/// Per unit named in forward-targets or backward-targets, its targets.
using TargetLists = std::map<std::string, SmallVector<std::string>>;
class StepUnits;
struct Request;

struct LoomPrefetchPass
    : public loom::impl::LoomPrefetchBase<LoomPrefetchPass> {
  using LoomPrefetchBase::LoomPrefetchBase;

  void runOnOperation() override;

private:
  LogicalResult prefetchStep(func::FuncOp func);
  /// The all-gathers each hook issues under the pass's options, in issue
  /// order; `bounded`'s backward ones apart.
  void addRequests(const StepUnits &units, const TargetLists &forwardLists,
                   const TargetLists &backwardLists,
                   SmallVectorImpl<Request> &requests,
                   SmallVectorImpl<Request> &boundedRequests);
};

/// Bytes a tensor or a future of one occupies.
int64_t getBytes(Type type) {
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValueType();
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return getTensorBytes(tensor);
  return 0;
}

/// Moves `start` (with the ops computing its input) to the earliest op after
/// `point` at which what it then holds early stays within `limit` activation
/// bytes at every op it is moved across; leaves it where it is when no op
/// does. The sweep over the current step is redone per start, so starts
/// moved before are counted.
void moveWithinPeak(func::FuncOp func, AllGatherStartOp start,
                    ProgramPoint point, ArrayRef<Operation *> slice,
                    int64_t limit) {
  Block &body = func.getBody().front();
  // Moved earlier, the gathered buffer (allocated at the start) and every
  // input the slice allocates are live across the ops they move over.
  int64_t extra = getBytes(start->getResult(0).getType());
  Operation *first = start;
  for (Operation *op : slice) {
    if (op->isBeforeInBlock(first))
      first = op;
    if (!getAliasedOperand(op))
      for (Value result : op->getResults())
        extra += getBytes(result.getType());
  }
  PeakMemory memory(func);
  DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(memory.order))
    position[op] = i;
  Operation *firstCandidate = point.after ? point.op->getNextNode() : point.op;
  if (!firstCandidate || !position.count(firstCandidate) ||
      !position.count(first))
    return;
  size_t lowest = position[firstCandidate];
  Operation *best = nullptr;
  int64_t live = 0;
  // Walk back from the start: the most already live across the moved-over
  // ops only grows, so the first op that would exceed the limit ends it.
  for (size_t i = position[first]; i-- > lowest;) {
    live = std::max(live, memory.activationBytesAt[i]);
    if (live + extra > limit)
      break;
    if (memory.order[i]->getBlock() == &body)
      best = memory.order[i];
  }
  if (!best)
    return;
  FailureOr<SmallVector<Operation *>> toMove =
      collectInputSlice(start, ProgramPoint::before(best));
  if (failed(toMove))
    return;
  for (Operation *op : *toMove)
    op->moveBefore(best);
  start->moveBefore(best);
}

/// Parses `UNIT:T1+T2` entries into (unit, targets), in option order.
LogicalResult parseTargets(ArrayRef<std::string> entries, StringRef option,
                           TargetLists &out,
                           function_ref<InFlightDiagnostic()> emitError) {
  auto unitName = [](StringRef text) {
    text = text.trim();
    return text == "<root>" ? std::string() : text.str();
  };
  for (StringRef entry : entries) {
    auto [unit, rest] = entry.split(':');
    if (rest.empty() || unit.trim().empty())
      return emitError() << "--loom-prefetch: " << option << " entry '" << entry
                         << "' is not 'UNIT:T1+T2'";
    std::string name = unitName(unit);
    if (out.count(name))
      return emitError() << "--loom-prefetch: " << option << " lists unit '"
                         << displayName(name) << "' twice";
    SmallVector<StringRef> parts;
    rest.split(parts, '+');
    SmallVector<std::string> targets;
    for (StringRef part : parts) {
      if (part.trim().empty())
        return emitError() << "--loom-prefetch: " << option << " entry '"
                           << entry << "' has an empty target";
      std::string target = unitName(part);
      if (target == name)
        return emitError() << "--loom-prefetch: " << option << " entry '"
                           << entry << "' makes unit '" << displayName(name)
                           << "' prefetch itself";
      targets.push_back(target);
    }
    out[name] = targets;
  }
  return success();
}

void LoomPrefetchPass::runOnOperation() {
  ModuleOp module = getOperation();
  for (func::FuncOp func : getStepFunctions(module))
    if (failed(prefetchStep(func)))
      return signalPassFailure();
  if (failed(verify(module))) {
    module.emitError("--loom-prefetch produced an invalid module");
    return signalPassFailure();
  }
}

/// The step's units as its collectives show them, and FSDP2's hook points
/// in them.
class StepUnits {
public:
  /// Collects the units of `body`, in order of first appearance; fails
  /// (with an error) on an all-gather without a phase or a single wait.
  LogicalResult collect(Block &body);
  /// Checks that every unit `lists` name has a collective.
  LogicalResult checkListed(ArrayRef<const TargetLists *> lists,
                            function_ref<InFlightDiagnostic()> emitError) const;
  /// Finds each unit's last forward and first backward op per call.
  void findComputeOps(Block &body);
  /// FSDP2's forward order (by forward all-gather) and post-forward order
  /// (by the last forward op of each call, as its post_forward_order).
  void findOrders();

  bool empty() const { return units.empty(); }
  unsigned indexOf(StringRef name) const { return index.lookup(name); }
  const UnitInfo &operator[](unsigned u) const { return units[u]; }

  std::optional<ProgramPoint> preForward(const UnitInfo &unit) const;
  std::optional<ProgramPoint> preBackward(const UnitInfo &unit) const;
  std::optional<ProgramPoint> preBackwardOfCall(const UnitInfo &unit,
                                                int64_t call) const;
  std::optional<ProgramPoint> postBackward(const UnitInfo &unit) const;

  SmallVector<unsigned> forwardOrder;
  SmallVector<PostForward> postForwardOrder;

private:
  UnitInfo &getUnit(StringRef name);
  /// The unit whose name is the longest prefix of `path`, or -1.
  int unitOfPath(StringRef path) const;
  static const Gather *firstGather(const UnitInfo &unit, Phase phase);

  SmallVector<UnitInfo> units;
  llvm::StringMap<unsigned> index;
  DenseSet<Operation *> collectiveOps;
};

/// A unit's all-gather to issue at `point`, at the hook of `issuer`.
struct Request {
  ProgramPoint point;
  unsigned target;
  unsigned issuer;
};
} // namespace

UnitInfo &StepUnits::getUnit(StringRef name) {
  auto [it, inserted] = index.try_emplace(name, units.size());
  if (inserted) {
    units.emplace_back();
    units.back().name = name.str();
  }
  return units[it->second];
}

LogicalResult StepUnits::collect(Block &body) {
  for (Operation &op : body) {
    if (auto start = dyn_cast<AllGatherStartOp>(op)) {
      WaitOp wait = getWaitOf(start);
      std::optional<Phase> phase = getPhase(start);
      if (!wait || !phase)
        return start.emitOpError("--loom-prefetch: an all-gather needs a "
                                 "'loom.phase' and exactly one loom.wait");
      getUnit(getModulePath(start)).gathers.push_back({start, wait, *phase});
      collectiveOps.insert(start);
      collectiveOps.insert(wait);
    } else if (isa<ReduceScatterStartOp>(op)) {
      UnitInfo &unit = getUnit(getModulePath(&op));
      if (!unit.firstReduceScatter)
        unit.firstReduceScatter = &op;
      collectiveOps.insert(&op);
    } else if (isa<WaitOp, AllReduceStartOp, BroadcastStartOp>(op)) {
      collectiveOps.insert(&op);
    }
  }
  return success();
}

LogicalResult
StepUnits::checkListed(ArrayRef<const TargetLists *> lists,
                       function_ref<InFlightDiagnostic()> emitError) const {
  auto allUnits = [&] {
    std::string all;
    for (const UnitInfo &u : units)
      all += (all.empty() ? "" : ", ") + displayName(u.name).str();
    return all;
  };
  for (const auto *list : lists)
    for (auto &[unit, targets] : *list)
      for (const std::string &name :
           llvm::concat<const std::string>(ArrayRef(unit), targets))
        if (!index.count(name))
          return emitError()
                 << "--loom-prefetch: unit '" << displayName(name)
                 << "' has no collective in this step (units: " << allUnits()
                 << ")";
  return success();
}

int StepUnits::unitOfPath(StringRef path) const {
  int best = -1;
  size_t bestLength = 0;
  for (auto [i, unit] : llvm::enumerate(units))
    if (isInModule(path, unit.name) &&
        (best < 0 || unit.name.size() > bestLength)) {
      best = i;
      bestLength = unit.name.size();
    }
  return best;
}

void StepUnits::findComputeOps(Block &body) {
  // Ops that compute gather inputs move with their starts; they are not the
  // unit's compute.
  DenseSet<Operation *> gatherInputs;
  for (const UnitInfo &unit : units)
    for (const Gather &g : unit.gathers) {
      FailureOr<SmallVector<Operation *>> slice =
          collectInputSlice(g.start, ProgramPoint::before(&body.front()));
      if (succeeded(slice))
        gatherInputs.insert(slice->begin(), slice->end());
    }
  for (Operation &op : body) {
    if (collectiveOps.contains(&op) || gatherInputs.contains(&op) ||
        op.hasTrait<OpTrait::IsTerminator>())
      continue;
    std::optional<Phase> phase = getPhase(&op);
    int u = unitOfPath(getModulePath(&op));
    if (!phase || u < 0)
      continue;
    int64_t call = getCallIndex(&op, units[u].name);
    if (*phase == Phase::forward) {
      units[u].lastForwardOp = &op;
      units[u].lastForwardOfCall[call] = &op;
    } else if (*phase == Phase::backward) {
      if (!units[u].firstBackwardOp)
        units[u].firstBackwardOp = &op;
      units[u].firstBackwardOfCall.insert({call, &op});
    }
  }
}

const Gather *StepUnits::firstGather(const UnitInfo &unit, Phase phase) {
  for (const Gather &g : unit.gathers)
    if (g.phase == phase)
      return &g;
  return nullptr;
}

void StepUnits::findOrders() {
  for (auto [i, unit] : llvm::enumerate(units)) {
    if (firstGather(unit, Phase::forward))
      forwardOrder.push_back(i);
    for (auto [call, op] : unit.lastForwardOfCall)
      postForwardOrder.push_back({unsigned(i), call});
  }
  llvm::sort(forwardOrder, [&](unsigned a, unsigned b) {
    return firstGather(units[a], Phase::forward)
        ->start->isBeforeInBlock(firstGather(units[b], Phase::forward)->start);
  });
  llvm::sort(postForwardOrder, [&](PostForward a, PostForward b) {
    return units[a.unit].lastForwardOfCall[a.call]->isBeforeInBlock(
        units[b.unit].lastForwardOfCall[b.call]);
  });
}

std::optional<ProgramPoint> StepUnits::preForward(const UnitInfo &unit) const {
  if (const Gather *g = firstGather(unit, Phase::forward))
    return ProgramPoint::afterOp(g->wait);
  return std::nullopt;
}

std::optional<ProgramPoint> StepUnits::preBackward(const UnitInfo &unit) const {
  if (const Gather *g = firstGather(unit, Phase::backward))
    return ProgramPoint::afterOp(g->wait);
  if (unit.firstBackwardOp)
    return ProgramPoint::before(unit.firstBackwardOp);
  return std::nullopt;
}

std::optional<ProgramPoint> StepUnits::preBackwardOfCall(const UnitInfo &unit,
                                                         int64_t call) const {
  // A later call's backward starts with its own pre-backward hook: after
  // the unit's all-gather right before it, if loom-fsdp gathered again
  // there, else before its first backward op.
  auto first = unit.firstBackwardOfCall.find(call);
  if (first == unit.firstBackwardOfCall.end())
    return std::nullopt;
  if (first == unit.firstBackwardOfCall.begin())
    return preBackward(unit);
  Operation *op = first->second;
  const Gather *last = nullptr;
  for (const Gather &g : unit.gathers)
    if (g.phase == Phase::backward && g.wait->isBeforeInBlock(op))
      last = &g;
  if (last && llvm::none_of(unit.firstBackwardOfCall, [&](auto &callAndOp) {
        Operation *x = callAndOp.second;
        return last->wait->isBeforeInBlock(x) && x->isBeforeInBlock(op);
      }))
    return ProgramPoint::afterOp(last->wait);
  return ProgramPoint::before(op);
}

std::optional<ProgramPoint>
StepUnits::postBackward(const UnitInfo &unit) const {
  if (unit.firstReduceScatter)
    return ProgramPoint::before(unit.firstReduceScatter);
  return std::nullopt;
}

/// The target's next all-gather whose wait follows the request's point,
/// unless it is already issued there.
static const Gather *gatherToMove(const StepUnits &units,
                                  const Request &request) {
  const Gather *next = nullptr;
  for (const Gather &g : units[request.target].gathers)
    if (!request.point.isAfter(g.wait)) {
      next = &g;
      break;
    }
  if (!next || request.point.isAfter(next->start))
    return nullptr;
  return next;
}

static void warnCannotMove(AllGatherStartOp start, StringRef issuer,
                           Operation *culprit) {
  InFlightDiagnostic diag = start.emitWarning()
                            << "--loom-prefetch: cannot issue the "
                               "all-gather of unit '"
                            << displayName(getModulePath(start))
                            << "' at unit '" << displayName(issuer)
                            << "''s prefetch point: its input depends on "
                               "an op computed later";
  diag.attachNote(culprit->getLoc()) << "this op";
}

void LoomPrefetchPass::addRequests(const StepUnits &units,
                                   const TargetLists &forwardLists,
                                   const TargetLists &backwardLists,
                                   SmallVectorImpl<Request> &requests,
                                   SmallVectorImpl<Request> &boundedRequests) {
  for (auto [pos, u] : llvm::enumerate(units.forwardOrder)) {
    std::optional<ProgramPoint> point = units.preForward(units[u]);
    auto it = forwardLists.find(units[u].name);
    if (it != forwardLists.end()) {
      for (const std::string &t : it->second)
        requests.push_back({*point, units.indexOf(t), u});
      continue;
    }
    for (int64_t k = 1;
         k <= forwardPrefetch && pos + k < units.forwardOrder.size(); ++k)
      requests.push_back({*point, units.forwardOrder[pos + k], u});
  }
  for (auto [pos, entry] : llvm::enumerate(units.postForwardOrder)) {
    unsigned u = entry.unit;
    auto it = backwardLists.find(units[u].name);
    if (it != backwardLists.end()) {
      if (std::optional<ProgramPoint> point =
              units.preBackwardOfCall(units[u], entry.call))
        for (const std::string &t : it->second)
          requests.push_back({*point, units.indexOf(t), u});
      continue;
    }
    if (pos == 0 || backwardPrefetch == BackwardPrefetch::None)
      continue;
    std::optional<ProgramPoint> point =
        backwardPrefetch == BackwardPrefetch::Post
            ? units.postBackward(units[u])
            : units.preBackwardOfCall(units[u], entry.call);
    if (!point)
      continue;
    unsigned target = units.postForwardOrder[pos - 1].unit;
    if (backwardPrefetch == BackwardPrefetch::Bounded)
      boundedRequests.push_back({*point, target, u});
    else
      requests.push_back({*point, target, u});
  }
  // Units with an explicit backward list but no forward op (rare) still
  // issue at their pre-backward point.
  for (auto &[name, targets] : backwardLists) {
    unsigned u = units.indexOf(name);
    if (units[u].lastForwardOp)
      continue;
    if (std::optional<ProgramPoint> point = units.preBackward(units[u]))
      for (const std::string &t : targets)
        requests.push_back({*point, units.indexOf(t), u});
  }
}

/// Moves each requested all-gather to the earliest point requested for it;
/// several starts at one point go in issue order.
static void moveGathers(const StepUnits &units, ArrayRef<Request> requests) {
  llvm::MapVector<Operation *, Move> moves;
  for (auto [sequence, request] : llvm::enumerate(requests)) {
    const Gather *next = gatherToMove(units, request);
    if (!next)
      continue;
    auto [it, inserted] = moves.try_emplace(
        next->start, Move{request.point, unsigned(sequence), next->start,
                          units[request.issuer].name});
    if (!inserted && request.point < it->second.point)
      it->second = Move{request.point, unsigned(sequence), next->start,
                        units[request.issuer].name};
  }
  SmallVector<Move> ordered;
  for (auto &[op, move] : moves)
    ordered.push_back(move);
  llvm::stable_sort(ordered, [](const Move &a, const Move &b) {
    if (a.point.op == b.point.op && a.point.after == b.point.after)
      return a.sequence < b.sequence;
    return a.point < b.point;
  });

  // After a wait each start goes after the previous one, before an op each
  // goes right before it.
  DenseMap<Operation *, Operation *> cursor;
  for (const Move &move : ordered) {
    AllGatherStartOp start = move.start;
    Operation *culprit = nullptr;
    FailureOr<SmallVector<Operation *>> slice =
        collectInputSlice(start, move.point, &culprit);
    if (failed(slice)) {
      warnCannotMove(start, move.issuer, culprit);
      continue;
    }
    SmallVector<Operation *> toMove(*slice);
    toMove.push_back(start);
    for (Operation *op : toMove) {
      if (move.point.after) {
        Operation *&last = cursor[move.point.op];
        op->moveAfter(last ? last : move.point.op);
        last = op;
      } else {
        op->moveBefore(move.point.op);
      }
    }
  }
}

/// `bounded`: the limit is the peak before any backward prefetch; starts
/// are placed in program order of their points, each against the sweep
/// that counts the ones placed before it.
static void placeWithinPeak(func::FuncOp func, const StepUnits &units,
                            SmallVector<Request> requests) {
  if (requests.empty())
    return;
  int64_t limit = PeakMemory(func).peakActivationBytes;
  llvm::stable_sort(requests, [](const Request &a, const Request &b) {
    return a.point < b.point;
  });
  for (const Request &request : requests) {
    const Gather *next = gatherToMove(units, request);
    if (!next)
      continue;
    Operation *culprit = nullptr;
    FailureOr<SmallVector<Operation *>> slice =
        collectInputSlice(next->start, request.point, &culprit);
    if (failed(slice)) {
      warnCannotMove(next->start, units[request.issuer].name, culprit);
      continue;
    }
    moveWithinPeak(func, next->start, request.point, *slice, limit);
  }
}

LogicalResult LoomPrefetchPass::prefetchStep(func::FuncOp func) {
  auto emitError = [&]() { return func.emitOpError(); };
  if (forwardPrefetch < 0)
    return emitError() << "--loom-prefetch: forward-prefetch "
                       << static_cast<int64_t>(forwardPrefetch)
                       << " is negative";
  TargetLists forwardLists, backwardLists;
  if (failed(parseTargets(forwardTargets, "forward-targets", forwardLists,
                          emitError)) ||
      failed(parseTargets(backwardTargets, "backward-targets", backwardLists,
                          emitError)))
    return failure();

  Block &body = func.getBody().front();
  StepUnits units;
  if (failed(units.collect(body)) ||
      failed(units.checkListed({&forwardLists, &backwardLists}, emitError)))
    return failure();
  if (units.empty())
    return success();
  units.findComputeOps(body);
  units.findOrders();

  // Requests: (point, target unit) in issue order; `bounded`'s are placed
  // last, against the step's peak as the other moves leave it.
  SmallVector<Request> requests, boundedRequests;
  addRequests(units, forwardLists, backwardLists, requests, boundedRequests);
  moveGathers(units, requests);
  placeWithinPeak(func, units, std::move(boundedRequests));
  return success();
}
