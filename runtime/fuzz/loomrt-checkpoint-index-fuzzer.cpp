//===- loomrt-checkpoint-index-fuzzer.cpp - libFuzzer: checkpoint index ---===//
//
// A checkpoint's index.json is untrusted input (a resume may point at any
// directory): CheckpointIndex::parse must refuse every malformed index with
// loomrt::Error and nothing else (not a JSON library exception, not
// std::out_of_range, no sanitizer report). An index it accepts must also
// survive its own round trip: dump() written back and parsed again gives
// the same index, so what a save writes is always what a load reads.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Checkpoint.h"
#include "loomrt/Error.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  std::string dumped;
  try {
    dumped = loomrt::CheckpointIndex::parse(text, "fuzz/index.json").dump();
  } catch (const loomrt::Error &) {
    return 0;
  }
  try {
    std::string again =
        loomrt::CheckpointIndex::parse(dumped, "dumped/index.json").dump();
    if (again != dumped) {
      std::fprintf(stderr, "dump() is not stable:\n%s\nthen\n%s\n",
                   dumped.c_str(), again.c_str());
      std::abort();
    }
  } catch (const loomrt::Error &e) {
    std::fprintf(stderr,
                 "parse() accepted an index, but refused its own dump():\n"
                 "%s\n%s\n",
                 e.what(), dumped.c_str());
    std::abort();
  }
  return 0;
}
