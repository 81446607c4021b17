//===- Liveness.cpp - loom-sac-ilp's memory profile of the finished step --===//
//
// The solver bounds the peak of the program the runtime will run, not of the
// step as it stands: FSDP's gathered parameters, the gradients, the
// optimizer's state and collective buffers are only there once the rest of
// the pipeline has run. So the pipeline runs on a copy, and the same sweep
// that predicts the runtime's peak (PeakMemory) gives the profile, with each
// node's outputs located in it by a tag the copy keeps. The same copy prices
// each node: its op as the rest of the pipeline leaves it (FSDP's
// mixed precision makes a f32 matmul a bf16 one) is the op the simulator and
// the scheduler price, so the solver's recompute time is theirs.
//
//===----------------------------------------------------------------------===//

#include "SacIlp.h"

#include "loom/Analysis/PeakMemory.h"
#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"

#include <map>
#include <mutex>

using namespace mlir;
using namespace loom;
using namespace loom::sacilp;

/// Where a reader keeps reading: a collective start until its wait.
static Operation *getHoldUntil(Operation *user) {
  if (auto start = dyn_cast<rt::CollectiveStartOp>(user))
    if (Operation *wait = start.getWait())
      return wait;
  if (getCollectiveKind(user))
    for (Operation *waitUser : user->getResult(0).getUsers())
      if (isa<WaitOp>(waitUser))
        return waitUser;
  return user;
}

/// Folds the readers of `v` and of views of it into `inst`.
static void addReaders(Value v, const DenseMap<Operation *, int64_t> &position,
                       int64_t end, Instance &inst) {
  for (Operation *user : v.getUsers()) {
    if (isa<rt::FreeOp>(user))
      continue;
    if (isa<func::ReturnOp, rt::OutputOp>(user)) {
      inst.last = end;
      continue;
    }
    auto it = position.find(getHoldUntil(user));
    if (it == position.end())
      it = position.find(user);
    if (it == position.end())
      continue;
    int64_t at = it->second;
    inst.last = std::max(inst.last, at);
    if (isForwardOp(user))
      inst.lastForward = std::max(inst.lastForward, at);
    else if (inst.firstBackward < 0 || at < inst.firstBackward)
      inst.firstBackward = at;
    // What reads a result that shares v's storage (a view, a split piece, a
    // reshape of a contiguous tensor) keeps v alive: the peak-memory sweep
    // this profile comes from says so with the same rule.
    if (getAliasedOperand(user) == v)
      for (Value r : user->getResults())
        addReaders(r, position, end, inst);
  }
}

/// The tag and microbatch copy of a node's op in a copy of the step.
static std::optional<std::pair<unsigned, int64_t>>
getInstanceKey(Operation *op) {
  auto tag = op->getAttrOfType<IntegerAttr>(kNodeAttrName);
  if (!tag)
    return std::nullopt;
  return std::make_pair(static_cast<unsigned>(tag.getInt()),
                        getMicrobatch(op).value_or(0));
}

using Prices = std::map<std::pair<unsigned, int64_t>, double>;

/// Whether `v`, through any chain of aliases, is the result of a node's op.
static bool isNodeValue(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (def->hasAttr(kNodeAttrName))
      return true;
    Value base = getAliasedOperand(def);
    if (!base)
      return false;
    v = base;
  }
  return false;
}

/// What a region that recomputes `op` runs besides it: the aliases it reads
/// through (a region takes views again) and the forward ops the rest of the
/// pipeline put between it and an activation it reads (FSDP's mixed
/// precision casts an f32 activation for a bf16 kernel, in forward and in
/// the region alike). What only reads parameters (FSDP's unsharding) runs
/// once per all-gather, not in the region.
static void getFeeders(Operation *op, SmallVectorImpl<Operation *> &feeders) {
  for (Value operand : op->getOperands()) {
    auto def = operand.getDefiningOp<AtenOp>();
    while (def && !def->hasAttr(kNodeAttrName) && isForwardOp(def)) {
      if (Value base = getAliasedOperand(def)) {
        if (!llvm::is_contained(feeders, def))
          feeders.push_back(def);
        def = base.getDefiningOp<AtenOp>();
        continue;
      }
      if (llvm::any_of(def->getOperands(), isNodeValue) &&
          !llvm::is_contained(feeders, def))
        feeders.push_back(def);
      break;
    }
  }
}

/// Each node op's time under `root`: its own, plus its share of its
/// feeders' (a region runs a feeder once for all the node ops it feeds; the
/// share is exact when they are recomputed together, as the pieces of one
/// split are).
static void priceNodeOps(Operation *root, const CostModel &costs,
                         Prices &prices) {
  SmallVector<std::pair<AtenOp, SmallVector<Operation *>>> fed;
  DenseMap<Operation *, unsigned> readers;
  root->walk([&](AtenOp aten) {
    if (!aten->hasAttr(kNodeAttrName))
      return;
    auto &[op, feeders] = fed.emplace_back(aten, SmallVector<Operation *>());
    getFeeders(op, feeders);
    for (Operation *feeder : feeders)
      ++readers[feeder];
  });
  for (auto &[op, feeders] : fed) {
    double seconds = costs.opCost(op).seconds;
    for (Operation *feeder : feeders)
      seconds += costs.opCost(feeder).seconds / readers[feeder];
    prices[*getInstanceKey(op)] = seconds;
  }
}

/// Whether `op` is a forward ATen call of `module` that allocates and is no
/// node: one the rest of the pipeline put there (every such op the step had
/// is a node), such as FSDP's cast of an activation for a bf16 kernel.
static bool isInsertedIn(Operation *op, StringRef module) {
  return isa<AtenOp, rt::AtenOp>(op) && !op->hasAttr(kNodeAttrName) &&
         isForwardOp(op) && !getAliasedOperand(op) &&
         isInModule(getModulePath(op), module);
}

/// The ops inserted in `module` that read `v` or an alias of it.
static void findInserted(Value v, StringRef module,
                         SmallVectorImpl<Operation *> &inserted) {
  for (Operation *user : v.getUsers()) {
    if (getAliasedOperand(user) == v) {
      for (Value r : user->getResults())
        findInserted(r, module, inserted);
    } else if (isInsertedIn(user, module) &&
               !llvm::is_contained(inserted, user)) {
      inserted.push_back(user);
    }
  }
}

static int64_t getResultBytes(Operation *op) {
  int64_t bytes = 0;
  for (Value r : op->getResults())
    bytes += getResultStorageBytes(r);
  return bytes;
}

/// Whether the step returns `v` or an alias of it: it then lives to the end
/// whatever is decided, and no decision holds or frees it.
static bool isReturned(Value v) {
  return llvm::any_of(v.getUsers(), [&](Operation *user) {
    if (isa<func::ReturnOp, rt::OutputOp>(user))
      return true;
    return getAliasedOperand(user) == v &&
           llvm::any_of(user->getResults(), isReturned);
  });
}

/// Per block copy of `problem` (blocks tagged with `blockOffset` + their
/// index), the first position of `peak`'s program where a region of it
/// takes a view again: where every region of that copy runs at the latest.
static std::map<std::pair<unsigned, int64_t>, int64_t>
getViewPoints(const PeakMemory &peak, const Problem &problem,
              unsigned blockOffset) {
  std::map<std::pair<unsigned, int64_t>, int64_t> points;
  for (auto [i, op] : llvm::enumerate(peak.order)) {
    auto tag = op->getAttrOfType<IntegerAttr>(kViewAttrName);
    if (!tag || (isForwardOp(op) && !op->getParentOfType<RecomputeOp>()))
      continue;
    int64_t block = tag.getInt() - int64_t(blockOffset);
    if (block < 0 || block >= int64_t(problem.blocks.size()))
      continue;
    points.try_emplace({unsigned(block), getMicrobatch(op).value_or(0)},
                       int64_t(i));
  }
  return points;
}

/// The liveness of `problem`'s nodes in `peak`'s program, whose node ops
/// are tagged with `offset` + their index in `problem`, and the views of
/// its blocks with `blockOffset` + the block's index.
static Liveness measure(const PeakMemory &peak, const Prices &prices,
                        const Problem &problem, unsigned offset,
                        unsigned blockOffset) {
  Liveness out;
  out.persistentBytes = peak.persistentBytes;
  out.activationBytesAt = peak.activationBytesAt;
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(peak.order))
    position[op] = i;
  int64_t end = peak.activationBytesAt.size();
  for (auto [i, op] : llvm::enumerate(peak.order)) {
    auto key = getInstanceKey(op);
    if (!key)
      continue;
    // Another problem's node (none runs in this program).
    if (key->first < offset || key->first - offset >= problem.nodes.size())
      continue;
    auto price = prices.find(*key);
    key->first -= offset;
    // The node's own outputs, and what the pipeline derived from them for
    // its kernels: when backward reads the derived copy (FSDP's bf16 cast
    // of an f32 activation) rather than the node, the copy is what lives
    // across the gap, and what recomputing the node frees (the region
    // derives it again).
    SmallVector<std::pair<Operation *, Instance>> storages;
    StringRef module = problem.blocks[problem.nodes[key->first].block].module;
    SmallVector<Operation *> inserted;
    for (Value r : op->getResults())
      findInserted(r, module, inserted);
    storages.push_back({op, {}});
    for (Operation *derived : inserted)
      if (position.count(derived))
        storages.push_back({derived, {}});
    Instance inst;
    inst.node = key->first;
    inst.copy = key->second;
    inst.def = inst.lastForward = inst.last = i;
    if (price != prices.end())
      inst.seconds = price->second;
    int64_t heldBytes = 0;
    for (auto &[storage, reads] : storages) {
      reads.def = reads.lastForward = reads.last = position[storage];
      int64_t bytes = 0;
      for (Value r : storage->getResults()) {
        if (isReturned(r))
          continue;
        addReaders(r, position, end, reads);
        bytes += getResultStorageBytes(r);
      }
      inst.lastForward = std::max(inst.lastForward, reads.lastForward);
      inst.last = std::max(inst.last, reads.last);
      if (reads.firstBackward >= 0) {
        heldBytes += bytes;
        if (inst.firstBackward < 0 || reads.firstBackward < inst.firstBackward)
          inst.firstBackward = reads.firstBackward;
      }
    }
    inst.bytes = inst.firstBackward >= 0 ? heldBytes : getResultBytes(op);
    out.instances.push_back(inst);
  }
  std::map<std::pair<unsigned, int64_t>, int64_t> viewPoints =
      getViewPoints(peak, problem, blockOffset);
  for (Instance &inst : out.instances) {
    auto it = viewPoints.find({problem.nodes[inst.node].block, inst.copy});
    if (it != viewPoints.end())
      inst.viewPoint = it->second;
  }
  return out;
}

FailureOr<SmallVector<Liveness>>
sacilp::measureLiveness(ModuleOp module, func::FuncOp step,
                        ArrayRef<ProgramProblem> problems,
                        const CostModel &costs, const Downstream &downstream) {
  // Every problem's nodes are tagged apart (problem k's node i with the
  // offset of k plus i), so that one copy prices and measures them all.
  Builder b(module.getContext());
  SmallVector<Operation *> body;
  for (Operation &op : step.getBody().front())
    body.push_back(&op);
  SmallVector<unsigned> offsets, blockOffsets;
  SmallVector<Operation *> views;
  unsigned offset = 0, blockOffset = 0;
  for (const ProgramProblem &p : problems) {
    offsets.push_back(offset);
    blockOffsets.push_back(blockOffset);
    for (auto [i, node] : llvm::enumerate(p.problem->nodes))
      node.op->setAttr(kNodeAttrName, b.getI64IntegerAttr(offset + i));
    for (auto [i, block] : llvm::enumerate(p.problem->blocks))
      for (size_t at : block.views) {
        body[at]->setAttr(kViewAttrName, b.getI64IntegerAttr(blockOffset + i));
        views.push_back(body[at]);
      }
    offset += p.problem->nodes.size();
    blockOffset += p.problem->blocks.size();
  }
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  for (const ProgramProblem &p : problems)
    for (const Node &node : p.problem->nodes)
      node.op->removeAttr(kNodeAttrName);
  for (Operation *view : views)
    view->removeAttr(kViewAttrName);

  // After every pass, the node ops still at the `loom` level are priced
  // again, so the prices kept are those of the last pass before lowering
  // (which turns them into `loomrt.aten`, which no cost model prices).
  Prices prices;
  std::mutex mutex;
  auto price = [&](Operation *root) {
    std::lock_guard<std::mutex> lock(mutex);
    priceNodeOps(root, costs, prices);
  };
  price(*copy);
  if (downstream && failed(downstream(*copy, price)))
    return failure();
  SmallVector<Operation *> programs = getPrograms(*copy);
  SmallVector<Liveness> out;
  for (auto [p, offset, blockOffset] :
       llvm::zip(problems, offsets, blockOffsets)) {
    if (p.program >= programs.size())
      return mlir::emitError(step.getLoc(), "--loom-sac-ilp: the pipeline "
                                            "after it left no step to measure");
    out.push_back(measure(getProgramPeak(programs[p.program]), prices,
                          *p.problem, offset, blockOffset));
  }
  return out;
}

PeakMemory sacilp::getProgramPeak(Operation *program) {
  if (auto rtProgram = dyn_cast<rt::ProgramOp>(program))
    return PeakMemory(rtProgram);
  return PeakMemory(cast<func::FuncOp>(program));
}

SmallVector<Operation *> sacilp::getPrograms(ModuleOp module) {
  SmallVector<Operation *> programs;
  for (auto program : module.getOps<rt::ProgramOp>())
    programs.push_back(program);
  if (programs.empty())
    for (func::FuncOp step : getStepFunctions(module))
      programs.push_back(step);
  return programs;
}

void sacilp::priceNodes(Problem &problem, const Liveness &liveness,
                        const CostModel &costs) {
  SmallVector<bool> measured(problem.nodes.size(), false);
  for (Node &node : problem.nodes)
    node.seconds = 0;
  for (const Instance &inst : liveness.instances) {
    problem.nodes[inst.node].seconds += inst.seconds;
    measured[inst.node] = true;
  }
  for (auto [node, seen] : llvm::zip(problem.nodes, measured))
    if (!seen)
      node.seconds = costs.opCost(node.op).seconds;
}

SmallVector<int64_t> sacilp::getKeptBytes(const Problem &problem,
                                          const Liveness &liveness) {
  SmallVector<int64_t> bytes(problem.nodes.size(), 0);
  SmallVector<bool> seen(problem.nodes.size(), false);
  for (const Instance &inst : liveness.instances)
    if (!seen[inst.node]) {
      bytes[inst.node] = inst.bytes;
      seen[inst.node] = true;
    }
  return bytes;
}
