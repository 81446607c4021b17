//===- LoomRTDialect.h - The loomrt dialect, its attributes and types -----===//

#ifndef LOOM_DIALECT_LOOMRT_IR_LOOMRTDIALECT_H
#define LOOM_DIALECT_LOOMRT_IR_LOOMRTDIALECT_H

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "loom/Dialect/LoomRT/IR/LoomRTOpsDialect.h.inc"

#include "loom/Dialect/LoomRT/IR/LoomRTEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/LoomRT/IR/LoomRTAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "loom/Dialect/LoomRT/IR/LoomRTOpsTypes.h.inc"

#endif // LOOM_DIALECT_LOOMRT_IR_LOOMRTDIALECT_H
