//===- LoomOps.h - Operations of the loom dialect -------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMOPS_H
#define LOOM_DIALECT_LOOM_IR_LOOMOPS_H

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "loom/Dialect/Loom/IR/LoomOps.h.inc"

namespace loom {

/// Dtype and shape of a tensor as ATen sees it, for shape rules.
struct TensorInfo {
  llvm::SmallVector<int64_t> shape;
  mlir::Type elementType;
};

/// Infers the result tensors of a known ATen operator from its operands and
/// arguments. Returns std::nullopt when Loom has no rule for `kernel`, and
/// failure (with a diagnostic on `op`) when the arguments break the rule.
std::optional<mlir::FailureOr<llvm::SmallVector<TensorInfo>>>
inferAtenResults(AtenOp op);

/// The phase of an op (from `loom.phase`), if tagged.
std::optional<Phase> getPhase(mlir::Operation *op);
/// The module path of an op (from `loom.module`); empty for the root module.
llvm::StringRef getModulePath(mlir::Operation *op);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_LOOMOPS_H
