//===- SafetensorsTest.cpp - The compiler's safetensors reader and writer -===//

#include "SafetensorsFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

using namespace loom::safetensors;

namespace {

/// A file with `header` as its JSON header (unpadded) and `data` after it.
std::string withHeader(llvm::StringRef header, llvm::StringRef data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return out + header.str() + data.str();
}

/// The message parsing `bytes` fails with ("" when it succeeds).
std::string parseError(llvm::StringRef bytes) {
  llvm::Expected<File> file = File::parse(bytes, "w.safetensors");
  if (file)
    return "";
  return llvm::toString(file.takeError());
}

TEST(SafetensorsTest, WriterHeaderOffsetsAndAlignment) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(
      llvm::sys::fs::createTemporaryFile("loom-st", "safetensors", path));
  Writer writer;
  ASSERT_FALSE(static_cast<bool>(
      writer.add("a.weight", "F32", {2, 3}, std::string(24, '\x01'))));
  ASSERT_FALSE(
      static_cast<bool>(writer.add("b", "I64", {}, std::string(8, '\x02'))));
  ASSERT_FALSE(static_cast<bool>(writer.writeFile(path)));

  auto buffer = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(static_cast<bool>(buffer));
  llvm::StringRef bytes = (*buffer)->getBuffer();
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u) << "data must start 8-byte aligned";
  ASSERT_EQ(bytes.size(), 8 + n + 32);
  auto header = llvm::json::parse(bytes.substr(8, n));
  ASSERT_TRUE(static_cast<bool>(header));
  const llvm::json::Object *a = header->getAsObject()->getObject("a.weight");
  ASSERT_TRUE(a);
  EXPECT_EQ(*a->getString("dtype"), "F32");
  const llvm::json::Array *offsets = a->getArray("data_offsets");
  EXPECT_EQ(*(*offsets)[0].getAsInteger(), 0);
  EXPECT_EQ(*(*offsets)[1].getAsInteger(), 24);
  const llvm::json::Object *b = header->getAsObject()->getObject("b");
  EXPECT_EQ(*(*b->getArray("data_offsets"))[1].getAsInteger(), 32);
  EXPECT_EQ(b->getArray("shape")->size(), 0u);
  EXPECT_EQ(bytes[8 + n + 24], '\x02');
  llvm::sys::fs::remove(path);
}

TEST(SafetensorsTest, WriterRefusesWhatItCannotWrite) {
  Writer writer;
  llvm::cantFail(writer.add("w", "F32", {2}, std::string(8, '\0')));
  auto message = [&](llvm::StringRef name, llvm::StringRef dtype,
                     std::vector<int64_t> shape, size_t bytes) {
    llvm::Error err = writer.add(name, dtype, shape, std::string(bytes, '\0'));
    return err ? llvm::toString(std::move(err)) : std::string();
  };
  EXPECT_EQ(message("v", "F32", {2, 2}, 12),
            "cannot add tensor 'v': F32[2, 2] needs 16 bytes, got 12");
  EXPECT_EQ(message("w", "F32", {2}, 8),
            "cannot add tensor 'w': a tensor of that name was added before");
  EXPECT_EQ(message("v", "F31", {}, 4),
            "cannot add tensor 'v': unknown dtype 'F31'");
  EXPECT_EQ(message("__metadata__", "F32", {}, 4),
            "cannot add tensor '__metadata__': the name is reserved or empty");
}

TEST(SafetensorsTest, ReadsWhatTheWriterWrites) {
  std::string bytes =
      loom::test::safetensorsFile({{"b", "BF16", {3}, std::string(6, '\x03')},
                                   {"a", "BOOL", {2, 0}, ""},
                                   {"c", "F64", {1}, std::string(8, '\x05')}});
  llvm::Expected<File> file = File::parse(bytes, "w.safetensors");
  ASSERT_TRUE(static_cast<bool>(file)) << llvm::toString(file.takeError());
  // Data order, which is the order they were added in.
  ASSERT_EQ(file->getTensors().size(), 3u);
  EXPECT_EQ(file->getTensors()[0].name, "b");
  const Tensor *b = file->lookup("b");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->dtype, "BF16");
  EXPECT_EQ(b->shape, (llvm::SmallVector<int64_t>{3}));
  EXPECT_EQ(b->data, std::string(6, '\x03'));
  EXPECT_EQ(file->lookup("a")->data.size(), 0u);
  EXPECT_EQ(file->lookup("c")->data, std::string(8, '\x05'));
  EXPECT_EQ(file->lookup("d"), nullptr);
  EXPECT_EQ(file->getMetadata().at("format"), "pt");
}

TEST(SafetensorsTest, NamesThatNeedEscapingRoundTrip) {
  // The header text comes from the runtime's SafetensorsFormat.h, the
  // reading from llvm::json: a quote, a backslash, control characters and
  // non-ASCII must survive both.
  std::string odd[] = {"q\"d", "back\\slash", std::string("c\x01\x1f", 3),
                       "t\tn\n", "caf\xc3\xa9"};
  std::string bytes = loom::test::safetensorsFile({{odd[0], "U8", {1}, "a"},
                                                   {odd[1], "U8", {1}, "b"},
                                                   {odd[2], "U8", {1}, "c"},
                                                   {odd[3], "U8", {1}, "d"},
                                                   {odd[4], "U8", {1}, "e"}});
  llvm::Expected<File> file = File::parse(bytes, "w.safetensors");
  ASSERT_TRUE(static_cast<bool>(file)) << llvm::toString(file.takeError());
  for (auto [i, name] : llvm::enumerate(odd)) {
    const Tensor *t = file->lookup(name);
    ASSERT_TRUE(t) << name;
    EXPECT_EQ(t->data, std::string(1, char('a' + i)));
  }
}

TEST(SafetensorsTest, TruncatedHeader) {
  EXPECT_EQ(parseError(llvm::StringRef("\x10\0\0", 3)),
            "'w.safetensors' is not a valid safetensors file: it has 3 bytes, "
            "fewer than the 8-byte header length");
  std::string file =
      loom::test::safetensorsFile({{"w", "F32", {2}, std::string(8, '\0')}});
  // Cut inside the header: the length still claims the whole header.
  EXPECT_EQ(parseError(llvm::StringRef(file).take_front(20)),
            "'w.safetensors' is not a valid safetensors file: the header "
            "length " +
                std::to_string(file.size() - 8 - 8) +
                " runs past the end of the file (12 bytes follow it)");
  EXPECT_EQ(parseError(withHeader("{\"w\": {\"dtype\": \"F32\"")),
            "'w.safetensors' is not a valid safetensors file: its header is "
            "not JSON ([1:21, byte=21]: Expected , or } after object "
            "property)");
  EXPECT_EQ(parseError(withHeader("[1, 2]")),
            "'w.safetensors' is not a valid safetensors file: its header is "
            "not a JSON object");
}

TEST(SafetensorsTest, OffsetsOutOfRange) {
  // The data section is cut short: the tensor's end lies past it.
  std::string file =
      loom::test::safetensorsFile({{"w", "F32", {4}, std::string(16, '\0')}});
  EXPECT_EQ(parseError(llvm::StringRef(file).drop_back(4)),
            "'w.safetensors' is not a valid safetensors file: tensor 'w' has "
            "data_offsets [0, 16] past the end of the data section (12 "
            "bytes): the file is truncated");
  EXPECT_EQ(
      parseError(withHeader(
          R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [3, 1]}})",
          "ab")),
      "'w.safetensors' is not a valid safetensors file: tensor 'w' has "
      "data_offsets [3, 1] with begin after end");
  EXPECT_EQ(
      parseError(withHeader(
          R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [-2, 0]}})",
          "ab")),
      "'w.safetensors' is not a valid safetensors file: tensor 'w' has "
      "data_offsets [-2,0], expected two non-negative integers");
  // Two tensors claiming the same bytes.
  EXPECT_EQ(
      parseError(withHeader(
          R"({"v": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},)"
          R"( "w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
          "ab")),
      "'w.safetensors' is not a valid safetensors file: tensor 'w' starts at "
      "data byte 1, expected 2 (it overlaps the tensor before)");
  EXPECT_EQ(
      parseError(withHeader(
          R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
          "ab")),
      "'w.safetensors' is not a valid safetensors file: tensor 'w' starts at "
      "data byte 1, expected 0 (a hole in the data)");
  EXPECT_EQ(
      parseError(withHeader(
          R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})",
          "ab")),
      "'w.safetensors' is not a valid safetensors file: 1 bytes follow the "
      "last tensor's data");
}

TEST(SafetensorsTest, DtypeAndShapeMismatch) {
  // Four bytes cannot hold an F32[2] (8 bytes) nor an F64[1].
  EXPECT_EQ(
      parseError(withHeader(
          R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})",
          "abcd")),
      "'w.safetensors' is not a valid safetensors file: tensor 'w' is "
      "F32[2], which needs 8 bytes, but its data_offsets [0, 4] hold 4");
  EXPECT_EQ(
      parseError(withHeader(
          R"({"w": {"dtype": "F64", "shape": [], "data_offsets": [0, 4]}})",
          "abcd")),
      "'w.safetensors' is not a valid safetensors file: tensor 'w' is "
      "F64[], which needs 8 bytes, but its data_offsets [0, 4] hold 4");
  EXPECT_EQ(
      parseError(withHeader(
          R"({"w": {"dtype": "F24", "shape": [], "data_offsets": [0, 3]}})",
          "abc")),
      "'w.safetensors' is not a valid safetensors file: tensor 'w' has dtype "
      "'F24', which safetensors does not define (BOOL, U8, I8, F8_E4M3, "
      "F8_E5M2, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64, C64, "
      "C128)");
  EXPECT_EQ(
      parseError(withHeader(
          R"({"w": {"dtype": "U8", "shape": [2, -1], "data_offsets": [0, 0]}})")),
      "'w.safetensors' is not a valid safetensors file: tensor 'w' has "
      "shape[1] = -1, expected a non-negative integer");
  EXPECT_EQ(
      parseError(withHeader(
          R"({"w": {"dtype": "U8", "shape": [], "data_offsets": [0, 1],)"
          R"( "strides": [1]}})",
          "a")),
      "'w.safetensors' is not a valid safetensors file: tensor 'w' has an "
      "unknown field 'strides' (expected dtype, shape, data_offsets)");
  EXPECT_EQ(parseError(withHeader(R"({"w": {"dtype": "U8", "shape": []}})")),
            "'w.safetensors' is not a valid safetensors file: tensor 'w' needs "
            "'data_offsets': [begin, end]");
  EXPECT_EQ(parseError(withHeader(R"({"__metadata__": {"format": 1}})")),
            "'w.safetensors' is not a valid safetensors file: "
            "__metadata__['format'] is 1, expected a string");
}

TEST(SafetensorsTest, LoadNamesTheFile) {
  llvm::Expected<File> file = File::load("/nonexistent/w.safetensors");
  ASSERT_FALSE(static_cast<bool>(file));
  EXPECT_EQ(llvm::toString(file.takeError()),
            "cannot read '/nonexistent/w.safetensors': No such file or "
            "directory");
}

} // namespace
