//===- Safetensors.cpp - The compiler's safetensors reader and writer -----===//
//
// An adapter over the runtime's loomrt/SafetensorsFormat.h, which holds the
// format's rules: this file parses the header with llvm::json, lends it to
// the shared decoder and turns its problems into llvm::Errors.
//
//===----------------------------------------------------------------------===//

#include "loom/Support/Safetensors.h"

#include "loomrt/SafetensorsFormat.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"

using namespace llvm;
using namespace loom::safetensors;
namespace format = loomrt::safetensors;

std::optional<unsigned> loom::safetensors::getDtypeSize(StringRef dtype) {
  return format::dtypeSize(std::string_view(dtype.data(), dtype.size()));
}

std::string loom::safetensors::formatShape(ArrayRef<int64_t> shape) {
  return format::formatShape(std::vector<int64_t>(shape.begin(), shape.end()));
}

//===----------------------------------------------------------------------===//
// Reader
//===----------------------------------------------------------------------===//

namespace {
/// llvm::json as SafetensorsFormat.h's decoder reads JSON.
struct JsonAccess {
  using Value = json::Value;
  static bool isObject(const Value &v) { return v.getAsObject(); }
  template <typename F>
  static void forEachMember(const Value &v, F f) {
    for (const auto &[key, member] : *v.getAsObject())
      f(key.str(), member);
  }
  static const Value *find(const Value &v, std::string_view key) {
    return v.getAsObject()->get(StringRef(key.data(), key.size()));
  }
  static std::optional<std::string> getString(const Value &v) {
    if (std::optional<StringRef> s = v.getAsString())
      return s->str();
    return std::nullopt;
  }
  static std::optional<uint64_t> getUnsigned(const Value &v) {
    return v.getAsUINT64();
  }
  static std::optional<size_t> arraySize(const Value &v) {
    if (const json::Array *a = v.getAsArray())
      return a->size();
    return std::nullopt;
  }
  static const Value &element(const Value &v, size_t i) {
    return (*v.getAsArray())[i];
  }
  static std::string print(const Value &v) {
    std::string text;
    raw_string_ostream(text) << v;
    return text;
  }
};
} // namespace

/// The error of a file that breaks the format.
static Error invalid(StringRef fileName, const Twine &why) {
  return createStringError(inconvertibleErrorCode(),
                           "'" + fileName +
                               "' is not a valid safetensors file: " + why);
}

Expected<File> File::parse(StringRef bytes, StringRef fileName) {
  uint64_t headerSize = 0;
  if (format::Problem p =
          format::readHeaderLength(bytes.data(), bytes.size(), headerSize))
    return invalid(fileName, *p);
  Expected<json::Value> header =
      json::parse(bytes.substr(format::kLengthBytes, headerSize));
  if (!header)
    return invalid(fileName, "its header is not JSON (" +
                                 toString(header.takeError()) + ")");

  StringRef data = bytes.drop_front(format::kLengthBytes + headerSize);
  format::Header decoded;
  if (format::Problem p =
          format::decodeHeader<JsonAccess>(*header, data.size(), decoded))
    return invalid(fileName, *p);

  File file;
  file.metadata = std::move(decoded.metadata);
  for (format::Entry &e : decoded.entries) {
    file.index[e.name] = file.tensors.size();
    file.tensors.push_back(
        {std::move(e.name), std::move(e.dtype),
         SmallVector<int64_t>(e.shape.begin(), e.shape.end()),
         data.slice(e.begin, e.end)});
  }
  return std::move(file);
}

Expected<File> File::load(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> read =
      MemoryBuffer::getFile(path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!read)
    return createStringError(read.getError(), "cannot read '" + path + "': " +
                                                  read.getError().message());
  std::shared_ptr<MemoryBuffer> buffer = std::move(*read);
  Expected<File> file = parse(buffer->getBuffer(), path);
  if (file)
    file->buffer = std::move(buffer);
  return file;
}

const Tensor *File::lookup(StringRef name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &tensors[it->second];
}

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

Writer::Writer() : header(std::make_unique<format::HeaderWriter>()) {
  // What `safetensors.torch.save_file` writes, so PyTorch tools take the
  // file for theirs.
  [[maybe_unused]] format::Problem p = header->setMetadata("format", "pt");
  assert(!p && "the metadata is ASCII");
}

Writer::~Writer() = default;
Writer::Writer(Writer &&) = default;
Writer &Writer::operator=(Writer &&) = default;

Error Writer::add(StringRef name, StringRef dtype, ArrayRef<int64_t> shape,
                  std::string bytes) {
  if (format::Problem p = header->add(
          name.str(), dtype.str(),
          std::vector<int64_t>(shape.begin(), shape.end()), bytes.size()))
    return createStringError(inconvertibleErrorCode(),
                             "cannot add tensor '" + name + "': " + *p);
  data.push_back(std::move(bytes));
  return Error::success();
}

void Writer::write(raw_ostream &os) const {
  os << header->prefix();
  for (const std::string &bytes : data)
    os << bytes;
}

Error Writer::writeFile(StringRef path) const {
  std::error_code ec;
  raw_fd_ostream os(path, ec, sys::fs::OF_None);
  if (ec)
    return createStringError(ec,
                             "cannot write '" + path + "': " + ec.message());
  write(os);
  os.close();
  if (os.has_error())
    return createStringError(os.error(), "cannot write '" + path +
                                             "': " + os.error().message());
  return Error::success();
}
