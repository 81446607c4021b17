//===- OpTimes.h - Measured op times from a loom-run trace ------*- C++ -*-===//
//
// The roofline prices an op from its FLOPs and bytes; on a real machine some
// kernels cost far more (small and skinny matmuls, transcendental pointwise
// ops, embedding lookups). `loom-run --trace` records every ATen instruction
// it runs with its kernel signature (the artifact's `signature`, spelled as
// the kernel workspace profile spells it: getKernelSignature), and every
// optimizer update with the update's (loomrt::optimizerSignature), and their
// durations. The median duration per signature then replaces the roofline for
// every op of a step with the same signature: the step the trace was taken
// of, and other compiles of it (with recompute regions, microbatch copies,
// another budget). See docs/simulator.md, "Measured op times".
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

/// Median op times, in seconds, by kernel signature (getKernelSignature),
/// read from a loom-run trace.
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
  /// instructions with a `signature` are ignored; the trace's first step is a
  /// warm-up and is left out when it has later ones. Errors name the file
  /// and the event: a syntax error its line and column, a malformed ATen
  /// event its index (`traceEvents[12].dur: expected a number`), and a trace
  /// without any ATen instruction with a `signature`.
  static llvm::Expected<MeasuredOpTimes> parse(llvm::StringRef json,
                                               llvm::StringRef fileName);

  /// The median measured seconds of `op`'s kernel signature (an optimizer
  /// update's: loomrt::optimizerSignature), or nullopt (neither an ATen op
  /// nor an update, or not in the trace).
  std::optional<double> lookup(mlir::Operation *op) const;

  /// The file the times were read from.
  llvm::StringRef getPath() const { return path; }

private:
  std::string path;
  llvm::StringMap<double> seconds;
};

} // namespace loom

#endif // LOOM_ANALYSIS_OPTIMES_H
