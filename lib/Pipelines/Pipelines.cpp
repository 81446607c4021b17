//===- Pipelines.cpp - Named Loom pass pipelines --------------------------===//

#include "loom/Pipelines/Pipelines.h"

#include "loom/Conversion/Passes.h"
#include "loom/Dialect/LoomRT/Transforms/Passes.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace loom;

void loom::buildCompilePipeline(OpPassManager &pm,
                                const CompilePipelineOptions &options) {
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
  pm.addPass(createLoomLowerToRT());
  buildFinishPipeline(pm);
}

void loom::buildFinishPipeline(OpPassManager &pm) {
  OpPassManager &programPm = pm.nest<rt::ProgramOp>();
  programPm.addPass(rt::createLoomRTInsertFrees());
  programPm.addPass(rt::createLoomRTAssignSlots());
}

void loom::registerLoomPipelines() {
  PassPipelineRegistration<CompilePipelineOptions>(
      "loom-compile-pipeline",
      "Compile a loom step into a loomrt program for the artifact: attach "
      "the optimizer, lower to loomrt, free values after their last use, "
      "assign slots",
      buildCompilePipeline);
  PassPipelineRegistration<>(
      "loomrt-finish-pipeline",
      "Make loomrt programs ready to write: free values after their last "
      "use, assign slots (for programs lowered or written by other means)",
      buildFinishPipeline);
}
