//===- Pipelines.h - Named Loom pass pipelines and their options ----------===//
//
// The compile pipeline and its options, owned here and declared once in
// CompileOptions.def (as CIRCT's firtool library owns FirtoolOptions):
// loom-compile instantiates the command-line form, loom-opt the pipeline
// form, and both build the same passes from the same `CompileOptions`.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PIPELINES_PIPELINES_H
#define LOOM_PIPELINES_PIPELINES_H

#include "loom/Conversion/Passes.h"
#include "loom/Transforms/OptionEnums.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/StringSet.h"

#include <string>
#include <vector>

namespace loom {

/// The values of every compile option (CompileOptions.def), with the flags
/// the user gave explicitly: a value taken from the captured run
/// configuration never overrides one of those.
struct CompileOptions {
#define LOOM_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC) TYPE FIELD = DEFAULT;
#define LOOM_PASS_LIST_OPTION(PASS, TYPE, FIELD, FLAG, DESC)                   \
  std::vector<TYPE> FIELD;
#include "loom/Pipelines/CompileOptions.def"

  /// Flags given explicitly ("world-size", "lr", ...).
  llvm::StringSet<> given;
  bool isGiven(llvm::StringRef flag) const { return given.contains(flag); }
};

/// The options of `loom-compile-pipeline` in loom-opt's pipeline syntax.
struct CompilePipelineOptions
    : public mlir::PassPipelineOptions<CompilePipelineOptions> {
#define LOOM_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC)                          \
  Option<TYPE> FIELD{*this, FLAG, llvm::cl::desc(DESC),                        \
                     llvm::cl::init(DEFAULT)};
#define LOOM_ENUM_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC, VALUES)             \
  Option<TYPE> FIELD{*this, FLAG, llvm::cl::desc(DESC),                        \
                     llvm::cl::init(DEFAULT), VALUES};
#define LOOM_PASS_LIST_OPTION(PASS, TYPE, FIELD, FLAG, DESC)                   \
  ListOption<TYPE> FIELD{*this, FLAG, llvm::cl::desc(DESC)};
#include "loom/Pipelines/CompileOptions.def"

  /// The values, with the options the pipeline text set as given.
  CompileOptions getCompileOptions() const;
};

/// Registers the compile options on the process's command line, in the
/// category "loom-compile options" (for loom-compile). Call before
/// llvm::cl::ParseCommandLineOptions.
void registerCompileCLOptions();
/// The category registerCompileCLOptions puts the options in.
llvm::cl::OptionCategory &getCompileCLCategory();
/// The values parsed from the command line; requires registerCompileCLOptions.
CompileOptions getCompileOptionsFromCL();

/// Checks the options buildCompilePipeline cannot represent (a world size
/// below 1, HSDP without FSDP, ...), reporting through `emitError`.
mlir::LogicalResult verifyCompileOptions(
    const CompileOptions &options,
    llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> emitError);

/// Takes what capture recorded in the module (`loom.run_config`: world size,
/// microbatches, optimizer) for every option not given, and fails, naming
/// both values, where a given option contradicts it. A module without a run
/// configuration leaves the options as they are.
mlir::LogicalResult applyRunConfig(CompileOptions &options,
                                   mlir::ModuleOp module);

/// remat (unless `remat=none`) -> accumulate-gradients (with
/// `microbatches` > 1) -> replicate (with
/// `dp=replicate`) or fsdp -> prefetch -> bucket (with `dp=fsdp`;
/// bucket only with `bucket-bytes` > 0) -> attach-optimizer (unless
/// `optimizer=none`) -> schedule (with `schedule`) -> lower-to-rt ->
/// insert-frees -> assign-slots: a loom step to a loomrt program ready to be
/// written as an artifact.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompileOptions &options);

/// insert-frees -> assign-slots on every loomrt.program: the end of the
/// compile pipeline, for programs that are already loomrt.
void buildFinishPipeline(mlir::OpPassManager &pm);

/// Registers `loom-compile-pipeline` and `loomrt-finish-pipeline`.
void registerLoomPipelines();

} // namespace loom

#endif // LOOM_PIPELINES_PIPELINES_H
