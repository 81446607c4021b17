//===- loomrt-safetensors-fuzzer.cpp - libFuzzer target: safetensors ------===//
//
// The input is a whole safetensors file. The reader must refuse it with a
// loomrt::Error or accept it, and then every tensor it listed must read
// (its byte range was validated against the file). Any other exception
// escaping, or a sanitizer report, is a bug: loom-run would die with a
// message that names neither the file nor the field.
//
//===----------------------------------------------------------------------===//

#include "FuzzFile.h"

#include "loomrt/Error.h"
#include "loomrt/Safetensors.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static loomrt::fuzz::FuzzFile file;
  file.assign(data, size);
  try {
    loomrt::SafetensorsFile st = loomrt::SafetensorsFile::open(file.path());
    for (const loomrt::SafetensorsEntry &e : st.entries())
      (void)st.read(e);
  } catch (const loomrt::Error &) {
  }
  return 0;
}
