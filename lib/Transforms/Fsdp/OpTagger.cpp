//===- OpTagger.cpp - Ops loom-fsdp inserts, tagged with module and phase -===//

#include "Fsdp.h"

using namespace mlir;
using namespace loom;
using namespace loom::fsdp;

void OpTagger::tag(Operation *op) const {
  op->setAttr(LoomDialect::kModuleAttrName, module);
  op->setAttr(LoomDialect::kPhaseAttrName,
              PhaseAttr::get(op->getContext(), phase));
  if (calls)
    op->setAttr(LoomDialect::kCallsAttrName, calls);
}

Value OpTagger::aten(OpBuilder &b, Location loc, StringRef kernel, Type result,
                     ValueRange inputs, ArrayRef<Attribute> args,
                     DictionaryAttr kwargs) const {
  auto op = AtenOp::create(
      b, loc, TypeRange{result}, kernel, inputs, b.getArrayAttr(args),
      kwargs ? kwargs : b.getDictionaryAttr({}), ArrayAttr());
  tag(op);
  return op->getResult(0);
}

Value OpTagger::view(OpBuilder &b, Location loc, Value v,
                     ArrayRef<int64_t> shape, StringRef kernel) const {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  return aten(
      b, loc, kernel, type.clone(shape), v,
      {OperandRefAttr::get(b.getContext(), 0), b.getI64ArrayAttr(shape)});
}

Value OpTagger::castTo(OpBuilder &b, Location loc, Value v,
                       Type elementType) const {
  auto type = cast<RankedTensorType>(v.getType());
  if (!elementType || type.getElementType() == elementType)
    return v;
  return aten(
      b, loc, "aten::_to_copy.default", type.clone(elementType), v,
      {OperandRefAttr::get(b.getContext(), 0)},
      b.getDictionaryAttr(b.getNamedAttr("dtype", TypeAttr::get(elementType))));
}

SmallVector<Value> OpTagger::splitWithSizes(OpBuilder &b, Location loc, Value v,
                                            ArrayRef<int64_t> sizes,
                                            int64_t dim) const {
  AtenOp op = buildSplitWithSizes(b, loc, v, sizes, dim);
  tag(op);
  return SmallVector<Value>(op->getResults());
}

Value OpTagger::finishCollective(OpBuilder &b, Location loc, Operation *start,
                                 Type type) const {
  tag(start);
  auto wait = WaitOp::create(b, loc, type, start->getResult(0));
  tag(wait);
  return wait.getResult();
}
