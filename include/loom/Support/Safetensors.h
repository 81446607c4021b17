//===- Safetensors.h - The compiler's one safetensors reader and writer ---===//
//
// A safetensors file is an 8-byte little-endian header length, a JSON header
// mapping each tensor name to {dtype, shape, data_offsets} (plus an optional
// `__metadata__` object of strings), then the data section the offsets index.
// loom-import writes the step's weights in it and the artifact writer reads
// them back and writes the artifact's weights section in it. The format's
// rules (dtypes, checks and their error texts, the header layout) live once,
// in the runtime's dependency-free runtime/include/loomrt/SafetensorsFormat.h,
// which the runtime's reader and writer use too; this is the LLVM-facing API
// over it (compiler and runtime still meet only at the artifact: the compiler
// includes that one header, it does not link the runtime).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_SAFETENSORS_H
#define LOOM_SUPPORT_SAFETENSORS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loomrt::safetensors {
class HeaderWriter;
} // namespace loomrt::safetensors

namespace loom::safetensors {

/// Bytes of one element of a safetensors dtype ("F32" is 4, "BOOL" 1), or
/// std::nullopt for a name the format does not define.
std::optional<unsigned> getDtypeSize(llvm::StringRef dtype);

/// "[2, 3]", as errors print shapes.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// One tensor of a parsed file.
struct Tensor {
  std::string name;
  /// The safetensors dtype name ("F32", "BF16", "I64", ...).
  std::string dtype;
  llvm::SmallVector<int64_t> shape;
  /// Its bytes, inside the buffer the file was parsed from.
  llvm::StringRef data;
};

/// A parsed safetensors file. Parsing checks everything a reader relies on,
/// as the reference implementation does: the header length fits the file,
/// the header is a JSON object, every tensor has a known dtype, a shape of
/// non-negative sizes and `data_offsets` [begin, end] whose length is what
/// its dtype and shape need, and the tensors' ranges cover the data section
/// without overlaps or holes.
class File {
public:
  /// Parses `bytes`, which must outlive the File. An error reads
  /// "'<fileName>' is not a valid safetensors file: <what and where>", the
  /// where naming the tensor and field at fault.
  static llvm::Expected<File> parse(llvm::StringRef bytes,
                                    llvm::StringRef fileName);
  /// Reads the file at `path` and parses it; the File keeps the buffer.
  static llvm::Expected<File> load(llvm::StringRef path);

  /// The tensors in data order.
  llvm::ArrayRef<Tensor> getTensors() const { return tensors; }
  /// The tensor called `name`, or null.
  const Tensor *lookup(llvm::StringRef name) const;
  /// The `__metadata__` entries (empty when the header has none).
  const std::map<std::string, std::string> &getMetadata() const {
    return metadata;
  }

private:
  std::vector<Tensor> tensors;
  llvm::StringMap<size_t> index;
  std::map<std::string, std::string> metadata;
  /// The bytes `load` read; null after `parse`.
  std::shared_ptr<llvm::MemoryBuffer> buffer;
};

/// Collects named, contiguous tensors and writes them as one safetensors
/// file with the data 8-byte aligned, in the order they were added, and
/// `__metadata__` {"format": "pt"} as `safetensors.torch.save_file` writes.
class Writer {
public:
  Writer();
  ~Writer();
  Writer(Writer &&);
  Writer &operator=(Writer &&);

  /// Adds a tensor. Fails, saying which tensor, when the name is taken or
  /// empty, the dtype unknown, a size negative, or `bytes` is not the size
  /// `dtype` and `shape` need.
  llvm::Error add(llvm::StringRef name, llvm::StringRef dtype,
                  llvm::ArrayRef<int64_t> shape, std::string bytes);

  /// Writes the file to `os`.
  void write(llvm::raw_ostream &os) const;
  /// Writes the file to `path`; the error names the path.
  llvm::Error writeFile(llvm::StringRef path) const;

private:
  /// The shared layout: names, dtypes, shapes and offsets.
  std::unique_ptr<loomrt::safetensors::HeaderWriter> header;
  /// Each tensor's bytes, in the order added.
  std::vector<std::string> data;
};

} // namespace loom::safetensors

#endif // LOOM_SUPPORT_SAFETENSORS_H
