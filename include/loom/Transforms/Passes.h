//===- Passes.h - Loom transformation and analysis passes -----------------===//

#ifndef LOOM_TRANSFORMS_PASSES_H
#define LOOM_TRANSFORMS_PASSES_H

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/OptionEnums.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <functional>

namespace loom {

#define GEN_PASS_DECL
#include "loom/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Transforms/Passes.h.inc"

/// Replaces `options`' lr and eps when unset (NaN, their option default)
/// and weight-decay when negative (its default) by PyTorch's default for
/// the algorithm: lr 1e-3
/// (sgd, adam, adamw), 1e-2 (rmsprop, adagrad) or 2e-3 (adamax); eps 1e-8,
/// Adagrad's 1e-10; weight decay 1e-2 for adamw, 0 otherwise.
void resolveOptimizerDefaults(LoomAttachOptimizerOptions &options);

/// Builds the optimizer attribute (`#loom.sgd/adam/adamw/rmsprop/adagrad`)
/// that `loom-attach-optimizer` attaches for `options`, resolving the
/// defaults; reports hyperparameters of another algorithm and ones PyTorch
/// would reject through `emitError`.
mlir::FailureOr<mlir::Attribute>
buildOptimizerAttr(mlir::MLIRContext *ctx,
                   const LoomAttachOptimizerOptions &options,
                   llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// loom-sac-ilp with the rest of the pipeline given as a builder (what
/// loom-compile passes), instead of as text in its `pipeline` option.
std::unique_ptr<mlir::Pass>
createLoomSacIlp(const LoomSacIlpOptions &options,
                 std::function<void(mlir::OpPassManager &)> downstream);

} // namespace loom

#endif // LOOM_TRANSFORMS_PASSES_H
