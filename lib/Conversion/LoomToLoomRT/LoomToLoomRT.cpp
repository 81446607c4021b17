//===- LoomToLoomRT.cpp - Patterns from loom ops to loomrt instructions ---===//

#include "loom/Conversion/LoomToLoomRT/LoomToLoomRT.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"

using namespace mlir;
using namespace loom;

/// Everything runs on the program's only stream until a pass adds more.
static constexpr int64_t kComputeStream = 0;

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
    auto lowered = rt::OptimizerOp::create(
        rewriter, op.getLoc(), adaptor.getParam(), adaptor.getGrad(),
        adaptor.getState(), rewriter.getI64IntegerAttr(kComputeStream));
    lowered->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    // In place: after the update the parameter and state bindings hold the
    // new values, so they stand for the op's results.
    SmallVector<Value> updated = {adaptor.getParam()};
    llvm::append_range(updated, adaptor.getState());
    rewriter.replaceOp(op, updated);
    return success();
  }
};
} // namespace

void loom::populateLoomToLoomRTPatterns(RewritePatternSet &patterns) {
  patterns.add<AtenOpLowering, OptimizerUpdateLowering>(patterns.getContext());
}
