//===- Weights.cpp - The artifact's weights section -----------------------===//

#include "Weights.h"

#include "loom/Support/Safetensors.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace loom;
using namespace loom::detail;

LogicalResult loom::detail::buildWeights(StringRef path, Operation *fileOp,
                                         ArrayRef<WeightRequest> requests,
                                         std::string &out) {
  // A step without parameters, buffers or constants needs no file.
  std::optional<safetensors::File> file;
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  if (!requests.empty()) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> read =
        llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                    /*RequiresNullTerminator=*/false);
    if (!read)
      return fileOp->emitError() << "cannot read the weights file '" << path
                                 << "': " << read.getError().message();
    buffer = std::move(*read);
    llvm::Expected<safetensors::File> parsed =
        safetensors::File::parse(buffer->getBuffer(), path);
    if (!parsed)
      return fileOp->emitError()
             << "weights file " << llvm::toString(parsed.takeError());
    file = std::move(*parsed);
  }

  bool ok = true;
  safetensors::Writer writer;
  for (const WeightRequest &r : requests) {
    const safetensors::Tensor *t = file->lookup(r.name);
    if (!t) {
      r.binding->emitError()
          << "'" << r.name << "' is not in the weights file '" << path << "'";
      ok = false;
      continue;
    }
    // The file's own dtype, shape and size agree (parse checks it), so
    // equal dtype and shape mean equal bytes.
    if (t->dtype != r.dtype ||
        ArrayRef<int64_t>(t->shape) != ArrayRef(r.shape)) {
      r.binding->emitError()
          << "'" << r.name << "' is " << r.dtype
          << safetensors::formatShape(r.shape) << " in the step but "
          << t->dtype << safetensors::formatShape(t->shape)
          << " in the weights file '" << path << "'";
      ok = false;
      continue;
    }
    if (llvm::Error err = writer.add(r.name, r.dtype, r.shape, t->data.str())) {
      r.binding->emitError() << llvm::toString(std::move(err));
      ok = false;
    }
  }
  if (!ok)
    return failure();
  out.clear();
  llvm::raw_string_ostream os(out);
  writer.write(os);
  return success();
}
