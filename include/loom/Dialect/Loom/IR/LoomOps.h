//===- LoomOps.h - Operations of the loom dialect -------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMOPS_H
#define LOOM_DIALECT_LOOM_IR_LOOMOPS_H

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
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

/// Checks the `returns` of an ATen call (`loom.aten`, `loomrt.aten`): each
/// entry is `unit`, a result index or a list of them, and every result of
/// `op` appears exactly once.
mlir::LogicalResult verifyAtenReturns(mlir::Operation *op,
                                      mlir::ArrayAttr returns);

/// Checks that an update of `op` passes the number of state tensors the
/// optimizer keeps per parameter.
mlir::LogicalResult verifyOptimizerStateCount(mlir::Operation *op,
                                              const OptimizerConfig &config,
                                              size_t numState);

/// The step functions of `module` (`func.func` with `loom.step`), in order.
llvm::SmallVector<mlir::func::FuncOp> getStepFunctions(mlir::ModuleOp module);

/// Builds `aten::split_with_sizes.default(v, sizes, dim)`: one result per
/// size, each of `v`'s shape with `dim` set to that size.
AtenOp buildSplitWithSizes(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value v, llvm::ArrayRef<int64_t> sizes,
                           int64_t dim);

/// Builds `aten::clone.default(v, memory_format=torch.contiguous_format)`:
/// `v` in storage of its own, laid out row-major.
AtenOp buildContiguousClone(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value v);

/// Microbatch `index` of batch input `v` along its batch dim `dim`, whose
/// microbatch has `v`'s type: `aten::slice`, then for `dim` > 0 a contiguous
/// clone (the step was traced on a contiguous microbatch; a slice of a later
/// dim is strided). Both ops are forward ops of the root module in
/// microbatch `index`.
mlir::Value buildMicrobatchSlice(mlir::OpBuilder &b, mlir::Location loc,
                                 mlir::Value v, int64_t dim, int64_t index);

/// Row-major strides of `shape`, in elements.
llvm::SmallVector<int64_t> getContiguousStrides(llvm::ArrayRef<int64_t> shape);

/// The phase of an op (from `loom.phase`), if tagged.
std::optional<Phase> getPhase(mlir::Operation *op);
/// The module path of an op (from `loom.module`); empty for the root module.
llvm::StringRef getModulePath(mlir::Operation *op);
/// The microbatch of an op (from `loom.microbatch`), if tagged.
std::optional<int64_t> getMicrobatch(mlir::Operation *op);
/// The batch dim of a step argument (from `loom.batch_dim`; 0 without it):
/// the dim data parallelism and microbatching split; none for a
/// `loom.unbatched` one, which every rank and microbatch takes whole.
std::optional<int64_t> getBatchDim(mlir::func::FuncOp func, unsigned argIndex);
/// The same from a step argument's attribute dictionary.
std::optional<int64_t> getBatchDim(mlir::DictionaryAttr argAttrs);
/// Which call (0-based, from `loom.calls`) of the module at `modulePath`
/// `op` ran in: 0 unless that module ran more than once per forward.
int64_t getCallIndex(mlir::Operation *op, llvm::StringRef modulePath);

/// Bytes of one element of `type` as ATen stores it (bool is one byte).
int64_t getElementBytes(mlir::Type type);
/// Bytes of a statically shaped tensor.
int64_t getTensorBytes(mlir::RankedTensorType type);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_LOOMOPS_H
