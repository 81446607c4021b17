//===- SafetensorsTest.cpp - The safetensors reader validates everything --===//

#include "TestUtil.h"

#include "loomrt/Safetensors.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>

using namespace loomrt;
using namespace loomrt::test;

namespace {

/// A safetensors file from a header JSON and raw data.
std::string fileWith(const json &header, const std::string &data) {
  std::string h = header.dump();
  uint64_t n = h.size();
  std::string bytes(reinterpret_cast<const char *>(&n), 8);
  return writeFile("t.safetensors", bytes + h + data);
}

std::string openError(const std::string &path) {
  return errorOf([&] { SafetensorsFile::open(path); });
}

TEST(Safetensors, RoundTripsEveryDtype) {
  at::Tensor base = at::arange(12, at::kDouble).reshape({3, 4}).sub(5.5);
  NamedTensors tensors;
  for (at::ScalarType t :
       {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong, at::kInt,
        at::kShort, at::kChar, at::kByte, at::kBool, at::kComplexFloat,
        at::kComplexDouble})
    tensors.emplace_back(std::string("t_") + c10::toString(t), base.to(t));
  // Non-contiguous and 0-d and empty tensors are written contiguous.
  tensors.emplace_back("transposed", base.t());
  tensors.emplace_back("scalar", at::scalar_tensor(3.0));
  tensors.emplace_back("empty", at::randn({0, 3}));
  std::string path = tempPath("all.safetensors");
  writeSafetensors(path, tensors, {{"k", "v"}});
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.metadata().at("k"), "v");
  ASSERT_EQ(f.entries().size(), tensors.size());
  for (const auto &[name, t] : tensors) {
    at::Tensor r = f.read(name);
    EXPECT_EQ(r.scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(at::equal(r, t)) << name;
  }
}

TEST(Safetensors, MissingTensor) {
  std::string path = tempPath("a.safetensors");
  writeSafetensors(path, {{"a", at::randn({2})}});
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_CONTAINS(errorOf([&] { f.read("b"); }), "has no tensor 'b'");
}

TEST(Safetensors, TooShort) {
  EXPECT_CONTAINS(openError(writeFile("t.safetensors", "abc")),
                  ": it has 3 bytes, fewer than the 8-byte header length");
}

TEST(Safetensors, HeaderLongerThanFile) {
  uint64_t n = 1000;
  std::string bytes(reinterpret_cast<const char *>(&n), 8);
  EXPECT_CONTAINS(openError(writeFile("t.safetensors", bytes + "{}")),
                  ": the header length 1000 runs past the end of the file (2 "
                  "bytes follow it)");
}

TEST(Safetensors, HugeHeaderLength) {
  // Refused before anything is allocated for it (SafetensorsFormatTest
  // covers the 100 MB cap that a file larger than that meets).
  uint64_t n = uint64_t(1) << 40;
  std::string bytes(reinterpret_cast<const char *>(&n), 8);
  EXPECT_CONTAINS(openError(writeFile("t.safetensors", bytes + "{}")),
                  "the header length 1099511627776 runs past the end of the "
                  "file");
}

TEST(Safetensors, HeaderNotJson) {
  std::string h = "{\"a\": ";
  uint64_t n = h.size();
  std::string bytes(reinterpret_cast<const char *>(&n), 8);
  EXPECT_CONTAINS(openError(writeFile("t.safetensors", bytes + h)),
                  "header is not valid JSON");
}

TEST(Safetensors, UnknownDtype) {
  json h = {
      {"a", {{"dtype", "F8_E4M3"}, {"shape", {2}}, {"data_offsets", {0, 2}}}}};
  EXPECT_CONTAINS(openError(fileWith(h, "xx")),
                  "tensor 'a' has dtype 'F8_E4M3', which loomrt does not read");
}

TEST(Safetensors, SizeDoesNotMatchShape) {
  json h = {
      {"a", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}}}};
  EXPECT_CONTAINS(openError(fileWith(h, std::string(8, '\0'))),
                  "tensor 'a' is F32[3], which needs 12 bytes, but its "
                  "data_offsets [0, 8] hold 8");
}

TEST(Safetensors, DataOutOfBounds) {
  json h = {
      {"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}};
  EXPECT_CONTAINS(openError(fileWith(h, std::string(8, '\0'))),
                  "tensor 'a' has data_offsets [0, 16] past the end of the "
                  "data section (8 bytes): the file is truncated");
}

TEST(Safetensors, Overlap) {
  json h = {
      {"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
      {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}};
  EXPECT_CONTAINS(openError(fileWith(h, std::string(12, '\0'))),
                  "tensor 'b' starts at data byte 4, expected 8 (it overlaps "
                  "the tensor before)");
}

TEST(Safetensors, Hole) {
  json h = {
      {"a", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {4, 8}}}}};
  EXPECT_CONTAINS(openError(fileWith(h, std::string(8, '\0'))),
                  "(a hole in the data)");
}

TEST(Safetensors, TrailingData) {
  json h = {
      {"a", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}}};
  EXPECT_CONTAINS(openError(fileWith(h, std::string(6, '\0'))),
                  ": 2 bytes follow the last tensor's data");
}

TEST(Safetensors, NegativeOrHugeShape) {
  json neg = {
      {"a", {{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 0}}}}};
  EXPECT_CONTAINS(openError(fileWith(neg, "")),
                  "tensor 'a' has shape[0] = -1, expected a non-negative "
                  "integer");
  json huge = {{"a",
                {{"dtype", "F64"},
                 {"shape", {uint64_t(1) << 62, 16}},
                 {"data_offsets", {0, 0}}}}};
  EXPECT_CONTAINS(openError(fileWith(huge, "")),
                  "tensor 'a' has a shape [4611686018427387904, 16] too large "
                  "to address");
}

TEST(Safetensors, UnknownField) {
  json h = {{"a",
             {{"dtype", "F32"},
              {"shape", {1}},
              {"data_offsets", {0, 4}},
              {"strides", {1}}}}};
  EXPECT_CONTAINS(openError(fileWith(h, std::string(4, '\0'))),
                  "tensor 'a' has an unknown field 'strides'");
}

TEST(Safetensors, MetadataMustBeStrings) {
  json h = {{"__metadata__", {{"num_steps", 4}}}};
  EXPECT_CONTAINS(openError(fileWith(h, "")),
                  "__metadata__['num_steps'] is 4, expected a string");
}

TEST(Safetensors, EmbeddedRange) {
  // A safetensors file inside a larger one, as in the .loomx weights section.
  std::string inner = safetensorsBytes({{"w", at::arange(3, at::kFloat)}});
  std::string path = writeFile("outer.bin", "prefix" + inner + "suffix");
  SafetensorsFile f = SafetensorsFile::open(path, 6, inner.size(), "embedded");
  EXPECT_TRUE(at::equal(f.read("w"), at::arange(3, at::kFloat)));
  EXPECT_CONTAINS(errorOf([&] {
                    SafetensorsFile::open(path, 6, inner.size() + 100,
                                          "embedded");
                  }),
                  "embedded: is truncated");
}

TEST(Safetensors, WriteRefusesDuplicates) {
  EXPECT_CONTAINS(errorOf([] {
                    writeSafetensors(
                        tempPath("d.safetensors"),
                        {{"a", at::randn({1})}, {"a", at::randn({1})}});
                  }),
                  "cannot write tensor 'a': a tensor of that name was added "
                  "before");
}

} // namespace
