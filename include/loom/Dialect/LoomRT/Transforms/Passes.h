//===- Passes.h - loomrt passes -------------------------------------------===//

#ifndef LOOM_DIALECT_LOOMRT_TRANSFORMS_PASSES_H
#define LOOM_DIALECT_LOOMRT_TRANSFORMS_PASSES_H

#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"
#include "mlir/Pass/Pass.h"

namespace loom::rt {

#define GEN_PASS_DECL
#include "loom/Dialect/LoomRT/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Dialect/LoomRT/Transforms/Passes.h.inc"

} // namespace loom::rt

#endif // LOOM_DIALECT_LOOMRT_TRANSFORMS_PASSES_H
