//===- Weights.cpp - The artifact's weights section -----------------------===//

#include "Weights.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace loom;
using namespace loom::detail;

namespace {
/// A safetensors file as read: its header entries and the data section.
struct SafetensorsFile {
  struct Entry {
    std::string dtype;
    SmallVector<int64_t> shape;
    uint64_t begin = 0, end = 0;
  };
  llvm::StringMap<Entry> entries;
  StringRef data;
};
} // namespace

static FailureOr<SafetensorsFile>
parseSafetensors(StringRef bytes, StringRef path, Operation *fileOp) {
  auto fail = [&](const Twine &why) {
    return fileOp->emitError() << "weights file '" << path
                               << "' is not a valid safetensors file: " << why;
  };
  if (bytes.size() < 8)
    return fail("it is shorter than its 8-byte header length");
  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i)
    headerSize |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (headerSize > bytes.size() - 8)
    return fail("the header length " + Twine(headerSize) +
                " runs past the end of the file");
  llvm::Expected<llvm::json::Value> header =
      llvm::json::parse(bytes.substr(8, headerSize));
  if (!header) {
    std::string message = llvm::toString(header.takeError());
    return fail("its header is not JSON (" + message + ")");
  }
  const llvm::json::Object *object = header->getAsObject();
  if (!object)
    return fail("its header is not a JSON object");
  SafetensorsFile file;
  file.data = bytes.drop_front(8 + headerSize);
  for (const auto &[key, value] : *object) {
    if (key == "__metadata__")
      continue;
    const llvm::json::Object *e = value.getAsObject();
    std::optional<StringRef> dtype = e ? e->getString("dtype") : std::nullopt;
    const llvm::json::Array *shape = e ? e->getArray("shape") : nullptr;
    const llvm::json::Array *offsets =
        e ? e->getArray("data_offsets") : nullptr;
    if (!dtype || !shape || !offsets || offsets->size() != 2)
      return fail("entry '" + key.str() +
                  "' needs 'dtype', 'shape' and two 'data_offsets'");
    SafetensorsFile::Entry entry;
    entry.dtype = dtype->str();
    for (const llvm::json::Value &d : *shape) {
      std::optional<int64_t> n = d.getAsInteger();
      if (!n || *n < 0)
        return fail("entry '" + key.str() + "' has a malformed shape");
      entry.shape.push_back(*n);
    }
    std::optional<int64_t> begin = (*offsets)[0].getAsInteger();
    std::optional<int64_t> end = (*offsets)[1].getAsInteger();
    if (!begin || !end || *begin < 0 || *end < *begin ||
        uint64_t(*end) > file.data.size())
      return fail("entry '" + key.str() +
                  "' has data_offsets outside the data section");
    entry.begin = *begin;
    entry.end = *end;
    file.entries[key.str()] = std::move(entry);
  }
  return file;
}

static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

LogicalResult loom::detail::buildWeights(StringRef path, Operation *fileOp,
                                         ArrayRef<WeightRequest> requests,
                                         std::string &out) {
  // A step without parameters, buffers or constants needs no file.
  SafetensorsFile file;
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  if (!requests.empty()) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> read =
        llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                    /*RequiresNullTerminator=*/false);
    if (!read)
      return fileOp->emitError() << "cannot read the weights file '" << path
                                 << "': " << read.getError().message();
    buffer = std::move(*read);
    FailureOr<SafetensorsFile> parsed =
        parseSafetensors(buffer->getBuffer(), path, fileOp);
    if (failed(parsed))
      return failure();
    file = std::move(*parsed);
  }

  bool ok = true;
  llvm::json::Object header;
  std::string data;
  for (const WeightRequest &r : requests) {
    auto it = file.entries.find(r.name);
    if (it == file.entries.end()) {
      r.binding->emitError()
          << "'" << r.name << "' is not in the weights file '" << path << "'";
      ok = false;
      continue;
    }
    const SafetensorsFile::Entry &e = it->second;
    if (e.dtype != r.dtype || ArrayRef<int64_t>(e.shape) != ArrayRef(r.shape)) {
      r.binding->emitError()
          << "'" << r.name << "' is " << r.dtype << formatShape(r.shape)
          << " in the step but " << e.dtype << formatShape(e.shape)
          << " in the weights file '" << path << "'";
      ok = false;
      continue;
    }
    if (e.end - e.begin != r.bytes) {
      r.binding->emitError() << "'" << r.name << "' has " << e.end - e.begin
                             << " bytes in the weights file '" << path
                             << "', expected " << r.bytes;
      ok = false;
      continue;
    }
    llvm::json::Array shape;
    for (int64_t d : r.shape)
      shape.push_back(d);
    header[r.name] = llvm::json::Object{
        {"dtype", r.dtype},
        {"shape", std::move(shape)},
        {"data_offsets", llvm::json::Array{uint64_t(data.size()),
                                           uint64_t(data.size() + r.bytes)}}};
    data.append(file.data.substr(e.begin, r.bytes).str());
  }
  if (!ok)
    return failure();

  header["__metadata__"] = llvm::json::Object{{"format", "pt"}};
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(header));
  // Padded with spaces so the data starts 8-byte aligned, as safetensors
  // writers do.
  while (text.size() % 8)
    text.push_back(' ');
  out.clear();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((uint64_t(text.size()) >> (8 * i)) & 0xff));
  out += text;
  out += data;
  return success();
}
