//===- ByteSize.h - Byte counts as users write them ------------*- C++ -*-===//

#ifndef LOOM_SUPPORT_BYTESIZE_H
#define LOOM_SUPPORT_BYTESIZE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace loom {

/// Parses a byte count: a plain number or one with a unit (B, KiB, MiB, GiB,
/// KB, MB, GB), e.g. `1073741824`, `512MiB`, `2.4GiB`. Returns -1 on bad
/// input.
int64_t parseByteSize(llvm::StringRef text);

/// `bytes` as a person reads it: `2.41 GiB (2583888896 B)`.
std::string formatByteSize(int64_t bytes);

} // namespace loom

#endif // LOOM_SUPPORT_BYTESIZE_H
