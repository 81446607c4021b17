//===- KernelWorkspace.cpp - Attach a measured kernel workspace profile ---===//
//
// The profile is the runtime's (runtime/lib/KernelWorkspace.h): its keys are
// declared once, in ArtifactSchema.def.
//
//===----------------------------------------------------------------------===//

#include "loom/Transforms/Passes.h"

#include "loomrt/ArtifactSchema.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

namespace loom {
#define GEN_PASS_DEF_LOOMKERNELWORKSPACE
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
namespace schema = loomrt::schema;

namespace {
/// What `format` says in a profile (runtime/lib/KernelWorkspace.cpp).
constexpr llvm::StringLiteral kProfileFormat = "loom-kernel-workspace";

/// A profile as the module's attributes.
struct Profile {
  DictionaryAttr kernels;
  /// Its `threads` (0: not given).
  int64_t threads = 0;
};

struct LoomKernelWorkspacePass
    : public loom::impl::LoomKernelWorkspaceBase<LoomKernelWorkspacePass> {
  using LoomKernelWorkspaceBase::LoomKernelWorkspaceBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<Profile> profile = read(module);
    if (failed(profile))
      return signalPassFailure();
    module->setAttr(LoomDialect::kKernelWorkspaceAttrName, profile->kernels);
    if (profile->threads > 0)
      module->setAttr(
          LoomDialect::kKernelWorkspaceThreadsAttrName,
          Builder(module.getContext()).getI64IntegerAttr(profile->threads));
    else
      module->removeAttr(LoomDialect::kKernelWorkspaceThreadsAttrName);
  }

  /// The profile the file holds, or an error on the module.
  FailureOr<Profile> read(ModuleOp module) {
    auto fail = [&](const Twine &what) {
      module.emitError("kernel workspace profile '")
          << kernelWorkspaceFile << "': " << what;
      return failure();
    };
    if (kernelWorkspaceFile.empty())
      return fail("no file given (file=...)");
    auto buffer = llvm::MemoryBuffer::getFile(kernelWorkspaceFile);
    if (!buffer)
      return fail("cannot read it: " + buffer.getError().message());
    llvm::Expected<llvm::json::Value> json =
        llvm::json::parse((*buffer)->getBuffer());
    if (!json)
      return fail("not JSON: " + llvm::toString(json.takeError()));
    llvm::json::Object *root = json->getAsObject();
    std::optional<StringRef> format =
        root ? root->getString(schema::kKernelWorkspaceFormat) : std::nullopt;
    if (!format || *format != kProfileFormat)
      return fail(Twine("not a profile of loom-run --kernel-workspace (\"") +
                  schema::kKernelWorkspaceFormat + "\" is not \"" +
                  kProfileFormat + "\")");
    Profile profile;
    if (const llvm::json::Value *t =
            root->get(schema::kKernelWorkspaceThreads)) {
      std::optional<int64_t> n = t->getAsInteger();
      if (!n || *n < 1)
        return fail(Twine("\"") + schema::kKernelWorkspaceThreads +
                    "\" must be a positive integer");
      profile.threads = *n;
    }
    std::optional<StringRef> device =
        root->getString(schema::kKernelWorkspaceDevice);
    if (device && *device != "cpu")
      return fail(Twine("measured on '") + *device +
                  "'; only the CPU runtime measures kernel workspace");
    llvm::json::Object *kernels =
        root->getObject(schema::kKernelWorkspaceKernels);
    if (!kernels)
      return fail(Twine("\"") + schema::kKernelWorkspaceKernels +
                  "\" must be an object from kernel signature to bytes");
    Builder b(module.getContext());
    SmallVector<NamedAttribute> entries;
    for (const auto &[signature, value] : *kernels) {
      std::optional<int64_t> bytes = value.getAsInteger();
      if (!bytes || *bytes < 0)
        return fail(Twine(schema::kKernelWorkspaceKernels) + "[\"" +
                    signature.str() + "\"] must be a non-negative integer");
      entries.push_back(
          b.getNamedAttr(signature.str(), b.getI64IntegerAttr(*bytes)));
    }
    profile.kernels = b.getDictionaryAttr(entries);
    return profile;
  }
};
} // namespace
