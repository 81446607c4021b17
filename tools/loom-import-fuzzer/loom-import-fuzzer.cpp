//===- loom-import-fuzzer.cpp - libFuzzer target for the .pt2 importer ----===//
//
// Two input shapes: bytes that start like a zip archive go through the whole
// importer (libzip included); anything else is taken as the text of
// `models/model.json` and imported from an in-memory archive, which lets
// the fuzzer mutate graph JSON without having to keep CRCs valid. Either
// way the importer must return an error or a verified module, never crash.
//
//===----------------------------------------------------------------------===//

#include "Pt2Archive.h"
#include "loom/Import/Pt2Importer.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdint>
#include <memory>

namespace {

// Creating an MLIRContext and loading the dialects cost more than importing
// a small graph, so one context serves many inputs. What an import leaves
// behind in it (uniqued attributes and types) only grows, so the context is
// replaced every kInputsPerContext inputs to bound memory. A crash that
// needed an earlier input's leftovers still reproduces from a fresh
// context in nearly every case: the importer builds into a new module each
// time and never looks up what an earlier import created.
constexpr unsigned kInputsPerContext = 1000;

mlir::MLIRContext &sharedContext() {
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry();
    r->insert<loom::LoomDialect, mlir::func::FuncDialect>();
    return r;
  }();
  static std::unique_ptr<mlir::MLIRContext> context;
  static unsigned uses = 0;
  if (!context || ++uses == kInputsPerContext) {
    context = std::make_unique<mlir::MLIRContext>(
        *registry, mlir::MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    uses = 0;
  }
  return *context;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext &context = sharedContext();
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  loom::ImportOptions options;
  if (bytes.starts_with("PK")) {
    (void)loom::importPt2Buffer(bytes, "fuzz.pt2", &context, options);
    return 0;
  }
  auto archive = loom::Pt2Archive::fromEntries(
      {{"f/models/model.json", bytes.str()}, {"f/archive_format", "pt2"}});
  (void)loom::importArchive(*archive, "fuzz.pt2", &context, options);
  return 0;
}
