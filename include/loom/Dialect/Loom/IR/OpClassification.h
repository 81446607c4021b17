//===- OpClassification.h - What kind of operation a loom op is -----------===//
//
// The one place that says which ATen operators are views, which write in
// place and which draw random numbers, what kind of collective a start op
// is, and whether an op's module lies under a module prefix. Passes and
// analyses ask here instead of keeping their own lists, so that one pass
// never moves an op another pass pins.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_OPCLASSIFICATION_H
#define LOOM_DIALECT_LOOM_IR_OPCLASSIFICATION_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace loom {

/// The ATen operator without its overload: "aten::bernoulli.p" and
/// "aten::bernoulli" both give "aten::bernoulli". Schema names contain a dot
/// only before the overload.
llvm::StringRef stripAtenOverload(llvm::StringRef schemaName);

/// Whether an ATen operator draws from the random generator (`rand_like`,
/// `bernoulli`, `native_dropout`, `normal_`, ...). Such ops keep their
/// relative order and are never moved or recomputed: the generator's stream
/// is consumed in program order, as in eager PyTorch. `schemaName` may carry
/// an overload.
bool isRandomAtenOp(llvm::StringRef schemaName);

/// Whether an ATen operator returns a view of its first argument and
/// allocates nothing (`view`, `_unsafe_view`, `permute`, `t`, `transpose`,
/// `expand`, `alias`, `slice`, `select`, `unsqueeze`, `squeeze`, `detach`,
/// `as_strided`). `schemaName` may carry an overload.
bool isViewAtenOp(llvm::StringRef schemaName);

/// Whether an ATen operator writes into its first argument: ATen's in-place
/// variants end in one underscore (`add_`, `bernoulli_`, `copy_`) and the
/// in-place dunders start with `__i` (`__iand__`); `__and__` and
/// `_to_copy` are not in place. `schemaName` may carry an overload.
bool isInPlaceAtenOp(llvm::StringRef schemaName);

/// Whether result `index` of an ATen operator is a float32 statistic
/// whatever the floating dtype of its inputs: the logsumexp of the fused
/// attention kernels and the rstd of `_fused_rms_norm` (PyTorch 2.9.1: a
/// bf16 call returns them in float32, on the CPU and on CUDA). Mixed
/// precision leaves such a result, and the operands it feeds, in float32.
/// `schemaName` may carry an overload.
bool isFloat32StatisticResult(llvm::StringRef schemaName, unsigned index);

/// Where a functional batch norm forward keeps its arguments: the two
/// forms AOTAutograd traces a training-mode `F.batch_norm` to
/// (`aten::_native_batch_norm_legit_functional.default`, with running
/// statistics, and `aten::_native_batch_norm_legit.no_stats`, without).
/// Positions are in the schema's argument list; results are (out,
/// save_mean, save_rstd[, new running_mean, new running_var]).
struct BatchNormForm {
  unsigned training, momentum, eps;
  std::optional<unsigned> runningMean, runningVar;
};
/// The form of `schemaName` (with its overload), or std::nullopt for any
/// other operator.
std::optional<BatchNormForm> getBatchNormForm(llvm::StringRef schemaName);

/// The above for an op: true only for a `loom.aten` of such an operator
/// (`loomrt.aten` callers pass its name).
bool isRandomAtenOp(mlir::Operation *op);
bool isViewAtenOp(mlir::Operation *op);
bool isInPlaceAtenOp(mlir::Operation *op);

/// The ATen schema name a `loom.aten` or `loomrt.aten` calls
/// ("aten::mse_loss.default"), or "" for any other op.
llvm::StringRef getAtenKernel(mlir::Operation *op);

/// The operand whose storage the results of ATen call `op` (`loom.aten` or
/// `loomrt.aten`) share at runtime, or null when they are allocated: its
/// first argument for the view ops (isViewAtenOp); for the splits (`split`,
/// `split_with_sizes`, `chunk`, `unbind`, `narrow`), whose pieces keep the
/// whole buffer alive until the last of them is freed (FSDP unpacks a
/// gathered buffer with one); and for a `reshape` of a tensor the runtime
/// holds contiguous (of any other, reshape copies). Liveness sweeps (the
/// peak-memory analysis, loom-sac-ilp's profile) ask here, so that they agree
/// on which values keep which storage alive.
mlir::Value getAliasedOperand(mlir::Operation *op);

/// What a `loom.*_start` collective does, as the cost model prices it.
enum class CollectiveKind {
  allGather,
  reduceScatter,
  allReduce,
  broadcast,
  sendRecv
};
llvm::StringRef stringifyCollectiveKind(CollectiveKind k);

/// The collective kind of a `loom.*_start` op that communicates, or
/// std::nullopt for other ops. `loom.all_slice_start` has none: each rank
/// keeps its own slice and nothing crosses the network.
std::optional<CollectiveKind> getCollectiveKind(mlir::Operation *op);

/// Whether every rank of the group runs a collective of this kind alike
/// (all but point-to-point send/recv), so that moving it within the step
/// moves it on every rank.
bool isGroupCollective(CollectiveKind k);

/// Whether module path `path` is `prefix` or lies under it, by whole
/// components: `layers.1.attn` is in `layers.1` and in `layers`, while
/// `layers.10` is not in `layers.1`. The empty prefix is the root module,
/// which holds every path.
bool isInModule(llvm::StringRef path, llvm::StringRef prefix);

/// The longest module path every one of `paths` is in (isInModule), by
/// whole components: `layers.1.attn` and `layers.10` give `layers`. A prefix
/// of `paths.front()`; empty for no paths.
llvm::StringRef getCommonModule(llvm::ArrayRef<llvm::StringRef> paths);

/// The module that owns a parameter or buffer: its fully-qualified name
/// without the last component (empty for one of the root module).
llvm::StringRef getOwnerModule(llvm::StringRef qualifiedName);

/// The repeated blocks of a model, as `fully_shard` and `checkpoint_wrapper`
/// are applied to `model.layers[i]`, found from its structure: the blocks of
/// the container with the most numbered children, whatever it is named
/// (`layers.N`, `stack.N`, a root `Sequential`'s `N`). A name's first
/// numbered component that is not its last one (the tensor) names its block
/// and, before it, its container. Containers tied at the most (an encoder's
/// and a decoder's `layers.N`) all count. Returns each block once, grouped
/// by container in order of first appearance, or nothing when no container
/// has `minBlocks` blocks.
llvm::SmallVector<std::string>
getRepeatedBlocks(llvm::ArrayRef<llvm::StringRef> qualifiedNames,
                  unsigned minBlocks = 1);

/// getRepeatedBlocks with its default, the units `loom-fsdp`, `loom-remat`
/// and `loom-sac-ilp` use when not told.
llvm::SmallVector<std::string>
getLayerBlocks(llvm::ArrayRef<llvm::StringRef> qualifiedNames);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_OPCLASSIFICATION_H
