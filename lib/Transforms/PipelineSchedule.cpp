//===- PipelineSchedule.cpp - One step per pipeline rank from a schedule -===//
//
// loom-pipeline-schedule: instantiates a pipeline schedule over the stage
// functions of loom-pipeline-split. Each rank gets one step whose body is
// its actions in order: stage functions copied per microbatch, sends right
// after the value is made, receives posted where the schedule receives,
// gradients accumulated and scaled at REDUCE_GRAD (docs/pipeline.md).
//
//===----------------------------------------------------------------------===//

#include "loom/Transforms/Passes.h"
#include "loom/Transforms/Pipeline/Schedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"

namespace loom {
#define GEN_PASS_DEF_LOOMPIPELINESCHEDULE
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
namespace pp = loom::pipeline;

namespace {

/// The stage functions and how their named values connect.
struct StageProgram {
  /// [stage] -> forward, backward.
  SmallVector<std::pair<func::FuncOp, func::FuncOp>> stages;
  /// [stage] -> the weight-gradient part of the backward, when
  /// loom-pipeline-split cut it (`second` is then the input-gradient part).
  SmallVector<func::FuncOp> weights;

  SmallVector<func::FuncOp> functionsOf(int64_t s) const {
    SmallVector<func::FuncOp> fs = {stages[s].first, stages[s].second};
    if (weights[s])
      fs.push_back(weights[s]);
    return fs;
  }
  /// The stage that makes each named value, its type and whether a forward
  /// function makes it.
  llvm::StringMap<int64_t> producer;
  llvm::StringMap<Type> type;
  llvm::StringMap<bool> madeInForward;
  /// The stages that read each named value (besides its producer).
  llvm::StringMap<SmallVector<int64_t>> consumers;
  /// Step-level arguments (by `loom.name`): type and attributes, in first
  /// appearance order over the stages.
  llvm::MapVector<StringRef, std::pair<Type, DictionaryAttr>> named;
  /// The stage that makes each parameter's gradient.
  llvm::StringMap<int64_t> gradStage;
  /// The stages that read each step-level argument (parameters, buffers,
  /// batch inputs), in stage order.
  llvm::StringMap<SmallVector<int64_t>> argStages;
};

StringRef valueName(func::FuncOp f, unsigned i, bool result) {
  auto key = result ? f.getResultAttrOfType<StringAttr>(
                          i, LoomDialect::kPipelineValueAttrName)
                    : f.getArgAttrOfType<StringAttr>(
                          i, LoomDialect::kPipelineValueAttrName);
  return key ? key.getValue() : StringRef();
}

/// Finds the stage functions and checks that they connect: every named
/// value is made once and read with the same type.
FailureOr<StageProgram> collectStages(ModuleOp module) {
  StageProgram p;
  SmallVector<func::FuncOp> funcs;
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr(LoomDialect::kPipelineStageAttrName))
      funcs.push_back(f);
  if (funcs.empty())
    return module.emitError("--loom-pipeline-schedule: no stage functions "
                            "(func.func with '")
           << LoomDialect::kPipelineStageAttrName
           << "'); run loom-pipeline-split first";
  int64_t numStages = 0;
  for (func::FuncOp f : funcs)
    numStages = std::max<int64_t>(
        numStages,
        f->getAttrOfType<IntegerAttr>(LoomDialect::kPipelineStageAttrName)
                .getInt() +
            1);
  p.stages.resize(numStages);
  p.weights.resize(numStages);
  for (func::FuncOp f : funcs) {
    int64_t s = f->getAttrOfType<IntegerAttr>(
                     LoomDialect::kPipelineStageAttrName)
                    .getInt();
    auto phase = f->getAttrOfType<PhaseAttr>(LoomDialect::kPhaseAttrName);
    bool forward = !phase || phase.getValue() == Phase::forward;
    auto part =
        f->getAttrOfType<StringAttr>(LoomDialect::kPipelinePartAttrName);
    bool weight = part && part.getValue() == "weight";
    func::FuncOp &slot = forward  ? p.stages[s].first
                         : weight ? p.weights[s]
                                  : p.stages[s].second;
    if (slot)
      return f.emitOpError("is a second ")
             << (forward ? "forward" : "backward") << " function of stage "
             << s;
    slot = f;
  }
  for (auto [s, fb] : llvm::enumerate(p.stages)) {
    if (!fb.first || !fb.second)
      return module.emitError("--loom-pipeline-schedule: stage ")
             << s << " has no " << (fb.first ? "backward" : "forward")
             << " function";
    for (func::FuncOp f : p.functionsOf(s)) {
      for (unsigned i = 0, e = f.getNumResults(); i < e; ++i) {
        StringRef key = valueName(f, i, /*result=*/true);
        if (!key.empty()) {
          if (!p.producer.try_emplace(key, s).second)
            return f.emitOpError("makes '") << key << "', which another "
                                            << "stage function makes too";
          p.type[key] = f.getResultTypes()[i];
          p.madeInForward[key] = f == fb.first;
        }
        auto role =
            f.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
        auto target =
            f.getResultAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName);
        if (role && role.getValue() == Role::grad && target)
          p.gradStage[target.getValue()] = s;
      }
      for (unsigned i = 0, e = f.getNumArguments(); i < e; ++i) {
        if (auto name = f.getArgAttrOfType<StringAttr>(
                i, LoomDialect::kNameAttrName)) {
          p.named.insert({name.getValue(),
                          {f.getArgumentTypes()[i], f.getArgAttrDict(i)}});
          auto &holders = p.argStages[name.getValue()];
          if (holders.empty() || holders.back() != int64_t(s))
            holders.push_back(s);
        }
      }
    }
  }
  for (int64_t s = 0; s < numStages; ++s)
    for (func::FuncOp f : p.functionsOf(s))
      for (unsigned i = 0, e = f.getNumArguments(); i < e; ++i) {
        StringRef key = valueName(f, i, /*result=*/false);
        if (key.empty())
          continue;
        if (!p.producer.count(key))
          return f.emitOpError("reads '")
                 << key << "', which no stage function makes";
        if (p.type.lookup(key) != f.getArgumentTypes()[i])
          return f.emitOpError("reads '") << key << "' as "
                                          << f.getArgumentTypes()[i]
                                          << " but it is made as "
                                          << p.type.lookup(key);
        auto &readers = p.consumers[key];
        if (int64_t(s) != p.producer[key] && !llvm::is_contained(readers, s))
          readers.push_back(s);
      }
  return p;
}

/// The ops of backward function `f` to run before it waits for any of the
/// `inFlight` arguments: recompute regions that do not depend on them, with
/// the ops of `f` they read. A region's values are made while the gradient
/// is still in transfer instead of after it arrives. Hoisted are the
/// regions whose values live to the end of the function anyway: every one
/// of an input-gradient part (the weight part reads what they recompute),
/// and the first of a full backward (read right away).
static llvm::SmallPtrSet<Operation *, 16>
regionsBeforeWaits(func::FuncOp f,
                   const llvm::SmallDenseMap<Value, StringRef> &inFlight,
                   bool everyRegion) {
  llvm::SmallPtrSet<Operation *, 16> hoisted;
  if (inFlight.empty())
    return hoisted;
  Block &body = f.getBody().front();
  // Ops that read an in-flight value, directly or through another op.
  llvm::SmallPtrSet<Operation *, 32> waits;
  auto readsInFlight = [&](Operation *op) {
    bool reads = false;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        Operation *def = operand.getDefiningOp();
        reads |= inFlight.count(operand) ||
                 (def && def->getBlock() == &body && waits.contains(def));
      }
    });
    return reads;
  };
  for (Operation &op : body.without_terminator()) {
    if (readsInFlight(&op)) {
      waits.insert(&op);
      continue;
    }
    if (!isa<RecomputeOp>(op))
      continue;
    SmallVector<Operation *> worklist = {&op};
    while (!worklist.empty()) {
      Operation *next = worklist.pop_back_val();
      if (!hoisted.insert(next).second)
        continue;
      for (Value operand : next->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && def->getBlock() == &body)
          worklist.push_back(def);
    }
    if (!everyRegion)
      break;
  }
  return hoisted;
}

/// A transfer's identity, which gives sender and receiver the same tag:
/// (value, microbatch, receiving rank).
using TransferId = std::tuple<std::string, int64_t, int64_t>;

/// Builds the step of one pipeline rank by running its actions in order.
class RankBuilder {
public:
  RankBuilder(const StageProgram &program, const pp::ScheduleSpec &spec,
              MeshOp mesh, int64_t rank, std::map<TransferId, int64_t> &tags)
      : ctx(mesh.getContext()), program(program), spec(spec), mesh(mesh),
        rank(rank), tags(tags), b(ctx) {}

  /// Creates `@name` after `after`, runs `actions` into it.
  FailureOr<func::FuncOp> build(ArrayRef<pp::Action> actions, StringRef name,
                                Operation *after);

private:
  void addArguments(Block *entry);
  LogicalResult runCompute(const pp::Action &action);
  void runFunction(func::FuncOp f, int64_t stage, int64_t mb, bool forward);
  void postReceives(int64_t stage, bool forward, int64_t mb);
  void postReceive(StringRef key, int64_t mb);
  Value valueHere(StringRef key, int64_t mb);
  void send(StringRef key, int64_t mb, Value value, ArrayRef<int64_t> dsts,
            Phase phase, std::optional<int64_t> forwardStage = std::nullopt);
  void waitForwardSends(int64_t stage, int64_t mb, ArrayRef<int64_t> peers);
  void reduceGrads(int64_t stage);
  Value batchSlice(StringRef name, int64_t mb);
  AtenOp aten(StringRef kernel, Type type, ValueRange inputs,
              ArrayRef<Attribute> args, Phase phase);
  void tag(Operation *op, Phase phase, std::optional<int64_t> mb);
  NamedAttrList p2pAttrs(int64_t peer, int64_t tag);
  int64_t tagOf(StringRef key, int64_t mb, int64_t dst);
  SmallVector<int64_t> remoteReaders(StringRef key);

  MLIRContext *ctx;
  const StageProgram &program;
  const pp::ScheduleSpec &spec;
  MeshOp mesh;
  int64_t rank;
  std::map<TransferId, int64_t> &tags;
  OpBuilder b;
  Location loc = UnknownLoc::get(ctx);

  llvm::MapVector<StringRef, BlockArgument> args;
  /// Batch arguments and their batch dims (`loom.batch_dim`).
  SmallVector<std::pair<BlockArgument, int64_t>> batchArgs;
  /// (value, microbatch) -> the value on this rank; receives posted and not
  /// yet waited for; batch slices.
  std::map<std::pair<std::string, int64_t>, Value> env, pending, slices;
  SmallVector<Value> sendFutures;
  /// Sends of stage s's forward on microbatch k: (receiving rank, future).
  std::map<std::pair<int64_t, int64_t>,
           SmallVector<std::pair<int64_t, Value>>>
      forwardSends;
  SmallVector<Value> losses;
  llvm::MapVector<StringRef, Value> gradSums, finalGrads;
};

int64_t RankBuilder::tagOf(StringRef key, int64_t mb, int64_t dst) {
  auto [it, inserted] =
      tags.try_emplace(TransferId(key.str(), mb, dst), tags.size());
  return it->second;
}

void RankBuilder::tag(Operation *op, Phase phase, std::optional<int64_t> mb) {
  op->setAttr(LoomDialect::kModuleAttrName, b.getStringAttr(""));
  op->setAttr(LoomDialect::kPhaseAttrName, PhaseAttr::get(ctx, phase));
  if (mb)
    op->setAttr(LoomDialect::kMicrobatchAttrName, b.getI64IntegerAttr(*mb));
}

AtenOp RankBuilder::aten(StringRef kernel, Type type, ValueRange inputs,
                         ArrayRef<Attribute> argList, Phase phase) {
  auto op = AtenOp::create(b, loc, TypeRange{type}, b.getStringAttr(kernel),
                           inputs, b.getArrayAttr(argList),
                           b.getDictionaryAttr({}), ArrayAttr());
  tag(op, phase, std::nullopt);
  return op;
}

NamedAttrList RankBuilder::p2pAttrs(int64_t peer, int64_t tagValue) {
  NamedAttrList attrs;
  attrs.set("mesh", FlatSymbolRefAttr::get(mesh.getSymNameAttr()));
  attrs.set("axes", b.getStrArrayAttr({"pp"}));
  attrs.set("peer", b.getI64IntegerAttr(peer));
  attrs.set("tag", b.getI64IntegerAttr(tagValue));
  return attrs;
}

SmallVector<int64_t> RankBuilder::remoteReaders(StringRef key) {
  SmallVector<int64_t> ranks;
  for (int64_t consumer : program.consumers.lookup(key)) {
    int64_t dst = pp::stageToRank(spec, consumer);
    if (dst != rank && !llvm::is_contained(ranks, dst))
      ranks.push_back(dst);
  }
  return ranks;
}

Value RankBuilder::batchSlice(StringRef name, int64_t mb) {
  Value &slice = slices[{name.str(), mb}];
  if (slice)
    return slice;
  std::optional<int64_t> dim = getBatchDim(program.named.lookup(name).second);
  if (!dim) // every microbatch takes an unbatched input whole
    return slice = args.lookup(name);
  // The argument still has the microbatch type; it is widened at the end.
  return slice = buildMicrobatchSlice(b, loc, args.lookup(name), *dim, mb);
}

void RankBuilder::send(StringRef key, int64_t mb, Value value,
                       ArrayRef<int64_t> dsts, Phase phase,
                       std::optional<int64_t> forwardStage) {
  for (int64_t dst : dsts) {
    auto start = SendStartOp::create(
        b, loc, TypeRange{FutureType::get(ctx, NoneType::get(ctx))},
        ValueRange{value}, p2pAttrs(dst, tagOf(key, mb, dst)));
    tag(start, phase, mb);
    if (forwardStage)
      forwardSends[{*forwardStage, mb}].push_back({dst, start.getFuture()});
    else
      sendFutures.push_back(start.getFuture());
  }
}

/// A forward send of (stage, mb) to a rank that has since sent this rank a
/// gradient for the same microbatch is complete: that rank computed from
/// it. Waiting for it here, before the stage's backward, frees the sent
/// activation long before the end of the step, and cannot block.
void RankBuilder::waitForwardSends(int64_t stage, int64_t mb,
                                   ArrayRef<int64_t> peers) {
  auto it = forwardSends.find({stage, mb});
  if (it == forwardSends.end())
    return;
  SmallVector<std::pair<int64_t, Value>> later;
  for (auto [dst, future] : it->second) {
    if (!llvm::is_contained(peers, dst)) {
      later.push_back({dst, future});
      continue;
    }
    auto wait = WaitOp::create(b, loc, TypeRange{}, future);
    tag(wait, Phase::backward, mb);
  }
  it->second = std::move(later);
}

void RankBuilder::postReceive(StringRef key, int64_t mb) {
  std::pair<std::string, int64_t> id(key.str(), mb);
  if (env.count(id) || pending.count(id))
    return;
  // A stage value, or the reduced gradient of a parameter this rank shares
  // with the rank whose stage makes it ("grad:NAME").
  int64_t src;
  Type type;
  bool forward = false;
  if (key.consume_front("grad:")) {
    src = pp::stageToRank(spec, program.gradStage.lookup(key));
    type = args.lookup(key).getType();
  } else {
    src = pp::stageToRank(spec, program.producer.lookup(key));
    type = program.type.lookup(key);
    forward = program.madeInForward.lookup(key);
  }
  auto start = RecvStartOp::create(b, loc,
                                   TypeRange{FutureType::get(ctx, type)},
                                   ValueRange{}, p2pAttrs(src, tagOf(id.first, mb, rank)));
  tag(start, forward ? Phase::forward : Phase::backward, mb);
  pending[id] = start.getFuture();
}

Value RankBuilder::valueHere(StringRef key, int64_t mb) {
  std::pair<std::string, int64_t> id(key.str(), mb);
  if (auto it = env.find(id); it != env.end())
    return it->second;
  postReceive(key, mb);
  Value future = pending[id];
  pending.erase(id);
  auto wait = WaitOp::create(
      b, loc, TypeRange{cast<FutureType>(future.getType()).getValueType()},
      future);
  // The wait belongs to the phase its receive was posted in.
  tag(wait, getPhase(future.getDefiningOp()).value_or(Phase::backward), mb);
  return env[id] = wait.getResult();
}

/// What the schedule's RECV_F / RECV_B action stands for: post the receives
/// of every value the stage's forward (backward) reads from another rank.
void RankBuilder::postReceives(int64_t stage, bool forward, int64_t mb) {
  func::FuncOp f = forward ? program.stages[stage].first
                           : program.stages[stage].second;
  for (unsigned i = 0, e = f.getNumArguments(); i < e; ++i) {
    StringRef key = valueName(f, i, /*result=*/false);
    if (!key.empty() &&
        pp::stageToRank(spec, program.producer.lookup(key)) != rank)
      postReceive(key, mb);
  }
}

LogicalResult RankBuilder::runCompute(const pp::Action &action) {
  int64_t s = action.stage, mb = *action.microbatch;
  func::FuncOp forward = program.stages[s].first;
  func::FuncOp input = program.stages[s].second;
  func::FuncOp weight = program.weights[s];
  switch (action.kind) {
  case pp::ActionKind::Forward:
    runFunction(forward, s, mb, /*isForward=*/true);
    break;
  case pp::ActionKind::FullBackward:
    runFunction(input, s, mb, false);
    if (weight)
      runFunction(weight, s, mb, false);
    break;
  case pp::ActionKind::BackwardInput:
  case pp::ActionKind::BackwardWeight:
    if (!weight)
      return mlir::emitError(input.getLoc())
             << "schedule action " << action.str()
             << " runs the input- and weight-gradient parts of a backward "
                "apart; run loom-pipeline-split with split-backward=true";
    runFunction(action.kind == pp::ActionKind::BackwardInput ? input : weight,
                s, mb, false);
    break;
  default:
    llvm_unreachable("not a compute action");
  }
  return success();
}

void RankBuilder::runFunction(func::FuncOp f, int64_t stage, int64_t mb,
                              bool forward) {
  Phase phase = forward ? Phase::forward : Phase::backward;
  IRMapping map;
  SmallVector<int64_t> gradientSources;
  // Values still in flight are waited for right before their first reader,
  // and a backward's recompute regions that do not read them go first
  // (regionsBeforeWaits), so that what the function can do without them
  // overlaps their transfer.
  llvm::SmallDenseMap<Value, StringRef> inFlight;
  for (unsigned i = 0, e = f.getNumArguments(); i < e; ++i) {
    Value v;
    StringRef key = valueName(f, i, /*result=*/false);
    if (!key.empty()) {
      int64_t src = pp::stageToRank(spec, program.producer.lookup(key));
      if (!forward && !program.madeInForward.lookup(key) && src != rank)
        gradientSources.push_back(src);
      if (!env.count({key.str(), mb})) {
        postReceive(key, mb);
        inFlight[f.getArgument(i)] = key;
        continue;
      }
      v = valueHere(key, mb);
    } else {
      StringRef name =
          f.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName)
              .getValue();
      auto role = f.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
      v = role && role.getValue() == Role::input ? batchSlice(name, mb)
                                                 : args.lookup(name);
    }
    map.map(f.getArgument(i), v);
  }
  if (!forward)
    waitForwardSends(stage, mb, gradientSources);
  Block &body = f.getBody().front();
  auto arrive = [&](Operation *reader) {
    reader->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (auto it = inFlight.find(operand); it != inFlight.end()) {
          map.map(operand, valueHere(it->second, mb));
          inFlight.erase(it);
        }
    });
  };
  bool inputPart =
      !forward && program.weights[stage] && f == program.stages[stage].second;
  llvm::SmallPtrSet<Operation *, 16> early =
      forward ? llvm::SmallPtrSet<Operation *, 16>()
              : regionsBeforeWaits(f, inFlight, inputPart);
  for (bool first : {true, false})
    for (Operation &op : body.without_terminator()) {
      if (early.contains(&op) != first)
        continue;
      arrive(&op);
      b.clone(op, map)->setAttr(LoomDialect::kMicrobatchAttrName,
                                b.getI64IntegerAttr(mb));
    }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  arrive(ret);
  for (auto [i, operand] : llvm::enumerate(ret.getOperands())) {
    Value v = map.lookupOrDefault(operand);
    StringRef key = valueName(f, i, /*result=*/true);
    if (!key.empty()) {
      env[{key.str(), mb}] = v;
      send(key, mb, v, remoteReaders(key), phase,
           forward ? std::optional<int64_t>(stage) : std::nullopt);
      continue;
    }
    auto role = f.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (role && role.getValue() == Role::loss) {
      losses.push_back(v);
      continue;
    }
    StringRef target =
        f.getResultAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName)
            .getValue();
    Value &sum = gradSums[target];
    sum = !sum ? v
               : aten("aten::add.Tensor", v.getType(), {sum, v},
                      {OperandRefAttr::get(ctx, 0),
                       OperandRefAttr::get(ctx, 1)},
                      Phase::backward)
                     .getResult(0);
  }
}

/// REDUCE_GRAD: the stage's gradients are complete; scale them by 1/M
/// (PyTorch's `scale_grads`) and hand a shared parameter's gradient to the
/// other ranks that hold it.
void RankBuilder::reduceGrads(int64_t stage) {
  for (auto &[target, sum] : gradSums) {
    if (program.gradStage.lookup(target) != stage || finalGrads.count(target))
      continue;
    Value grad = aten("aten::div.Tensor", sum.getType(), sum,
                      {OperandRefAttr::get(ctx, 0),
                       b.getF64FloatAttr(double(spec.microbatches))},
                      Phase::backward)
                     .getResult(0);
    finalGrads[target] = grad;
    SmallVector<int64_t> holders;
    for (int64_t s : program.argStages.lookup(target)) {
      int64_t r = pp::stageToRank(spec, s);
      if (r != rank && !llvm::is_contained(holders, r))
        holders.push_back(r);
    }
    send(("grad:" + target).str(), 0, grad, holders, Phase::backward);
  }
}

void RankBuilder::addArguments(Block *entry) {
  std::vector<int64_t> mine = pp::rankStages(spec, rank);
  for (auto &[name, typeAndAttrs] : program.named) {
    bool used = llvm::any_of(program.argStages.lookup(name), [&](int64_t s) {
      return llvm::is_contained(mine, s);
    });
    if (!used)
      continue;
    BlockArgument arg = entry->addArgument(typeAndAttrs.first, loc);
    args.insert({name, arg});
    auto role = typeAndAttrs.second.getAs<RoleAttr>(LoomDialect::kRoleAttrName);
    std::optional<int64_t> dim = getBatchDim(typeAndAttrs.second);
    if (role && role.getValue() == Role::input && dim)
      batchArgs.push_back({arg, *dim});
  }
}

FailureOr<func::FuncOp> RankBuilder::build(ArrayRef<pp::Action> actions,
                                           StringRef name, Operation *after) {
  b.setInsertionPointAfter(after);
  auto step = func::FuncOp::create(b, after->getLoc(), name,
                                   FunctionType::get(ctx, {}, {}));
  Block *entry = step.addEntryBlock();
  addArguments(entry);
  b.setInsertionPointToEnd(entry);

  for (const pp::Action &action : actions) {
    switch (action.kind) {
    case pp::ActionKind::Forward:
    case pp::ActionKind::FullBackward:
    case pp::ActionKind::BackwardInput:
    case pp::ActionKind::BackwardWeight:
      if (failed(runCompute(action)))
        return failure();
      break;
    case pp::ActionKind::RecvF:
    case pp::ActionKind::RecvB:
      postReceives(action.stage, action.kind == pp::ActionKind::RecvF,
                   *action.microbatch);
      break;
    case pp::ActionKind::ReduceGrad:
      reduceGrads(action.stage);
      break;
    case pp::ActionKind::OverlapFB:
      return step.emitOpError("schedule action ")
             << action.str() << " overlaps a forward with a backward "
             << "(DualPipeV), which loom-pipeline-schedule does not run yet";
    case pp::ActionKind::SendF:
    case pp::ActionKind::SendB:
      // Sent as soon as the value exists (runCompute).
    case pp::ActionKind::Unshard:
    case pp::ActionKind::Reshard:
      // Parameters are not sharded within a stage (yet).
      break;
    }
  }

  // Gradients of parameters another rank reduced, the loss, the send waits.
  SmallVector<Value> results;
  SmallVector<NamedAttrList> resultAttrs;
  if (!losses.empty()) {
    Value sum = losses.front();
    for (Value l : ArrayRef(losses).drop_front())
      sum = aten("aten::add.Tensor", sum.getType(), {sum, l},
                 {OperandRefAttr::get(ctx, 0), OperandRefAttr::get(ctx, 1)},
                 Phase::forward)
                .getResult(0);
    results.push_back(aten("aten::div.Tensor", sum.getType(), sum,
                           {OperandRefAttr::get(ctx, 0),
                            b.getF64FloatAttr(double(spec.microbatches))},
                           Phase::forward)
                          .getResult(0));
    NamedAttrList attrs;
    attrs.set(LoomDialect::kRoleAttrName, RoleAttr::get(ctx, Role::loss));
    resultAttrs.push_back(attrs);
  }
  for (auto &[pname, arg] : args) {
    if (!program.gradStage.count(pname))
      continue;
    Value grad = finalGrads.lookup(pname);
    NamedAttrList attrs;
    if (!grad) {
      // Another rank's REDUCE_GRAD made it: this rank holds a copy.
      grad = valueHere(("grad:" + pname).str(), 0);
      attrs.set(LoomDialect::kPipelineGradFromAttrName,
                b.getI64IntegerAttr(
                    pp::stageToRank(spec, program.gradStage.lookup(pname))));
    }
    results.push_back(grad);
    attrs.set(LoomDialect::kRoleAttrName, RoleAttr::get(ctx, Role::grad));
    attrs.set(LoomDialect::kTargetAttrName, b.getStringAttr(pname));
    resultAttrs.push_back(attrs);
  }
  for (auto &[id, sends] : forwardSends)
    for (auto &[dst, future] : sends)
      sendFutures.push_back(future);
  for (Value future : sendFutures) {
    auto wait = WaitOp::create(b, loc, TypeRange{}, future);
    tag(wait, Phase::backward, std::nullopt);
  }
  func::ReturnOp::create(b, loc, results);

  // Batch arguments take M times the rows (the slices were built with the
  // microbatch type).
  for (auto [arg, dim] : batchArgs) {
    auto type = cast<RankedTensorType>(arg.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] *= spec.microbatches;
    arg.setType(RankedTensorType::get(shape, type.getElementType()));
  }
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  step.setFunctionType(
      FunctionType::get(ctx, entry->getArgumentTypes(), resultTypes));
  for (auto [i, entryArg] : llvm::enumerate(args))
    step.setArgAttrs(i, program.named.lookup(entryArg.first).second);
  for (auto [i, attrs] : llvm::enumerate(resultAttrs))
    step.setResultAttrs(i, attrs.getDictionary(ctx));
  return step;
}

struct LoomPipelineSchedulePass
    : public loom::impl::LoomPipelineScheduleBase<LoomPipelineSchedulePass> {
  using LoomPipelineScheduleBase::LoomPipelineScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<StageProgram> program = collectStages(module);
    if (failed(program))
      return signalPassFailure();
    FailureOr<pp::ScheduleSpec> spec = makeSpec(module, program->stages.size());
    if (failed(spec))
      return signalPassFailure();
    llvm::Expected<pp::RankActions> actions = pp::lowerSchedule(*spec);
    if (!actions) {
      module.emitError("--loom-pipeline-schedule: ")
          << llvm::toString(actions.takeError());
      return signalPassFailure();
    }
    if (dpRanks < 1) {
      module.emitError("--loom-pipeline-schedule: dp must be at least 1, got ")
          << int64_t(dpRanks);
      return signalPassFailure();
    }
    if (replicas < 1 || dpRanks % replicas != 0) {
      module.emitError("--loom-pipeline-schedule: replicate=")
          << int64_t(replicas)
          << " must be at least 1 and divide dp=" << int64_t(dpRanks);
      return signalPassFailure();
    }
    MeshOp mesh = getOrCreateMesh(module, spec->pp);
    if (!mesh)
      return signalPassFailure();

    std::map<TransferId, int64_t> tags;
    Operation *after = program->stages.back().second;
    StringRef base = program->stages.front().first.getSymName();
    std::string stepName = base.drop_back(StringRef("_s0_forward").size()).str();
    for (int64_t r = 0; r < spec->pp; ++r) {
      RankBuilder builder(*program, *spec, mesh, r, tags);
      FailureOr<func::FuncOp> step = builder.build(
          (*actions)[r], stepName + "_pp" + std::to_string(r), after);
      if (failed(step))
        return signalPassFailure();
      (*step)->setAttr(LoomDialect::kStepAttrName, UnitAttr::get(&getContext()));
      // Row r of the [pp, dp] mesh (row-major) runs pipeline rank r's step.
      SmallVector<int64_t> row;
      for (int64_t d = 0; d < dpRanks; ++d)
        row.push_back(r * dpRanks + d);
      (*step)->setAttr(LoomDialect::kProgramRanksAttrName,
                       DenseI64ArrayAttr::get(&getContext(), row));
      SmallVector<Attribute> names;
      for (const pp::Action &a : (*actions)[r])
        names.push_back(StringAttr::get(&getContext(), a.str()));
      (*step)->setAttr(LoomDialect::kPipelineActionsAttrName,
                       ArrayAttr::get(&getContext(), names));
      after = *step;
    }
    for (auto &[fwd, bwd] : program->stages) {
      fwd.erase();
      bwd.erase();
    }
    for (func::FuncOp weight : program->weights)
      if (weight)
        weight.erase();
  }

  FailureOr<pp::ScheduleSpec> makeSpec(ModuleOp module, int64_t numStages) {
    llvm::Expected<pp::ScheduleKind> kind = pp::parseScheduleKind(ppSchedule);
    if (!kind) {
      module.emitError("--loom-pipeline-schedule: ")
          << llvm::toString(kind.takeError());
      return failure();
    }
    pp::ScheduleSpec spec;
    spec.kind = *kind;
    int64_t perRank = pp::isSingleStage(*kind) ? 1 : 2;
    spec.pp = ppRanks > 0 ? int64_t(ppRanks) : numStages / perRank;
    if (spec.pp < 1 || numStages % spec.pp != 0) {
      module.emitError("--loom-pipeline-schedule: ")
          << numStages << " stages do not divide over " << spec.pp
          << " pipeline ranks";
      return failure();
    }
    spec.stagesPerRank = numStages / spec.pp;
    spec.microbatches = microbatches;
    if (spec.microbatches == 0) {
      auto config = module->getAttrOfType<RunConfigAttr>(
          LoomDialect::kRunConfigAttrName);
      spec.microbatches = config ? std::max<int64_t>(1, config.getMicrobatches())
                                 : 1;
    }
    if (llvm::Error err = pp::verifySpec(spec)) {
      module.emitError("--loom-pipeline-schedule: ")
          << llvm::toString(std::move(err));
      return failure();
    }
    return spec;
  }

  MeshOp getOrCreateMesh(ModuleOp module, int64_t pp) {
    for (MeshOp mesh : module.getOps<MeshOp>()) {
      module.emitError("--loom-pipeline-schedule: the module already has a "
                       "mesh (@")
          << mesh.getSymName()
          << "); run the pipeline passes before the data-parallel ones";
      return nullptr;
    }
    OpBuilder builder(module.getBodyRegion());
    builder.setInsertionPointToStart(module.getBody());
    // HSDP inside each stage: dp factored (replicate, shard), row-major, so
    // the ranks of each row stay pp * dp + d.
    if (replicas > 1)
      return MeshOp::create(
          builder, module.getLoc(), builder.getStringAttr("pp"),
          builder.getDenseI64ArrayAttr(
              {pp, int64_t(replicas), int64_t(dpRanks / replicas)}),
          builder.getStrArrayAttr({"pp", "replicate", "shard"}));
    if (dpRanks > 1)
      return MeshOp::create(builder, module.getLoc(),
                            builder.getStringAttr("pp"),
                            builder.getDenseI64ArrayAttr({pp, dpRanks}),
                            builder.getStrArrayAttr({"pp", "dp"}));
    return MeshOp::create(builder, module.getLoc(), builder.getStringAttr("pp"),
                          builder.getDenseI64ArrayAttr({pp}),
                          builder.getStrArrayAttr({"pp"}));
  }
};

} // namespace
