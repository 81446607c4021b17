//===- LoomRTDialect.cpp - loomrt dialect registration and attributes -----===//

#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom::rt;

#include "loom/Dialect/LoomRT/IR/LoomRTEnums.cpp.inc"
#include "loom/Dialect/LoomRT/IR/LoomRTOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/LoomRT/IR/LoomRTAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "loom/Dialect/LoomRT/IR/LoomRTOpsTypes.cpp.inc"

void LoomRTDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "loom/Dialect/LoomRT/IR/LoomRTOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "loom/Dialect/LoomRT/IR/LoomRTAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "loom/Dialect/LoomRT/IR/LoomRTOpsTypes.cpp.inc"
      >();
}

LogicalResult DeviceAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef name) {
  // The devices a runtime can substitute its own for; a `meta` tensor
  // would make a shape-only program.
  StringRef index = name;
  if (name == "cpu" || name == "cuda" ||
      (index.consume_front("cuda:") && !index.empty() &&
       llvm::all_of(index, [](char c) { return llvm::isDigit(c); })))
    return success();
  return emitError() << "unknown device '" << name
                     << "' (expected cpu, cuda or cuda:N)";
}

LogicalResult FutureType::verify(function_ref<InFlightDiagnostic()> emitError,
                                 Type valueType) {
  if (!isa<RankedTensorType, NoneType>(valueType))
    return emitError() << "a future holds a ranked tensor or none (a send's "
                          "completion), got "
                       << valueType;
  return success();
}

StringRef loom::rt::getDtypeName(Type type) {
  if (auto complex = dyn_cast<ComplexType>(type)) {
    Type e = complex.getElementType();
    return e.isF32() ? "c64" : e.isF64() ? "c128" : "";
  }
  if (type.isF32())
    return "f32";
  if (type.isF64())
    return "f64";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  auto integer = dyn_cast<IntegerType>(type);
  if (!integer)
    return "";
  if (integer.getWidth() == 1)
    return "bool";
  if (integer.isUnsigned())
    return integer.getWidth() == 8 ? "u8" : "";
  switch (integer.getWidth()) {
  case 8:
    return "i8";
  case 16:
    return "i16";
  case 32:
    return "i32";
  case 64:
    return "i64";
  default:
    return "";
  }
}
