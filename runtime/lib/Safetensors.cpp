//===- Safetensors.cpp - A validating safetensors reader and writer -------===//

#include "loomrt/Safetensors.h"

#include "FileUtil.h"
#include "loomrt/Dtype.h"
#include "loomrt/Error.h"

#include <ATen/ops/empty.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

using nlohmann::json;

// safetensors stores little-endian data and loomrt copies it byte for byte.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "loomrt reads little-endian data without conversion");

namespace loomrt {
namespace {

// The reference implementation refuses larger headers; so do we, so a
// corrupt length cannot make us allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void fail(const std::string &what, const std::string &message) {
  throw Error(what + ": " + message);
}

uint64_t asOffset(const json &v, const std::string &what,
                  const std::string &field) {
  if (!v.is_number_unsigned() &&
      !(v.is_number_integer() && v.get<int64_t>() >= 0))
    fail(what, field + " must be a non-negative integer, found " + v.dump());
  return v.get<uint64_t>();
}

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
  uint64_t fileSize = f.size();
  if (offset > fileSize)
    fail(w, "starts at byte " + std::to_string(offset) + " past the end of " +
                path + " (" + std::to_string(fileSize) + " bytes)");
  uint64_t size = length ? *length : fileSize - offset;
  if (size > fileSize - offset)
    fail(w, "is truncated: expected " + std::to_string(size) +
                " bytes, the file has " + std::to_string(fileSize - offset));
  if (size < 8)
    fail(w, "is truncated: " + std::to_string(size) +
                " bytes, shorter than the 8-byte header length");

  uint64_t headerLen = 0;
  f.readAt(offset, &headerLen, 8);
  if (headerLen > kMaxHeaderBytes)
    fail(w, "header length " + std::to_string(headerLen) + " exceeds " +
                std::to_string(kMaxHeaderBytes) + " bytes");
  if (headerLen > size - 8)
    fail(w, "is truncated: header length " + std::to_string(headerLen) +
                " but only " + std::to_string(size - 8) + " bytes follow it");
  std::string headerText(headerLen, '\0');
  f.readAt(offset + 8, headerText.data(), headerLen);

  json header;
  try {
    header = json::parse(headerText);
  } catch (const json::exception &e) {
    // Not only parse_error: a number too large for a double (1e999) is an
    // out_of_range from the parser.
    fail(w, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object())
    fail(w, "header must be a JSON object, found " +
                std::string(header.type_name()));

  uint64_t dataSize = size - 8 - headerLen;
  file.dataOffset_ = offset + 8 + headerLen;
  for (const auto &[name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object())
        fail(w, "__metadata__ must be an object of strings");
      for (const auto &[k, v] : value.items()) {
        if (!v.is_string())
          fail(w,
               "__metadata__['" + k + "'] must be a string, found " + v.dump());
        file.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    std::string t = "tensor '" + name + "'";
    if (!value.is_object())
      fail(w, t + " must be an object");
    for (const auto &[k, v] : value.items())
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        fail(w, t + " has an unknown field '" + k + "'");
    if (!value.contains("dtype") || !value["dtype"].is_string())
      fail(w, t + " has no string 'dtype'");
    std::string dtypeName = value["dtype"].get<std::string>();
    std::optional<c10::ScalarType> dtype = parseSafetensorsDtype(dtypeName);
    if (!dtype)
      fail(w, t + " has dtype '" + dtypeName +
                  "', which loomrt does not read (F64 F32 F16 BF16 I64 I32 "
                  "I16 I8 U8 BOOL C64 C128)");
    if (!value.contains("shape") || !value["shape"].is_array())
      fail(w, t + " has no 'shape' list");
    SafetensorsEntry entry;
    entry.name = name;
    entry.dtype = *dtype;
    uint64_t numel = 1;
    bool overflow = false;
    for (const json &d : value["shape"]) {
      uint64_t dim = asOffset(d, w, t + " shape");
      if (dim > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(w,
             t + " shape dimension " + std::to_string(dim) + " is too large");
      entry.shape.push_back(int64_t(dim));
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim)
        overflow = true;
      numel *= dim;
    }
    const json &offsets = value.value("data_offsets", json());
    if (!offsets.is_array() || offsets.size() != 2)
      fail(w, t + " needs 'data_offsets': [begin, end]");
    entry.begin = asOffset(offsets[0], w, t + " data_offsets[0]");
    entry.end = asOffset(offsets[1], w, t + " data_offsets[1]");
    if (entry.begin > entry.end)
      fail(w, t + " has data_offsets [" + std::to_string(entry.begin) + ", " +
                  std::to_string(entry.end) + "] with begin after end");
    uint64_t itemSize = c10::elementSize(entry.dtype);
    if (overflow || numel > std::numeric_limits<uint64_t>::max() / itemSize)
      fail(w, t + " shape " + formatShape(entry.shape) + " is too large");
    if (entry.end - entry.begin != numel * itemSize)
      fail(w, t + " has " + std::to_string(entry.end - entry.begin) +
                  " bytes of data, but " + dtypeName + " " +
                  formatShape(entry.shape) + " needs " +
                  std::to_string(numel * itemSize));
    if (entry.end > dataSize)
      fail(w, "is truncated: " + t + " ends at data byte " +
                  std::to_string(entry.end) + ", the data section has " +
                  std::to_string(dataSize) + " bytes");
    file.entries_.push_back(std::move(entry));
  }

  // Like the reference implementation: ranges neither overlap nor leave
  // holes, and together cover the data section exactly.
  std::sort(file.entries_.begin(), file.entries_.end(),
            [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t cursor = 0;
  for (const SafetensorsEntry &e : file.entries_) {
    if (e.begin != cursor)
      fail(w, "tensor '" + e.name + "' starts at data byte " +
                  std::to_string(e.begin) + ", expected " +
                  std::to_string(cursor) +
                  (e.begin < cursor ? " (it overlaps the previous tensor)"
                                    : " (a hole in the data)"));
    cursor = e.end;
  }
  if (cursor != dataSize)
    fail(w, "has " + std::to_string(dataSize - cursor) +
                " bytes after the last tensor's data");
  for (size_t i = 0; i < file.entries_.size(); ++i)
    file.byName_[file.entries_[i].name] = i;
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
  json header = json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  uint64_t cursor = 0;
  for (const auto &[name, tensor] : tensors) {
    if (name == "__metadata__" || header.contains(name))
      throw Error(path + ": cannot write tensor '" + name +
                  "': the name is reserved or used twice");
    if (!tensor.defined())
      throw Error(path + ": cannot write tensor '" + name +
                  "': it is undefined");
    if (tensor.device().type() != c10::DeviceType::CPU)
      throw Error(path + ": cannot write tensor '" + name +
                  "': it is not on the CPU");
    std::string dtype = safetensorsDtypeName(tensor.scalar_type());
    if (!parseSafetensorsDtype(dtype))
      throw Error(path + ": cannot write tensor '" + name + "' of dtype " +
                  dtype);
    at::Tensor c = tensor.contiguous();
    uint64_t n = c.numel() * c.element_size();
    header[name] = {{"dtype", dtype},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {cursor, cursor + n}}};
    cursor += n;
    data.push_back(std::move(c));
  }
  std::string headerText = header.dump();
  // Pad with spaces to a multiple of 8 so the data is aligned when mapped, as
  // the reference writer does.
  headerText.append((8 - headerText.size() % 8) % 8, ' ');

  AtomicFileWriter out(path);
  uint64_t headerLen = headerText.size();
  out.write(&headerLen, 8);
  out.write(headerText.data(), headerText.size());
  for (const at::Tensor &t : data)
    out.write(t.data_ptr(), t.numel() * t.element_size());
  out.commit();
}

} // namespace loomrt
