//===- Passes.h - Loom conversion passes ----------------------------------===//

#ifndef LOOM_CONVERSION_PASSES_H
#define LOOM_CONVERSION_PASSES_H

#include "loom/Conversion/LoomToLoomRT/LoomToLoomRT.h"
#include "loom/Dialect/LoomRT/IR/LoomRTDialect.h"
#include "loom/Transforms/OptionEnums.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace loom {

#define GEN_PASS_DECL
#include "loom/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Conversion/Passes.h.inc"

} // namespace loom

#endif // LOOM_CONVERSION_PASSES_H
