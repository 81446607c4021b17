//===- ByteSize.cpp - Byte counts as users write them ---------------------===//

#include "loom/Support/ByteSize.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <utility>

using namespace llvm;

int64_t loom::parseByteSize(StringRef text) {
  text = text.trim();
  static const std::pair<StringRef, double> units[] = {
      {"KiB", 1024.0},        {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024}, {"KB", 1e3},
      {"MB", 1e6},            {"GB", 1e9},
      {"B", 1.0}};
  double scale = 1;
  for (auto [suffix, factor] : units) {
    if (text.ends_with(suffix)) {
      text = text.drop_back(suffix.size()).trim();
      scale = factor;
      break;
    }
  }
  double value;
  if (text.empty() || text.getAsDouble(value) || value < 0)
    return -1;
  return static_cast<int64_t>(value * scale);
}

std::string loom::formatByteSize(int64_t bytes) {
  std::string text;
  raw_string_ostream os(text);
  double v = bytes;
  const char *unit = "B";
  for (const char *next : {"KiB", "MiB", "GiB"}) {
    if (v < 1024)
      break;
    v /= 1024;
    unit = next;
  }
  if (StringRef(unit) == "B")
    os << bytes << " B";
  else
    os << format("%.2f ", v) << unit << " (" << bytes << " B)";
  return text;
}
