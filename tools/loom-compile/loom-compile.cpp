//===- loom-compile.cpp - Compile a loom step into a .loomx artifact ------===//

#include "loom/Analysis/PeakMemory.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/InitAll.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Target/Artifact/ArtifactWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

static cl::OptionCategory category("loom-compile options");

static cl::opt<std::string> inputPath(cl::Positional, cl::init("-"),
                                      cl::desc("<step.mlir>"),
                                      cl::cat(category));
static cl::opt<std::string> outputPath("o", cl::init("-"),
                                       cl::desc("Output file"),
                                       cl::value_desc("file"),
                                       cl::cat(category));
enum class PipelineKind { Compile, Finish };
static cl::opt<PipelineKind, false, loom::EnumOptionParser<PipelineKind>>
    pipelineKind(
        "pipeline", cl::init(PipelineKind::Compile),
        cl::desc("The pass pipeline to run"),
        cl::values(clEnumValN(PipelineKind::Compile, "loom-compile-pipeline",
                              "distribute, attach the optimizer, lower (the "
                              "compile options below)"),
                   clEnumValN(PipelineKind::Finish, "loomrt-finish-pipeline",
                              "only make loomrt programs ready to write (for "
                              "programs already lowered)")),
        cl::cat(category));
static cl::opt<bool>
    printPipeline("print-pipeline", cl::init(false),
                  cl::desc("Print the textual pass pipeline and exit (with an "
                           "input file, after taking its run configuration)"),
                  cl::cat(category));
enum class Emit { Artifact, MLIR, Program };
static cl::opt<Emit, false, loom::EnumOptionParser<Emit>> emit(
    "emit", cl::init(Emit::Artifact), cl::desc("What to write"),
    cl::values(clEnumValN(Emit::Artifact, "artifact", "the .loomx artifact"),
               clEnumValN(Emit::MLIR, "mlir", "the loomrt IR"),
               clEnumValN(Emit::Program, "program",
                          "the artifact's program JSON alone")),
    cl::cat(category));
static cl::opt<bool>
    summary("summary", cl::init(false),
            cl::desc("Print slots, instruction counts and the predicted peak "
                     "memory of each program to stderr"),
            cl::cat(category));

static int fail(const Twine &message) {
  WithColor::error(errs(), "loom-compile") << message << "\n";
  return 1;
}

static void printSummary(mlir::ModuleOp module) {
  for (auto program : module.getOps<loom::rt::ProgramOp>()) {
    StringMap<int64_t> counts;
    for (mlir::Operation &op : program.getBody().front())
      if (isa<loom::rt::AtenOp, loom::rt::FreeOp, loom::rt::OptimizerOp>(op))
        counts[op.getName().stripDialect()]++;
    loom::PeakMemory memory(program);
    // An MPMD program (a pipeline stage) is named by its step and ranks.
    if (std::optional<ArrayRef<int64_t>> ranks = program.getRanks()) {
      errs() << "loom-compile: program '" << program.getStepName()
             << "' ranks [";
      llvm::interleaveComma(*ranks, errs());
      errs() << "]: ";
    } else {
      errs() << "loom-compile: rank " << program.getRank() << ": ";
    }
    errs() << program.getNumSlots().value_or(0) << " slots, "
           << counts.lookup("aten") << " aten, " << counts.lookup("free")
           << " free, " << counts.lookup("optimizer")
           << " optimizer instructions; predicted peak memory "
           << memory.peakBytes << " bytes (persistent "
           << memory.persistentBytes << " + activations "
           << memory.peakActivationBytes << ")\n";
    if (memory.peakOp) {
      errs() << "loom-compile:   ";
      memory.printLiveAtPeak(errs());
    }
    // Parameter groups and the schedule, as the runtime will apply them.
    llvm::MapVector<mlir::Attribute, SmallVector<StringRef>> groups;
    for (auto update : program.getBody().getOps<loom::rt::OptimizerOp>())
      if (mlir::Attribute own = update.getOptimizerAttr())
        groups[own].push_back(update.getParam()
                                  .getDefiningOp<loom::rt::InputOp>()
                                  .getBindingName());
    for (auto &[attr, params] : groups) {
      errs() << "loom-compile:   param group " << attr << ": ";
      llvm::interleaveComma(params, errs());
      errs() << "\n";
    }
    if (mlir::Attribute schedule =
            program->getAttr(loom::LoomDialect::kLrScheduleAttrName))
      errs() << "loom-compile:   lr schedule " << schedule << "\n";
  }
}

/// The units of the step in `module`, as loom-fsdp (or loom-replicate with
/// grouping=units) will take them:
/// `--units` when given, else the model's repeated blocks; the root is
/// always the last. Told before the pipeline runs, while parameter names are
/// still on the step's arguments, so a user sees which modules the default
/// found (a model whose blocks are not numbered gets the root alone).
static void printUnits(mlir::ModuleOp module,
                       const loom::CompileOptions &options) {
  SmallVector<std::string> units(options.units.begin(), options.units.end());
  StringRef origin = "--units";
  if (units.empty()) {
    SmallVector<StringRef> names;
    module.walk([&](mlir::func::FuncOp step) {
      for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
        auto role = step.getArgAttrOfType<loom::RoleAttr>(
            i, loom::LoomDialect::kRoleAttrName);
        auto name = step.getArgAttrOfType<mlir::StringAttr>(
            i, loom::LoomDialect::kNameAttrName);
        if (role && name && role.getValue() == loom::Role::parameter)
          names.push_back(name.getValue());
      }
    });
    units = loom::getLayerBlocks(names);
    origin = "default: the model's repeated blocks";
  }
  errs() << "loom-compile: "
         << (options.dp == loom::DataParallel::Fsdp ? "fsdp" : "replicate")
         << " units (" << origin << "): ";
  for (const std::string &unit : units)
    errs() << unit << ", ";
  errs() << "<root>\n";
}

/// The module in `inputPath`, parsed with diagnostics at its source lines.
static mlir::OwningOpRef<mlir::ModuleOp> readModule(mlir::MLIRContext &context,
                                                    SourceMgr &sourceMgr) {
  std::string errorMessage;
  std::unique_ptr<MemoryBuffer> input =
      mlir::openInputFile(inputPath, &errorMessage);
  if (!input) {
    fail(errorMessage);
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());
  return mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
}

/// A CPU step compiled under a memory budget (loom.memory_budget) is
/// warned, at the first such call, when it runs kernels whose temporaries
/// no rule predicts and the kernel workspace profile does not list: the
/// budget holds for the prediction, and the measured peak can be above it.
static void warnUnmeasuredWorkspace(mlir::ModuleOp module) {
  auto budget = module->getAttrOfType<mlir::IntegerAttr>(
      loom::LoomDialect::kMemoryBudgetAttrName);
  auto device =
      module->getAttrOfType<mlir::StringAttr>(loom::LoomDialect::kDeviceAttrName);
  if (!budget || (device && device.getValue() != "cpu"))
    return;
  mlir::Operation *first = nullptr;
  int64_t calls = 0;
  module.walk([&](mlir::Operation *op) {
    if (!loom::hasMachineDependentWorkspace(op) ||
        loom::hasMeasuredWorkspace(op))
      return;
    if (!first)
      first = op;
    ++calls;
  });
  if (!first)
    return;
  mlir::emitWarning(first->getLoc())
      << "the memory budget (" << budget.getInt()
      << " B) does not count the CPU workspace of " << calls
      << " kernel call" << (calls == 1 ? "" : "s") << ", such as this '"
      << loom::getAtenKernel(first)
      << "', which depends on the machine (oneDNN convolutions, bf16/f16 "
         "matmuls): the measured peak can be above the budget; measure it "
         "with loom-run --kernel-workspace FILE on the step compiled without "
         "the budget, then compile with --kernel-workspace FILE";
}

/// Writes what --emit asks for.
static int writeOutput(mlir::ModuleOp module, StringRef pipeline) {
  loom::ArtifactOptions options;
  options.source = inputPath;
  options.pipeline = pipeline.str();
  SmallString<256> dir(inputPath == "-" ? "" : inputPath.getValue());
  sys::path::remove_filename(dir);
  options.weightsDir = dir.empty() ? "." : std::string(dir);

  std::string errorMessage;
  std::unique_ptr<ToolOutputFile> output =
      mlir::openOutputFile(outputPath, &errorMessage);
  if (!output)
    return fail(errorMessage);
  switch (emit) {
  case Emit::MLIR:
    module.print(output->os());
    output->os() << "\n";
    break;
  case Emit::Program: {
    FailureOr<std::string> program = loom::buildProgramJSON(module, options);
    if (failed(program))
      return 1;
    output->os() << *program;
    break;
  }
  case Emit::Artifact:
    if (failed(loom::writeArtifact(module, options, output->os())))
      return 1;
    break;
  }
  output->keep();
  return 0;
}

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  loom::registerAllPasses();
  loom::registerCompileCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  // libLLVM registers hundreds of backend options; --help shows ours, and
  // mlir-opt's pass-manager options still work (--help-hidden lists them).
  cl::HideUnrelatedOptions({&category, &loom::getCompileCLCategory()});
  cl::ParseCommandLineOptions(
      argc, argv,
      "loom-compile: compile a loom training step (loom-import's .mlir) into "
      "a .loomx artifact for the Loom runtime\n\n"
      "The world size, microbatches and optimizer default to the run "
      "configuration capture recorded with the step.\n"
      "Also takes mlir-opt's pass-manager options: --mlir-print-ir-after-all, "
      "--mlir-print-ir-after-failure, --mlir-timing, ...\n");
  loom::CompileOptions options = loom::getCompileOptionsFromCL();

  mlir::DialectRegistry registry;
  loom::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Diagnostics point at the source line; dumping the op adds nothing.
  context.printOpOnDiagnostic(false);

  // --print-pipeline alone prints the defaults without reading stdin.
  SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module;
  // The finish pipeline takes loomrt programs, already distributed: the
  // compile options and the run configuration do not apply to it.
  bool compiling = pipelineKind == PipelineKind::Compile;
  if (!printPipeline || inputPath.getNumOccurrences()) {
    module = readModule(context, sourceMgr);
    if (!module ||
        (compiling && failed(loom::applyRunConfig(options, *module))))
      return 1;
  }
  if (compiling &&
      failed(loom::verifyCompileOptions(options, [](const Twine &message) {
        fail(message);
        return failure();
      })))
    return 1;

  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName());
  if (compiling)
    loom::buildCompilePipeline(pm, options);
  else
    loom::buildFinishPipeline(pm);
  // The expanded pipeline, as the artifact records it.
  std::string pipeline;
  raw_string_ostream pipelineOs(pipeline);
  pm.printAsTextualPipeline(pipelineOs);
  if (printPipeline) {
    outs() << pipeline << "\n";
    return 0;
  }
  if (failed(mlir::applyPassManagerCLOptions(pm)))
    return 1;
  auto timing = std::make_unique<mlir::DefaultTimingManager>();
  mlir::applyDefaultTimingManagerCLOptions(*timing);
  pm.enableTiming(std::move(timing));
  if (summary && compiling &&
      (options.dp == loom::DataParallel::Fsdp ||
       options.grouping == loom::ReplicateGrouping::Units))
    printUnits(*module, options);
  if (failed(pm.run(*module)))
    return 1;
  if (compiling)
    warnUnmeasuredWorkspace(*module);
  if (summary)
    printSummary(*module);
  return writeOutput(*module, pipeline);
}
