//===- AccumulateGradients.cpp - Run a step on M microbatches, average ----===//

#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace loom {
#define GEN_PASS_DEF_LOOMACCUMULATEGRADIENTS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {
struct LoomAccumulateGradientsPass
    : public loom::impl::LoomAccumulateGradientsBase<
          LoomAccumulateGradientsPass> {
  using LoomAccumulateGradientsBase::LoomAccumulateGradientsBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func->hasAttr(LoomDialect::kStepAttrName))
      return markAllAnalysesPreserved();
    if (microbatches < 1) {
      func.emitOpError("--loom-accumulate-gradients: microbatches must be at "
                       "least 1, got ")
          << static_cast<int64_t>(microbatches);
      return signalPassFailure();
    }
    if (microbatches == 1)
      return markAllAnalysesPreserved();
    if (failed(accumulate(func)))
      signalPassFailure();
  }

  /// A tagged aten op of the accumulation (phase backward for gradients,
  /// forward for the batch slices and the loss).
  static loom::AtenOp createAten(OpBuilder &b, Location loc, StringRef kernel,
                                 Type type, ValueRange inputs,
                                 ArrayRef<Attribute> args, Phase phase) {
    auto op = loom::AtenOp::create(b, loc, TypeRange{type},
                                   b.getStringAttr(kernel), inputs,
                                   b.getArrayAttr(args),
                                   b.getDictionaryAttr({}), ArrayAttr());
    op->setAttr(LoomDialect::kModuleAttrName, b.getStringAttr(""));
    op->setAttr(LoomDialect::kPhaseAttrName,
                PhaseAttr::get(b.getContext(), phase));
    return op;
  }

  LogicalResult accumulate(func::FuncOp func) {
    MLIRContext *ctx = &getContext();
    if (func->getAttr(LoomDialect::kOptimizerAttrName))
      return func.emitOpError("already has an optimizer attached; run "
                              "loom-accumulate-gradients before "
                              "loom-attach-optimizer");
    // The arguments by name: the step verifier guarantees that a buffer
    // mutation targets a buffer argument of its type.
    llvm::StringMap<BlockArgument> args;
    for (BlockArgument arg : func.getArguments())
      if (auto name = func.getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), LoomDialect::kNameAttrName))
        args[name.getValue()] = arg;
    SmallVector<Role> roles;
    // The buffer each buffer-mutation result writes.
    DenseMap<unsigned, BlockArgument> written;
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
      Role role =
          func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName)
              .getValue();
      roles.push_back(role);
      if (role == Role::buffer_mutation)
        written[i] = args.lookup(func.getResultAttrOfType<StringAttr>(
                                         i, LoomDialect::kTargetAttrName)
                                     .getValue());
      else if (role != Role::loss && role != Role::grad)
        return func.emitOpError("result #")
               << i << " has role " << stringifyRole(role)
               << "; gradient accumulation handles steps that return the "
                  "loss, gradients and buffer mutations of the step's "
                  "buffers";
    }
    Block &body = func.getBody().front();
    for (Operation &op : body)
      if (isa<WaitOp>(op))
        return op.emitOpError("is a collective; run "
                              "loom-accumulate-gradients before the "
                              "distribution passes");

    // Batch inputs take M times the rows of their batch dim; an unbatched
    // one is every microbatch's whole.
    SmallVector<std::pair<BlockArgument, int64_t>> batch;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      auto role =
          func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
      std::optional<int64_t> dim = getBatchDim(func, i);
      if (!role || role.getValue() != Role::input || !dim)
        continue;
      auto type = cast<RankedTensorType>(func.getArgument(i).getType());
      if (type.getRank() == 0)
        return func.emitOpError("batch input #")
               << i
               << " is 0-d; microbatches split the batch dim of "
                  "every batch input not marked '"
               << LoomDialect::kUnbatchedAttrName << "'";
      batch.push_back({func.getArgument(i), *dim});
    }

    auto ret = cast<func::ReturnOp>(body.getTerminator());
    SmallVector<Operation *> original;
    for (Operation &op : body.without_terminator())
      original.push_back(&op);

    OpBuilder b(ret);
    // One running sum per result, added to after each microbatch, so only
    // one microbatch's gradients are live besides the sums.
    SmallVector<Value> sums(func.getNumResults());
    // Buffer mutations chain: microbatch k reads what microbatch k - 1
    // wrote (batch norm's running statistics are updated once per
    // microbatch, as a loop running the module M times updates them), and
    // the step returns what the last one wrote.
    IRMapping previous;
    for (int64_t k = 0; k < microbatches; ++k) {
      IRMapping map = previous;
      for (auto [arg, dim] : batch) {
        Location loc = NameLoc::get(
            StringAttr::get(ctx, "microbatch" + Twine(k)), arg.getLoc());
        map.map(arg, buildMicrobatchSlice(b, loc, arg, dim, k));
      }
      // Each copy records its microbatch, so that later passes (loom-fsdp)
      // can unshard and reshard per microbatch.
      for (Operation *op : original)
        b.clone(*op, map)->setAttr(LoomDialect::kMicrobatchAttrName,
                                   b.getI64IntegerAttr(k));
      previous.clear();
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        Value value = map.lookupOrDefault(v);
        if (BlockArgument buffer = written.lookup(i)) {
          previous.map(buffer, value);
          sums[i] = value;
          continue;
        }
        Phase phase =
            roles[i] == Role::loss ? Phase::forward : Phase::backward;
        sums[i] = !sums[i] ? value
                           : createAten(b, value.getLoc(), "aten::add.Tensor",
                                        value.getType(), {sums[i], value},
                                        {OperandRefAttr::get(ctx, 0),
                                         OperandRefAttr::get(ctx, 1)},
                                        phase)
                                 .getResult(0);
      }
    }

    // The mean over the microbatches (a buffer: the last one's value).
    for (auto [i, sum] : llvm::enumerate(sums)) {
      if (written.count(i)) {
        ret->setOperand(i, sum);
        continue;
      }
      Phase phase = roles[i] == Role::loss ? Phase::forward : Phase::backward;
      Type type = sum.getType();
      Location loc = sum.getLoc();
      Value mean = createAten(b, loc, "aten::div.Tensor", type, sum,
                              {OperandRefAttr::get(ctx, 0),
                               b.getF64FloatAttr(double(microbatches))},
                              phase)
                       .getResult(0);
      ret->setOperand(i, mean);
    }
    // The return no longer reads the original body; the copies replace it.
    for (Operation *op : llvm::reverse(original))
      op->erase();

    // Only now widen the batch arguments: the slices above were built with
    // the microbatch type as their result.
    SmallVector<Type> argTypes(func.getArgumentTypes());
    for (auto [arg, dim] : batch) {
      auto type = cast<RankedTensorType>(arg.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[dim] *= microbatches;
      auto wide = RankedTensorType::get(shape, type.getElementType());
      arg.setType(wide);
      argTypes[arg.getArgNumber()] = wide;
    }
    func.setFunctionType(
        FunctionType::get(ctx, argTypes, func.getResultTypes()));
    return success();
  }
};
} // namespace
