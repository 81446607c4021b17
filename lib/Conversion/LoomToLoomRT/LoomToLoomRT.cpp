//===- LoomToLoomRT.cpp - Patterns from loom ops to loomrt instructions ---===//

#include "loom/Conversion/LoomToLoomRT/LoomToLoomRT.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"

using namespace mlir;
using namespace loom;

/// The program's streams (docs/distributed.md): everything but the
/// collectives and their waits runs on `compute`.
static constexpr int64_t kComputeStream = 0;
static constexpr int64_t kCommStream = 1;

FailureOr<Attribute>
loom::convertAtenArgument(Attribute value, StringRef keyword,
                          function_ref<InFlightDiagnostic()> emitError) {
  MLIRContext *ctx = value.getContext();
  Builder b(ctx);
  if (isa<OperandRefAttr, UnitAttr, BoolAttr, TypeAttr>(value))
    return value;
  if (auto i = dyn_cast<IntegerAttr>(value))
    return Attribute(b.getI64IntegerAttr(i.getValue().getSExtValue()));
  if (auto f = dyn_cast<FloatAttr>(value))
    return Attribute(b.getF64FloatAttr(f.getValueAsDouble()));
  if (auto s = dyn_cast<StringAttr>(value)) {
    StringRef text = s.getValue();
    // The importer spells Device, Layout and MemoryFormat arguments as
    // strings; factory ops take the device as the keyword `device`.
    if (keyword == "device") {
      auto device = rt::DeviceAttr::getChecked(emitError, ctx, text);
      if (!device)
        return failure();
      return Attribute(device);
    }
    if (text.consume_front("torch.")) {
      if (std::optional<rt::Layout> layout = rt::symbolizeLayout(text))
        return Attribute(rt::LayoutAttr::get(ctx, *layout));
      if (std::optional<rt::MemoryFormat> format =
              rt::symbolizeMemoryFormat(text))
        return Attribute(rt::MemoryFormatAttr::get(ctx, *format));
    }
    return value;
  }
  if (auto list = dyn_cast<ArrayAttr>(value)) {
    SmallVector<Attribute> elements;
    for (Attribute element : list) {
      if (isa<ArrayAttr>(element))
        return emitError() << "argument " << value
                           << " nests lists, which no ATen schema takes";
      FailureOr<Attribute> converted =
          convertAtenArgument(element, keyword, emitError);
      if (failed(converted))
        return failure();
      elements.push_back(*converted);
    }
    return Attribute(b.getArrayAttr(elements));
  }
  return emitError() << "argument " << value
                     << " has no encoding in the artifact";
}

namespace {
struct AtenOpLowering : public OpConversionPattern<loom::AtenOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(loom::AtenOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // A cast eager makes only under a mixed-precision policy that no
    // loom-fsdp{param-dtype} made real converts a value to its own dtype:
    // it is the value.
    if (op->hasAttr(LoomDialect::kPolicyCastAttrName)) {
      rewriter.replaceOp(op, adaptor.getInputs());
      return success();
    }
    // loom-lower-to-rt reports unencodable arguments before rewriting, so a
    // failure here is only a pattern that does not apply.
    auto silent = [&] { return InFlightDiagnostic(); };
    SmallVector<Attribute> args;
    for (Attribute arg : op.getArgs()) {
      FailureOr<Attribute> converted = convertAtenArgument(arg, "", silent);
      if (failed(converted))
        return rewriter.notifyMatchFailure(op, "unencodable argument");
      args.push_back(*converted);
    }
    SmallVector<NamedAttribute> kwargs;
    for (NamedAttribute kwarg : op.getKwargs()) {
      FailureOr<Attribute> converted = convertAtenArgument(
          kwarg.getValue(), kwarg.getName().getValue(), silent);
      if (failed(converted))
        return rewriter.notifyMatchFailure(op, "unencodable keyword argument");
      kwargs.emplace_back(kwarg.getName(), *converted);
    }
    auto lowered = rt::AtenOp::create(
        rewriter, op.getLoc(), op.getResultTypes(), op.getKernelAttr(),
        adaptor.getInputs(), rewriter.getArrayAttr(args),
        rewriter.getDictionaryAttr(kwargs), op.getReturnsAttr(),
        rewriter.getI64IntegerAttr(kComputeStream),
        /*slots=*/DenseI64ArrayAttr());
    // loom.module and loom.phase, for traces.
    lowered->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceOp(op, lowered.getResults());
    return success();
  }
};

struct OptimizerUpdateLowering : public OpConversionPattern<OptimizerUpdateOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(OptimizerUpdateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // The update's own hyperparameters where its group's differ from the
    // program's (the step's).
    Attribute stepOptimizer;
    if (auto program = op->getParentOfType<rt::ProgramOp>())
      stepOptimizer = program.getOptimizerAttr();
    Attribute own =
        op.getOptimizer() != stepOptimizer ? op.getOptimizer() : Attribute();
    auto lowered = rt::OptimizerOp::create(
        rewriter, op.getLoc(), adaptor.getParam(), adaptor.getGrad(),
        adaptor.getState(), rewriter.getI64IntegerAttr(kComputeStream), own);
    lowered->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    // In place: after the update the parameter and state bindings hold the
    // new values, so they stand for the op's results.
    SmallVector<Value> updated = {adaptor.getParam()};
    llvm::append_range(updated, adaptor.getState());
    rewriter.replaceOp(op, updated);
    return success();
  }
};
/// Issues the collective on the comm stream once compute has produced its
/// input: an event recorded on compute, waited for on comm.
template <typename StartOp>
struct CollectiveStartLowering : public OpConversionPattern<StartOp> {
  using OpConversionPattern<StartOp>::OpConversionPattern;
  using OpAdaptor = typename StartOp::Adaptor;

  LogicalResult
  matchAndRewrite(StartOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MLIRContext *ctx = op.getContext();
    auto valueType = dyn_cast<RankedTensorType>(
        cast<FutureType>(op.getFuture().getType()).getValueType());
    if (!valueType)
      return rewriter.notifyMatchFailure(op, "a collective without a value");
    rt::CollectiveKind kind;
    IntegerAttr dim, root;
    ReduceKindAttr reduction;
    if constexpr (std::is_same_v<StartOp, AllGatherStartOp>) {
      kind = rt::CollectiveKind::all_gather;
      dim = op.getDimAttr();
    } else if constexpr (std::is_same_v<StartOp, ReduceScatterStartOp>) {
      kind = rt::CollectiveKind::reduce_scatter;
      dim = op.getDimAttr();
      reduction = op.getReductionAttr();
    } else if constexpr (std::is_same_v<StartOp, AllSliceStartOp>) {
      kind = rt::CollectiveKind::all_slice;
      dim = op.getDimAttr();
    } else if constexpr (std::is_same_v<StartOp, AllReduceStartOp>) {
      kind = rt::CollectiveKind::all_reduce;
      reduction = op.getReductionAttr();
    } else {
      kind = rt::CollectiveKind::broadcast;
      root = op.getRootAttr();
    }
    auto event = rt::RecordEventOp::create(
        rewriter, op.getLoc(), rt::EventType::get(ctx), rewriter.getI64IntegerAttr(kComputeStream));
    rt::WaitEventOp::create(rewriter, op.getLoc(), event.getEvent(),
                            rewriter.getI64IntegerAttr(kCommStream));
    auto start = rt::CollectiveStartOp::create(
        rewriter, op.getLoc(), rt::FutureType::get(ctx, valueType),
        rt::CollectiveKindAttr::get(ctx, kind), adaptor.getInput(),
        op.getAxes(), dim, reduction, root, /*peer=*/IntegerAttr(),
        /*tag=*/IntegerAttr(), rewriter.getI64IntegerAttr(kCommStream),
        /*slot=*/IntegerAttr());
    start->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceOp(op, start.getFuture());
    return success();
  }
};

/// A send issues on the comm stream once compute has produced what it
/// sends (as a collective); a recv reads nothing of this rank's, so it is
/// issued on comm at once.
struct SendStartLowering : public OpConversionPattern<SendStartOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(SendStartOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MLIRContext *ctx = op.getContext();
    auto event = rt::RecordEventOp::create(
        rewriter, op.getLoc(), rt::EventType::get(ctx),
        rewriter.getI64IntegerAttr(kComputeStream));
    rt::WaitEventOp::create(rewriter, op.getLoc(), event.getEvent(),
                            rewriter.getI64IntegerAttr(kCommStream));
    auto start = rt::CollectiveStartOp::create(
        rewriter, op.getLoc(), rt::FutureType::get(ctx, NoneType::get(ctx)),
        rt::CollectiveKindAttr::get(ctx, rt::CollectiveKind::send),
        adaptor.getInput(), op.getAxes(), /*dim=*/IntegerAttr(),
        /*reduction=*/ReduceKindAttr(), /*root=*/IntegerAttr(),
        op.getPeerAttr(), op.getTagAttr(),
        rewriter.getI64IntegerAttr(kCommStream), /*slot=*/IntegerAttr());
    start->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceOp(op, start.getFuture());
    return success();
  }
};

struct RecvStartLowering : public OpConversionPattern<RecvStartOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(RecvStartOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MLIRContext *ctx = op.getContext();
    auto valueType = dyn_cast<RankedTensorType>(
        cast<FutureType>(op.getFuture().getType()).getValueType());
    if (!valueType)
      return rewriter.notifyMatchFailure(op, "a recv without a tensor");
    auto start = rt::CollectiveStartOp::create(
        rewriter, op.getLoc(), rt::FutureType::get(ctx, valueType),
        rt::CollectiveKindAttr::get(ctx, rt::CollectiveKind::recv),
        /*input=*/Value(), op.getAxes(), /*dim=*/IntegerAttr(),
        /*reduction=*/ReduceKindAttr(), /*root=*/IntegerAttr(),
        op.getPeerAttr(), op.getTagAttr(),
        rewriter.getI64IntegerAttr(kCommStream), /*slot=*/IntegerAttr());
    start->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceOp(op, start.getFuture());
    return success();
  }
};

/// Waits on the comm stream, then lets compute go on after it: an event
/// recorded on comm, waited for on compute. The wait of a send yields
/// nothing compute reads, so compute does not wait for it.
struct WaitLowering : public OpConversionPattern<loom::WaitOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(loom::WaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MLIRContext *ctx = op.getContext();
    if (!isa<rt::FutureType>(adaptor.getFuture().getType()))
      return rewriter.notifyMatchFailure(op, "not a lowered collective");
    auto wait = rt::WaitOp::create(
        rewriter, op.getLoc(),
        op.getResult() ? op.getResult().getType() : Type(), adaptor.getFuture(),
        rewriter.getI64IntegerAttr(kCommStream),
        /*slot=*/IntegerAttr());
    wait->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    if (!op.getResult()) {
      rewriter.eraseOp(op);
      return success();
    }
    auto event = rt::RecordEventOp::create(
        rewriter, op.getLoc(), rt::EventType::get(ctx), rewriter.getI64IntegerAttr(kCommStream));
    rt::WaitEventOp::create(rewriter, op.getLoc(), event.getEvent(),
                            rewriter.getI64IntegerAttr(kComputeStream));
    rewriter.replaceOp(op, wait.getResult());
    return success();
  }
};
} // namespace

void loom::populateLoomToLoomRTPatterns(RewritePatternSet &patterns) {
  patterns.add<AtenOpLowering, OptimizerUpdateLowering,
               CollectiveStartLowering<AllGatherStartOp>,
               CollectiveStartLowering<ReduceScatterStartOp>,
               CollectiveStartLowering<AllSliceStartOp>,
               CollectiveStartLowering<AllReduceStartOp>,
               CollectiveStartLowering<BroadcastStartOp>, SendStartLowering,
               RecvStartLowering, WaitLowering>(patterns.getContext());
}
