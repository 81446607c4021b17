//===- LowerToRT.cpp - The loom-lower-to-rt pass --------------------------===//

#include "loom/Conversion/Passes.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
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
  };
  SmallVector<Arg> args;
  SmallVector<Role> resultRoles;
  SmallVector<StringAttr> resultTargets;
};
} // namespace

static StepSignature readSignature(func::FuncOp func) {
  StepSignature sig;
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
         func.getArgAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName)});
  }
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    sig.resultRoles.push_back(
        func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName)
            .getValue());
    sig.resultTargets.push_back(
        func.getResultAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName));
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
  if (numLosses != 1)
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
    auto update = dyn_cast<OptimizerUpdateOp>(op);
    if (!update)
      return op.emitOpError("cannot be lowered to loomrt: loom-lower-to-rt "
                            "handles loom.aten and loom.optimizer_update "
                            "(collectives are not lowered yet)");

    if (!optimizer)
      optimizer = update.getOptimizer();
    if (update.getOptimizer() != optimizer) {
      InFlightDiagnostic diag =
          update.emitOpError("uses ")
          << update.getOptimizer() << " but the step uses " << optimizer
          << "; artifact format v1 has one optimizer configuration";
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
static void buildProgram(func::FuncOp func, const StepSignature &sig,
                         Attribute optimizer) {
  MLIRContext *ctx = func.getContext();
  OpBuilder builder(func);
  auto program = rt::ProgramOp::create(
      builder, func.getLoc(), builder.getStringAttr(func.getSymName()),
      builder.getI64IntegerAttr(0), builder.getI64IntegerAttr(1),
      builder.getStrArrayAttr({"compute"}), /*num_slots=*/IntegerAttr(),
      optimizer);
  program.getBody().takeBody(func.getBody());
  Block &block = program.getBody().front();

  builder.setInsertionPointToStart(&block);
  int64_t batchIndex = 0;
  for (auto [arg, info] : llvm::zip(block.getArguments(), sig.args)) {
    Value binding;
    if (info.role == Role::optimizer_state) {
      binding =
          rt::StateOp::create(builder, arg.getLoc(), arg.getType(),
                              builder.getStringAttr(info.name), info.target,
                              rt::StateInitAttr::get(ctx, rt::StateInit::zeros),
                              /*slot=*/IntegerAttr());
    } else {
      IntegerAttr batch = info.role == Role::input
                              ? builder.getI64IntegerAttr(batchIndex++)
                              : IntegerAttr();
      binding = rt::InputOp::create(builder, arg.getLoc(), arg.getType(),
                                    builder.getStringAttr(info.name),
                                    RoleAttr::get(ctx, info.role), batch,
                                    /*slot=*/IntegerAttr());
    }
    arg.replaceAllUsesWith(binding);
  }
  block.eraseArguments(0, block.getNumArguments());

  auto ret = cast<func::ReturnOp>(block.getTerminator());
  builder.setInsertionPoint(ret);
  for (auto [value, role, target] :
       llvm::zip(ret.getOperands(), sig.resultRoles, sig.resultTargets)) {
    if (role == Role::param_update || role == Role::state_update)
      continue;
    rt::OutputOp::create(builder, ret.getLoc(), value, RoleAttr::get(ctx, role),
                         target);
  }
  rt::ReturnOp::create(builder, ret.getLoc());
  ret.erase();
  func.erase();
}

namespace {
struct LoomLowerToRTPass
    : public loom::impl::LoomLowerToRTBase<LoomLowerToRTPass> {
  using LoomLowerToRTBase::LoomLowerToRTBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> steps;
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(LoomDialect::kStepAttrName))
        steps.push_back(func);
    if (steps.empty()) {
      module.emitError("no step function (func.func with '")
          << LoomDialect::kStepAttrName << "') to lower";
      return signalPassFailure();
    }
    for (func::FuncOp func : steps) {
      StepSignature sig = readSignature(func);
      Attribute optimizer;
      if (failed(checkStep(func, sig, optimizer)))
        return signalPassFailure();
      buildProgram(func, sig, optimizer);
    }

    ConversionTarget target(getContext());
    target.addLegalDialect<rt::LoomRTDialect>();
    target.addIllegalOp<loom::AtenOp, OptimizerUpdateOp>();
    RewritePatternSet patterns(&getContext());
    populateLoomToLoomRTPatterns(patterns);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
