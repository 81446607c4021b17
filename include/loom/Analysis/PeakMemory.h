//===- PeakMemory.h - Predicted peak memory of a step from liveness -------===//

#ifndef LOOM_ANALYSIS_PEAKMEMORY_H
#define LOOM_ANALYSIS_PEAKMEMORY_H

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

namespace loom {

/// The bytes of live tensors while a step runs in program order, as the
/// runtime holds them:
///
/// - parameters, buffers, constants, optimizer state and the batch inputs
///   are live throughout (the runtime or the caller keeps them);
/// - every other tensor is allocated by the op that defines it and lives
///   until the last use of it or of any view of it (view ops allocate
///   nothing and keep their base alive; an optimizer update writes its
///   parameter and state in place); step results live to the end; a
///   result nothing reads lives only while its op runs;
/// - a collective's input stays live until the collective's wait (the
///   runtime holds it while the collective is in flight); its result
///   buffer is allocated when it starts;
/// - a `loom.recompute` region runs its body where it stands, as the
///   lowering inlines it: its inputs are read by the body ops that read
///   them, each body value lives from its op to its last use inside the
///   body (so the transient peak of the body counts), and a result is the
///   body value it yields (a yielded view keeps its base alive), allocated
///   by the body op and freed after the result's last use.
///
/// Kernel workspaces and temporaries inside an op (e.g. the optimizer's)
/// are not counted, except where a kernel's temporary is as large as its
/// input (CPU native_dropout's mask converted to the input's dtype), which
/// is counted while the op runs. The loom step and the loomrt program it lowers to give
/// the same numbers, since frees come right after last uses.
class PeakMemory {
public:
  /// For a step function (`func.func` with `loom.step`).
  explicit PeakMemory(mlir::func::FuncOp step);
  /// For a step function whose body runs in `order` (every op of the body
  /// but the terminator once, in a topological order), as a scheduler
  /// would reorder it.
  PeakMemory(mlir::func::FuncOp step, llvm::ArrayRef<mlir::Operation *> order);
  /// For a `loomrt.program`; its frees are not uses.
  explicit PeakMemory(rt::ProgramOp program);

  /// Bytes live throughout the step.
  int64_t persistentBytes = 0;
  /// The most bytes of other tensors live at once.
  int64_t peakActivationBytes = 0;
  /// persistentBytes + peakActivationBytes.
  int64_t peakBytes = 0;
  /// The first op at which the peak is reached (null for a step without
  /// ops); an op inside a recompute body when the peak is reached while
  /// recomputing.
  mlir::Operation *peakOp = nullptr;

  /// The ops in the order the sweep ran them (the terminator last) and the
  /// activation bytes live while each runs (parallel to `order`): the
  /// profile a memory solver bounds position by position.
  llvm::SmallVector<mlir::Operation *> order;
  llvm::SmallVector<int64_t> activationBytesAt;

  /// The tensors live at `peakOp`: each storage (the value that allocated
  /// it) and its bytes, largest first; a kernel's temporaries as a null
  /// value. What a memory snapshot at the peak would show.
  llvm::SmallVector<std::pair<mlir::Value, int64_t>> liveAtPeak;

  /// A short name for `peakOp`: its graph node name where the location has
  /// one, else the op name.
  std::string peakOpName() const;
  /// The bytes of `liveAtPeak` by the module and phase of the op that
  /// allocated them ("layers.0 (forward)", "<root> (backward)", "layers.1
  /// (collective)", "kernel scratch"), largest first.
  llvm::SmallVector<std::pair<std::string, int64_t>>
  getLiveGroupsAtPeak() const;
  /// One line: "live at the peak:" and the `groups` largest groups, then how
  /// many more and their bytes.
  void printLiveAtPeak(llvm::raw_ostream &os, size_t groups = 4) const;
  /// The numbers above, with what is live at the peak: its groups
  /// (`live_at_peak`) and the `kLargestAtPeak` largest tensors
  /// (`largest_at_peak`: the name of the op that allocated each, its group
  /// and bytes).
  llvm::json::Value toJSON() const;
  static constexpr size_t kLargestAtPeak = 10;
};

/// The bytes a value of `type` occupies (a future's: its value's; 0 for a
/// non-tensor).
int64_t getValueBytes(mlir::Type type);

/// The bytes of the storage an op result allocates: its value's, or more
/// where the kernel returns a small result over a larger buffer (a reduced
/// mse_loss keeps its input-sized elementwise buffer).
int64_t getResultStorageBytes(mlir::Value result);

/// Bytes an ATen kernel or an optimizer update allocates and frees while it
/// runs beyond its results (0 for most kernels and for other ops); counted at
/// the op's step. The module's measured profile (`loom.kernel_workspace`,
/// loom-kernel-workspace) gives it for the kernel signatures it lists; the
/// analysis' own rules the rest.
int64_t getKernelScratchBytes(mlir::Operation *op);

/// What an optimizer update (`loom.optimizer_update` or `loomrt.optimizer`)
/// runs: the algorithm and hyperparameters (its own attribute, a parameter
/// group's, else its program's), whether the runtime runs it fused
/// (`loom.optimizer_impl` on its step or program) and the parameter.
struct OptimizerUpdate {
  OptimizerConfig config;
  bool fused = false;
  mlir::Value param;
};
/// std::nullopt for any other op.
std::optional<OptimizerUpdate> getOptimizerUpdate(mlir::Operation *op);

/// The kernel signature of an ATen call (`loom.aten` or `loomrt.aten`) as the
/// runtime's kernel workspace profile spells it: the qualified kernel, then
/// its tensor operands and its results as dtype and sizes, each list sorted:
/// "aten::mm.default(bf16[16,8],bf16[8,4])->(bf16[16,4])". Empty for any
/// other op or a type the artifact has no dtype for.
std::string getKernelSignature(mlir::Operation *op);

/// Whether the module's kernel workspace profile lists `op`'s signature.
bool hasMeasuredWorkspace(mlir::Operation *op);

/// Whether no rule predicts the CPU temporaries of `op`'s kernel because
/// they depend on the machine (the vector width, the threads) more than on
/// the shapes, and they can be as large as an operand: oneDNN's
/// convolutions (blocked-layout reorders, im2col columns) and matmuls over
/// bf16 or f16 (per-thread packing buffers). Only a measured profile
/// (`loom.kernel_workspace`) counts them.
bool hasMachineDependentWorkspace(mlir::Operation *op);

/// Records on `module` that the compiled step was planned to stay within
/// `bytes` per rank (`loom.memory_budget`), keeping the tightest bound
/// recorded.
void recordMemoryBudget(mlir::ModuleOp module, int64_t bytes);

} // namespace loom

#endif // LOOM_ANALYSIS_PEAKMEMORY_H
