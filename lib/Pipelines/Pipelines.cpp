//===- Pipelines.cpp - Named Loom pass pipelines --------------------------===//

#include "loom/Pipelines/Pipelines.h"

#include "loom/Conversion/Passes.h"
#include "loom/Dialect/LoomRT/Transforms/Passes.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace loom;

LogicalResult loom::verifyCompilePipelineOptions(
    const CompilePipelineOptions &options,
    function_ref<LogicalResult(const Twine &)> emitError) {
  if (options.dp != "none" && options.dp != "replicate" && options.dp != "fsdp")
    return emitError("dp: unknown data parallelism '" + options.dp +
                     "' (expected none, replicate or fsdp)");
  if (options.worldSize < 1)
    return emitError("world-size must be at least 1, got " +
                     Twine(options.worldSize));
  if (options.dp == "none" && options.worldSize != 1)
    return emitError("world-size " + Twine(options.worldSize) +
                     " needs a data parallelism (dp=replicate or fsdp)");
  if (options.replicateSize < 1 ||
      options.worldSize % options.replicateSize != 0)
    return emitError("replicate-size " + Twine(options.replicateSize) +
                     " must be at least 1 and divide world-size " +
                     Twine(options.worldSize));
  if (options.replicateSize != 1 && options.dp != "fsdp")
    return emitError("replicate-size (HSDP) needs dp=fsdp");
  if (options.microbatches < 1)
    return emitError("microbatches must be at least 1, got " +
                     Twine(options.microbatches));
  if (!options.reshardAfterBackward && options.dp != "fsdp")
    return emitError("reshard-after-backward=false needs dp=fsdp");
  if (options.bucketCapMb < 0)
    return emitError("bucket-cap-mb must not be negative");
  if (options.backwardPrefetch != "pre" && options.backwardPrefetch != "post" &&
      options.backwardPrefetch != "none")
    return emitError("backward-prefetch: '" + options.backwardPrefetch +
                     "' is not pre, post or none");
  if (options.forwardPrefetch < 0)
    return emitError("forward-prefetch must not be negative, got " +
                     Twine(options.forwardPrefetch));
  if (options.bucketBytes < 0)
    return emitError("bucket-bytes must not be negative, got " +
                     Twine(options.bucketBytes));
  if (options.dp != "fsdp" &&
      (options.forwardPrefetch != 0 || options.backwardPrefetch != "pre" ||
       options.bucketBytes != 0))
    return emitError("forward-prefetch, backward-prefetch and bucket-bytes "
                     "need dp=fsdp");
  if (options.maxInFlight < 1)
    return emitError("max-in-flight must be at least 1, got " +
                     Twine(options.maxInFlight));
  if (options.firstBucketCapMb < 0)
    return emitError("first-bucket-cap-mb must not be negative");
  return success();
}

void loom::buildCompilePipeline(OpPassManager &pm,
                                const CompilePipelineOptions &options) {
  if (options.microbatches > 1) {
    LoomAccumulateGradientsOptions accumulate;
    accumulate.microbatches = options.microbatches;
    pm.addNestedPass<func::FuncOp>(createLoomAccumulateGradients(accumulate));
  }
  if (options.dp == "replicate") {
    LoomReplicateOptions replicate;
    replicate.meshShape = {options.worldSize};
    replicate.axes = {"dp"};
    replicate.bucketCapMb = options.bucketCapMb;
    // DDP: first_bucket_bytes_cap is _DEFAULT_FIRST_BUCKET_BYTES (1 MiB)
    // when bucket_cap_mb is not given, else bucket_cap_mb.
    replicate.firstBucketCapMb =
        options.firstBucketCapMb.hasValue() || !options.bucketCapMb.hasValue()
            ? options.firstBucketCapMb
            : options.bucketCapMb;
    pm.addPass(createLoomReplicate(replicate));
  }
  if (options.dp == "fsdp") {
    LoomFsdpOptions fsdp;
    if (options.replicateSize > 1)
      fsdp.meshShape = {options.replicateSize,
                        options.worldSize / options.replicateSize};
    else
      fsdp.meshShape = {options.worldSize};
    fsdp.reshardAfterForward = options.reshardAfterForward;
    fsdp.reshardAfterBackward = options.reshardAfterBackward;
    fsdp.units.assign(options.units.begin(), options.units.end());
    fsdp.paramDtype = options.paramDtype;
    fsdp.reduceDtype = options.reduceDtype;
    pm.addPass(createLoomFsdp(fsdp));
    LoomPrefetchOptions prefetch;
    prefetch.forwardPrefetch = options.forwardPrefetch;
    prefetch.backwardPrefetch = options.backwardPrefetch;
    pm.addPass(createLoomPrefetch(prefetch));
    if (options.bucketBytes > 0) {
      LoomBucketOptions bucket;
      bucket.bucketBytes = options.bucketBytes;
      pm.addPass(createLoomBucket(bucket));
    }
  }
  if (options.optimizer != "none") {
    LoomAttachOptimizerOptions attach;
    attach.optimizer = options.optimizer;
    attach.lr = options.lr;
    attach.momentum = options.momentum;
    attach.dampening = options.dampening;
    attach.nesterov = options.nesterov;
    // Resolved here so the pipeline recorded in the artifact shows the
    // weight decay the step really uses.
    attach.weightDecay = options.weightDecay >= 0       ? options.weightDecay
                         : options.optimizer == "adamw" ? 1e-2
                                                        : 0.0;
    attach.beta1 = options.beta1;
    attach.beta2 = options.beta2;
    attach.eps = options.eps;
    attach.maximize = options.maximize;
    pm.addNestedPass<func::FuncOp>(createLoomAttachOptimizer(attach));
  }
  if (options.schedule) {
    LoomScheduleOptions schedule;
    schedule.device = options.scheduleDevice;
    schedule.memoryLimit = options.memoryLimit;
    schedule.maxInFlight = options.maxInFlight;
    pm.addPass(createLoomSchedule(schedule));
  }
  pm.addPass(createLoomLowerToRT());
  buildFinishPipeline(pm);
}

void loom::buildFinishPipeline(OpPassManager &pm) {
  OpPassManager &programPm = pm.nest<rt::ProgramOp>();
  programPm.addPass(rt::createLoomRTInsertFrees());
  programPm.addPass(rt::createLoomRTAssignSlots());
}

void loom::registerLoomPipelines() {
  // Registered by hand (not PassPipelineRegistration) so that options the
  // pipeline cannot build report an error instead of being ignored.
  registerPassPipeline(
      "loom-compile-pipeline",
      "Compile a loom step into a loomrt program for the artifact: "
      "distribute it (dp=replicate: DDP, dp=fsdp: FSDP2/HSDP over "
      "world-size ranks), attach the "
      "optimizer, lower to loomrt, free values after their last use, assign "
      "slots",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        CompilePipelineOptions options;
        if (failed(options.parseFromString(text)) ||
            failed(verifyCompilePipelineOptions(options, errorHandler)))
          return failure();
        buildCompilePipeline(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(CompilePipelineOptions());
      });
  PassPipelineRegistration<>(
      "loomrt-finish-pipeline",
      "Make loomrt programs ready to write: free values after their last "
      "use, assign slots (for programs lowered or written by other means)",
      buildFinishPipeline);
}
