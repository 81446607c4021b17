//===- Safetensors.cpp - The compiler's one safetensors reader and writer -===//

#include "loom/Support/Safetensors.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace llvm;
using namespace loom::safetensors;

/// The reference implementation refuses larger headers; so do we, so that a
/// corrupt length reads as an error rather than as a huge header.
static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::optional<unsigned> loom::safetensors::getDtypeSize(StringRef dtype) {
  unsigned size = StringSwitch<unsigned>(dtype)
                      .Cases({"BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2"}, 1)
                      .Cases({"U16", "I16", "F16", "BF16"}, 2)
                      .Cases({"U32", "I32", "F32"}, 4)
                      .Cases({"U64", "I64", "F64", "C64"}, 8)
                      .Case("C128", 16)
                      .Default(0);
  if (!size)
    return std::nullopt;
  return size;
}

std::string loom::safetensors::formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  raw_string_ostream os(text);
  os << "[";
  interleaveComma(shape, os);
  os << "]";
  return text;
}

/// Bytes a tensor of `dtypeSize`-byte elements and `shape` holds, or
/// std::nullopt when that overflows.
static std::optional<uint64_t> tensorBytes(unsigned dtypeSize,
                                           ArrayRef<int64_t> shape) {
  std::optional<uint64_t> n = dtypeSize;
  for (int64_t d : shape)
    if (n)
      n = checkedMulUnsigned<uint64_t>(*n, d);
  return n;
}

//===----------------------------------------------------------------------===//
// Reader
//===----------------------------------------------------------------------===//

namespace {
/// Builds the errors of one parse, all naming the file.
struct Problem {
  StringRef fileName;

  Error operator()(const Twine &why) const {
    return createStringError(inconvertibleErrorCode(),
                             "'" + fileName +
                                 "' is not a valid safetensors file: " + why);
  }
};

/// A range of the data section a tensor claims.
struct Claim {
  uint64_t begin, end;
  size_t tensor;
};
} // namespace

/// Parses one header entry (not `__metadata__`) into `out` and `claim`.
static Error parseEntry(StringRef name, const json::Value &value,
                        uint64_t dataSize, const Problem &problem, Tensor &out,
                        Claim &claim) {
  std::string at = ("tensor '" + name + "'").str();
  const json::Object *entry = value.getAsObject();
  if (!entry)
    return problem(at + " must be an object with 'dtype', 'shape' and "
                        "'data_offsets'");
  for (const auto &[key, unused] : *entry)
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return problem(at + " has an unknown field '" + key.str() +
                     "' (expected dtype, shape, data_offsets)");

  std::optional<StringRef> dtype = entry->getString("dtype");
  if (!dtype)
    return problem(at + " needs a string 'dtype'");
  std::optional<unsigned> dtypeSize = getDtypeSize(*dtype);
  if (!dtypeSize)
    return problem(at + " has dtype '" + *dtype +
                   "', which safetensors does not define (BOOL, U8, I8, "
                   "F8_E4M3, F8_E5M2, U16, I16, F16, BF16, U32, I32, F32, "
                   "U64, I64, F64, C64, C128)");

  const json::Array *shape = entry->getArray("shape");
  if (!shape)
    return problem(at + " needs a 'shape' list");
  out.name = name.str();
  out.dtype = dtype->str();
  for (auto [i, d] : enumerate(*shape)) {
    std::optional<int64_t> n = d.getAsInteger();
    if (!n || *n < 0)
      return problem(formatv("{0} has shape[{1}] = {2}, expected a "
                             "non-negative integer",
                             at, i, d));
    out.shape.push_back(*n);
  }

  const json::Array *offsets = entry->getArray("data_offsets");
  if (!offsets || offsets->size() != 2)
    return problem(at + " needs 'data_offsets': [begin, end]");
  std::optional<uint64_t> begin = (*offsets)[0].getAsUINT64();
  std::optional<uint64_t> end = (*offsets)[1].getAsUINT64();
  if (!begin || !end)
    return problem(formatv("{0} has data_offsets {1}, expected two "
                           "non-negative integers",
                           at, *entry->get("data_offsets")));
  if (*begin > *end)
    return problem(formatv("{0} has data_offsets [{1}, {2}] with begin after "
                           "end",
                           at, *begin, *end));
  std::optional<uint64_t> need = tensorBytes(*dtypeSize, out.shape);
  if (!need)
    return problem(at + " has a shape " + formatShape(out.shape) +
                   " too large to address");
  if (*end - *begin != *need)
    return problem(formatv("{0} is {1}{2}, which needs {3} bytes, but its "
                           "data_offsets [{4}, {5}] hold {6}",
                           at, *dtype, formatShape(out.shape), *need, *begin,
                           *end, *end - *begin));
  if (*end > dataSize)
    return problem(formatv("{0} has data_offsets [{1}, {2}] past the end of "
                           "the data section ({3} bytes): the file is "
                           "truncated",
                           at, *begin, *end, dataSize));
  claim.begin = *begin;
  claim.end = *end;
  return Error::success();
}

Expected<File> File::parse(StringRef bytes, StringRef fileName) {
  Problem problem{fileName};
  if (bytes.size() < 8)
    return problem(formatv("it has {0} bytes, fewer than the 8-byte header "
                           "length",
                           bytes.size()));
  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i)
    headerSize |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (headerSize > bytes.size() - 8)
    return problem(formatv("the header length {0} runs past the end of the "
                           "file ({1} bytes follow it)",
                           headerSize, bytes.size() - 8));
  if (headerSize > kMaxHeaderBytes)
    return problem(formatv("the header length {0} exceeds the {1} bytes "
                           "safetensors allows",
                           headerSize, kMaxHeaderBytes));

  Expected<json::Value> header = json::parse(bytes.substr(8, headerSize));
  if (!header)
    return problem("its header is not JSON (" + toString(header.takeError()) +
                   ")");
  const json::Object *object = header->getAsObject();
  if (!object)
    return problem("its header is not a JSON object");

  File file;
  StringRef data = bytes.drop_front(8 + headerSize);
  std::vector<Claim> claims;
  for (const auto &[key, value] : *object) {
    if (key == "__metadata__") {
      const json::Object *metadata = value.getAsObject();
      if (!metadata)
        return problem("__metadata__ must be an object of strings");
      for (const auto &[k, v] : *metadata) {
        std::optional<StringRef> s = v.getAsString();
        if (!s)
          return problem(formatv("__metadata__['{0}'] is {1}, expected a "
                                 "string",
                                 k.str(), v));
        file.metadata[k.str()] = s->str();
      }
      continue;
    }
    Tensor tensor;
    Claim claim;
    if (Error err = parseEntry(key, value, data.size(), problem, tensor, claim))
      return std::move(err);
    claim.tensor = file.tensors.size();
    file.tensors.push_back(std::move(tensor));
    claims.push_back(claim);
  }

  // The ranges tile the data section, as the reference implementation
  // requires: an overlap or a hole means the offsets are corrupt.
  llvm::sort(claims, [&](const Claim &a, const Claim &b) {
    if (a.begin != b.begin)
      return a.begin < b.begin;
    if (a.end != b.end)
      return a.end < b.end;
    return file.tensors[a.tensor].name < file.tensors[b.tensor].name;
  });
  uint64_t cursor = 0;
  std::vector<Tensor> ordered;
  for (const Claim &c : claims) {
    Tensor &t = file.tensors[c.tensor];
    if (c.begin != cursor)
      return problem(formatv("tensor '{0}' starts at data byte {1}, expected "
                             "{2} ({3})",
                             t.name, c.begin, cursor,
                             c.begin < cursor ? "it overlaps the tensor before"
                                              : "a hole in the data"));
    cursor = c.end;
    t.data = data.slice(c.begin, c.end);
    ordered.push_back(std::move(t));
  }
  if (cursor != data.size())
    return problem(formatv("{0} bytes follow the last tensor's data",
                           data.size() - cursor));
  file.tensors = std::move(ordered);
  for (auto [i, t] : enumerate(file.tensors))
    file.index[t.name] = i;
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

Error Writer::add(StringRef name, StringRef dtype, ArrayRef<int64_t> shape,
                  std::string bytes) {
  auto fail = [&](const Twine &why) {
    return createStringError(inconvertibleErrorCode(),
                             "cannot add tensor '" + name + "': " + why);
  };
  if (name.empty() || name == "__metadata__")
    return fail("the name is reserved or empty");
  if (index.count(name))
    return fail("a tensor of that name was added before");
  std::optional<unsigned> dtypeSize = getDtypeSize(dtype);
  if (!dtypeSize)
    return fail("unknown dtype '" + dtype + "'");
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return fail("negative size in shape " + formatShape(shape));
  std::optional<uint64_t> need = tensorBytes(*dtypeSize, shape);
  if (!need || *need != bytes.size())
    return fail(formatv("{0}{1} needs {2} bytes, got {3}", dtype,
                        formatShape(shape), need ? *need : 0, bytes.size()));
  index[name] = entries.size();
  entries.push_back(
      {name.str(), dtype.str(), SmallVector<int64_t>(shape), std::move(bytes)});
  return Error::success();
}

void Writer::write(raw_ostream &os) const {
  json::Object header;
  uint64_t offset = 0;
  for (const Entry &e : entries) {
    json::Array shape;
    for (int64_t d : e.shape)
      shape.push_back(d);
    header[e.name] = json::Object{
        {"dtype", e.dtype},
        {"shape", std::move(shape)},
        {"data_offsets", json::Array{offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  header["__metadata__"] = json::Object{{"format", "pt"}};
  std::string text;
  raw_string_ostream(text) << json::Value(std::move(header));
  // Padded with spaces so the data starts 8-byte aligned, as the reference
  // writer does: readers may map tensors in place.
  while (text.size() % 8)
    text.push_back(' ');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    os << static_cast<char>((n >> (8 * i)) & 0xff);
  os << text;
  for (const Entry &e : entries)
    os << e.bytes;
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
