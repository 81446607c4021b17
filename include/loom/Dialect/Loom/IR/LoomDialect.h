//===- LoomDialect.h - The loom dialect, its attributes and types ---------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H
#define LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "loom/Dialect/Loom/IR/LoomOpsDialect.h.inc"

#include "loom/Dialect/Loom/IR/LoomEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/Loom/IR/LoomAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "loom/Dialect/Loom/IR/LoomOpsTypes.h.inc"

#endif // LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H
