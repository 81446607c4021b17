//===- Safetensors.cpp - The runtime's safetensors reader and writer ------===//
//
// An adapter over loomrt/SafetensorsFormat.h, which holds the format's rules
// for the runtime and the compiler alike: this file reads the bytes with
// positioned reads, parses the header with nlohmann::json, lends it to the
// shared decoder and turns its problems into loomrt::Errors; tensors come
// and go as at::Tensors.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Safetensors.h"

#include "FileUtil.h"
#include "Json.h"
#include "loomrt/Dtype.h"
#include "loomrt/Error.h"
#include "loomrt/SafetensorsFormat.h"

#include <ATen/ops/empty.h>
#include <nlohmann/json.hpp>

using nlohmann::json;
namespace format = loomrt::safetensors;

// safetensors stores little-endian data and loomrt copies it byte for byte.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "loomrt reads little-endian data without conversion");

namespace loomrt {
namespace {

[[noreturn]] void fail(const std::string &what, const std::string &message) {
  throw Error(what + ": " + message);
}

/// nlohmann::json as SafetensorsFormat.h's decoder reads JSON.
struct JsonAccess {
  using Value = json;
  static bool isObject(const json &v) { return v.is_object(); }
  template <typename F>
  static void forEachMember(const json &v, F f) {
    for (auto it = v.begin(); it != v.end(); ++it)
      f(it.key(), it.value());
  }
  static const json *find(const json &v, std::string_view key) {
    auto it = v.find(std::string(key));
    return it == v.end() ? nullptr : &*it;
  }
  static std::optional<std::string> getString(const json &v) {
    if (!v.is_string())
      return std::nullopt;
    return v.get<std::string>();
  }
  static std::optional<uint64_t> getUnsigned(const json &v) {
    if (v.is_number_unsigned())
      return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0)
      return uint64_t(v.get<int64_t>());
    return std::nullopt;
  }
  static std::optional<size_t> arraySize(const json &v) {
    if (!v.is_array())
      return std::nullopt;
    return v.size();
  }
  static const json &element(const json &v, size_t i) { return v[i]; }
  static std::string print(const json &v) { return v.dump(); }
};

} // namespace

SafetensorsFile SafetensorsFile::open(const std::string &path, uint64_t offset,
                                      std::optional<uint64_t> length,
                                      std::string what) {
  SafetensorsFile file;
  file.what_ = what.empty() ? path : std::move(what);
  const std::string &w = file.what_;

  auto opened = std::make_shared<File>(File::openRead(path));
  const File &f = *opened;
  file.file_ = opened;
  // The byte range of an embedded file is the container's to get right.
  uint64_t fileSize = f.size();
  if (offset > fileSize)
    fail(w, "starts at byte " + std::to_string(offset) + " past the end of " +
                path + " (" + std::to_string(fileSize) + " bytes)");
  uint64_t size = length ? *length : fileSize - offset;
  if (size > fileSize - offset)
    fail(w, "is truncated: expected " + std::to_string(size) +
                " bytes, the file has " + std::to_string(fileSize - offset));

  char prefix[format::kLengthBytes] = {};
  if (size >= format::kLengthBytes)
    f.readAt(offset, prefix, format::kLengthBytes);
  uint64_t headerLen = 0;
  if (format::Problem p = format::readHeaderLength(prefix, size, headerLen))
    fail(w, *p);
  std::string headerText(headerLen, '\0');
  f.readAt(offset + format::kLengthBytes, headerText.data(), headerLen);

  json header =
      parseUntrustedJson(headerText, w + ": header is not valid JSON: ");
  uint64_t dataSize = size - format::kLengthBytes - headerLen;
  file.dataOffset_ = offset + format::kLengthBytes + headerLen;
  format::Header decoded;
  if (format::Problem p =
          format::decodeHeader<JsonAccess>(header, dataSize, decoded))
    fail(w, *p);

  file.metadata_ = std::move(decoded.metadata);
  for (format::Entry &e : decoded.entries) {
    // A dtype the format defines but ATen (or loomrt) has no type for.
    std::optional<c10::ScalarType> dtype = parseSafetensorsDtype(e.dtype);
    if (!dtype)
      fail(w, "tensor '" + e.name + "' has dtype '" + e.dtype +
                  "', which loomrt does not read (F64 F32 F16 BF16 I64 I32 "
                  "I16 I8 U8 BOOL C64 C128)");
    file.byName_[e.name] = file.entries_.size();
    file.entries_.push_back(
        {std::move(e.name), *dtype, std::move(e.shape), e.begin, e.end});
  }
  return file;
}

const SafetensorsEntry *SafetensorsFile::find(const std::string &name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : &entries_[it->second];
}

at::Tensor SafetensorsFile::read(const SafetensorsEntry &entry) const {
  at::Tensor t = at::empty(entry.shape, at::TensorOptions().dtype(entry.dtype));
  uint64_t n = entry.end - entry.begin;
  if (n != 0) {
    file_->readAt(dataOffset_ + entry.begin, t.data_ptr(), n);
  }
  return t;
}

at::Tensor SafetensorsFile::read(const std::string &name) const {
  const SafetensorsEntry *e = find(name);
  if (!e)
    fail(what_, "has no tensor '" + name + "'");
  return read(*e);
}

void writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, at::Tensor>> &tensors,
    const std::map<std::string, std::string> &metadata) {
  format::HeaderWriter header;
  for (const auto &[key, value] : metadata)
    if (format::Problem p = header.setMetadata(key, value))
      throw Error(path + ": cannot write " + *p);
  std::vector<at::Tensor> data;
  for (const auto &[name, tensor] : tensors) {
    auto refuse = [&, &name = name](const std::string &why) {
      throw Error(path + ": cannot write tensor '" + name + "': " + why);
    };
    if (!tensor.defined())
      refuse("it is undefined");
    if (tensor.device().type() != c10::DeviceType::CPU)
      refuse("it is not on the CPU");
    std::string dtype = safetensorsDtypeName(tensor.scalar_type());
    if (!parseSafetensorsDtype(dtype))
      refuse("loomrt does not write dtype " + dtype);
    at::Tensor c = tensor.contiguous();
    if (format::Problem p = header.add(name, dtype, c.sizes().vec(),
                                       c.numel() * c.element_size()))
      refuse(*p);
    data.push_back(std::move(c));
  }

  AtomicFileWriter out(path);
  std::string prefix = header.prefix();
  out.write(prefix.data(), prefix.size());
  for (const at::Tensor &t : data)
    out.write(t.data_ptr(), t.numel() * t.element_size());
  out.commit();
}

} // namespace loomrt
