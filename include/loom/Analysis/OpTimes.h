//===- OpTimes.h - Measured op times from a loom-run trace ------*- C++ -*-===//
//
// The roofline prices an op from its FLOPs and bytes; on a real machine some
// kernels cost far more (small and skinny matmuls, transcendental pointwise
// ops, embedding lookups). `loom-run --trace` records every ATen instruction
// it runs with its kernel, its operand and result types (the artifact's
// `types`) and its duration. The median duration per kernel and types then
// replaces the roofline for every op of a step with the same kernel and
// types: the step the trace was taken of, and other compiles of it (with
// recompute regions, microbatch copies, another budget). See
// docs/simulator.md, "Measured op times".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_OPTIMES_H
#define LOOM_ANALYSIS_OPTIMES_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>

namespace loom {

/// An op's operand and result types as the artifact's `types` records them,
/// e.g. `(tensor<4x16xf32>,tensor<16x8xf32>)->(tensor<4x8xf32>)`.
std::string printOpTypes(mlir::Operation *op);

/// The key an ATen op (`loom.aten` or `loomrt.aten`) is measured under: its
/// kernel as the runtime qualifies it (`aten::mm.default`) followed by
/// printOpTypes(op). Empty for other ops.
std::string measuredOpKey(mlir::Operation *op);

/// Median op times, in seconds, by measuredOpKey, read from a loom-run
/// trace.
class MeasuredOpTimes {
public:
  /// Reads the Chrome trace `loom-run --trace` wrote at `path` (one rank's
  /// or the launcher's merged file).
  static llvm::Expected<MeasuredOpTimes> load(llvm::StringRef path);
  /// load(), once per process for a file of the same size and modification
  /// time: loom-sac-ilp runs the rest of the pipeline (loom-schedule
  /// included) on copies of the step many times, and a trace of a large
  /// step is tens of MB of JSON.
  static llvm::Expected<std::shared_ptr<const MeasuredOpTimes>>
  loadShared(llvm::StringRef path);
  /// Parses trace JSON read from `fileName`. Events other than ATen
  /// instructions with `types` are ignored; the trace's first step is a
  /// warm-up and is left out when it has later ones. Errors name the file
  /// and the event: a syntax error its line and column, a malformed ATen
  /// event its index (`traceEvents[12].dur: expected a number`), and a trace
  /// without any ATen instruction with `types`.
  static llvm::Expected<MeasuredOpTimes> parse(llvm::StringRef json,
                                               llvm::StringRef fileName);

  /// The median measured seconds of `op`'s key, or nullopt (not an ATen op,
  /// or not in the trace).
  std::optional<double> lookup(mlir::Operation *op) const;

  /// Distinct keys measured.
  size_t size() const { return seconds.size(); }
  /// The file the times were read from.
  llvm::StringRef getPath() const { return path; }

private:
  std::string path;
  llvm::StringMap<double> seconds;
};

} // namespace loom

#endif // LOOM_ANALYSIS_OPTIMES_H
