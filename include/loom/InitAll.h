//===- InitAll.h - Register every Loom dialect and pass -------------------===//
//
// Every Loom tool includes this one header, so a dialect or pass added here
// is available in all of them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_INITALL_H
#define LOOM_INITALL_H

#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/LoomRT/IR/LoomRTDialect.h"
#include "loom/Dialect/LoomRT/Transforms/Passes.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace loom {

inline void registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<LoomDialect, rt::LoomRTDialect, mlir::func::FuncDialect>();
}

inline void registerAllPasses() {
  registerLoomPasses();
  registerLoomConversionPasses();
  rt::registerLoomRTPasses();
  registerLoomPipelines();
  // The generic cleanups users chain with Loom passes.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
}

} // namespace loom

#endif // LOOM_INITALL_H
