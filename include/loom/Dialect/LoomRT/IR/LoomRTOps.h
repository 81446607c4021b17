//===- LoomRTOps.h - Operations of the loomrt dialect ---------------------===//

#ifndef LOOM_DIALECT_LOOMRT_IR_LOOMRTOPS_H
#define LOOM_DIALECT_LOOMRT_IR_LOOMRTOPS_H

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Dialect/LoomRT/IR/LoomRTDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

#define GET_OP_CLASSES
#include "loom/Dialect/LoomRT/IR/LoomRTOps.h.inc"

namespace loom::rt {

/// The slot a value lives in once slots are assigned: the `slot` of its
/// binding or its entry in the defining `loomrt.aten`'s `slots`; -1 when
/// the value has no slot (not assigned yet, or a result nothing reads).
int64_t getSlot(mlir::Value value);

/// The stream an instruction runs on; std::nullopt for ops that are not
/// instructions (bindings, outputs).
std::optional<int64_t> getStream(mlir::Operation *op);

/// The artifact's name of a dtype (`f32`, `bf16`, `i64`, `bool`, ...), or
/// an empty string for an element type artifact format v1 lacks.
llvm::StringRef getDtypeName(mlir::Type elementType);

} // namespace loom::rt

#endif // LOOM_DIALECT_LOOMRT_IR_LOOMRTOPS_H
