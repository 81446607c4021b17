//===- LowerToRT.cpp - The loom-lower-to-rt pass --------------------------===//

#include "loom/Conversion/Passes.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Dialect/Loom/IR/Transfers.h"
#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"

#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_LOOMLOWERTORT
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {
/// Everything about a step's signature the lowering needs, read once.
struct StepSignature {
  struct Arg {
    Role role;
    std::string name;
    StringAttr target;
    SplitAttr split;
    ShardAttr shard;
    /// The batch element an input binds (`loom.batch_index`), if given.
    IntegerAttr batchIndex;
  };
  SmallVector<Arg> args;
  SmallVector<Role> resultRoles;
  SmallVector<StringAttr> resultTargets;
  SmallVector<PartialAttr> resultPartials;
  /// The mesh of a distributed step (null for a single-rank one).
  MeshOp mesh;
  /// Whether the step has collectives (and so a `comm` stream).
  bool hasCollectives = false;
  /// The global ranks of an MPMD step (`loom.program_ranks`), else null.
  DenseI64ArrayAttr programRanks;
};
} // namespace

static StepSignature readSignature(func::FuncOp func) {
  StepSignature sig;
  sig.programRanks = func->getAttrOfType<DenseI64ArrayAttr>(
      LoomDialect::kProgramRanksAttrName);
  unsigned numInputs = 0;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    // The step verifier guarantees a role, and a name except on inputs.
    Role role = func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName)
                    .getValue();
    auto name =
        func.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName);
    std::string text =
        name ? name.getValue().str() : ("input" + Twine(numInputs)).str();
    numInputs += role == Role::input;
    sig.args.push_back(
        {role, text,
         func.getArgAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName),
         func.getArgAttrOfType<SplitAttr>(i, LoomDialect::kSplitAttrName),
         func.getArgAttrOfType<ShardAttr>(i, LoomDialect::kShardAttrName),
         func.getArgAttrOfType<IntegerAttr>(i,
                                            LoomDialect::kBatchIndexAttrName)});
  }
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    sig.resultRoles.push_back(
        func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName)
            .getValue());
    sig.resultTargets.push_back(
        func.getResultAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName));
    sig.resultPartials.push_back(func.getResultAttrOfType<PartialAttr>(
        i, LoomDialect::kPartialAttrName));
  }
  return sig;
}

static LogicalResult checkElementType(Operation *op, Type type,
                                      const Twine &what) {
  Type element = cast<RankedTensorType>(type).getElementType();
  if (rt::getDtypeName(element).empty())
    return op->emitError() << what << " has element type " << element
                           << ", which artifact format v1 has no dtype for";
  return success();
}

/// Resolves the one mesh a distributed step uses (its collectives and the
/// split, shard and partial attributes of its signature) into `sig.mesh`;
/// a step that names none stays single-rank.
static LogicalResult resolveMesh(func::FuncOp func, StepSignature &sig) {
  FlatSymbolRefAttr meshRef;
  Operation *firstUser = nullptr;
  auto use = [&](FlatSymbolRefAttr ref, Operation *at) -> LogicalResult {
    if (!meshRef) {
      meshRef = ref;
      firstUser = at;
      return success();
    }
    if (ref == meshRef)
      return success();
    InFlightDiagnostic diag = at->emitError("uses mesh ")
                              << ref << " but the step already uses "
                              << meshRef
                              << "; an artifact runs on one mesh";
    diag.attachNote(firstUser->getLoc()) << "the first use of " << meshRef;
    return diag;
  };
  for (const StepSignature::Arg &arg : sig.args) {
    if (arg.split && failed(use(arg.split.getMesh(), func)))
      return failure();
    if (arg.shard && failed(use(arg.shard.getMesh(), func)))
      return failure();
  }
  for (PartialAttr partial : sig.resultPartials)
    if (partial && failed(use(partial.getMesh(), func)))
      return failure();
  WalkResult walk = func.walk([&](Operation *op) {
    auto meshAttr = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
    if (!isa<AllGatherStartOp, ReduceScatterStartOp, AllSliceStartOp,
             AllReduceStartOp, BroadcastStartOp, SendStartOp, RecvStartOp>(
            op) ||
        !meshAttr)
      return WalkResult::advance();
    sig.hasCollectives = true;
    return failed(use(meshAttr, op)) ? WalkResult::interrupt()
                                     : WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (!meshRef && sig.programRanks) {
    // The ranks of an MPMD step are ranks of the module's mesh, even where
    // the step itself communicates with no one.
    auto module = func->getParentOfType<ModuleOp>();
    for (auto mesh : module.getOps<MeshOp>())
      if (!sig.mesh || mesh.getNumRanks() > sig.mesh.getNumRanks())
        sig.mesh = mesh;
    return success();
  }
  if (!meshRef)
    return success();
  sig.mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(func,
                                                          meshRef.getAttr());
  if (!sig.mesh)
    return firstUser->emitError("mesh ")
           << meshRef << " does not name a loom.mesh";
  return success();
}

/// Refuses, where it is, a kernel ATen has only for the CPU in a step
/// compiled for cuda: capture runs on the CPU and records CPU variants (the
/// `_for_cpu` attention kernels, mkldnn's), which CUDA cannot dispatch.
static LogicalResult checkKernelsRunOn(func::FuncOp func, TargetDevice device) {
  if (device != TargetDevice::Cuda)
    return success();
  WalkResult walk = func.walk([](loom::AtenOp aten) {
    StringRef kernel = aten.getKernel();
    if (!kernel.contains("_for_cpu") && !kernel.starts_with("aten::mkldnn") &&
        !kernel.starts_with("mkldnn::"))
      return WalkResult::advance();
    aten.emitError("kernel '")
        << kernel
        << "' runs only on the CPU, so the step cannot be compiled for "
           "device=cuda (loom.capture records the CPU's kernels; write "
           "the computation with operators both devices have, e.g. "
           "attention as matmul and softmax)";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

/// Reports, where it is, everything in a step the lowering cannot carry
/// into a loomrt program, and finds the step's one optimizer.
static LogicalResult checkStep(func::FuncOp func, const StepSignature &sig,
                               Attribute &optimizer) {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  for (auto [i, arg] : llvm::enumerate(sig.args))
    if (failed(checkElementType(func, func.getArgument(i).getType(),
                                "step argument '" + arg.name + "'")))
      return failure();

  unsigned numLosses = 0;
  for (auto [i, role] : llvm::enumerate(sig.resultRoles)) {
    Value value = ret.getOperand(i);
    switch (role) {
    case Role::loss:
      ++numLosses;
      if (cast<RankedTensorType>(value.getType()).getRank() != 0)
        return func.emitOpError("the loss (result #")
               << i << ") must be a 0-d tensor, got " << value.getType();
      break;
    case Role::grad:
    case Role::buffer_mutation:
      break;
    case Role::param_update:
    case Role::state_update: {
      // The update happens in place, so the result must be exactly what a
      // loom.optimizer_update makes for the argument it targets.
      auto update = value.getDefiningOp<OptimizerUpdateOp>();
      unsigned resultNumber =
          update ? cast<OpResult>(value).getResultNumber() : 0;
      Value updatedArg;
      if (update && role == Role::param_update && resultNumber == 0)
        updatedArg = update.getParam();
      else if (update && role == Role::state_update && resultNumber > 0)
        updatedArg = update.getState()[resultNumber - 1];
      auto arg = dyn_cast_or_null<BlockArgument>(updatedArg);
      if (!arg ||
          sig.args[arg.getArgNumber()].name != sig.resultTargets[i].getValue())
        return func.emitOpError("step result #")
               << i << " (" << stringifyRole(role)
               << ") must be what a loom.optimizer_update makes of '"
               << sig.resultTargets[i].getValue()
               << "', because the runtime updates it in place";
      break;
    }
    default:
      return func.emitOpError("step result #")
             << i << " has role " << stringifyRole(role)
             << ", which artifact format v1 cannot return (it returns the "
                "loss, gradients and buffer mutations)";
    }
  }
  // Of a pipelined step's programs, only the one holding the last stage
  // has the loss (the writer checks that one does).
  if (numLosses != 1 && !sig.programRanks)
    return func.emitOpError("has no loss result; the runtime's step() "
                            "returns the loss, so a compiled step needs one");

  optimizer = func->getAttr(LoomDialect::kOptimizerAttrName);
  Operation *firstUpdate = nullptr;
  for (Operation &op : body.without_terminator()) {
    if (auto aten = dyn_cast<loom::AtenOp>(op)) {
      auto emitError = [&] { return aten.emitOpError(); };
      for (Attribute arg : aten.getArgs())
        if (failed(convertAtenArgument(arg, "", emitError)))
          return failure();
      for (NamedAttribute kwarg : aten.getKwargs())
        if (failed(convertAtenArgument(kwarg.getValue(),
                                       kwarg.getName().getValue(), emitError)))
          return failure();
      auto [name, overload] = aten.getKernel().split('.');
      if (overload.empty())
        return aten.emitOpError("kernel '")
               << aten.getKernel()
               << "' has no overload; the runtime looks operators up by "
                  "name and overload";
      for (auto [i, t] : llvm::enumerate(aten.getResultTypes()))
        if (failed(checkElementType(aten, t, "result #" + Twine(i))))
          return failure();
      continue;
    }
    if (isa<AllGatherStartOp, ReduceScatterStartOp, AllSliceStartOp,
            AllReduceStartOp, BroadcastStartOp, SendStartOp>(op)) {
      if (failed(checkElementType(&op, op.getOperand(0).getType(), "input")))
        return failure();
      continue;
    }
    if (auto recv = dyn_cast<RecvStartOp>(op)) {
      if (failed(checkElementType(
              recv, cast<FutureType>(recv.getFuture().getType()).getValueType(),
              "the received tensor")))
        return failure();
      continue;
    }
    if (isa<loom::WaitOp>(op))
      continue;
    auto update = dyn_cast<OptimizerUpdateOp>(op);
    if (!update)
      return op.emitOpError("cannot be lowered to loomrt: loom-lower-to-rt "
                            "handles loom.aten, loom.optimizer_update, the "
                            "all-gather, reduce-scatter, all-slice, "
                            "all-reduce and broadcast collectives, send and "
                            "recv, with their waits");

    if (!optimizer)
      optimizer = update.getOptimizer();
    if (!isSameAlgorithm(update.getOptimizer(), optimizer)) {
      InFlightDiagnostic diag =
          update.emitOpError("uses ")
          << update.getOptimizer() << " but the step uses " << optimizer
          << "; the artifact has one optimizer configuration (a parameter "
             "group may change only lr and weight_decay)";
      if (firstUpdate)
        diag.attachNote(firstUpdate->getLoc()) << "the first update";
      return diag;
    }
    firstUpdate = firstUpdate ? firstUpdate : update.getOperation();

    auto param = dyn_cast<BlockArgument>(update.getParam());
    if (!param || sig.args[param.getArgNumber()].role != Role::parameter)
      return update.emitOpError("must update a parameter argument of the "
                                "step, which the runtime updates in place");
    for (auto [k, s] : llvm::enumerate(update.getState())) {
      auto state = dyn_cast<BlockArgument>(s);
      if (!state ||
          sig.args[state.getArgNumber()].role != Role::optimizer_state ||
          sig.args[state.getArgNumber()].target.getValue() !=
              sig.args[param.getArgNumber()].name)
        return update.emitOpError("state #")
               << k << " must be an optimizer_state argument of '"
               << sig.args[param.getArgNumber()].name << "'";
    }
    // Updates write in place: a later read would see the new value where
    // the step means the old one.
    SmallVector<Value> inPlace = {update.getParam()};
    llvm::append_range(inPlace, update.getState());
    for (Value v : inPlace)
      for (Operation *user : v.getUsers()) {
        if (user == update || !update->isBeforeInBlock(user))
          continue;
        auto arg = cast<BlockArgument>(v);
        InFlightDiagnostic diag =
            user->emitError("reads '")
            << sig.args[arg.getArgNumber()].name
            << "' after its optimizer update, which writes it in place";
        diag.attachNote(update.getLoc()) << "the update";
        return diag;
      }
    for (Value r : update.getResults())
      for (Operation *user : r.getUsers())
        if (!isa<func::ReturnOp>(user))
          return user->emitError("uses an updated parameter or optimizer "
                                 "state, which after lowering exists only "
                                 "in place of the old one");
  }
  return success();
}

/// Moves the step's body into a loomrt.program: arguments become bindings
/// and the return becomes outputs. The ops inside are rewritten by the
/// patterns afterwards.
static void buildProgram(func::FuncOp func, StepSignature &sig,
                         Attribute optimizer) {
  MLIRContext *ctx = func.getContext();
  OpBuilder builder(func);
  // A distributed step is one SPMD program for every rank of its mesh, or
  // (pipelined) one MPMD program per `loom.program_ranks`; collectives run
  // on their own stream (docs/distributed.md).
  int64_t worldSize = sig.mesh ? sig.mesh.getNumRanks() : 1;
  SmallVector<StringRef> streams = {"compute"};
  if (sig.hasCollectives)
    streams.push_back("comm");
  auto program = rt::ProgramOp::create(
      builder, func.getLoc(), builder.getStringAttr(func.getSymName()),
      builder.getI64IntegerAttr(0), builder.getI64IntegerAttr(worldSize),
      builder.getStrArrayAttr(streams), /*num_slots=*/IntegerAttr(), optimizer,
      sig.mesh ? FlatSymbolRefAttr::get(sig.mesh.getSymNameAttr())
               : FlatSymbolRefAttr(),
      sig.programRanks);
  if (Attribute schedule = func->getAttr(LoomDialect::kLrScheduleAttrName))
    program->setAttr(LoomDialect::kLrScheduleAttrName, schedule);
  if (Attribute impl = func->getAttr(LoomDialect::kOptimizerImplAttrName))
    program->setAttr(LoomDialect::kOptimizerImplAttrName, impl);
  program.getBody().takeBody(func.getBody());
  Block &block = program.getBody().front();

  builder.setInsertionPointToStart(&block);
  int64_t batchIndex = 0;
  for (auto [arg, info] : llvm::zip(block.getArguments(), sig.args)) {
    Value binding;
    if (info.role == Role::optimizer_state) {
      // torch.optim.Adagrad creates its `sum` filled with
      // initial_accumulator_value; every other state starts as zeros.
      rt::StateInit init = isa_and_nonnull<AdagradAttr>(optimizer)
                               ? rt::StateInit::initial_accumulator_value
                               : rt::StateInit::zeros;
      binding =
          rt::StateOp::create(builder, arg.getLoc(), arg.getType(),
                              builder.getStringAttr(info.name), info.target,
                              rt::StateInitAttr::get(ctx, init),
                              /*slot=*/IntegerAttr(), info.shard);
    } else {
      // An MPMD program binds some elements of the step's batch, which
      // `loom.batch_index` names.
      IntegerAttr batch;
      if (info.role == Role::input)
        batch = info.batchIndex ? info.batchIndex
                                : builder.getI64IntegerAttr(batchIndex);
      batchIndex += info.role == Role::input;
      binding = rt::InputOp::create(builder, arg.getLoc(), arg.getType(),
                                    builder.getStringAttr(info.name),
                                    RoleAttr::get(ctx, info.role), batch,
                                    /*slot=*/IntegerAttr(), info.split,
                                    info.shard);
    }
    arg.replaceAllUsesWith(binding);
  }
  block.eraseArguments(0, block.getNumArguments());

  auto ret = cast<func::ReturnOp>(block.getTerminator());
  builder.setInsertionPoint(ret);
  for (auto [value, role, target, partial] :
       llvm::zip(ret.getOperands(), sig.resultRoles, sig.resultTargets,
                 sig.resultPartials)) {
    if (role == Role::param_update || role == Role::state_update)
      continue;
    rt::OutputOp::create(builder, ret.getLoc(), value, RoleAttr::get(ctx, role),
                         target, partial);
  }
  rt::ReturnOp::create(builder, ret.getLoc());
  ret.erase();
  func.erase();
}

/// Runs each recompute region where it stands: a loomrt program is straight
/// line, so the body's ops move before the region (taking its phase, as they
/// run in backward), its arguments become its inputs and its results the
/// values it yields.
static void inlineRecomputeRegions(func::FuncOp func) {
  SmallVector<RecomputeOp> regions;
  func.walk([&](RecomputeOp op) { regions.push_back(op); });
  for (RecomputeOp region : regions) {
    Block &body = region.getBodyBlock();
    YieldOp yield = region.getYield();
    for (auto [arg, input] : llvm::zip(body.getArguments(), region.getInputs()))
      arg.replaceAllUsesWith(input);
    region.replaceAllUsesWith(yield.getValues());
    Attribute phase = region->getAttr(LoomDialect::kPhaseAttrName);
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
      op.moveBefore(region);
      if (phase)
        op.setAttr(LoomDialect::kPhaseAttrName, phase);
    }
    region.erase();
  }
}

/// The steps of a pipelined module are MPMD programs: each lists its ranks
/// (`loom.program_ranks`), the lists are disjoint, cover the mesh, and name
/// one mesh, and every send meets a receive of its type. A module is either
/// one SPMD step or only MPMD steps.
static LogicalResult checkPrograms(ArrayRef<func::FuncOp> steps,
                                   ArrayRef<StepSignature> sigs) {
  func::FuncOp firstMpmd;
  for (size_t i = 0; i < steps.size() && !firstMpmd; ++i)
    if (sigs[i].programRanks)
      firstMpmd = steps[i];
  if (!firstMpmd)
    return success();
  MeshOp mesh;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i] == firstMpmd)
      mesh = sigs[i].mesh;
  llvm::DenseMap<int64_t, func::FuncOp> owner;
  for (size_t i = 0; i < steps.size(); ++i) {
    func::FuncOp func = steps[i];
    MeshOp stepMesh = sigs[i].mesh;
    DenseI64ArrayAttr ranks = sigs[i].programRanks;
    if (!ranks)
      return func.emitOpError("has no '")
             << LoomDialect::kProgramRanksAttrName
             << "' but the module's other steps are MPMD programs; say "
                "which ranks run it";
    // Every MPMD step has a mesh: its program ranks name one.
    if (stepMesh != mesh)
      return func.emitOpError("runs on mesh @")
             << stepMesh.getSymName() << " but @" << firstMpmd.getSymName()
             << " on @" << mesh.getSymName()
             << "; the programs of a step share one mesh";
    for (int64_t rank : ranks.asArrayRef()) {
      auto [it, inserted] = owner.try_emplace(rank, func);
      if (!inserted) {
        InFlightDiagnostic diag = func.emitOpError("runs on rank ")
                                  << rank << ", which @"
                                  << it->second.getSymName()
                                  << " runs too; each rank runs one program";
        diag.attachNote(it->second.getLoc()) << "the other program";
        return diag;
      }
    }
  }
  for (int64_t rank = 0, e = mesh.getNumRanks(); rank < e; ++rank)
    if (!owner.count(rank))
      return firstMpmd.emitOpError("rank ")
             << rank << " of mesh @" << mesh.getSymName()
             << " runs no program; the steps' '"
             << LoomDialect::kProgramRanksAttrName << "' must cover every rank";
  // The runtime receives into a buffer of the receive's type: a send of
  // another type would be read as garbage, not refused.
  return matchTransfers(steps);
}

namespace {
struct LoomLowerToRTPass
    : public loom::impl::LoomLowerToRTBase<LoomLowerToRTPass> {
  using LoomLowerToRTBase::LoomLowerToRTBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> steps = getStepFunctions(module);
    if (steps.empty()) {
      module.emitError("no step function (func.func with '")
          << LoomDialect::kStepAttrName << "') to lower";
      return signalPassFailure();
    }
    SmallVector<StepSignature, 2> sigs;
    SmallVector<Attribute> optimizers;
    for (func::FuncOp func : steps) {
      inlineRecomputeRegions(func);
      StepSignature &sig = sigs.emplace_back(readSignature(func));
      Attribute &optimizer = optimizers.emplace_back();
      if (failed(resolveMesh(func, sig)) ||
          failed(checkStep(func, sig, optimizer)) ||
          failed(checkKernelsRunOn(func, device)))
        return signalPassFailure();
    }
    if (failed(checkPrograms(steps, sigs)))
      return signalPassFailure();
    for (size_t i = 0; i < steps.size(); ++i)
      buildProgram(steps[i], sigs[i], optimizers[i]);
    if (device == TargetDevice::Cuda)
      module->setAttr(LoomDialect::kDeviceAttrName,
                      StringAttr::get(&getContext(), "cuda"));

    ConversionTarget target(getContext());
    target.addLegalDialect<rt::LoomRTDialect>();
    target.addIllegalOp<loom::AtenOp, OptimizerUpdateOp, AllGatherStartOp,
                        AllSliceStartOp, ReduceScatterStartOp, AllReduceStartOp,
                        BroadcastStartOp, SendStartOp, RecvStartOp,
                        loom::WaitOp>();
    RewritePatternSet patterns(&getContext());
    populateLoomToLoomRTPatterns(patterns);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
