//===- MixedPrecision.cpp - loom-fsdp's param-dtype compute ---------------===//
//
// Mixed precision, as FSDP2's MixedPrecisionPolicy: the parameters are
// gathered in the compute dtype and the root's floating forward inputs are
// cast to it (cast_forward_inputs); buffers and constants keep their dtype.
// Every op then computes in the dtype eager PyTorch would give it:
// elementwise ops follow type promotion (`bf16 activation + f32 buffer` is
// f32), other ops run in the compute dtype.
//
//===----------------------------------------------------------------------===//

#include "Fsdp.h"

#include "loom/Dialect/Loom/IR/OpClassification.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace loom;
using namespace loom::fsdp;

/// Whether an ATen operator computes in torch.result_type of its tensor
/// operands (elementwise arithmetic and comparisons): with a compute-dtype
/// and an original-dtype operand it runs, in eager PyTorch, in the promoted
/// dtype rather than failing or casting down.
static bool promotesTypes(StringRef opName) {
  return llvm::StringSwitch<bool>(opName)
      .Cases({"aten::add", "aten::sub", "aten::mul", "aten::div", "aten::rsub",
              "aten::where", "aten::maximum", "aten::minimum"},
             true)
      .Cases({"aten::pow", "aten::atan2", "aten::fmod", "aten::remainder",
              "aten::addcmul", "aten::addcdiv", "aten::lerp"},
             true)
      .Cases({"aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt",
              "aten::ge", "aten::fmax", "aten::fmin", "aten::hypot"},
             true)
      .Default(false);
}

/// Whether an ATen operator makes a complex value from real ones. ATen has
/// no bf16 or f16 complex dtype, so such an op reads f32 in eager mixed
/// precision: a model casts its input up first (RoPE's `x.float()` before
/// `view_as_complex`), and autograd casts the gradient that reaches the
/// op's backward (`view_as_complex` of the gradient of `view_as_real`) up
/// to the f32 of its forward output.
static bool makesComplex(StringRef opName) {
  return llvm::is_contained(
      {"aten::view_as_complex", "aten::polar", "aten::complex"}, opName);
}

/// A float32 statistic of a reduced-precision kernel (attention's
/// logsumexp): the kernel returns it in float32 and its backward reads it so.
/// A recompute region's result is the body value it yields, a body
/// argument the region's input.
static bool isFloat32Statistic(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto region = dyn_cast_or_null<RecomputeOp>(arg.getOwner()->getParentOp());
    return region && isFloat32Statistic(region.getInputs()[arg.getArgNumber()]);
  }
  auto result = cast<OpResult>(v);
  if (auto region = dyn_cast<RecomputeOp>(result.getOwner()))
    return isFloat32Statistic(
        region.getYield().getValues()[result.getResultNumber()]);
  auto aten = dyn_cast<AtenOp>(result.getOwner());
  return aten &&
         isFloat32StatisticResult(aten.getKernel(), result.getResultNumber());
}

static Type dtypeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

/// Whether the step returns `v` as a parameter's gradient: on a pipelined
/// step, a shared parameter's gradient its gradient rank sends to the other
/// ranks that hold it, and those ranks' receive of it.
static bool isGradientResult(ShardingState &s, Value v) {
  Operation *terminator = s.body().getTerminator();
  return llvm::any_of(s.params, [&](const ParamInfo &info) {
    return info.gradResult && terminator->getOperand(*info.gradResult) == v;
  });
}

/// The received value of a receive (its wait's result), or null.
static Value receivedValue(RecvStartOp recv) {
  for (Operation *user : recv.getFuture().getUsers())
    if (auto wait = dyn_cast<WaitOp>(user))
      return wait.getResult();
  return nullptr;
}

namespace {
/// Moves ops from the original (parameter) dtype to the compute dtype.
class ComputeLowering {
public:
  ComputeLowering(ShardingState &s, Type original)
      : s(s), original(original), compute(s.config.computeDtype),
        b(s.func.getContext()) {}

  void castForwardInputs();
  void lowerOps();
  void lowerGradientProducers();
  /// On a pipelined step the stages exchange values in the dtype the wire
  /// rule gives (wireType): the receives take it before lowering, the
  /// sends are cast to it after, so both ends agree without seeing each
  /// other.
  void lowerReceives();
  void recordSends();
  void castSends();

private:
  /// lowerOps on the ops of one block: the step's body or a recompute
  /// region's.
  void lowerBlock(Block &block);
  /// A recompute region re-runs forward ops on inputs that may now be in
  /// the compute dtype: its body takes its inputs' types and computes as
  /// the forward ops it copies do, and its results the types it yields.
  void lowerRecompute(RecomputeOp region);
  /// Runs `atenOp` in the compute dtype: its original-dtype operands are
  /// cast (once per value), its results and dtype arguments retyped.
  void lowerToCompute(AtenOp atenOp);
  /// Its ScalarType arguments that named the original dtype name the
  /// compute dtype.
  void retypeDtypeArgs(AtenOp atenOp);
  /// A check without results whose operand now runs in the compute dtype.
  void lowerCheck(AtenOp check);
  /// Points the operands of `atenOp` in dtype `from` (but f32 statistics)
  /// at their cast to `to`, made once per value.
  void castOperands(AtenOp atenOp, Type from, Type to);
  /// A cast keeps its dtype (the model wrote it), unless it is autograd's
  /// cast of a gradient back to the dtype of a forward cast's input that now
  /// runs in the compute dtype (eager makes that gradient in the compute
  /// dtype), or lowering left it converting to the dtype its input has: then
  /// the cast goes.
  void lowerCast(AtenOp cast);
  /// A cast capture found by tracing under the policy (`loom.policy_cast`):
  /// converts to `target` (the compute dtype, or the dtype it names), or
  /// goes where its input has that dtype already.
  void lowerPolicyCast(AtenOp castOp, Type target);
  /// Whether type promotion keeps an op with compute-dtype operands in the
  /// original dtype.
  bool staysOriginal(Operation &op) const;

  /// A value traced in the parameters' dtype crosses between stages in the
  /// compute dtype, as PyTorch's stages send their bf16 activations and
  /// gradients; any other dtype crosses as traced.
  Type wireType(Type traced) const {
    return traced == original ? compute : traced;
  }

  ShardingState &s;
  Type original, compute;
  Builder b;
  /// Each value's cast to the other of the two dtypes (which one its own
  /// dtype says).
  DenseMap<Value, Value> castOnce;
  /// The input dtype of each forward cast met so far, by its `loom.cast` id.
  DenseMap<int64_t, Type> forwardInputDtypes;
  /// Each send's traced element type, recorded before lowering.
  SmallVector<std::pair<SendStartOp, Type>> sends;
};
} // namespace

void ComputeLowering::castForwardInputs() {
  func::FuncOp func = s.func;
  OpBuilder ib(func.getContext());
  ib.setInsertionPointToStart(&s.body());
  s.tagger.module = b.getStringAttr("");
  s.tagger.phase = Phase::forward;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto role = func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    BlockArgument arg = func.getArgument(i);
    if (!role || role.getValue() != Role::input || arg.use_empty() ||
        dtypeOf(arg) != original)
      continue;
    Value lowered = s.tagger.castTo(ib, arg.getLoc(), arg, compute);
    arg.replaceAllUsesExcept(lowered, lowered.getDefiningOp());
  }
}

void ComputeLowering::lowerReceives() {
  for (auto recv : s.body().getOps<RecvStartOp>()) {
    // A gradient crosses in the dtype castGradientTransfers gives it.
    if (Value received = receivedValue(recv);
        received && isGradientResult(s, received))
      continue;
    auto future = cast<FutureType>(recv.getFuture().getType());
    auto type = cast<RankedTensorType>(future.getValueType());
    Type wire = wireType(type.getElementType());
    if (wire == type.getElementType())
      continue;
    RankedTensorType lowered = type.clone(wire);
    recv.getFuture().setType(FutureType::get(recv.getContext(), lowered));
    for (Operation *user : recv.getFuture().getUsers())
      if (auto wait = dyn_cast<WaitOp>(user))
        wait.getResult().setType(lowered);
  }
}

void ComputeLowering::recordSends() {
  for (auto send : s.body().getOps<SendStartOp>())
    if (!isGradientResult(s, send.getInput()))
      sends.emplace_back(send, dtypeOf(send.getInput()));
}

void ComputeLowering::castSends() {
  for (auto [send, traced] : sends) {
    Type wire = wireType(traced);
    if (dtypeOf(send.getInput()) == wire)
      continue;
    OpBuilder ob(send);
    s.tagger.module = b.getStringAttr(getModulePath(send));
    s.tagger.phase = getPhase(send).value_or(Phase::forward);
    send.getInputMutable().assign(
        s.tagger.castTo(ob, send.getLoc(), send.getInput(), wire));
  }
}

void ComputeLowering::castOperands(AtenOp atenOp, Type from, Type to) {
  OpBuilder ob(atenOp);
  s.tagger.module = b.getStringAttr(getModulePath(atenOp));
  s.tagger.phase = getPhase(atenOp).value_or(Phase::forward);
  for (OpOperand &operand : atenOp->getOpOperands()) {
    Value v = operand.get();
    if (dtypeOf(v) != from || isFloat32Statistic(v))
      continue;
    // Values defined before the loop dominate every later use, so one
    // cast serves all of them.
    Value &cast = castOnce[v];
    if (!cast)
      cast = s.tagger.castTo(ob, atenOp.getLoc(), v, to);
    operand.set(cast);
  }
}

void ComputeLowering::lowerToCompute(AtenOp atenOp) {
  castOperands(atenOp, original, compute);
  for (Value result : atenOp->getResults()) {
    auto type = cast<RankedTensorType>(result.getType());
    if (isFloat32Statistic(result))
      result.setType(type.clone(
          compute.getIntOrFloatBitWidth() < 32 ? b.getF32Type() : compute));
    else if (type.getElementType() == original)
      result.setType(type.clone(compute));
  }
  // ScalarType arguments that named the original dtype follow it.
  retypeDtypeArgs(atenOp);
}

void ComputeLowering::lowerCheck(AtenOp check) {
  // Export writes a `.to(dtype)` that was a no-op when traced (`.float()` on
  // an f32 tensor) as `_assert_tensor_metadata(x, dtype=f32)` and reads x
  // itself after it. With x now in the compute dtype that conversion is
  // real again, as in eager under FSDP2's mixed precision: what runs after
  // the check reads x cast back to the dtype the check states.
  auto stated = check.getArgs().size() > 3
                    ? dyn_cast<TypeAttr>(check.getArgs()[3])
                    : TypeAttr();
  // Where capture traced the step under the policy, its casts say which
  // reads convert (`loom.policy_cast`), and the residual stream's add after
  // an RMSNorm's `.float()` still reads x itself.
  bool tracedUnderPolicy =
      llvm::any_of(check->getOperand(0).getUsers(), [](Operation *user) {
        return user->hasAttr(LoomDialect::kPolicyCastAttrName);
      });
  if (check.getOpName() == "aten::_assert_tensor_metadata" &&
      check->getNumOperands() == 1 && stated && stated.getValue() == original &&
      dtypeOf(check->getOperand(0)) == compute && !tracedUnderPolicy) {
    Value x = check->getOperand(0);
    OpBuilder ob(check->getContext());
    ob.setInsertionPointAfter(check);
    s.tagger.module = b.getStringAttr(getModulePath(check));
    s.tagger.phase = getPhase(check).value_or(Phase::forward);
    Value converted = s.tagger.castTo(ob, check.getLoc(), x, original);
    Operation *cast = converted.getDefiningOp();
    x.replaceUsesWithIf(converted, [&](OpOperand &use) {
      Operation *user = use.getOwner();
      return user != cast && user->getBlock() == check->getBlock() &&
             check->isBeforeInBlock(user);
    });
  }
  // The check states the dtype its operand has now.
  retypeDtypeArgs(check);
}

/// Whether a cast only converts the dtype (`_to_copy(x, dtype=...)`, as
/// autocast and `.to(dtype)` write it), not the layout, device or memory
/// format.
static bool convertsDtypeOnly(AtenOp cast) {
  return cast.getArgs().size() == 1 &&
         llvm::all_of(cast.getKwargs(), [](NamedAttribute kwarg) {
           return kwarg.getName() == "dtype";
         });
}

void ComputeLowering::lowerCast(AtenOp cast) {
  Value input = cast->getOperand(0);
  Value result = cast->getResult(0);
  if (auto policy =
          cast->getAttrOfType<BoolAttr>(LoomDialect::kPolicyCastAttrName)) {
    lowerPolicyCast(cast, policy.getValue() ? compute : dtypeOf(result));
    return;
  }
  auto id = cast->getAttrOfType<IntegerAttr>(LoomDialect::kCastAttrName);
  std::optional<Phase> phase = getPhase(cast);
  if (id && phase == Phase::forward)
    forwardInputDtypes.try_emplace(id.getInt(), dtypeOf(input));
  // Autograd's cast of a gradient back to the dtype of the forward cast's
  // input (a recompute region's copy of a forward cast is the model's).
  bool gradientOfLowered = false;
  if (id && phase == Phase::backward &&
      !isa<RecomputeOp>(cast->getParentOp())) {
    auto forward = forwardInputDtypes.find(id.getInt());
    gradientOfLowered =
        forward != forwardInputDtypes.end() && forward->second == compute &&
        dtypeOf(input) == compute && dtypeOf(result) == original;
  }
  // Eager's `.to(dtype)` returns a tensor already in that dtype as it is.
  bool sameDtype = dtypeOf(input) == dtypeOf(result) && convertsDtypeOnly(cast);
  if (!gradientOfLowered && !sameDtype)
    return;
  result.replaceAllUsesWith(input);
  cast->erase();
}

void ComputeLowering::lowerPolicyCast(AtenOp castOp, Type target) {
  Value input = castOp->getOperand(0);
  Value result = castOp->getResult(0);
  if (dtypeOf(input) == target) {
    result.replaceAllUsesWith(input);
    castOp->erase();
    return;
  }
  // A real conversion now, as eager's: the mark said where, the types say
  // what.
  castOp->removeAttr(LoomDialect::kPolicyCastAttrName);
  result.setType(cast<RankedTensorType>(result.getType()).clone(target));
  // A cast to the compute dtype names the original one as traced; one to the
  // dtype it names keeps it.
  if (target == compute)
    retypeDtypeArgs(castOp);
}

void ComputeLowering::retypeDtypeArgs(AtenOp atenOp) {
  auto retype = [&](Attribute a) -> Attribute {
    if (auto t = dyn_cast<TypeAttr>(a))
      if (t.getValue() == original)
        return TypeAttr::get(compute);
    return a;
  };
  SmallVector<Attribute> args;
  for (Attribute a : atenOp.getArgs())
    args.push_back(retype(a));
  atenOp.setArgsAttr(b.getArrayAttr(args));
  SmallVector<NamedAttribute> kwargs;
  for (NamedAttribute a : atenOp.getKwargs())
    kwargs.push_back(b.getNamedAttr(a.getName(), retype(a.getValue())));
  atenOp.setKwargsAttr(b.getDictionaryAttr(kwargs));
}

bool ComputeLowering::staysOriginal(Operation &op) const {
  // torch.result_type over the floating operands: dimensioned tensors take
  // precedence over 0-dim ones; among either, the original (wider) dtype
  // wins over the compute dtype. ATen promotes mixed operands itself, so an
  // op that stays in the original dtype needs no cast.
  bool dimensioned = llvm::any_of(op.getOperands(), [&](Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return t.getRank() > 0 && isa<FloatType>(t.getElementType());
  });
  return llvm::any_of(op.getOperands(), [&](Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return (!dimensioned || t.getRank() > 0) && t.getElementType() == original;
  });
}

void ComputeLowering::lowerOps() { lowerBlock(s.body()); }

void ComputeLowering::lowerRecompute(RecomputeOp region) {
  Block &body = region.getBodyBlock();
  for (auto [arg, input] : llvm::zip(body.getArguments(), region.getInputs()))
    arg.setType(input.getType());
  lowerBlock(body);
  for (auto [result, yielded] :
       llvm::zip(region.getResults(), region.getYield().getValues()))
    result.setType(yielded.getType());
}

void ComputeLowering::lowerBlock(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (auto region = dyn_cast<RecomputeOp>(&op)) {
      lowerRecompute(region);
      continue;
    }
    auto atenOp = dyn_cast<AtenOp>(&op);
    if (!atenOp)
      continue;
    bool lowered = llvm::any_of(op.getOperands(),
                                [&](Value v) { return dtypeOf(v) == compute; });
    // A check without results (export's `_assert_tensor_metadata` before a
    // `.float()`) states the dtype its operand now has.
    if (atenOp->getNumResults() == 0) {
      if (lowered)
        lowerCheck(atenOp);
      continue;
    }
    if (s.gatheredValues.contains(atenOp->getResult(0)))
      continue;
    if (atenOp.getOpName() == "aten::_to_copy") {
      lowerCast(atenOp);
      continue;
    }
    if (!lowered)
      continue;
    if (makesComplex(atenOp.getOpName())) {
      castOperands(atenOp, compute, original);
      continue;
    }
    if (promotesTypes(atenOp.getOpName()) && staysOriginal(op))
      continue;
    lowerToCompute(atenOp);
  }
}

/// The op making a gradient result and the views of it in between (e.g.
/// `view(sum(g, [0]))` for a bias), each used only by the next, innermost
/// last; empty when the gradient is not made so.
static SmallVector<AtenOp> getGradientChain(Value grad, Operation *user) {
  SmallVector<AtenOp> chain;
  for (Value v = grad;;) {
    auto def = v.getDefiningOp<AtenOp>();
    if (!def || def->getNumResults() != 1 || !v.hasOneUse() ||
        *v.getUsers().begin() != user)
      break;
    chain.push_back(def);
    if (!isViewAtenOp(def) || def->getNumOperands() == 0)
      break;
    user = def;
    v = def->getOperand(0);
  }
  return chain;
}

void ComputeLowering::lowerGradientProducers() {
  // In eager, autograd casts a gradient flowing into a compute-dtype tensor
  // to that dtype, so each parameter's gradient is made in the compute
  // dtype; the captured f32 graph has no such cast where the gradient comes
  // from an f32 op (e.g. a bias gradient summed from the f32 gradient of
  // `bf16 logits + f32 buffer`).
  Operation *terminator = s.body().getTerminator();
  for (ParamInfo &info : s.params) {
    if (!info.gradResult)
      continue;
    Value grad = terminator->getOperand(*info.gradResult);
    if (dtypeOf(grad) != original)
      continue;
    SmallVector<AtenOp> chain = getGradientChain(grad, terminator);
    if (chain.empty() || isViewAtenOp(chain.back()) ||
        chain.back().getOpName() == "aten::_to_copy")
      continue;
    for (AtenOp op : llvm::reverse(chain))
      lowerToCompute(op);
  }
}

/// A parameter's gradient crosses between pipeline ranks (a shared
/// parameter's, from its gradient rank to the others that hold it) in the
/// dtype it is reduced in, else the compute dtype: as accumulated, so every
/// holder reduces the same value.
static void castGradientTransfers(ShardingState &s) {
  Type wire = s.config.gradReduceDtype ? s.config.gradReduceDtype
                                       : s.config.computeDtype;
  if (!wire)
    return;
  for (auto send : s.body().getOps<SendStartOp>()) {
    Value grad = send.getInput();
    if (dtypeOf(grad) == wire || !isGradientResult(s, grad))
      continue;
    OpBuilder b(send);
    s.tagger.module = b.getStringAttr(getModulePath(send));
    s.tagger.phase = Phase::backward;
    send.getInputMutable().assign(
        s.tagger.castTo(b, send.getLoc(), grad, wire));
  }
  for (auto recv : s.body().getOps<RecvStartOp>()) {
    Value received = receivedValue(recv);
    if (!received || dtypeOf(received) == wire ||
        !isGradientResult(s, received))
      continue;
    auto type = cast<RankedTensorType>(received.getType()).clone(wire);
    recv.getFuture().setType(FutureType::get(recv.getContext(), type));
    received.setType(type);
  }
}

void fsdp::applyMixedPrecision(ShardingState &s) {
  Type original = s.params.front().fullType.getElementType();
  Type compute = s.config.computeDtype;
  if (compute && compute != original) {
    ComputeLowering lowering(s, original);
    lowering.castForwardInputs();
    lowering.recordSends();
    lowering.lowerReceives();
    lowering.lowerOps();
    lowering.lowerGradientProducers();
    lowering.castSends();
  }
  accumulateInReduceDtype(s);
  castGradientTransfers(s);
}
