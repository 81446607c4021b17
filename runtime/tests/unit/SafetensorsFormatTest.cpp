//===- SafetensorsFormatTest.cpp - The shared safetensors rules -----------===//
//
// SafetensorsFormat.h's dtype table, checks and header layout, which both
// codecs (runtime and compiler) use; and names that need escaping written
// by loomrt and read by the Python `safetensors` package, and back.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "loomrt/Dtype.h"
#include "loomrt/Safetensors.h"
#include "loomrt/SafetensorsFormat.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>

#include <cstdio>

using namespace loomrt;
using namespace loomrt::test;
namespace format = loomrt::safetensors;

namespace {

format::Entry entry(std::string name, std::string dtype,
                    std::vector<int64_t> shape, uint64_t begin, uint64_t end) {
  return {std::move(name), std::move(dtype), std::move(shape), begin, end};
}

/// What validate() says of `entries` in a data section of `dataBytes`
/// bytes ("" when nothing).
std::string problemOf(std::vector<format::Entry> entries, uint64_t dataBytes) {
  return format::validate(entries, dataBytes).value_or("");
}

TEST(SafetensorsFormat, DtypeTable) {
  EXPECT_EQ(format::dtypeSize("F32"), 4u);
  EXPECT_EQ(format::dtypeSize("BF16"), 2u);
  EXPECT_EQ(format::dtypeSize("F8_E5M2"), 1u);
  EXPECT_EQ(format::dtypeSize("C128"), 16u);
  EXPECT_EQ(format::dtypeSize("f32"), std::nullopt);
  EXPECT_EQ(format::dtypeNames(),
            "BOOL, U8, I8, F8_E4M3, F8_E5M2, U16, I16, F16, BF16, U32, I32, "
            "F32, U64, I64, F64, C64, C128");
  // Every dtype loomrt reads is one the format defines, with the element
  // size ATen gives it: data is copied byte for byte.
  int readable = 0;
  for (const format::DtypeInfo &d : format::kDtypes)
    if (std::optional<c10::ScalarType> t = parseSafetensorsDtype(d.name)) {
      EXPECT_EQ(c10::elementSize(*t), d.bytes) << d.name;
      ++readable;
    }
  EXPECT_EQ(readable, 12);
}

TEST(SafetensorsFormat, HeaderLength) {
  auto lengthProblem = [](uint64_t headerBytes, uint64_t fileBytes) {
    char prefix[8];
    for (int i = 0; i < 8; ++i)
      prefix[i] = char((headerBytes >> (8 * i)) & 0xff);
    uint64_t read = 0;
    format::Problem p = format::readHeaderLength(prefix, fileBytes, read);
    if (!p) {
      EXPECT_EQ(read, headerBytes);
    }
    return p.value_or("");
  };
  EXPECT_EQ(lengthProblem(16, 24), "");
  EXPECT_EQ(lengthProblem(0, 7),
            "it has 7 bytes, fewer than the 8-byte header length");
  EXPECT_EQ(lengthProblem(17, 24), "the header length 17 runs past the end "
                                   "of the file (16 bytes follow it)");
  // A file large enough to hold it still may not have a header that long.
  EXPECT_EQ(lengthProblem(uint64_t(1) << 30, uint64_t(1) << 31),
            "the header length 1073741824 exceeds the 100000000 bytes "
            "safetensors allows");
}

TEST(SafetensorsFormat, ValidateNamesTheTensorAndField) {
  EXPECT_EQ(problemOf({entry("a", "F32", {2, 3}, 0, 24),
                       entry("b", "I64", {}, 24, 32)},
                      32),
            "");
  EXPECT_EQ(problemOf({entry("w", "F24", {}, 0, 3)}, 3),
            "tensor 'w' has dtype 'F24', which safetensors does not define "
            "(" +
                format::dtypeNames() + ")");
  EXPECT_EQ(problemOf({entry("w", "U8", {2, -1}, 0, 0)}, 0),
            "tensor 'w' has shape[1] = -1, expected a non-negative integer");
  EXPECT_EQ(problemOf({entry("w", "U8", {2}, 3, 1)}, 3),
            "tensor 'w' has data_offsets [3, 1] with begin after end");
  EXPECT_EQ(problemOf({entry("w", "F64", {int64_t(1) << 62, 16}, 0, 0)}, 0),
            "tensor 'w' has a shape [4611686018427387904, 16] too large to "
            "address");
  EXPECT_EQ(problemOf({entry("w", "F32", {2}, 0, 4)}, 4),
            "tensor 'w' is F32[2], which needs 8 bytes, but its data_offsets "
            "[0, 4] hold 4");
  EXPECT_EQ(problemOf({entry("w", "F32", {4}, 0, 16)}, 12),
            "tensor 'w' has data_offsets [0, 16] past the end of the data "
            "section (12 bytes): the file is truncated");
  EXPECT_EQ(
      problemOf({entry("w", "U8", {1}, 0, 1), entry("w", "U8", {1}, 1, 2)}, 2),
      "tensor 'w' appears twice");
  EXPECT_EQ(
      problemOf({entry("v", "U8", {2}, 0, 2), entry("w", "U8", {1}, 1, 2)}, 2),
      "tensor 'w' starts at data byte 1, expected 2 (it overlaps the "
      "tensor before)");
  EXPECT_EQ(problemOf({entry("w", "U8", {1}, 1, 2)}, 2),
            "tensor 'w' starts at data byte 1, expected 0 (a hole in the "
            "data)");
  EXPECT_EQ(problemOf({entry("w", "U8", {1}, 0, 1)}, 2),
            "1 bytes follow the last tensor's data");
}

TEST(SafetensorsFormat, ValidateSortsIntoDataOrder) {
  // Empty tensors share an offset; they come in name order.
  std::vector<format::Entry> entries = {
      entry("c", "U8", {2}, 1, 3), entry("z", "U8", {0}, 1, 1),
      entry("b", "U8", {0}, 1, 1), entry("a", "U8", {1}, 0, 1)};
  ASSERT_EQ(format::validate(entries, 3), std::nullopt);
  std::vector<std::string> order;
  for (const format::Entry &e : entries)
    order.push_back(e.name);
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "z", "c"}));
}

TEST(SafetensorsFormat, WriterLayout) {
  format::HeaderWriter w;
  ASSERT_EQ(w.add("b.weight", "F32", {2, 3}, 24), std::nullopt);
  ASSERT_EQ(w.add("a", "I64", {}, 8), std::nullopt);
  ASSERT_EQ(w.add("e", "BOOL", {0}, 0), std::nullopt);
  ASSERT_EQ(w.setMetadata("format", "pt"), std::nullopt);
  std::string prefix = w.prefix();
  // Keys in byte order, offsets in the order added, the header padded with
  // spaces so the data starts 8-byte aligned.
  std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("a":{"data_offsets":[24,32],"dtype":"I64","shape":[]},)"
      R"("b.weight":{"data_offsets":[0,24],"dtype":"F32","shape":[2,3]},)"
      R"("e":{"data_offsets":[32,32],"dtype":"BOOL","shape":[0]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  uint64_t n = header.size();
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(prefix,
            std::string(reinterpret_cast<const char *>(&n), 8) + header);
  ASSERT_EQ(w.getEntries().size(), 3u);
  EXPECT_EQ(w.getEntries()[1].begin, 24u);
}

TEST(SafetensorsFormat, WriterRefuses) {
  format::HeaderWriter w;
  ASSERT_EQ(w.add("w", "F32", {2}, 8), std::nullopt);
  EXPECT_EQ(w.add("", "F32", {}, 4), "the name is reserved or empty");
  EXPECT_EQ(w.add("__metadata__", "F32", {}, 4),
            "the name is reserved or empty");
  EXPECT_EQ(w.add("w", "F32", {2}, 8),
            "a tensor of that name was added before");
  EXPECT_EQ(w.add("bad\xff", "F32", {}, 4), "the name is not valid UTF-8");
  EXPECT_EQ(w.add("v", "F31", {}, 4), "unknown dtype 'F31'");
  EXPECT_EQ(w.add("v", "F32", {2, -2}, 0), "negative size in shape [2, -2]");
  EXPECT_EQ(w.add("v", "F32", {2, 2}, 12), "F32[2, 2] needs 16 bytes, got 12");
  EXPECT_EQ(w.add("v", "C128", {int64_t(1) << 62, 4}, 0),
            "C128[4611686018427387904, 4] is too large to address");
  EXPECT_EQ(w.setMetadata("k", "\xc0\x80"), "metadata 'k' is not valid UTF-8");
  // Nothing refused was laid out.
  EXPECT_EQ(w.getEntries().size(), 1u);
}

TEST(SafetensorsFormat, Utf8) {
  EXPECT_TRUE(format::isUtf8(""));
  EXPECT_TRUE(
      format::isUtf8("layers.0.w \xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(format::isUtf8("\x80"));             // a lone continuation
  EXPECT_FALSE(format::isUtf8("\xc3"));             // cut short
  EXPECT_FALSE(format::isUtf8("\xc0\xaf"));         // overlong '/'
  EXPECT_FALSE(format::isUtf8("\xed\xa0\x80"));     // a surrogate
  EXPECT_FALSE(format::isUtf8("\xf4\x90\x80\x80")); // past U+10FFFF
}

TEST(SafetensorsFormat, QuotesWhatJsonMustEscape) {
  EXPECT_EQ(format::quoteJson("plain.name"), "\"plain.name\"");
  EXPECT_EQ(format::quoteJson(std::string("q\"b\\c\x01\x1f\n\t\r\b\f\xc3\xa9")),
            "\"q\\\"b\\\\c\\u0001\\u001f\\n\\t\\r\\b\\f\xc3\xa9\"");
}

/// Names that only survive a writer that escapes them.
const std::vector<std::string> kOddNames = {"quote\"d",
                                            "back\\slash",
                                            std::string("ctl\x01\x1f", 5),
                                            "tab\tnl\n",
                                            "caf\xc3\xa9 \xe2\x9c\x93",
                                            "/a/b"};

NamedTensors oddTensors() {
  NamedTensors tensors;
  for (size_t i = 0; i < kOddNames.size(); ++i)
    tensors.emplace_back(kOddNames[i], at::arange(3, at::kFloat).add(i));
  return tensors;
}

TEST(SafetensorsFormat, OddNamesRoundTripInLoomrt) {
  std::string path = tempPath("odd.safetensors");
  writeSafetensors(path, oddTensors(), {{"k\"\\\x02", "v\n"}});
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.metadata().at("k\"\\\x02"), "v\n");
  for (const auto &[name, t] : oddTensors())
    EXPECT_TRUE(at::equal(f.read(name), t)) << name;
}

/// Runs the Python with torch and safetensors the runtime was built against
/// (LOOMRT_TEST_PYTHON) on `script` with `args`; its stdout.
std::string runPython(const std::string &script, const std::string &args) {
  std::string scriptPath = writeFile("script.py", script);
  std::string command = std::string("'") + LOOMRT_TEST_PYTHON + "' '" +
                        scriptPath + "' " + args + " 2>&1";
  FILE *pipe = popen(command.c_str(), "r");
  if (!pipe)
    ADD_FAILURE() << "cannot run " << command;
  std::string out;
  char buf[4096];
  for (size_t n; pipe && (n = fread(buf, 1, sizeof buf, pipe)) > 0;)
    out.append(buf, n);
  int status = pipe ? pclose(pipe) : -1;
  EXPECT_EQ(status, 0) << command << "\n" << out;
  return out;
}

TEST(SafetensorsFormat, PythonSafetensorsReadsOddNames) {
  std::string path = tempPath("odd-for-python.safetensors");
  writeSafetensors(path, oddTensors(), {{"k\"\\\x02", "v\n"}});
  std::string out = runPython(R"(
import json, sys
from safetensors import safe_open
with safe_open(sys.argv[1], framework="np") as f:
    print(json.dumps({"metadata": f.metadata(),
                      "tensors": {k: f.get_tensor(k).tolist() for k in f.keys()}}))
)",
                              path);
  json got = json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(got.is_discarded()) << out;
  EXPECT_EQ(got["metadata"], (json{{"k\"\\\x02", "v\n"}}));
  ASSERT_EQ(got["tensors"].size(), kOddNames.size()) << out;
  for (size_t i = 0; i < kOddNames.size(); ++i)
    EXPECT_EQ(got["tensors"][kOddNames[i]], (json{0.0 + i, 1.0 + i, 2.0 + i}))
        << kOddNames[i];
}

TEST(SafetensorsFormat, ReadsOddNamesPythonWrites) {
  std::string spec = writeFile("names.json", json(kOddNames).dump());
  std::string path = tempPath("odd-from-python.safetensors");
  runPython(R"(
import json, sys
import numpy as np
from safetensors.numpy import save_file
names = json.load(open(sys.argv[1]))
save_file({n: np.arange(3, dtype=np.float32) + i for i, n in enumerate(names)},
          sys.argv[2], metadata={"k\"\\\x02": "v\n"})
)",
            spec + " " + path);
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.metadata().at("k\"\\\x02"), "v\n");
  ASSERT_EQ(f.entries().size(), kOddNames.size());
  for (const auto &[name, t] : oddTensors())
    EXPECT_TRUE(at::equal(f.read(name), t)) << name;
}

} // namespace
