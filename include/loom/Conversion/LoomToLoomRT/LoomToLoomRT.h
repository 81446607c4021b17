//===- LoomToLoomRT.h - Lower loom steps to loomrt programs ---------------===//

#ifndef LOOM_CONVERSION_LOOMTOLOOMRT_LOOMTOLOOMRT_H
#define LOOM_CONVERSION_LOOMTOLOOMRT_LOOMTOLOOMRT_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/Transforms/DialectConversion.h"

namespace loom {

/// Patterns that rewrite the ops of a step, once it sits in a
/// `loomrt.program`, into loomrt instructions on stream 0: `loom.aten` to
/// `loomrt.aten` and `loom.optimizer_update` to `loomrt.optimizer`.
void populateLoomToLoomRTPatterns(mlir::RewritePatternSet &patterns);

/// The loomrt form of one argument of `loom.aten` (`keyword` is its name
/// when it is a keyword argument): typed device, layout and memory format
/// attributes where the importer wrote strings, i64 integers and f64
/// floats. Reports values loomrt cannot encode through `emitError`.
mlir::FailureOr<mlir::Attribute>
convertAtenArgument(mlir::Attribute value, llvm::StringRef keyword,
                    llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

} // namespace loom

#endif // LOOM_CONVERSION_LOOMTOLOOMRT_LOOMTOLOOMRT_H
