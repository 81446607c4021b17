//===- Units.cpp - loom-fsdp's parameters and fully_shard units -----------===//
//
// Which parameters the step has, which unit (a module-path prefix, as
// `fully_shard(model.layers[i])` names one) gathers and reduces each, and
// which units reshard after forward. The module-path and op queries at the
// end are the pass's own; they answer what the dialect's op classification
// answers for other passes.
//
//===----------------------------------------------------------------------===//

#include "Fsdp.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/GlobPattern.h"

using namespace mlir;
using namespace loom;
using namespace loom::fsdp;

static int64_t product(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The dim `shard-dims` gives parameter `name` (the last matching entry),
/// checked as FSDP2 checks Shard(d): in range, and even for d > 0.
static FailureOr<int64_t> resolveShardDim(ShardingState &s, StringRef name,
                                          RankedTensorType type) {
  int64_t dim = 0;
  for (const auto &[pattern, entryDim] : s.config.shardDims) {
    llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(pattern);
    if (!glob) {
      std::string why = llvm::toString(glob.takeError());
      return s.emitError() << "shard-dims pattern '" << pattern << "': " << why;
    }
    if (!glob->match(name))
      continue;
    dim = entryDim;
    if (dim < 0) {
      ArrayRef<int64_t> shape = type.getShape();
      dim = std::max_element(shape.begin(), shape.end()) - shape.begin();
    }
    if (dim >= type.getRank())
      return s.emitError() << "shard-dims gives parameter '" << name << "' dim "
                           << dim << ", but it has " << type.getRank()
                           << " dims";
  }
  int64_t shardSize = s.mesh().shardSize;
  if (dim > 0 && type.getDimSize(dim) % shardSize != 0)
    return s.emitError() << "parameter '" << name << "' is sharded on dim "
                         << dim << " of size " << type.getDimSize(dim)
                         << ", which does not divide by the shard size "
                         << shardSize << "; as FSDP2, only dim 0 is padded";
  return dim;
}

LogicalResult fsdp::collectParams(ShardingState &s) {
  func::FuncOp func = s.func;
  int64_t shardSize = s.mesh().shardSize;
  llvm::StringMap<unsigned> paramByName;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto role = func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role || role.getValue() != Role::parameter)
      continue;
    if (func.getArgAttr(i, LoomDialect::kShardAttrName))
      return s.emitError() << "argument #" << i << " is already sharded";
    auto name =
        func.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName);
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    if (type.getRank() == 0)
      return s.emitError()
             << "parameter '" << name.getValue()
             << "' is a scalar; FSDP shards dim 0 and cannot shard it";
    ParamInfo info;
    info.argIndex = i;
    info.name = name.getValue();
    info.fullType = type;
    FailureOr<int64_t> dim = resolveShardDim(s, info.name, type);
    if (failed(dim))
      return failure();
    info.shardDim = *dim;
    SmallVector<int64_t> local(type.getShape());
    local[*dim] = (local[*dim] + shardSize - 1) / shardSize;
    info.localType = type.clone(local);
    info.localNumel = product(local);
    paramByName[info.name] = s.params.size();
    s.params.push_back(info);
  }
  if (s.params.empty() && !s.config.pipelined)
    return s.emitError() << "the step has no parameters to shard";
  for (const auto &entry : s.config.shardDims) {
    llvm::Expected<llvm::GlobPattern> glob =
        llvm::GlobPattern::create(entry.first);
    if (!glob) {
      llvm::consumeError(glob.takeError());
      continue;
    }
    if (llvm::none_of(s.params,
                      [&](const ParamInfo &p) { return glob->match(p.name); }))
      return s.emitError() << "shard-dims pattern '" << entry.first
                           << "' matches no parameter";
  }
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto role =
        func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role || role.getValue() != Role::grad)
      continue;
    auto target =
        func.getResultAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName);
    auto it = paramByName.find(target.getValue());
    if (it != paramByName.end())
      s.params[it->second].gradResult = i;
  }
  return success();
}

/// The default units: the model's repeated blocks (getLayerBlocks), found
/// from the numbered components of the parameter names.
static SmallVector<std::string>
collectDefaultUnits(ArrayRef<ParamInfo> params) {
  SmallVector<StringRef> names;
  for (const ParamInfo &param : params)
    names.push_back(param.name);
  return getLayerBlocks(names);
}

/// One unit per prefix, each checked to name some parameter, then the root.
static LogicalResult createUnits(ShardingState &s,
                                 ArrayRef<std::string> prefixes) {
  func::FuncOp func = s.func;
  for (const std::string &prefix : prefixes) {
    if (prefix.empty())
      return s.emitError()
             << "a unit prefix is empty; the root is always a unit";
    // A unit names parameters by their owner module, or uses them under its
    // path (`head` of a weight tied to `tok.weight`).
    bool matches = llvm::any_of(s.params, [&](const ParamInfo &p) {
      if (isInModule(getOwnerModule(p.name), prefix))
        return true;
      return llvm::any_of(func.getArgument(p.argIndex).getUsers(),
                          [&](Operation *user) {
                            return isInModule(getModulePath(user), prefix);
                          });
    });
    // A pipeline rank holds some units; the pass checks that every listed
    // unit is held by some rank.
    if (!matches && s.config.pipelined)
      continue;
    if (!matches)
      return s.emitError()
             << "unit '" << prefix
             << "' matches no parameter (none is owned or used by "
                "a module under it)";
    if (llvm::any_of(s.units,
                     [&](const Unit &u) { return u.prefix == prefix; }))
      return s.emitError() << "unit '" << prefix << "' is listed twice";
    Unit unit;
    unit.prefix = prefix;
    s.units.push_back(unit);
  }
  Unit root;
  root.isRoot = true;
  s.units.push_back(root);
  return success();
}

unsigned ShardingState::unitOfPath(StringRef path) const {
  unsigned best = rootUnit();
  size_t bestLength = 0;
  for (unsigned u = 0, e = rootUnit(); u < e; ++u)
    if (isInModule(path, units[u].prefix) &&
        units[u].prefix.size() >= bestLength) {
      best = u;
      bestLength = units[u].prefix.size();
    }
  return best;
}

/// A parameter belongs to the unit of its owner module, unless forward ops
/// of several units use it directly (a tied weight): then to the first of
/// them in program order.
static unsigned assignUnit(ShardingState &s, const ParamInfo &info,
                           ArrayRef<OpOperand *> uses) {
  SmallVector<Operation *> users;
  for (OpOperand *use : uses)
    users.push_back(use->getOwner());
  llvm::sort(users,
             [](Operation *a, Operation *c) { return a->isBeforeInBlock(c); });
  llvm::SmallSetVector<unsigned, 2> forwardUnits;
  for (Operation *user : users)
    if (getPhase(user) == Phase::forward)
      forwardUnits.insert(s.unitOfPath(getModulePath(user)));
  if (forwardUnits.size() > 1)
    return forwardUnits.front();
  return s.unitOfPath(getOwnerModule(info.name));
}

/// Applies `unit-settings` over the defaults the global options give,
/// each entry to every unit its pattern matches, later entries last.
static LogicalResult applyUnitSettings(ShardingState &s) {
  using Key = UnitSetting::Key;
  ReshardAfterForward raf = s.config.reshardAfterForward;
  for (Unit &unit : s.units) {
    unit.reshard = raf == ReshardAfterForward::True ||
                   raf == ReshardAfterForward::Group ||
                   (raf == ReshardAfterForward::Auto && !unit.isRoot);
    unit.keepAfterBackward = !s.config.reshardAfterBackward;
  }
  // Whether each unit's all-reduce was set, to follow gradient-sync if not.
  SmallVector<std::optional<bool>> allReduce(s.units.size());
  for (const UnitSetting &setting : s.config.unitSettings) {
    llvm::Expected<llvm::GlobPattern> glob =
        llvm::GlobPattern::create(setting.pattern);
    if (!glob) {
      std::string why = llvm::toString(glob.takeError());
      return s.emitError() << "unit-settings entry '" << setting.text
                           << "': bad pattern: " << why;
    }
    bool matched = false;
    for (auto [u, unit] : llvm::enumerate(s.units)) {
      if (!glob->match(unit.label()))
        continue;
      matched = true;
      switch (setting.key) {
      case Key::ReshardAfterForward:
        unit.reshard = setting.value.value_or(!unit.isRoot);
        break;
      case Key::ReshardAfterBackward:
        unit.keepAfterBackward = !*setting.value;
        break;
      case Key::GradientSync:
        unit.syncEveryMicrobatch = *setting.value;
        break;
      case Key::AllReduce:
        allReduce[u] = *setting.value;
        break;
      case Key::UnshardInBackward:
        unit.unshardInBackward = *setting.value;
        break;
      }
    }
    if (!matched) {
      auto diag = s.emitError() << "unit-settings entry '" << setting.text
                                << "' matches no unit; the units are ";
      llvm::interleaveComma(s.units, diag,
                            [&](const Unit &unit) { diag << unit.label(); });
      return diag;
    }
  }
  for (auto [u, unit] : llvm::enumerate(s.units)) {
    unit.allReduceEveryMicrobatch =
        allReduce[u].value_or(unit.syncEveryMicrobatch);
    // FSDP2's set_requires_all_reduce only holds back the all-reduce of a
    // reduction that runs; without one there is nothing to all-reduce.
    if (unit.allReduceEveryMicrobatch && !unit.syncEveryMicrobatch)
      return s.emitError()
             << "unit '" << unit.label()
             << "' has all-reduce=every but gradient-sync=last: a "
                "microbatch that does not reduce-scatter has nothing to "
                "all-reduce";
  }
  return success();
}

LogicalResult fsdp::formUnits(ShardingState &s) {
  SmallVector<std::string> prefixes(s.config.unitPrefixes);
  if (prefixes.empty())
    prefixes = collectDefaultUnits(s.params);
  if (failed(createUnits(s, prefixes)))
    return failure();

  s.uses.assign(s.params.size(), {});
  for (auto [p, info] : llvm::enumerate(s.params)) {
    for (OpOperand &use : s.func.getArgument(info.argIndex).getUses())
      s.uses[p].push_back(&use);
    info.unit = assignUnit(s, info, s.uses[p]);
    s.units[info.unit].params.push_back(p);
  }

  if (failed(applyUnitSettings(s)))
    return failure();
  for (Unit &unit : s.units) {
    if (unit.params.empty())
      continue;
    Type dtype = s.params[unit.params.front()].fullType.getElementType();
    for (unsigned p : unit.params) {
      const ParamInfo &info = s.params[p];
      if (info.fullType.getElementType() != dtype)
        return s.emitError()
               << "unit '" << unit.label() << "' mixes parameter dtypes "
               << dtype << " and " << info.fullType.getElementType() << " ('"
               << info.name << "'); FSDP needs one dtype per unit";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Local queries
//===----------------------------------------------------------------------===//

bool fsdp::isRecomputable(Operation *op) {
  auto aten = dyn_cast<AtenOp>(op);
  if (!aten || op->getNumOperands() == 0 || op->getNumRegions() != 0)
    return false;
  // Random ops draw new numbers each call, so they are never recomputed;
  // in-place ops would apply twice; an nn.SyncBatchNorm's statistics come
  // from a collective.
  return !isRandomAtenOp(aten) && !isInPlaceAtenOp(aten) &&
         !aten->hasAttr(LoomDialect::kSyncBatchNormAttrName);
}
