//===- SafetensorsWriter.cpp - Write tensors in the safetensors format ----===//

#include "SafetensorsWriter.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace loom;

void SafetensorsWriter::add(llvm::StringRef name, llvm::StringRef dtype,
                            llvm::ArrayRef<int64_t> shape, std::string bytes) {
  entries.push_back(
      {name.str(), dtype.str(), llvm::SmallVector<int64_t>(shape),
       std::move(bytes)});
}

llvm::Error SafetensorsWriter::write(llvm::StringRef path) const {
  llvm::json::Object header;
  uint64_t offset = 0;
  for (const Entry &e : entries) {
    llvm::json::Array shape;
    for (int64_t d : e.shape)
      shape.push_back(d);
    header[e.name] = llvm::json::Object{
        {"dtype", e.dtype},
        {"shape", std::move(shape)},
        {"data_offsets", llvm::json::Array{offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  header["__metadata__"] = llvm::json::Object{{"format", "pt"}};
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(header));
  // The header is padded with spaces to keep the data 8-byte aligned.
  while (text.size() % 8)
    text.push_back(' ');

  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError(ec, "cannot write '" + path +
                                           "': " + ec.message());
  uint64_t n = text.size();
  char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  os.write(length, 8);
  os << text;
  for (const Entry &e : entries)
    os << e.bytes;
  os.close();
  if (os.has_error())
    return llvm::createStringError(os.error(), "cannot write '" + path +
                                                   "': " +
                                                   os.error().message());
  return llvm::Error::success();
}
