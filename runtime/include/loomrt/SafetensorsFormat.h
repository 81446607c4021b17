//===- SafetensorsFormat.h - The safetensors format's rules, once -*- C++
//-*-===//
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON header ({"<name>": {"dtype", "shape", "data_offsets": [begin, end]},
// ..., optional "__metadata__": {str: str}}), then the data section the
// offsets index. This header holds the format's rules for both codecs (the
// compiler's lib/Support/Safetensors.cpp and the runtime's
// lib/Safetensors.cpp): the dtype table, every check a reader makes after the
// JSON is parsed (with the error texts, naming the tensor and field at
// fault), and the writer's header layout. Each codec parses the JSON with its
// own library and lends it to decodeHeader through a small accessor, and
// wraps the problems this header finds in its own error type.
//
// Dependency-free on purpose (the C++ standard library only, no exceptions
// thrown): the compiler, built without LibTorch and without exceptions,
// includes it as well as the runtime (lib/Support/CMakeLists.txt copies it).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SAFETENSORSFORMAT_H
#define LOOMRT_SAFETENSORSFORMAT_H

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loomrt {
namespace safetensors {

/// What is wrong, naming the tensor and field at fault; std::nullopt when
/// nothing is. Each codec prefixes it with the file's name.
using Problem = std::optional<std::string>;

/// The header length that starts a file.
inline constexpr uint64_t kLengthBytes = 8;
/// The reference implementation refuses larger headers; so do we, so that a
/// corrupt length reads as an error rather than as a huge allocation.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;
/// The writer pads the header so the data starts aligned to this many bytes:
/// readers may map tensors in place.
inline constexpr uint64_t kDataAlignment = 8;
/// The header key of the metadata object; no tensor may be called so.
inline constexpr std::string_view kMetadataKey = "__metadata__";

/// A dtype the format defines and the bytes of one of its elements.
struct DtypeInfo {
  const char *name;
  unsigned bytes;
};

inline constexpr DtypeInfo kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},   {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
    {"U16", 2},  {"I16", 2},  {"F16", 2}, {"BF16", 2},    {"U32", 4},
    {"I32", 4},  {"F32", 4},  {"U64", 8}, {"I64", 8},     {"F64", 8},
    {"C64", 8},  {"C128", 16}};

/// Bytes of one element of `dtype` ("F32" is 4), or std::nullopt for a name
/// the format does not define.
inline std::optional<unsigned> dtypeSize(std::string_view dtype) {
  for (const DtypeInfo &d : kDtypes)
    if (dtype == d.name)
      return d.bytes;
  return std::nullopt;
}

/// "BOOL, U8, ..., C128", for errors about an unknown dtype.
inline std::string dtypeNames() {
  std::string out;
  for (const DtypeInfo &d : kDtypes)
    out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

/// "[2, 3]", as errors print shapes.
inline std::string formatShape(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

/// Bytes a tensor of `dtypeBytes`-byte elements and `shape` holds, or
/// std::nullopt when a size is negative or the product overflows.
inline std::optional<uint64_t> tensorBytes(unsigned dtypeBytes,
                                           const std::vector<int64_t> &shape) {
  uint64_t n = dtypeBytes;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / uint64_t(d))
      return std::nullopt;
    n *= uint64_t(d);
  }
  return n;
}

/// One tensor of a header.
struct Entry {
  std::string name;
  /// The format's dtype name ("F32", "BF16", ...).
  std::string dtype;
  std::vector<int64_t> shape;
  /// Its byte range, relative to the start of the data section.
  uint64_t begin = 0;
  uint64_t end = 0;
};

/// A decoded and checked header.
struct Header {
  /// In data order.
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// Checks that a file of `fileBytes` bytes, whose first
/// min(8, fileBytes) bytes are `prefix`, starts with a header length that
/// fits it, and sets `headerBytes` to that length. The data section then
/// spans the file's last fileBytes - 8 - headerBytes bytes.
inline Problem readHeaderLength(const char *prefix, uint64_t fileBytes,
                                uint64_t &headerBytes) {
  if (fileBytes < kLengthBytes)
    return "it has " + std::to_string(fileBytes) +
           " bytes, fewer than the 8-byte header length";
  headerBytes = 0;
  for (uint64_t i = 0; i < kLengthBytes; ++i)
    headerBytes |= uint64_t(static_cast<unsigned char>(prefix[i])) << (8 * i);
  if (headerBytes > fileBytes - kLengthBytes)
    return "the header length " + std::to_string(headerBytes) +
           " runs past the end of the file (" +
           std::to_string(fileBytes - kLengthBytes) + " bytes follow it)";
  if (headerBytes > kMaxHeaderBytes)
    return "the header length " + std::to_string(headerBytes) +
           " exceeds the " + std::to_string(kMaxHeaderBytes) +
           " bytes safetensors allows";
  return std::nullopt;
}

/// Checks what the reference implementation checks of tensors read from a
/// header: a known dtype, non-negative sizes, data_offsets [begin, end] whose
/// length is what dtype and shape need and which lie inside a data section
/// of `dataBytes` bytes, unique names, and ranges that tile the data section
/// without overlaps or holes (either means the offsets are corrupt). Sorts
/// `entries` into data order.
inline Problem validate(std::vector<Entry> &entries, uint64_t dataBytes) {
  std::set<std::string> names;
  for (const Entry &e : entries) {
    std::string at = "tensor '" + e.name + "'";
    if (!names.insert(e.name).second)
      return at + " appears twice";
    std::optional<unsigned> size = dtypeSize(e.dtype);
    if (!size)
      return at + " has dtype '" + e.dtype +
             "', which safetensors does not define (" + dtypeNames() + ")";
    for (size_t i = 0; i < e.shape.size(); ++i)
      if (e.shape[i] < 0)
        return at + " has shape[" + std::to_string(i) +
               "] = " + std::to_string(e.shape[i]) +
               ", expected a non-negative integer";
    std::string offsets =
        "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.begin > e.end)
      return at + " has data_offsets " + offsets + " with begin after end";
    std::optional<uint64_t> need = tensorBytes(*size, e.shape);
    if (!need)
      return at + " has a shape " + formatShape(e.shape) +
             " too large to address";
    if (e.end - e.begin != *need)
      return at + " is " + e.dtype + formatShape(e.shape) + ", which needs " +
             std::to_string(*need) + " bytes, but its data_offsets " + offsets +
             " hold " + std::to_string(e.end - e.begin);
    if (e.end > dataBytes)
      return at + " has data_offsets " + offsets +
             " past the end of the data section (" + std::to_string(dataBytes) +
             " bytes): the file is truncated";
  }

  // Ties (empty tensors at one offset) in name order, so both codecs list
  // them alike.
  std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
    if (a.begin != b.begin)
      return a.begin < b.begin;
    if (a.end != b.end)
      return a.end < b.end;
    return a.name < b.name;
  });
  uint64_t cursor = 0;
  for (const Entry &e : entries) {
    if (e.begin != cursor)
      return "tensor '" + e.name + "' starts at data byte " +
             std::to_string(e.begin) + ", expected " + std::to_string(cursor) +
             (e.begin < cursor ? " (it overlaps the tensor before)"
                               : " (a hole in the data)");
    cursor = e.end;
  }
  if (cursor != dataBytes)
    return std::to_string(dataBytes - cursor) +
           " bytes follow the last tensor's data";
  return std::nullopt;
}

// decodeHeader reads a parsed JSON value through `Access`, a class each
// codec writes over its JSON library with these static members:
//
//   using Value = <the library's value type>;
//   static bool isObject(const Value &);
//   // Calls f(std::string key, const Value &member) for each member.
//   template <typename F> static void forEachMember(const Value &, F f);
//   // The member called `key` of an object, or null.
//   static const Value *find(const Value &, std::string_view key);
//   static std::optional<std::string> getString(const Value &);
//   // A JSON integer >= 0 (not a float).
//   static std::optional<uint64_t> getUnsigned(const Value &);
//   // The length of an array, or std::nullopt when it is none.
//   static std::optional<size_t> arraySize(const Value &);
//   static const Value &element(const Value &array, size_t i);
//   // Compact JSON text, for errors.
//   static std::string print(const Value &);
namespace detail {

/// The members of an object in key order, so a header with several faults
/// reports the same one whichever codec reads it.
template <typename Access>
std::vector<std::pair<std::string, const typename Access::Value *>>
sortedMembers(const typename Access::Value &object) {
  std::vector<std::pair<std::string, const typename Access::Value *>> out;
  Access::forEachMember(object,
                        [&](std::string key, const typename Access::Value &v) {
                          out.emplace_back(std::move(key), &v);
                        });
  std::sort(out.begin(), out.end(),
            [](const auto &a, const auto &b) { return a.first < b.first; });
  return out;
}

template <typename Access>
Problem decodeMetadata(const typename Access::Value &value,
                       std::map<std::string, std::string> &out) {
  if (!Access::isObject(value))
    return "__metadata__ must be an object of strings";
  for (const auto &[key, v] : sortedMembers<Access>(value)) {
    std::optional<std::string> s = Access::getString(*v);
    if (!s)
      return "__metadata__['" + key + "'] is " + Access::print(*v) +
             ", expected a string";
    out[key] = std::move(*s);
  }
  return std::nullopt;
}

template <typename Access>
Problem decodeEntry(const std::string &name,
                    const typename Access::Value &value, Entry &out) {
  using Value = typename Access::Value;
  std::string at = "tensor '" + name + "'";
  if (!Access::isObject(value))
    return at + " must be an object with 'dtype', 'shape' and "
                "'data_offsets'";
  for (const auto &member : sortedMembers<Access>(value))
    if (member.first != "dtype" && member.first != "shape" &&
        member.first != "data_offsets")
      return at + " has an unknown field '" + member.first +
             "' (expected dtype, shape, data_offsets)";
  out.name = name;

  const Value *dtype = Access::find(value, "dtype");
  std::optional<std::string> dtypeName =
      dtype ? Access::getString(*dtype) : std::nullopt;
  if (!dtypeName)
    return at + " needs a string 'dtype'";
  out.dtype = std::move(*dtypeName);

  const Value *shape = Access::find(value, "shape");
  std::optional<size_t> rank = shape ? Access::arraySize(*shape) : std::nullopt;
  if (!rank)
    return at + " needs a 'shape' list";
  for (size_t i = 0; i < *rank; ++i) {
    const Value &d = Access::element(*shape, i);
    std::optional<uint64_t> n = Access::getUnsigned(d);
    if (!n || *n > uint64_t(std::numeric_limits<int64_t>::max()))
      return at + " has shape[" + std::to_string(i) +
             "] = " + Access::print(d) + ", expected a non-negative integer";
    out.shape.push_back(int64_t(*n));
  }

  const Value *offsets = Access::find(value, "data_offsets");
  if (!offsets || Access::arraySize(*offsets) != std::optional<size_t>(2))
    return at + " needs 'data_offsets': [begin, end]";
  std::optional<uint64_t> begin =
      Access::getUnsigned(Access::element(*offsets, 0));
  std::optional<uint64_t> end =
      Access::getUnsigned(Access::element(*offsets, 1));
  if (!begin || !end)
    return at + " has data_offsets " + Access::print(*offsets) +
           ", expected two non-negative integers";
  out.begin = *begin;
  out.end = *end;
  return std::nullopt;
}

} // namespace detail

/// Decodes a parsed header (the JSON value of a file whose data section has
/// `dataBytes` bytes) into `out` and validates it.
template <typename Access>
Problem decodeHeader(const typename Access::Value &header, uint64_t dataBytes,
                     Header &out) {
  if (!Access::isObject(header))
    return std::string("its header is not a JSON object");
  for (const auto &[key, value] : detail::sortedMembers<Access>(header)) {
    if (key == kMetadataKey) {
      if (Problem p = detail::decodeMetadata<Access>(*value, out.metadata))
        return p;
      continue;
    }
    Entry entry;
    if (Problem p = detail::decodeEntry<Access>(key, *value, entry))
      return p;
    out.entries.push_back(std::move(entry));
  }
  return validate(out.entries, dataBytes);
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

/// Whether `text` is well-formed UTF-8, which JSON strings must be.
inline bool isUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80           ? 1
               : (c >> 5) == 0x6  ? 2
               : (c >> 4) == 0xe  ? 3
               : (c >> 3) == 0x1e ? 4
                                  : 0;
    if (n == 0 || i + n > text.size())
      return false;
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      unsigned char cc = static_cast<unsigned char>(text[i + k]);
      if ((cc >> 6) != 0x2)
        return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not
    // UTF-8 either.
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
      return false;
    i += n;
  }
  return true;
}

/// `text` as a JSON string: quoted, with quote, backslash and control
/// characters escaped. `text` must be UTF-8 (isUtf8).
inline std::string quoteJson(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
      } else {
        out += ch;
      }
    }
  }
  return out + "\"";
}

/// Lays out the header of a file holding tensors in the order they are
/// added, each right after the one before; the codec writes prefix() and
/// then the tensors' bytes in that order.
class HeaderWriter {
public:
  /// Adds a tensor of `bytes` bytes, or says why it cannot be written: the
  /// name is empty, reserved, taken or not UTF-8, the dtype unknown, a size
  /// negative, or `bytes` not what dtype and shape need.
  Problem add(const std::string &name, const std::string &dtype,
              const std::vector<int64_t> &shape, uint64_t bytes) {
    if (name.empty() || name == kMetadataKey)
      return std::string("the name is reserved or empty");
    if (!isUtf8(name))
      return std::string("the name is not valid UTF-8");
    if (names.count(name))
      return std::string("a tensor of that name was added before");
    std::optional<unsigned> size = dtypeSize(dtype);
    if (!size)
      return "unknown dtype '" + dtype + "'";
    for (int64_t d : shape)
      if (d < 0)
        return "negative size in shape " + formatShape(shape);
    std::optional<uint64_t> need = tensorBytes(*size, shape);
    if (!need)
      return dtype + formatShape(shape) + " is too large to address";
    if (*need != bytes)
      return dtype + formatShape(shape) + " needs " + std::to_string(*need) +
             " bytes, got " + std::to_string(bytes);
    names.insert(name);
    entries.push_back({name, dtype, shape, cursor, cursor + bytes});
    cursor += bytes;
    return std::nullopt;
  }

  /// Sets a `__metadata__` entry; both strings must be UTF-8.
  Problem setMetadata(const std::string &key, const std::string &value) {
    if (!isUtf8(key) || !isUtf8(value))
      return "metadata '" + key + "' is not valid UTF-8";
    metadata[key] = value;
    return std::nullopt;
  }

  /// The bytes before the data: the header length and the header, padded
  /// with spaces (as the reference writer does) so the data starts aligned.
  /// Keys are in byte order, the way llvm::json and nlohmann::json print
  /// objects, so files are what the codecs wrote before this header.
  std::string prefix() const {
    std::vector<std::pair<std::string, std::string>> members;
    for (const Entry &e : entries) {
      std::string shape;
      for (int64_t d : e.shape)
        shape += (shape.empty() ? "" : ",") + std::to_string(d);
      members.emplace_back(e.name, "{\"data_offsets\":[" +
                                       std::to_string(e.begin) + "," +
                                       std::to_string(e.end) +
                                       "],\"dtype\":" + quoteJson(e.dtype) +
                                       ",\"shape\":[" + shape + "]}");
    }
    if (!metadata.empty()) {
      std::string object;
      for (const auto &[k, v] : metadata)
        object +=
            (object.empty() ? "{" : ",") + quoteJson(k) + ":" + quoteJson(v);
      members.emplace_back(std::string(kMetadataKey), object + "}");
    }
    std::sort(members.begin(), members.end());
    std::string header = "{";
    for (const auto &[key, value] : members)
      header += (header.size() > 1 ? "," : "") + quoteJson(key) + ":" + value;
    header += "}";
    header.append((kDataAlignment - header.size() % kDataAlignment) %
                      kDataAlignment,
                  ' ');
    std::string out(kLengthBytes, '\0');
    for (uint64_t i = 0; i < kLengthBytes; ++i)
      out[i] = static_cast<char>((uint64_t(header.size()) >> (8 * i)) & 0xff);
    return out + header;
  }

  /// The tensors in the order added, with their ranges in the data section.
  const std::vector<Entry> &getEntries() const { return entries; }

private:
  std::vector<Entry> entries;
  std::set<std::string> names;
  std::map<std::string, std::string> metadata;
  uint64_t cursor = 0;
};

} // namespace safetensors
} // namespace loomrt

#endif // LOOMRT_SAFETENSORSFORMAT_H
