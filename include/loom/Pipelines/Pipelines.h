//===- Pipelines.h - Named Loom pass pipelines ----------------------------===//

#ifndef LOOM_PIPELINES_PIPELINES_H
#define LOOM_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace loom {

/// Options of `loom-compile-pipeline`: the optimizer to attach (or none)
/// with its hyperparameters, as `loom-attach-optimizer` takes them.
struct CompilePipelineOptions
    : public mlir::PassPipelineOptions<CompilePipelineOptions> {
  Option<std::string> optimizer{
      *this, "optimizer",
      llvm::cl::desc("The optimizer the step applies: none (the step returns "
                     "gradients), sgd, adam or adamw"),
      llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> momentum{*this, "momentum",
                          llvm::cl::desc("SGD momentum factor"),
                          llvm::cl::init(0.0)};
  Option<double> dampening{*this, "dampening",
                           llvm::cl::desc("SGD dampening of the momentum"),
                           llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("SGD: use Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay; negative means PyTorch's default for the "
                     "algorithm (0.01 for adamw, 0 for sgd and adam)"),
      llvm::cl::init(-1.0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("Adam/AdamW betas[0]"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("Adam/AdamW betas[1]"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps",
                     llvm::cl::desc("Adam/AdamW term added to the denominator"),
                     llvm::cl::init(1e-8)};
  Option<bool> maximize{*this, "maximize",
                        llvm::cl::desc("Maximize the objective"),
                        llvm::cl::init(false)};
  Option<std::string> dp{
      *this, "dp",
      llvm::cl::desc("Data parallelism: none (a single-rank step), "
                     "replicate (DDP: loom-replicate over world-size ranks) "
                     "or fsdp (FSDP2: loom-fsdp over world-size ranks; HSDP "
                     "with replicate-size > 1)"),
      llvm::cl::init("none")};
  Option<int64_t> worldSize{
      *this, "world-size",
      llvm::cl::desc("Ranks of the data-parallel mesh (with dp=replicate)"),
      llvm::cl::init(1)};
  Option<int64_t> microbatches{
      *this, "microbatches",
      llvm::cl::desc("Gradient-accumulation microbatches per step "
                     "(loom-accumulate-gradients; 1: none)"),
      llvm::cl::init(1)};
  Option<int64_t> replicateSize{
      *this, "replicate-size",
      llvm::cl::desc("With dp=fsdp: HSDP replicas (mesh replicate-size x "
                     "world-size/replicate-size, axes replicate and shard)"),
      llvm::cl::init(1)};
  Option<std::string> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("With dp=fsdp: auto, true, false or an integer (as "
                     "loom-fsdp)"),
      llvm::cl::init("auto")};
  Option<bool> reshardAfterBackward{
      *this, "reshard-after-backward",
      llvm::cl::desc("With dp=fsdp and microbatches > 1: false keeps the "
                     "parameters unsharded between microbatches (as "
                     "loom-fsdp)"),
      llvm::cl::init(true)};
  ListOption<std::string> units{
      *this, "units",
      llvm::cl::desc("With dp=fsdp: module-path prefixes of the units "
                     "(default: every layers.N plus the root)")};
  Option<std::string> paramDtype{
      *this, "param-dtype",
      llvm::cl::desc("With dp=fsdp: all-gather and compute dtype"),
      llvm::cl::init("")};
  Option<std::string> reduceDtype{
      *this, "reduce-dtype",
      llvm::cl::desc("With dp=fsdp: gradient reduction dtype"),
      llvm::cl::init("")};
  Option<int64_t> forwardPrefetch{
      *this, "forward-prefetch",
      llvm::cl::desc("With dp=fsdp: every unit prefetches the all-gathers of "
                     "the next N units in forward (loom-prefetch; FSDP2's "
                     "default 0)"),
      llvm::cl::init(0)};
  Option<std::string> backwardPrefetch{
      *this, "backward-prefetch",
      llvm::cl::desc("With dp=fsdp: pre (FSDP2's default), post or none "
                     "(loom-prefetch)"),
      llvm::cl::init("pre")};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("With dp=fsdp: merge consecutive all-gathers and "
                     "reduce-scatters up to this many unsharded bytes "
                     "(loom-bucket; 0: none)"),
      llvm::cl::init(0)};
  Option<double> bucketCapMb{
      *this, "bucket-cap-mb",
      llvm::cl::desc("DDP gradient bucket size in MiB; 0 reduces each "
                     "gradient on its own (with dp=replicate)"),
      llvm::cl::init(25.0)};
  Option<bool> schedule{
      *this, "schedule",
      llvm::cl::desc("Reorder the step with loom-schedule (latency hiding "
                     "under memory-limit) before lowering"),
      llvm::cl::init(false)};
  Option<std::string> scheduleDevice{
      *this, "schedule-device",
      llvm::cl::desc("With schedule: the device spec the scheduler's cost "
                     "model uses (a name in data/devices or a .json path)"),
      llvm::cl::init("cpu")};
  Option<std::string> memoryLimit{
      *this, "memory-limit",
      llvm::cl::desc("With schedule: per-rank peak memory limit (bytes, "
                     "or with KiB/MiB/GiB/KB/MB/GB; none)"),
      llvm::cl::init("none")};
  Option<int64_t> maxInFlight{
      *this, "max-in-flight",
      llvm::cl::desc("With schedule: most collectives in flight at once"),
      llvm::cl::init(2)};
  Option<double> firstBucketCapMb{
      *this, "first-bucket-cap-mb",
      llvm::cl::desc("DDP's first bucket size in MiB (default: 1, as DDP "
                     "without bucket_cap_mb, or bucket-cap-mb when that is "
                     "given, as DDP(bucket_cap_mb=X))"),
      llvm::cl::init(1.0)};
};

/// Checks the options buildCompilePipeline cannot represent (an unknown
/// `dp`, a world size below 1), reporting through `emitError`.
mlir::LogicalResult verifyCompilePipelineOptions(
    const CompilePipelineOptions &options,
    llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> emitError);

/// accumulate-gradients (with `microbatches` > 1) -> replicate (with
/// `dp=replicate`) or fsdp -> prefetch -> bucket (with `dp=fsdp`;
/// bucket only with `bucket-bytes` > 0) -> attach-optimizer (unless
/// `optimizer=none`) -> lower-to-rt -> insert-frees -> assign-slots: a loom
/// step to a loomrt program ready to be written as an artifact.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompilePipelineOptions &options);

/// insert-frees -> assign-slots on every loomrt.program: the end of the
/// compile pipeline, for programs that are already loomrt.
void buildFinishPipeline(mlir::OpPassManager &pm);

/// Registers `loom-compile-pipeline` and `loomrt-finish-pipeline`.
void registerLoomPipelines();

} // namespace loom

#endif // LOOM_PIPELINES_PIPELINES_H
