//===- Weights.h - The artifact's weights section -------------------------===//

#ifndef LOOM_LIB_TARGET_ARTIFACT_WEIGHTS_H
#define LOOM_LIB_TARGET_ARTIFACT_WEIGHTS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace loom::detail {

/// One tensor the step binds from the weights: the binding that needs it,
/// with the dtype and shape it expects.
struct WeightRequest {
  mlir::Operation *binding;
  std::string name;
  /// The safetensors dtype name ("F32", "BF16", "I64", ...).
  std::string dtype;
  llvm::SmallVector<int64_t> shape;
  uint64_t bytes;
};

/// Reads the safetensors file at `path` (`fileOp` is where to report
/// problems with the file itself) and writes a safetensors file holding
/// exactly `requests`, in order, to `out`. Each missing tensor and each
/// dtype or shape that differs is reported at its binding.
mlir::LogicalResult buildWeights(llvm::StringRef path, mlir::Operation *fileOp,
                                 llvm::ArrayRef<WeightRequest> requests,
                                 std::string &out);

} // namespace loom::detail

#endif // LOOM_LIB_TARGET_ARTIFACT_WEIGHTS_H
