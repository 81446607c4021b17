//===- PipelineSplit.cpp - Cut a step into pipeline stage functions ------===//
//
// loom-pipeline-split: one forward and one backward function per stage,
// connected by named values (docs/pipeline.md).
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/StepStats.h"
#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <map>

namespace loom {
#define GEN_PASS_DEF_LOOMPIPELINESPLIT
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// The module path of an op ("" for the root module).
StringRef moduleOf(Operation *op) {
  auto path = op->getAttrOfType<StringAttr>(LoomDialect::kModuleAttrName);
  return path ? path.getValue() : StringRef();
}

bool isForward(Operation *op) {
  auto phase = op->getAttrOfType<PhaseAttr>(LoomDialect::kPhaseAttrName);
  return !phase || phase.getValue() == Phase::forward;
}

/// The forward ops of the step body in program order, and where modules
/// start and end: the index of the first and the last forward op of each
/// module path (and of every prefix of it).
struct ForwardOrder {
  SmallVector<Operation *> ops;
  DenseMap<Operation *, int64_t> indexOf;
  llvm::StringMap<int64_t> firstOp, lastOp;

  explicit ForwardOrder(Block &body) {
    for (Operation &op : body.without_terminator()) {
      if (!isForward(&op))
        continue;
      int64_t index = ops.size();
      ops.push_back(&op);
      indexOf[&op] = index;
      // Record every enclosing module too: `layers.2` starts where its first
      // submodule's op is.
      for (StringRef path = moduleOf(&op); !path.empty();
           path = getOwnerModule(path)) {
        firstOp.try_emplace(path, index);
        lastOp[path] = index;
      }
    }
  }

  /// The op's index in forward order (nullopt for an op not in it).
  std::optional<int64_t> position(Operation *op) const {
    auto it = indexOf.find(op);
    return it == indexOf.end() ? std::nullopt : std::optional(it->second);
  }
  std::optional<int64_t> start(StringRef module) const {
    return find(firstOp, module);
  }
  /// The index of the module's last forward op (nullopt when `start` is).
  std::optional<int64_t> end(StringRef module) const {
    return find(lastOp, module);
  }

private:
  static std::optional<int64_t> find(const llvm::StringMap<int64_t> &map,
                                     StringRef module) {
    auto it = map.find(module);
    return it == map.end() ? std::nullopt : std::optional(it->second);
  }
};

/// The units a default split cuts between: the model's repeated blocks, as
/// the FSDP units (getRepeatedBlocks: the blocks of the container with the
/// most numbered children, `layers.N`, a Sequential's `N`, `stack.N`, when
/// it has at least two), or else the root's children (through a chain of
/// only children), in forward order.
SmallVector<std::string> findUnits(func::FuncOp step,
                                   const ForwardOrder &order) {
  SmallVector<StringRef> names;
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i)
    if (auto name =
            step.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName))
      names.push_back(name.getValue());
  SmallVector<std::string> units = getRepeatedBlocks(names, /*minBlocks=*/2);
  // Else the root's children; under a module that is the root's only child
  // (a wrapper that holds the model and adds the loss), its children, and
  // so on down.
  std::string parent;
  while (units.empty()) {
    SmallVector<std::string> children;
    llvm::StringSet<> seen;
    for (Operation *op : order.ops) {
      StringRef path = moduleOf(op);
      if (path == parent || !isInModule(path, parent))
        continue;
      StringRef head = path.drop_front(parent.empty() ? 0 : parent.size() + 1)
                           .split('.')
                           .first;
      std::string child =
          parent.empty() ? head.str() : parent + "." + head.str();
      if (seen.insert(child).second)
        children.push_back(std::move(child));
    }
    if (children.size() != 1) {
      units = std::move(children);
      break;
    }
    parent = children.front();
  }
  // Only units that run in forward, in forward order.
  llvm::erase_if(units, [&](const std::string &u) { return !order.start(u); });
  llvm::stable_sort(units, [&](const std::string &a, const std::string &b) {
    return *order.start(a) < *order.start(b);
  });
  return units;
}

/// Contiguous groups of `costs` (plus `head` on the first group and `tail`
/// on the last) that minimise the largest group: the index where each group
/// after the first starts.
SmallVector<int64_t> balance(ArrayRef<double> costs, double head, double tail,
                             int64_t groups) {
  int64_t n = costs.size();
  SmallVector<double> prefix(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + costs[i];
  auto cost = [&](int64_t g, int64_t from, int64_t to) {
    double c = prefix[to] - prefix[from];
    if (g == 0)
      c += head;
    if (g == groups - 1)
      c += tail;
    return c;
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[g][i]: the smallest largest cost of groups 0..g covering units 0..i-1.
  std::vector<std::vector<double>> best(groups,
                                        std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> cut(groups,
                                        std::vector<int64_t>(n + 1, 0));
  for (int64_t i = 1; i <= n; ++i)
    best[0][i] = cost(0, 0, i);
  for (int64_t g = 1; g < groups; ++g)
    for (int64_t i = g + 1; i <= n; ++i)
      for (int64_t j = g; j < i; ++j) {
        double c = std::max(best[g - 1][j], cost(g, j, i));
        // Ties go to the earlier cut, so equal blocks split evenly and the
        // result does not depend on iteration details.
        if (c < best[g][i]) {
          best[g][i] = c;
          cut[g][i] = j;
        }
      }
  SmallVector<int64_t> starts(groups - 1);
  for (int64_t g = groups - 1, i = n; g > 0; --g) {
    starts[g - 1] = cut[g][i];
    i = cut[g][i];
  }
  return starts;
}

struct LoomPipelineSplitPass
    : public loom::impl::LoomPipelineSplitBase<LoomPipelineSplitPass> {
  using LoomPipelineSplitBase::LoomPipelineSplitBase;

  void runOnOperation() override;

private:
  LogicalResult checkStep(func::FuncOp step);
  /// Where each stage after the first starts, in forward order; `names`
  /// gets the module paths that start them.
  FailureOr<SmallVector<int64_t>>
  boundaryStarts(func::FuncOp step, const ForwardOrder &order,
                 SmallVectorImpl<std::string> &names);
  LogicalResult assignStages(func::FuncOp step, const ForwardOrder &order,
                             ArrayRef<int64_t> starts);
  FailureOr<std::optional<int64_t>>
  recomputeStage(RecomputeOp region,
                 function_ref<std::optional<int64_t>(StringRef)> moduleStage);
  LogicalResult checkDataflow(func::FuncOp step);
  void buildFunctions(func::FuncOp step);
  DenseSet<Operation *> findWeightGradientOps(Block &body);

  /// The stage of every op of the step body.
  DenseMap<Operation *, int64_t> stageOf;
  /// State arguments no op reads, and the stage whose forward takes them.
  SmallVector<std::pair<BlockArgument, int64_t>> unreadState;
};

LogicalResult LoomPipelineSplitPass::checkStep(func::FuncOp step) {
  if (ppStages < 1)
    return step.emitOpError("--loom-pipeline-split: stages must be at least "
                            "1, got ")
           << static_cast<int64_t>(ppStages);
  if (step->hasAttr(LoomDialect::kOptimizerAttrName))
    return step.emitOpError("already has an optimizer attached; run "
                            "loom-pipeline-split before "
                            "loom-attach-optimizer");
  for (unsigned i = 0, e = step.getNumResults(); i < e; ++i) {
    Role role =
        step.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName)
            .getValue();
    if (role != Role::loss && role != Role::grad)
      return step.emitOpError("result #")
             << i << " has role " << stringifyRole(role)
             << "; a pipelined step returns the loss and gradients (buffer "
                "mutations would chain from one microbatch to the next)";
  }
  for (Operation &op : step.getBody().front())
    if (isa<WaitOp>(op) || op.hasAttr(LoomDialect::kMicrobatchAttrName))
      return op.emitOpError("is a collective or a microbatch copy; run "
                            "loom-pipeline-split on the captured step, "
                            "before the distribution passes");
  return success();
}

FailureOr<SmallVector<int64_t>>
LoomPipelineSplitPass::boundaryStarts(func::FuncOp step,
                                      const ForwardOrder &order,
                                      SmallVectorImpl<std::string> &names) {
  SmallVector<int64_t> starts;
  // The cut asked for, else the one an earlier pass planned under and
  // pinned on the module (loom-sac-ilp), else a balanced one.
  SmallVector<std::string> given(ppBoundaries.begin(), ppBoundaries.end());
  if (given.empty())
    if (auto pinned = getOperation()->getAttrOfType<ArrayAttr>(
            LoomDialect::kPipelineBoundariesAttrName))
      for (auto name : pinned.getAsRange<StringAttr>())
        given.push_back(name.str());
  if (!given.empty()) {
    if (static_cast<int64_t>(given.size()) != ppStages - 1)
      return step.emitOpError("--loom-pipeline-split: ")
             << given.size() << " boundaries for "
             << static_cast<int64_t>(ppStages) << " stages; give one module "
             << "path per stage after the first";
    names.assign(given.begin(), given.end());
    for (const std::string &module : given) {
      std::optional<int64_t> start = order.start(module);
      if (!start)
        return step.emitOpError("--loom-pipeline-split: boundary '")
               << module << "' names no module of the step's forward";
      if (!starts.empty() && *start <= starts.back())
        return step.emitOpError("--loom-pipeline-split: boundaries must "
                                "follow forward order; '")
               << module << "' does not start after the previous boundary";
      if (*start == 0)
        return step.emitOpError("--loom-pipeline-split: boundary '")
               << module << "' starts with the first forward op, which "
               << "would leave stage 0 empty";
      starts.push_back(*start);
    }
    return starts;
  }

  SmallVector<std::string> units = findUnits(step, order);
  if (static_cast<int64_t>(units.size()) < ppStages)
    return step.emitOpError("--loom-pipeline-split: ")
           << static_cast<int64_t>(ppStages) << " stages need at least as many "
           << "splittable modules, found " << units.size()
           << (units.empty() ? "" : " (")
           << llvm::join(units, ", ") << (units.empty() ? "" : ")");
  // Forward and backward FLOPs per unit; ops before the first unit go to
  // stage 0, the rest outside units to the last stage. The ops of recompute
  // regions count too (by the module each re-runs): a checkpointed block
  // costs its forward twice, the head and the embedding do not, and leaving
  // the recompute out would load the blocks' stages by a third more than
  // the head's.
  SmallVector<double> costs(units.size(), 0.0);
  double head = 0, tail = 0;
  int64_t firstUnit = *order.start(units.front());
  // Whether an op outside the units runs before them. A module's by where
  // it starts; the root's and that of a module enclosing the units (the
  // model under a loss wrapper, whose own code runs before and after its
  // children) by where the op stands in forward order, or, in backward, the
  // latest forward value it reads (none: after).
  auto beforeUnits = [&](AtenOp aten, StringRef path) {
    if (!path.empty() && !isInModule(units.front(), path)) {
      std::optional<int64_t> start = order.start(path);
      return start && *start < firstUnit;
    }
    std::optional<int64_t> at = order.position(aten);
    if (!at)
      for (Value v : aten->getOperands())
        if (std::optional<int64_t> read = order.position(v.getDefiningOp()))
          at = std::max(at.value_or(*read), *read);
    return at && *at < firstUnit;
  };
  step.getBody().front().walk([&](AtenOp aten) {
    double flops = static_cast<double>(countFlops(aten));
    StringRef path = moduleOf(aten);
    auto *unit = llvm::find_if(
        units, [&](const std::string &u) { return isInModule(path, u); });
    if (unit != units.end()) {
      costs[unit - units.begin()] += flops;
      return;
    }
    (beforeUnits(aten, path) ? head : tail) += flops;
  });
  for (int64_t unit : balance(costs, head, tail, ppStages)) {
    starts.push_back(*order.start(units[unit]));
    names.push_back(units[unit]);
  }
  return starts;
}

LogicalResult LoomPipelineSplitPass::assignStages(func::FuncOp step,
                                                  const ForwardOrder &order,
                                                  ArrayRef<int64_t> starts) {
  auto stageAt = [&](int64_t index) {
    return static_cast<int64_t>(llvm::upper_bound(starts, index) -
                                starts.begin());
  };
  // The stage of a module whose forward lies within one stage. A module a
  // boundary cuts (one that encloses the cut blocks, such as a model under
  // a wrapper that adds the loss) has none: its own ops, like the root's,
  // go where the values they read are.
  auto moduleStage = [&](StringRef path) -> std::optional<int64_t> {
    std::optional<int64_t> first = order.start(path), last = order.end(path);
    if (!first || stageAt(*first) != stageAt(*last))
      return std::nullopt;
    return stageAt(*first);
  };
  // The stage of the op that makes `v`, if it has one yet (an op deferred
  // to its users below has none).
  auto producerStage = [&](Value v) -> std::optional<int64_t> {
    auto it = stageOf.find(v.getDefiningOp());
    if (it == stageOf.end())
      return std::nullopt;
    return it->second;
  };
  Block &body = step.getBody().front();
  SmallVector<Operation *> deferred;
  for (Operation &op : body.without_terminator()) {
    // A recompute region re-runs forward ops in the backward of their stage
    // (where the gradients reach them); its own module may be a prefix that
    // spans stages (remat-modules=layers), so its body decides.
    if (auto region = dyn_cast<RecomputeOp>(op)) {
      FailureOr<std::optional<int64_t>> stage =
          recomputeStage(region, moduleStage);
      if (failed(stage))
        return failure();
      if (*stage) {
        stageOf[&op] = **stage;
        continue;
      }
    }
    if (std::optional<int64_t> stage = moduleStage(moduleOf(&op))) {
      stageOf[&op] = *stage;
      continue;
    }
    // An op of the root module, of a module the cut spans, or of one with
    // no forward op.
    std::optional<int64_t> fwd, bwd;
    for (Value operand : op.getOperands()) {
      std::optional<int64_t> s = producerStage(operand);
      if (!s)
        continue;
      if (isForward(operand.getDefiningOp()))
        fwd = fwd ? std::max(*fwd, *s) : *s;
      else
        bwd = bwd ? std::min(*bwd, *s) : *s;
    }
    if (isForward(&op)) {
      // With the latest value it reads; one that reads only the step's
      // arguments (a parameter, an input) where it stands in forward order.
      if (fwd)
        stageOf[&op] = *fwd;
      else if (llvm::any_of(op.getOperands(), llvm::IsaPred<BlockArgument>))
        stageOf[&op] = stageAt(*order.position(&op));
      else
        deferred.push_back(&op);
      continue;
    }
    // Backward: with the forward values it differentiates, but no later than
    // the gradients it reads allow.
    if (fwd && bwd)
      stageOf[&op] = std::min(*fwd, *bwd);
    else if (fwd || bwd)
      stageOf[&op] = fwd ? *fwd : *bwd;
    else
      deferred.push_back(&op);
  }
  // Ops that read nothing computed (constants, `arange`): where their users
  // are (forward: the first of them; backward: the last, which gradients
  // reach first).
  for (Operation *op : llvm::reverse(deferred)) {
    std::optional<int64_t> stage;
    for (Operation *user : op->getUsers()) {
      auto it = stageOf.find(user);
      if (it == stageOf.end())
        continue;
      stage = !stage ? it->second
                     : (isForward(op) ? std::min(*stage, it->second)
                                      : std::max(*stage, it->second));
    }
    stageOf[op] = stage.value_or(isForward(op) ? 0 : ppStages - 1);
  }
  // State no op reads (a registered buffer the forward never uses, the
  // parameters of a module it never calls) still belongs to a stage, whose
  // ranks keep, update and checkpoint it: its module's, or the nearest
  // enclosing module's that lies in one stage, else the first.
  unreadState.clear();
  for (BlockArgument arg : step.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto role = step.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!arg.use_empty() || !role ||
        !llvm::is_contained({Role::parameter, Role::buffer, Role::constant},
                            role.getValue()))
      continue;
    auto name =
        step.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName);
    StringRef owner = name ? getOwnerModule(name.getValue()) : StringRef();
    std::optional<int64_t> stage;
    for (; !owner.empty() && !stage; owner = getOwnerModule(owner))
      stage = moduleStage(owner);
    unreadState.emplace_back(arg, stage.value_or(0));
  }
  return checkDataflow(step);
}

FailureOr<std::optional<int64_t>> LoomPipelineSplitPass::recomputeStage(
    RecomputeOp region,
    function_ref<std::optional<int64_t>(StringRef)> moduleStage) {
  // The stage of each re-run op, by the module it was copied from; the
  // first op seen in each stage names it in the error.
  std::map<int64_t, Operation *> stages;
  region.getBodyBlock().walk([&](Operation *inner) {
    if (!isForward(inner))
      return;
    if (std::optional<int64_t> stage = moduleStage(moduleOf(inner)))
      stages.try_emplace(*stage, inner);
  });
  if (stages.empty())
    return std::optional<int64_t>();
  if (stages.size() == 1)
    return std::optional<int64_t>(stages.begin()->first);
  auto first = stages.begin(), second = std::next(first);
  InFlightDiagnostic diag =
      region.emitOpError("recomputes forward ops of stages ")
      << first->first << " (module '" << moduleOf(first->second) << "') and "
      << second->first << " (module '" << moduleOf(second->second)
      << "'); a recompute region runs in one stage's backward, so "
         "checkpoint blocks that no stage boundary cuts (remat-modules, or "
         "boundaries between the checkpointed blocks)";
  diag.attachNote(first->second->getLoc())
      << "re-runs this op of stage " << first->first;
  diag.attachNote(second->second->getLoc())
      << "and this op of stage " << second->first;
  return failure();
}

LogicalResult LoomPipelineSplitPass::checkDataflow(func::FuncOp step) {
  for (Operation &op : step.getBody().front().without_terminator()) {
    int64_t stage = stageOf.lookup(&op);
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def)
        continue;
      int64_t from = stageOf.lookup(def);
      // Forward values flow to later stages; gradients to earlier ones. A
      // backward op may read any forward value (every forward runs before
      // any backward of the same microbatch reaches it).
      bool ok = isForward(def) ? (!isForward(&op) || from <= stage)
                               : from >= stage;
      if (ok)
        continue;
      InFlightDiagnostic diag =
          op.emitOpError("(stage ")
          << stage << ", module '" << moduleOf(&op) << "') reads a "
          << (isForward(def) ? "forward value of a later" : "gradient of an "
                                                            "earlier")
          << " stage (" << from << ", module '" << moduleOf(def)
          << "'); pipeline stages must follow the forward order of the "
             "model";
      diag.attachNote(def->getLoc()) << "the value is computed here";
      return diag;
    }
  }
  return success();
}

/// A name for `v` unique in `used`: the op's location name (the graph node).
std::string valueKey(Value v, llvm::StringSet<> &used) {
  std::string base = "v";
  if (Operation *def = v.getDefiningOp()) {
    // The graph node's name, or else the operator's (`aten::relu.default`
    // gives `relu`).
    if (auto name = dyn_cast<NameLoc>(def->getLoc()))
      base = name.getName().str();
    else if (auto aten = dyn_cast<AtenOp>(def))
      base = aten.getOpName().split("::").second.str();
    if (def->getNumResults() > 1)
      base += "#" + std::to_string(cast<OpResult>(v).getResultNumber());
  }
  std::string key = base;
  for (int i = 1; !used.insert(key).second; ++i)
    key = base + "." + std::to_string(i);
  return key;
}

DenseSet<Operation *>
LoomPipelineSplitPass::findWeightGradientOps(Block &body) {
  // The input-gradient part of a stage's backward is what the gradients it
  // hands to other stages need (closed over operands within the stage's
  // backward); the rest only makes parameter gradients and can run later
  // (zero-bubble schedules' W).
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  auto sameBackward = [&](Operation *a, Operation *b) {
    return a && b && !isForward(a) && !isForward(b) &&
           stageOf.lookup(a) == stageOf.lookup(b);
  };
  DenseSet<Operation *> input;
  SmallVector<Operation *> work;
  for (Operation &op : body.without_terminator()) {
    if (isForward(&op))
      continue;
    bool crosses = llvm::any_of(op.getUsers(), [&](Operation *user) {
      return user != ret && !sameBackward(user, &op);
    });
    if (crosses && input.insert(&op).second)
      work.push_back(&op);
  }
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (sameBackward(def, op) && input.insert(def).second)
        work.push_back(def);
    }
  }
  DenseSet<Operation *> weight;
  for (Operation &op : body.without_terminator())
    if (!isForward(&op) && !input.contains(&op))
      weight.insert(&op);
  return weight;
}

void LoomPipelineSplitPass::buildFunctions(func::FuncOp step) {
  MLIRContext *ctx = &getContext();
  // A stage reads only some batch inputs: each keeps its index in the
  // batch, which the runtime feeds by.
  int64_t batchIndex = 0;
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
    auto role = step.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (role && role.getValue() == Role::input &&
        !step.getArgAttr(i, LoomDialect::kBatchIndexAttrName))
      step.setArgAttr(i, LoomDialect::kBatchIndexAttrName,
                      IntegerAttr::get(IntegerType::get(ctx, 64),
                                       batchIndex++));
  }
  Block &body = step.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // Groups per stage: forward, backward (or its input-gradient part), and
  // with split-backward the weight-gradient part.
  DenseSet<Operation *> weightPart = ppSplitBackward
                                         ? findWeightGradientOps(body)
                                         : DenseSet<Operation *>();
  auto groupOf = [&](Operation *op) {
    int64_t part = isForward(op) ? 0 : (weightPart.contains(op) ? 2 : 1);
    return stageOf.lookup(op) * 3 + part;
  };
  // Values read outside the group that makes them get a key.
  DenseMap<Value, std::string> keys;
  llvm::StringSet<> used;
  for (Operation &op : body.without_terminator())
    for (Value result : op.getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return user != ret && groupOf(user) != groupOf(&op);
          }))
        keys[result] = valueKey(result, used);

  OpBuilder b(ctx);
  b.setInsertionPointAfter(step);
  for (int64_t group = 0; group < 3 * ppStages; ++group) {
    int64_t stage = group / 3;
    int64_t part = group % 3;
    bool forward = part == 0;
    if (part == 2 && !ppSplitBackward)
      continue;
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      if (groupOf(&op) == group)
        ops.push_back(&op);

    // Arguments: step arguments and keyed values, each once, in first-use
    // order.
    SmallVector<Value> inputs;
    llvm::SetVector<Value> seenInputs;
    DenseSet<Operation *> inGroup(ops.begin(), ops.end());
    for (Operation *op : ops)
      for (Value operand : op->getOperands())
        if (!inGroup.contains(operand.getDefiningOp()))
          seenInputs.insert(operand);
    for (auto [arg, argStage] : unreadState)
      if (forward && argStage == stage)
        seenInputs.insert(arg);
    inputs.assign(seenInputs.begin(), seenInputs.end());

    // Results: keyed values read by another group, then the step results
    // this group makes.
    SmallVector<Value> outputs;
    SmallVector<NamedAttrList> outputAttrs;
    for (Operation *op : ops)
      for (Value result : op->getResults())
        if (keys.count(result) &&
            llvm::any_of(result.getUsers(), [&](Operation *user) {
              return user != ret && groupOf(user) != group;
            })) {
          outputs.push_back(result);
          NamedAttrList attrs;
          attrs.set(LoomDialect::kPipelineValueAttrName,
                    StringAttr::get(ctx, keys[result]));
          outputAttrs.push_back(attrs);
        }
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      if (inGroup.contains(v.getDefiningOp())) {
        outputs.push_back(v);
        outputAttrs.emplace_back(step.getResultAttrDict(i));
      }

    SmallVector<Type> argTypes, resultTypes;
    for (Value v : inputs)
      argTypes.push_back(v.getType());
    for (Value v : outputs)
      resultTypes.push_back(v.getType());
    StringRef suffix = forward                ? "_forward"
                       : !ppSplitBackward     ? "_backward"
                       : part == 1            ? "_backward_input"
                                              : "_backward_weight";
    std::string name =
        (step.getSymName() + "_s" + Twine(stage) + suffix).str();
    auto func = func::FuncOp::create(b, step.getLoc(), name,
                                     FunctionType::get(ctx, argTypes,
                                                       resultTypes));
    b.setInsertionPointAfter(func);
    func->setAttr(LoomDialect::kPipelineStageAttrName,
                  b.getI64IntegerAttr(stage));
    func->setAttr(LoomDialect::kPhaseAttrName,
                  PhaseAttr::get(ctx, forward ? Phase::forward
                                              : Phase::backward));
    if (ppSplitBackward && !forward)
      func->setAttr(LoomDialect::kPipelinePartAttrName,
                    b.getStringAttr(part == 1 ? "input" : "weight"));
    Block *entry = func.addEntryBlock();
    IRMapping map;
    for (auto [i, v] : llvm::enumerate(inputs)) {
      map.map(v, entry->getArgument(i));
      if (auto arg = dyn_cast<BlockArgument>(v))
        func.setArgAttrs(i, step.getArgAttrDict(arg.getArgNumber()));
      else
        func.setArgAttr(i, LoomDialect::kPipelineValueAttrName,
                        StringAttr::get(ctx, keys.lookup(v)));
    }
    for (auto [i, attrs] : llvm::enumerate(outputAttrs))
      func.setResultAttrs(i, attrs.getDictionary(ctx));
    OpBuilder fb = OpBuilder::atBlockEnd(entry);
    for (Operation *op : ops)
      fb.clone(*op, map);
    SmallVector<Value> results;
    for (Value v : outputs)
      results.push_back(map.lookup(v));
    func::ReturnOp::create(fb, ret.getLoc(), results);
  }
  step.erase();
}

void LoomPipelineSplitPass::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<func::FuncOp> steps = getStepFunctions(module);
  if (steps.size() != 1) {
    module.emitError("--loom-pipeline-split: expected one step function "
                     "(func.func with '")
        << LoomDialect::kStepAttrName << "'), found " << steps.size();
    return signalPassFailure();
  }
  func::FuncOp step = steps.front();
  if (failed(checkStep(step)))
    return signalPassFailure();
  ForwardOrder order(step.getBody().front());
  SmallVector<std::string> names;
  FailureOr<SmallVector<int64_t>> starts = boundaryStarts(step, order, names);
  if (failed(starts) || failed(assignStages(step, order, *starts)))
    return signalPassFailure();
  buildFunctions(step);
  // The cut, for whoever plans on it (loom-sac-ilp pins it).
  Builder b(module.getContext());
  module->setAttr(LoomDialect::kPipelineBoundariesAttrName,
                  b.getStrArrayAttr(SmallVector<StringRef>(names.begin(),
                                                           names.end())));
}

} // namespace
