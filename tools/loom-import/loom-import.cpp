//===- loom-import.cpp - Import a .pt2 training step into loom IR ---------===//

#include "loom/Import/Pt2Importer.h"
#include "loom/InitAll.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

static cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                                      cl::desc("<step.pt2>"));
static cl::opt<std::string> outputPath("o", cl::init("-"),
                                       cl::desc("Output .mlir file"),
                                       cl::value_desc("file"));
static cl::opt<std::string>
    weightsPath("weights", cl::init(""),
                cl::desc("Write the weights to this safetensors file "
                         "(default: next to -o as <name>.weights.safetensors)"),
                cl::value_desc("file"));
static cl::opt<bool> noWeights(
    "no-weights", cl::init(false),
    cl::desc("Import without weights: do not read or write them; "
             "parameters, buffers and constants become typed arguments "
             "whose data the archive may lack (loom.capture --meta)"));
static cl::opt<std::string> funcName("func-name", cl::init("step"),
                                     cl::desc("Name of the step function"));

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv,
      "loom-import: read a torch.export .pt2 training step into loom IR\n");

  mlir::DialectRegistry registry;
  loom::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  // The importer's diagnostics name the node; dumping the op adds nothing.
  context.printOpOnDiagnostic(false);

  // Diagnostics say where: file:line of the model source and the node.
  bool failedAny = false;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    raw_ostream &os = errs();
    os << loom::formatLocation(d.getLocation()) << ": ";
    switch (d.getSeverity()) {
    case mlir::DiagnosticSeverity::Error:
      failedAny = true;
      WithColor(os, HighlightColor::Error) << "error: ";
      break;
    case mlir::DiagnosticSeverity::Warning:
      WithColor(os, HighlightColor::Warning) << "warning: ";
      break;
    default:
      WithColor(os, HighlightColor::Note) << "note: ";
      break;
    }
    os << d << "\n";
    for (mlir::Diagnostic &note : d.getNotes())
      os << loom::formatLocation(note.getLocation()) << ": note: " << note
         << "\n";
    return mlir::success();
  });

  loom::ImportOptions options;
  options.funcName = funcName;
  options.requireWeights = !noWeights;
  if (noWeights && !weightsPath.empty()) {
    WithColor::error(errs(), "loom-import")
        << "--weights and --no-weights exclude each other\n";
    return 1;
  }
  if (!noWeights) {
    if (!weightsPath.empty()) {
      options.weightsOut = weightsPath;
    } else if (outputPath != "-") {
      SmallString<256> w(outputPath);
      sys::path::replace_extension(w, "weights.safetensors");
      options.weightsOut = std::string(w);
    }
    // Refer to the weights relative to the IR file when they sit together.
    if (!options.weightsOut.empty() && outputPath != "-" &&
        sys::path::parent_path(options.weightsOut) ==
            sys::path::parent_path(outputPath))
      options.weightsRef = sys::path::filename(options.weightsOut).str();
  }

  mlir::OwningOpRef<mlir::ModuleOp> module =
      loom::importPt2(inputPath, &context, options);
  if (!module || failedAny)
    return 1;

  std::string errorMessage;
  std::unique_ptr<ToolOutputFile> output =
      mlir::openOutputFile(outputPath, &errorMessage);
  if (!output) {
    WithColor::error(errs(), "loom-import") << errorMessage << "\n";
    return 1;
  }
  // Locations (graph node name and model source line) are kept in the text
  // so later tools can name the node in diagnostics, traces and artifacts.
  module->print(output->os(),
                mlir::OpPrintingFlags().enableDebugInfo(/*enable=*/true,
                                                        /*prettyForm=*/false));
  output->os() << "\n";
  output->keep();
  return 0;
}
