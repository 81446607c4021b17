//===- RunConfig.h - The run configuration capture embeds in a .pt2 -------===//

#ifndef LOOM_LIB_IMPORT_RUNCONFIG_H
#define LOOM_LIB_IMPORT_RUNCONFIG_H

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "llvm/Support/Error.h"

namespace loom {

/// The archive entry (below the archive's folder) where `loom.capture`
/// records what it was asked, through torch.export.save's extra_files.
inline constexpr llvm::StringLiteral kRunConfigEntry = "extra/loom_run.json";

/// Parses the run configuration's JSON (format "loom-run-config", version
/// 1) into `#loom.run_config`; an error names the field that is wrong.
llvm::Expected<RunConfigAttr> parseRunConfig(llvm::StringRef text,
                                             mlir::MLIRContext *ctx);

/// The run configuration's "batch_dims": the dim that indexes the samples
/// of each batch input, in input order (capture's --batch-dims), or none
/// (JSON null) for an input without one, which every rank takes whole;
/// checked against the ranks of the step's batch inputs (`inputRanks`, in
/// order); empty when absent (every input's dim 0).
llvm::Expected<llvm::SmallVector<std::optional<int64_t>>>
parseBatchDims(llvm::StringRef text, llvm::ArrayRef<int64_t> inputRanks);

} // namespace loom

#endif // LOOM_LIB_IMPORT_RUNCONFIG_H
