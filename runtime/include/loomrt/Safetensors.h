//===- Safetensors.h - Read and write safetensors files --------*- C++ -*-===//
//
// safetensors is the tensor interchange format between capture (Python), the
// compiler and the runtime: u64 little-endian header length N, N bytes of JSON
// header ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// optional "__metadata__": {str: str}}), then the raw little-endian data. The
// reader validates everything before it reads a byte of data: header size,
// JSON shape, dtype names, shapes, that each tensor's byte range matches its
// shape and lies inside the data, and that no two ranges overlap. Those rules
// and the writer's layout are SafetensorsFormat.h's, shared with the
// compiler; this is the ATen-facing API over them.
//
// A file may also be embedded in a larger one (the .loomx weights section):
// `open` then takes the byte range that holds it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SAFETENSORS_H
#define LOOMRT_SAFETENSORS_H

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace loomrt {

class File;

struct SafetensorsEntry {
  std::string name;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  /// Byte range relative to the start of the data section.
  uint64_t begin = 0;
  uint64_t end = 0;
};

class SafetensorsFile {
public:
  /// Opens and validates the safetensors file at `path`, or the one embedded
  /// in `path` at [offset, offset + length) when `length` is given. `what`
  /// names it in errors (defaults to the path). Throws loomrt::Error.
  static SafetensorsFile open(const std::string &path, uint64_t offset = 0,
                              std::optional<uint64_t> length = std::nullopt,
                              std::string what = "");

  /// Entries in data order.
  const std::vector<SafetensorsEntry> &entries() const { return entries_; }
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// nullptr when there is no tensor called `name`.
  const SafetensorsEntry *find(const std::string &name) const;
  /// Reads one tensor into freshly allocated (CPU allocator) memory.
  at::Tensor read(const SafetensorsEntry &entry) const;
  /// Reads `name`; throws naming the file when it is absent.
  at::Tensor read(const std::string &name) const;
  const std::string &what() const { return what_; }

private:
  /// Kept open so reading many tensors does not reopen the file (shared:
  /// SafetensorsFile is copyable).
  std::shared_ptr<const File> file_;
  std::string what_;
  uint64_t dataOffset_ = 0; // absolute offset of the data section in path_
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> byName_;
  std::map<std::string, std::string> metadata_;
};

/// Writes `tensors` (any layout; stored contiguous, in the given order) to
/// `path` atomically (a temporary file renamed over it). Throws loomrt::Error.
void writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, at::Tensor>> &tensors,
    const std::map<std::string, std::string> &metadata = {});

} // namespace loomrt

#endif // LOOMRT_SAFETENSORS_H
