//===- Remat.cpp - loom-remat: recompute forward ops in backward ----------===//

#include "loom/Transforms/Remat.h"

#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

namespace loom {
#define GEN_PASS_DEF_LOOMREMAT
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

//===----------------------------------------------------------------------===//
// Building the regions
//===----------------------------------------------------------------------===//

bool loom::isRecomputable(Operation *op) {
  if (!isa<AtenOp>(op) || op->getNumRegions() != 0)
    return false;
  if (isRandomAtenOp(op) || isInPlaceAtenOp(op))
    return false;
  // An nn.SyncBatchNorm's statistics come from a collective, which a
  // recompute region cannot hold: its outputs are saved.
  if (op->hasAttr(LoomDialect::kSyncBatchNormAttrName))
    return false;
  return llvm::all_of(op->getResultTypes(),
                      [](Type t) { return isa<RankedTensorType>(t); });
}

static bool isBackward(Operation *op) {
  std::optional<Phase> phase = getPhase(op);
  return phase && *phase == Phase::backward;
}

/// Ops that must keep their outputs because an in-place op writes the
/// storage they produce or read: run again in backward, they would see (or
/// make) the value from the wrong side of the write. The written value is
/// followed up through the views it was taken from to its base.
static void collectOverwritten(Block &body,
                               SmallPtrSetImpl<Operation *> &pinned) {
  llvm::SmallPtrSet<Value, 8> written;
  for (Operation &op : body) {
    if (!isInPlaceAtenOp(&op) || op.getNumOperands() == 0)
      continue;
    Value v = op.getOperand(0);
    while (written.insert(v).second) {
      Operation *def = v.getDefiningOp();
      if (!def || !isViewAtenOp(def) || def->getNumOperands() == 0)
        break;
      v = def->getOperand(0);
    }
  }
  for (Value v : written) {
    if (Operation *def = v.getDefiningOp())
      pinned.insert(def);
    for (Operation *user : v.getUsers())
      pinned.insert(user);
  }
}

namespace {
/// One group's region, planned on the original step before any region is
/// built, so that no group sees another's region as a backward use.
struct RegionPlan {
  const RecomputeGroup *group;
  /// The recomputed ops the region runs, in program order.
  SmallVector<Operation *> body;
  /// Backward operands that read a value of `body`.
  SmallVector<OpOperand *> backwardUses;
  /// The backward op the region goes before.
  Operation *firstUser = nullptr;
};
} // namespace

/// Plans the region of `group`; `body` stays empty when backward reads
/// nothing it recomputes.
static RegionPlan planRegion(const RecomputeGroup &group,
                             const DenseMap<Operation *, unsigned> &position,
                             const SmallPtrSetImpl<Operation *> &pinned) {
  RegionPlan plan;
  plan.group = &group;
  llvm::SmallPtrSet<Operation *, 32> recomputed;
  for (Operation *op : group.ops)
    if (!group.saved.contains(op) && !pinned.contains(op) && isRecomputable(op))
      recomputed.insert(op);

  SmallVector<Operation *> worklist;
  llvm::SmallPtrSet<Operation *, 32> needed;
  SmallVector<Operation *> ordered(group.ops);
  llvm::sort(ordered, [&](Operation *a, Operation *b) {
    return position.lookup(a) < position.lookup(b);
  });
  // An alias of a value the group saves keeps that value's storage alive
  // whether backward reads the forward's alias or takes it again, so it is
  // not taken again: a region would move backward's reads from what the
  // rest of the pipeline derives from the forward's alias (FSDP's bf16 cast
  // of an f32 activation) to the saved value itself. (Aliases of values
  // from outside the group, parameters included, are taken again as
  // checkpoint_wrapper does.)
  llvm::SmallPtrSet<Operation *, 32> inGroup(group.ops.begin(),
                                             group.ops.end());
  for (Operation *op : ordered) {
    if (!recomputed.contains(op))
      continue;
    Value base = getAliasedOperand(op);
    Operation *def = base ? base.getDefiningOp() : nullptr;
    if (def && inGroup.contains(def) && !recomputed.contains(def))
      recomputed.erase(op);
  }
  for (Operation *op : ordered) {
    if (!recomputed.contains(op))
      continue;
    for (Value result : op->getResults())
      for (OpOperand &use : result.getUses())
        if (isBackward(use.getOwner())) {
          plan.backwardUses.push_back(&use);
          Operation *user = use.getOwner();
          if (!plan.firstUser ||
              position.lookup(user) < position.lookup(plan.firstUser))
            plan.firstUser = user;
          if (needed.insert(op).second)
            worklist.push_back(op);
        }
  }
  // The recomputed ops those read, and so on: a saved op or one outside the
  // group is an input instead.
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && recomputed.contains(def) && needed.insert(def).second)
        worklist.push_back(def);
    }
  }
  for (Operation *op : ordered)
    if (needed.contains(op))
      plan.body.push_back(op);
  // Uses in the order of their users, so that the rewrite is deterministic.
  llvm::stable_sort(plan.backwardUses, [&](OpOperand *a, OpOperand *b) {
    return position.lookup(a->getOwner()) < position.lookup(b->getOwner());
  });
  return plan;
}

/// "loom.remat:layers.0" around the first backward user's location.
static Location regionLoc(const RegionPlan &plan) {
  MLIRContext *ctx = plan.firstUser->getContext();
  StringRef module = plan.group->module;
  return NameLoc::get(
      StringAttr::get(ctx, "loom.remat:" +
                               (module.empty() ? StringRef("<root>") : module)),
      plan.firstUser->getLoc());
}

static LogicalResult
buildRegion(const RegionPlan &plan,
            const DenseMap<Operation *, unsigned> &position) {
  MLIRContext *ctx = plan.firstUser->getContext();
  llvm::SmallPtrSet<Operation *, 32> inBody(plan.body.begin(), plan.body.end());
  llvm::SetVector<Value> inputs;
  for (Operation *op : plan.body)
    for (Value operand : op->getOperands())
      if (!inBody.contains(operand.getDefiningOp()))
        inputs.insert(operand);
  unsigned at = position.lookup(plan.firstUser);
  for (Value input : inputs) {
    Operation *def = input.getDefiningOp();
    if (def && position.lookup(def) >= at)
      return def->emitOpError("is read by the recompute region of '")
             << plan.group->module
             << "' but comes after the backward op that needs the region "
                "first; recompute each microbatch on its own";
  }
  llvm::SetVector<Value> yielded;
  for (OpOperand *use : plan.backwardUses)
    yielded.insert(use->get());
  // Results in the order of the ops that produce them, as the body runs.
  SmallVector<Value> results(yielded.begin(), yielded.end());
  llvm::stable_sort(results, [&](Value a, Value b) {
    Operation *da = a.getDefiningOp(), *db = b.getDefiningOp();
    if (da != db)
      return position.lookup(da) < position.lookup(db);
    return cast<OpResult>(a).getResultNumber() <
           cast<OpResult>(b).getResultNumber();
  });

  OpBuilder b(plan.firstUser);
  auto region =
      RecomputeOp::create(b, regionLoc(plan), plan.group->module,
                          ValueRange(results).getTypes(), inputs.getArrayRef());
  region->setAttr(LoomDialect::kModuleAttrName,
                  StringAttr::get(ctx, plan.group->module));
  region->setAttr(LoomDialect::kPhaseAttrName,
                  PhaseAttr::get(ctx, Phase::backward));
  if (Attribute microbatch =
          plan.firstUser->getAttr(LoomDialect::kMicrobatchAttrName))
    region->setAttr(LoomDialect::kMicrobatchAttrName, microbatch);

  Block &block = region.getBodyBlock();
  IRMapping map;
  map.map(inputs.getArrayRef(), block.getArguments());
  OpBuilder inner = OpBuilder::atBlockEnd(&block);
  for (Operation *op : plan.body)
    inner.clone(*op, map);
  SmallVector<Value> values;
  for (Value v : results)
    values.push_back(map.lookup(v));
  YieldOp::create(inner, region.getLoc(), values);

  DenseMap<Value, Value> replacement;
  for (auto [original, result] : llvm::zip(results, region.getResults()))
    replacement[original] = result;
  for (OpOperand *use : plan.backwardUses)
    use->set(replacement.lookup(use->get()));
  return success();
}

LogicalResult loom::applyRecompute(func::FuncOp step,
                                   ArrayRef<RecomputeGroup> groups) {
  Block &body = step.getBody().front();
  DenseMap<Operation *, unsigned> position;
  unsigned next = 0;
  for (Operation &op : body)
    position[&op] = next++;

  DenseMap<Operation *, unsigned> groupOf;
  for (auto [i, group] : llvm::enumerate(groups)) {
    for (Operation *op : group.ops) {
      if (op->getBlock() != &body)
        return op->emitOpError("is not in the body of step '")
               << step.getSymName() << "' and cannot be recomputed there";
      std::optional<Phase> phase = getPhase(op);
      if (!phase || *phase != Phase::forward)
        return op->emitOpError("is not a forward op; only forward ops are "
                               "recomputed (group '")
               << group.module << "')";
      auto [it, inserted] = groupOf.try_emplace(op, i);
      if (!inserted && it->second != i)
        return op->emitOpError("is in two recompute groups, '")
               << groups[it->second].module << "' and '" << group.module << "'";
    }
  }

  llvm::SmallPtrSet<Operation *, 8> pinned;
  collectOverwritten(body, pinned);
  SmallVector<RegionPlan> plans;
  for (const RecomputeGroup &group : groups) {
    RegionPlan plan = planRegion(group, position, pinned);
    if (!plan.body.empty())
      plans.push_back(std::move(plan));
  }

  // Forward ops whose results backward no longer reads may now be dead.
  SmallVector<Operation *> mayDie;
  for (const RegionPlan &plan : plans) {
    if (failed(buildRegion(plan, position)))
      return failure();
    mayDie.append(plan.body.begin(), plan.body.end());
  }
  llvm::sort(mayDie, [&](Operation *a, Operation *b) {
    return position.lookup(a) > position.lookup(b);
  });
  // Latest first, so that an op whose only reader dies dies after it.
  for (Operation *op : mayDie)
    if (op->use_empty())
      op->erase();
  return success();
}

//===----------------------------------------------------------------------===//
// The pass: what each mode saves
//===----------------------------------------------------------------------===//

/// The ops torchtitan's op-level SAC policy saves: those whose time is their
/// FLOPs (matrix products, attention, convolution), not their bytes.
static bool isSavedBySelectivePolicy(StringRef kernel) {
  StringRef name = stripAtenOverload(kernel);
  if (!name.consume_front("aten::") || name.ends_with("_backward"))
    return false;
  if (llvm::StringSwitch<bool>(name)
          .Cases({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear"}, true)
          .Default(false))
    return true;
  // scaled_dot_product_attention and its kernels (_flash, _efficient,
  // _cudnn, _for_cpu, ...).
  if (name.contains("scaled_dot_product"))
    return true;
  // convolution, _convolution, conv2d, conv_transpose2d, cudnn_convolution,
  // mkldnn_convolution, _slow_conv2d_forward, ...; not _convert_*.
  StringRef bare = name.ltrim('_');
  if (bare.contains("convert"))
    return false;
  return bare.starts_with("conv") || bare.contains("_conv");
}

namespace {
struct LoomRematPass : public loom::impl::LoomRematBase<LoomRematPass> {
  using LoomRematBase::LoomRematBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // A stage function or a scheduled rank's step is no longer the whole
    // step: its forward values come from and go to other functions, so a
    // region could not see what backward reads. Silently doing nothing here
    // would train without the recompute the user asked for.
    if (rematMode != RematMode::None &&
        (func->hasAttr(LoomDialect::kPipelineStageAttrName) ||
         func->hasAttr(LoomDialect::kPipelineActionsAttrName))) {
      func.emitOpError("--loom-remat: '")
          << func.getSymName()
          << "' is a pipeline stage or a scheduled pipeline rank; run "
             "loom-remat before loom-pipeline-split";
      return signalPassFailure();
    }
    if (!func->hasAttr(LoomDialect::kStepAttrName))
      return markAllAnalysesPreserved();
    if (failed(checkOptions(func)))
      return signalPassFailure();
    if (rematMode == RematMode::None)
      return markAllAnalysesPreserved();
    FailureOr<SmallVector<RecomputeGroup>> groups =
        rematMode == RematMode::Captured ? capturedGroups(func)
                                         : blockGroups(func);
    if (failed(groups))
      return signalPassFailure();
    warnUnmatchedSaveOps(func, *groups);
    if (failed(applyRecompute(func, *groups)))
      signalPassFailure();
  }

  /// A save-ops entry that names no op of the recomputed modules saves
  /// nothing: most likely a misspelling, but a list shared across models
  /// (torchtitan's) names ops some models lack, so a warning, not an error.
  void warnUnmatchedSaveOps(func::FuncOp func,
                            ArrayRef<RecomputeGroup> groups) {
    for (const std::string &name : rematSaveOps) {
      bool matched = llvm::any_of(groups, [&](const RecomputeGroup &group) {
        return llvm::any_of(group.ops,
                            [&](Operation *op) { return isNamedBy(op, name); });
      });
      if (!matched)
        func.emitWarning("--loom-remat: save-ops entry '")
            << name
            << "' matches no forward op of the recomputed modules; it "
               "saves nothing";
    }
  }

  InFlightDiagnostic emitRematError(func::FuncOp func) {
    return func.emitOpError("--loom-remat: ");
  }

  LogicalResult checkOptions(func::FuncOp func) {
    bool blocks =
        rematMode == RematMode::Full || rematMode == RematMode::Selective;
    if (!rematModules.empty() && !blocks)
      return emitRematError(func)
             << "modules applies to mode full and selective only";
    if (!rematSaveOps.empty() && rematMode == RematMode::None)
      return emitRematError(func) << "save-ops needs a mode other than none";
    for (const std::string &name : rematSaveOps)
      if (!StringRef(name).starts_with("aten::") || name.size() == 6)
        return emitRematError(func)
               << "save-ops entry '" << name
               << "' is not an ATen op name (aten::NAME or "
                  "aten::NAME.OVERLOAD)";
    return success();
  }

  /// Whether `op` is the ATen op a save-ops entry `name` names (with or
  /// without its overload).
  static bool isNamedBy(Operation *op, StringRef name) {
    auto aten = dyn_cast<AtenOp>(op);
    return aten && (aten.getKernel() == name ||
                    stripAtenOverload(aten.getKernel()) == name);
  }

  /// Whether `op` is an ATen op the user listed in save-ops.
  bool isListedSaved(Operation *op) {
    return llvm::any_of(rematSaveOps, [&](const std::string &name) {
      return isNamedBy(op, name);
    });
  }

  /// Whether the mode or save-ops keeps the outputs of `op`.
  bool isSavedByPolicy(Operation *op) {
    if (isListedSaved(op))
      return true;
    auto aten = dyn_cast<AtenOp>(op);
    if (aten && rematMode == RematMode::Selective &&
        isSavedBySelectivePolicy(aten.getKernel()))
      return true;
    auto policy =
        op->getAttrOfType<AcPolicyAttr>(LoomDialect::kAcPolicyAttrName);
    return rematMode == RematMode::Captured && policy &&
           (policy.getValue() == AcPolicy::must_save ||
            policy.getValue() == AcPolicy::prefer_save);
  }

  /// Saves what the policy keeps, then each group's outputs that stay alive
  /// for backward anyway: those backward ops outside the group's module
  /// read, and those another group's region recomputes from. Decided on the
  /// policy's choice alone, so the order of the groups does not matter.
  void chooseSaved(MutableArrayRef<RecomputeGroup> groups) {
    DenseMap<Operation *, unsigned> groupOf;
    for (auto [i, group] : llvm::enumerate(groups))
      for (Operation *op : group.ops) {
        groupOf[op] = i;
        if (isSavedByPolicy(op))
          group.saved.insert(op);
      }
    auto recomputedElsewhere = [&](Operation *user, unsigned i) {
      auto it = groupOf.find(user);
      return it != groupOf.end() && it->second != i &&
             !groups[it->second].saved.contains(user) && isRecomputable(user);
    };
    SmallVector<std::pair<unsigned, Operation *>> outputs;
    for (auto [i, group] : llvm::enumerate(groups)) {
      for (Operation *op : group.ops) {
        bool alive = false;
        for (Operation *user : op->getUsers())
          alive |= (isBackward(user) &&
                    !isInModule(getModulePath(user), group.module)) ||
                   recomputedElsewhere(user, i);
        if (alive)
          outputs.push_back({i, op});
      }
    }
    for (auto [i, op] : outputs)
      groups[i].saved.insert(op);
  }

  /// The forward ops of `body`, keyed by the group they fall in and their
  /// microbatch (a step of loom-accumulate-gradients recomputes each
  /// microbatch in its own region), in order of first appearance.
  using GroupKey = std::pair<int64_t, int64_t>;

  static int64_t microbatchOf(Operation *op) {
    return getMicrobatch(op).value_or(-1);
  }

  FailureOr<SmallVector<RecomputeGroup>> blockGroups(func::FuncOp func) {
    SmallVector<std::string> prefixes(rematModules.begin(), rematModules.end());
    if (prefixes.empty()) {
      SmallVector<StringRef> params;
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
        auto role =
            func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
        auto name =
            func.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName);
        if (role && role.getValue() == Role::parameter && name)
          params.push_back(name.getValue());
      }
      prefixes = getLayerBlocks(params);
      if (prefixes.empty())
        return emitRematError(func)
               << "the step has no repeated blocks (such as 'layers.N') to "
                  "checkpoint; name the modules with modules=... "
                  "(loom-compile: --remat-modules=...)";
    }
    llvm::StringSet<> seen;
    for (const std::string &prefix : prefixes) {
      if (prefix.empty())
        return emitRematError(func)
               << "a module prefix is empty; checkpointing the whole model "
                  "recomputes nothing backward could not";
      if (!seen.insert(prefix).second)
        return emitRematError(func)
               << "module '" << prefix << "' is listed twice";
    }

    llvm::MapVector<GroupKey, RecomputeGroup> groups;
    llvm::DenseSet<unsigned> used;
    for (Operation &op : func.getBody().front()) {
      std::optional<Phase> phase = getPhase(&op);
      if (!phase || *phase != Phase::forward)
        continue;
      StringRef path = getModulePath(&op);
      int64_t best = -1;
      for (auto [i, prefix] : llvm::enumerate(prefixes))
        if (isInModule(path, prefix) &&
            (best < 0 || prefix.size() > prefixes[best].size()))
          best = i;
      if (best < 0)
        continue;
      used.insert(best);
      RecomputeGroup &group = groups[{best, microbatchOf(&op)}];
      group.module = prefixes[best];
      group.ops.push_back(&op);
    }
    for (auto [i, prefix] : llvm::enumerate(prefixes))
      if (!used.contains(i))
        return emitRematError(func)
               << "module '" << prefix << "' has no forward ops";
    SmallVector<RecomputeGroup> result;
    for (auto &[key, group] : groups)
      result.push_back(std::move(group));
    chooseSaved(result);
    return result;
  }

  FailureOr<SmallVector<RecomputeGroup>> capturedGroups(func::FuncOp func) {
    llvm::MapVector<GroupKey, RecomputeGroup> groups;
    for (Operation &op : func.getBody().front()) {
      auto id = op.getAttrOfType<IntegerAttr>(LoomDialect::kAcRegionAttrName);
      std::optional<Phase> phase = getPhase(&op);
      if (!id || !phase || *phase != Phase::forward)
        continue;
      groups[{id.getInt(), microbatchOf(&op)}].ops.push_back(&op);
    }
    if (groups.empty())
      return emitRematError(func)
             << "mode captured needs forward ops tagged with '"
             << LoomDialect::kAcRegionAttrName
             << "' (capture records them for torch.utils.checkpoint "
                "regions); none is";
    SmallVector<RecomputeGroup> result;
    for (auto &[key, group] : groups) {
      SmallVector<StringRef> paths;
      for (Operation *op : group.ops)
        paths.push_back(getModulePath(op));
      group.module = getCommonModule(paths).str();
      result.push_back(std::move(group));
    }
    chooseSaved(result);
    return result;
  }
};
} // namespace
