//===- SafetensorsWriter.h - Write tensors in the safetensors format -----===//

#ifndef LOOM_LIB_IMPORT_SAFETENSORSWRITER_H
#define LOOM_LIB_IMPORT_SAFETENSORSWRITER_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace loom {

/// Collects named, contiguous tensors and writes them as one safetensors
/// file (8-byte little-endian header length, JSON header, raw data), the
/// format `safetensors.torch.load_file` and the Loom runtime read.
class SafetensorsWriter {
public:
  /// `dtype` is the safetensors dtype name ("F32", "BF16", "I64", ...).
  void add(llvm::StringRef name, llvm::StringRef dtype,
           llvm::ArrayRef<int64_t> shape, std::string bytes);
  llvm::Error write(llvm::StringRef path) const;

private:
  struct Entry {
    std::string name, dtype;
    llvm::SmallVector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Entry> entries;
};

} // namespace loom

#endif // LOOM_LIB_IMPORT_SAFETENSORSWRITER_H
