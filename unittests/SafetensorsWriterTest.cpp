//===- SafetensorsWriterTest.cpp - The importer's weights file format ----===//

#include "SafetensorsWriter.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

using namespace loom;

TEST(SafetensorsWriterTest, HeaderOffsetsAndAlignment) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(
      llvm::sys::fs::createTemporaryFile("loom-st", "safetensors", path));
  SafetensorsWriter writer;
  writer.add("a.weight", "F32", {2, 3}, std::string(24, '\x01'));
  writer.add("b", "I64", {}, std::string(8, '\x02'));
  ASSERT_FALSE(static_cast<bool>(writer.write(path)));

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
