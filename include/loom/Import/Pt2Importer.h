//===- Pt2Importer.h - Import a PyTorch .pt2 archive into loom IR ---------===//

#ifndef LOOM_IMPORT_PT2IMPORTER_H
#define LOOM_IMPORT_PT2IMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace loom {

struct ImportOptions {
  /// Where to write the weights (parameters, buffers, constants) as
  /// safetensors; empty: do not write them.
  std::string weightsOut;
  /// How the IR refers to the weights file (`loom.weights`); defaults to
  /// `weightsOut`.
  std::string weightsRef;
  /// Whether parameters, buffers and constants must have their data in the
  /// archive. When false (a weightless step, `loom.capture --meta`), they
  /// are typed arguments whose data the archive may lack: listed weights are
  /// checked for type only and unlisted ones are accepted; `weightsOut` must
  /// then be empty.
  bool requireWeights = true;
  /// Name of the step function.
  std::string funcName = "step";
};

/// Reads `path` (a `torch.export.save` archive, graph schema 8.x) and builds
/// a module with one `loom.step` function. Every problem with the archive
/// is reported as an error diagnostic in `context` naming the entry or
/// graph node at fault; the result is then null.
mlir::OwningOpRef<mlir::ModuleOp> importPt2(llvm::StringRef path,
                                            mlir::MLIRContext *context,
                                            const ImportOptions &options);

/// Same, from archive bytes already in memory (for the fuzzer and tests);
/// `bufferName` names the archive in diagnostics.
mlir::OwningOpRef<mlir::ModuleOp> importPt2Buffer(llvm::StringRef bytes,
                                                  llvm::StringRef bufferName,
                                                  mlir::MLIRContext *context,
                                                  const ImportOptions &options);

/// Formats a diagnostic location the way Loom tools print it:
/// `file:line: node 'name'` when the location has both parts.
std::string formatLocation(mlir::Location loc);

} // namespace loom

#endif // LOOM_IMPORT_PT2IMPORTER_H
