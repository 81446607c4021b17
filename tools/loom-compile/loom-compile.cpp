//===- loom-compile.cpp - Compile a loom step into a .loomx artifact ------===//

#include "loom/Analysis/PeakMemory.h"
#include "loom/InitAll.h"
#include "loom/Target/Artifact/ArtifactWriter.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringSwitch.h"
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
static cl::opt<std::string>
    pipelineName("pipeline", cl::init("loom-compile-pipeline"),
                 cl::desc("The registered pass pipeline to run; the "
                          "optimizer options below are its options"),
                 cl::value_desc("name"), cl::cat(category));
static cl::opt<bool>
    printPipeline("print-pipeline", cl::init(false),
                  cl::desc("Print the textual pass pipeline and exit"),
                  cl::cat(category));
enum class Emit { Artifact, MLIR, Program };
static cl::opt<Emit> emit(
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

// The optimizer, as loom-compile-pipeline's options; only those given on
// the command line are passed, so the pipeline's defaults (PyTorch's) hold
// otherwise.
static cl::opt<std::string>
    optimizer("optimizer", cl::desc("none, sgd, adam or adamw (default adamw)"),
              cl::cat(category));
static cl::opt<double> lr("lr", cl::desc("Learning rate (default 1e-3)"),
                          cl::cat(category));
static cl::opt<double> momentum("momentum", cl::desc("SGD momentum"),
                                cl::cat(category));
static cl::opt<double> dampening("dampening", cl::desc("SGD dampening"),
                                 cl::cat(category));
static cl::opt<bool> nesterov("nesterov", cl::desc("SGD Nesterov momentum"),
                              cl::cat(category));
static cl::opt<double>
    weightDecay("weight-decay",
                cl::desc("Weight decay (default 0.01 for adamw, else 0)"),
                cl::cat(category));
static cl::opt<double> beta1("beta1", cl::desc("Adam/AdamW betas[0]"),
                             cl::cat(category));
static cl::opt<double> beta2("beta2", cl::desc("Adam/AdamW betas[1]"),
                             cl::cat(category));
static cl::opt<double> eps("eps", cl::desc("Adam/AdamW eps"),
                           cl::cat(category));
static cl::opt<bool> maximize("maximize", cl::desc("Maximize the objective"),
                              cl::cat(category));

// Data parallelism, as loom-compile-pipeline's options.
static cl::opt<std::string>
    dp("dp",
       cl::desc("Data parallelism: none (default), replicate (DDP: "
                "all-reduce the gradients in buckets) or fsdp (FSDP2: shard "
                "parameters, all-gather per unit, reduce-scatter gradients; "
                "HSDP with --replicate-size)"),
       cl::cat(category));
static cl::opt<int64_t>
    worldSize("world-size",
              cl::desc("Ranks of the data-parallel mesh (default 1)"),
              cl::cat(category));
static cl::opt<double>
    bucketCapMb("bucket-cap-mb",
                cl::desc("DDP bucket size in MiB (default 25; 0: one "
                         "all-reduce per gradient)"),
                cl::cat(category));
static cl::opt<double> firstBucketCapMb(
    "first-bucket-cap-mb",
    cl::desc("DDP's first bucket size in MiB (default 1, or --bucket-cap-mb "
             "when that is given, as DDP does)"),
    cl::cat(category));

static cl::opt<int64_t> replicateSize(
    "replicate-size",
    cl::desc("With --dp=fsdp: HSDP replicas (mesh replicate-size x "
             "world-size/replicate-size)"),
    cl::cat(category));
static cl::opt<std::string> reshardAfterForward(
    "reshard-after-forward",
    cl::desc("With --dp=fsdp: auto (default), true, false or an integer"),
    cl::cat(category));
static cl::opt<bool> reshardAfterBackward(
    "reshard-after-backward",
    cl::desc("With --dp=fsdp and --microbatches: false keeps the parameters "
             "unsharded between microbatches (default true)"),
    cl::cat(category));
static cl::list<std::string>
    units("units", cl::CommaSeparated,
          cl::desc("With --dp=fsdp: module-path prefixes of the FSDP units "
                   "(default: every layers.N plus the root)"),
          cl::cat(category));
static cl::opt<std::string>
    paramDtype("param-dtype",
               cl::desc("With --dp=fsdp: all-gather and compute dtype "
                        "(bf16, f16, f32)"),
               cl::cat(category));
static cl::opt<std::string>
    reduceDtype("reduce-dtype",
                cl::desc("With --dp=fsdp: gradient reduction dtype"),
                cl::cat(category));

static cl::opt<int64_t> forwardPrefetch(
    "forward-prefetch",
    cl::desc("With --dp=fsdp: every unit prefetches the next N units' "
             "all-gathers in forward (default 0)"),
    cl::cat(category));
static cl::opt<std::string> backwardPrefetch(
    "backward-prefetch",
    cl::desc("With --dp=fsdp: pre (default, FSDP2), post (FSDP1 "
             "BACKWARD_POST) or none"),
    cl::cat(category));
static cl::opt<int64_t> bucketBytes(
    "bucket-bytes",
    cl::desc("With --dp=fsdp: merge consecutive all-gathers and "
             "reduce-scatters up to this many unsharded bytes (default 0: "
             "none)"),
    cl::cat(category));

static cl::opt<int64_t>
    microbatches("microbatches",
                 cl::desc("Gradient-accumulation microbatches per step "
                          "(default 1)"),
                 cl::cat(category));

// Latency hiding, as loom-compile-pipeline's options.
static cl::opt<bool>
    schedule("schedule",
             cl::desc("Reorder the step with loom-schedule: prefetch "
                      "all-gathers, send reduce-scatters early, under "
                      "--memory-limit"),
             cl::cat(category));
static cl::opt<std::string> scheduleDevice(
    "schedule-device",
    cl::desc("With --schedule: device spec of the cost model (default cpu)"),
    cl::cat(category));
static cl::opt<std::string> memoryLimit(
    "memory-limit",
    cl::desc("With --schedule: per-rank peak memory limit (bytes, or "
             "512MiB, 2GiB, ...; default none)"),
    cl::cat(category));
static cl::opt<int64_t> maxInFlight(
    "max-in-flight",
    cl::desc("With --schedule: most collectives in flight at once "
             "(default 2)"),
    cl::cat(category));

static int fail(const Twine &message) {
  WithColor::error(errs(), "loom-compile") << message << "\n";
  return 1;
}

/// `NAME{key=value ...}` with the optimizer options given on the command
/// line, to run on the module.
static std::string buildPipelineText() {
  std::string options;
  raw_string_ostream os(options);
  auto add = [&](cl::Option &opt, const Twine &value) {
    if (opt.getNumOccurrences())
      os << (options.empty() ? "" : " ") << opt.ArgStr << "=" << value;
  };
  // %.17g keeps every double exact through the pipeline text.
  auto number = [](double v) { return formatv("{0}", format("%.17g", v)); };
  add(optimizer, optimizer);
  add(lr, number(lr));
  add(momentum, number(momentum));
  add(dampening, number(dampening));
  add(nesterov, nesterov ? "true" : "false");
  add(weightDecay, number(weightDecay));
  add(beta1, number(beta1));
  add(beta2, number(beta2));
  add(eps, number(eps));
  add(maximize, maximize ? "true" : "false");
  add(dp, dp);
  add(worldSize, Twine(worldSize));
  add(bucketCapMb, number(bucketCapMb));
  add(firstBucketCapMb, number(firstBucketCapMb));
  add(replicateSize, Twine(replicateSize));
  add(reshardAfterForward, reshardAfterForward);
  add(reshardAfterBackward, reshardAfterBackward ? "true" : "false");
  if (units.getNumOccurrences()) {
    std::string list;
    for (const std::string &u : units)
      list += (list.empty() ? "" : ",") + u;
    os << (options.empty() ? "" : " ") << "units={" << list << "}";
  }
  add(paramDtype, paramDtype);
  add(reduceDtype, reduceDtype);
  add(forwardPrefetch, Twine(forwardPrefetch));
  add(backwardPrefetch, backwardPrefetch);
  add(bucketBytes, Twine(bucketBytes));
  add(microbatches, Twine(microbatches));
  add(schedule, schedule ? "true" : "false");
  add(scheduleDevice, scheduleDevice);
  add(memoryLimit, memoryLimit);
  add(maxInFlight, Twine(maxInFlight));
  return pipelineName + (options.empty() ? "" : "{" + options + "}");
}

static void printSummary(mlir::ModuleOp module) {
  for (auto program : module.getOps<loom::rt::ProgramOp>()) {
    StringMap<int64_t> counts;
    for (mlir::Operation &op : program.getBody().front())
      if (isa<loom::rt::AtenOp, loom::rt::FreeOp, loom::rt::OptimizerOp>(op))
        counts[op.getName().stripDialect()]++;
    loom::PeakMemory memory(program);
    errs() << "loom-compile: rank " << program.getRank() << ": "
           << program.getNumSlots().value_or(0) << " slots, "
           << counts.lookup("aten") << " aten, " << counts.lookup("free")
           << " free, " << counts.lookup("optimizer")
           << " optimizer instructions; predicted peak memory "
           << memory.peakBytes << " bytes (persistent "
           << memory.persistentBytes << " + activations "
           << memory.peakActivationBytes << ")\n";
  }
}

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  loom::registerAllPasses();
  mlir::registerPassManagerCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  // libLLVM registers hundreds of backend options; --help shows ours, and
  // mlir-opt's pass-manager options still work (--help-hidden lists them).
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "loom-compile: compile a loom training step (loom-import's .mlir) into "
      "a .loomx artifact for the Loom runtime\n\n"
      "Also takes mlir-opt's pass-manager options: --mlir-print-ir-after-all, "
      "--mlir-print-ir-after-failure, --mlir-timing, ...\n");

  if (optimizer.getNumOccurrences() &&
      !llvm::is_contained({"none", "sgd", "adam", "adamw"}, optimizer))
    return fail("--optimizer: unknown optimizer '" + optimizer +
                "' (expected none, sgd, adam or adamw)");
  if (!mlir::PassPipelineInfo::lookup(pipelineName))
    return fail("--pipeline: no pass pipeline is registered as '" +
                pipelineName + "' (loom-compile-pipeline is)");

  mlir::DialectRegistry registry;
  loom::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Diagnostics point at the source line; dumping the op adds nothing.
  context.printOpOnDiagnostic(false);

  std::string pipelineText = buildPipelineText();
  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName());
  std::string pipelineError;
  raw_string_ostream pipelineErrors(pipelineError);
  if (failed(mlir::parsePassPipeline(pipelineText, pm, pipelineErrors)))
    return fail("cannot build the pipeline '" + pipelineText +
                "': " + pipelineError);
  // The expanded pipeline, as the artifact records it.
  std::string expanded;
  raw_string_ostream expandedOs(expanded);
  pm.printAsTextualPipeline(expandedOs);
  if (printPipeline) {
    outs() << expanded << "\n";
    return 0;
  }
  if (failed(mlir::applyPassManagerCLOptions(pm)))
    return 1;
  auto timing = std::make_unique<mlir::DefaultTimingManager>();
  mlir::applyDefaultTimingManagerCLOptions(*timing);
  pm.enableTiming(std::move(timing));

  std::string errorMessage;
  std::unique_ptr<MemoryBuffer> input =
      mlir::openInputFile(inputPath, &errorMessage);
  if (!input)
    return fail(errorMessage);
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());
  // Diagnostics say where, with the source line, as mlir-opt's do.
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  if (failed(pm.run(*module)))
    return 1;

  if (summary)
    printSummary(*module);

  loom::ArtifactOptions options;
  options.source = inputPath;
  options.pipeline = expanded;
  SmallString<256> dir(inputPath == "-" ? "" : inputPath.getValue());
  sys::path::remove_filename(dir);
  options.weightsDir = dir.empty() ? "." : std::string(dir);

  std::unique_ptr<ToolOutputFile> output =
      mlir::openOutputFile(outputPath, &errorMessage);
  if (!output)
    return fail(errorMessage);
  switch (emit) {
  case Emit::MLIR:
    module->print(output->os());
    output->os() << "\n";
    break;
  case Emit::Program: {
    FailureOr<std::string> program = loom::buildProgramJSON(*module, options);
    if (failed(program))
      return 1;
    output->os() << *program;
    break;
  }
  case Emit::Artifact:
    if (failed(loom::writeArtifact(*module, options, output->os())))
      return 1;
    break;
  }
  output->keep();
  return 0;
}
