//===- SafetensorsFile.h - Safetensors file bytes for the unit tests ------===//

#ifndef LOOM_UNITTESTS_SAFETENSORSFILE_H
#define LOOM_UNITTESTS_SAFETENSORSFILE_H

#include "loom/Support/Safetensors.h"

#include "llvm/Support/raw_ostream.h"

#include <string>
#include <tuple>
#include <vector>

namespace loom::test {

/// The bytes of a safetensors file holding `tensors` (name, dtype, shape,
/// data), written by the compiler's Writer.
inline std::string
safetensorsFile(llvm::ArrayRef<std::tuple<llvm::StringRef, llvm::StringRef,
                                          std::vector<int64_t>, std::string>>
                    tensors) {
  safetensors::Writer writer;
  for (const auto &[name, dtype, shape, bytes] : tensors)
    llvm::cantFail(writer.add(name, dtype, shape, bytes));
  std::string out;
  llvm::raw_string_ostream os(out);
  writer.write(os);
  return out;
}

} // namespace loom::test

#endif // LOOM_UNITTESTS_SAFETENSORSFILE_H
