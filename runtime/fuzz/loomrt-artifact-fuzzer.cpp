//===- loomrt-artifact-fuzzer.cpp - libFuzzer target: the .loomx loader ---===//
//
// Two input shapes, as in the importer's target: bytes that start with the
// .loomx magic are a whole artifact and go through Artifact::load (container
// header, program, embedded weights). Anything else is the program JSON
// alone: mutating it inside a container would almost always break the
// header's declared lengths first, so the JSON goes to Artifact::parseProgram
// directly. When the program is accepted, the harness wraps it into a
// container with weights that match its inputs, and load() must accept that
// too: the reader and the loader may not disagree about a program.
//
// Either way the only exception allowed out is loomrt::Error; anything else
// (a JSON library exception, c10::Error, std::out_of_range) or a sanitizer
// report is a bug.
//
//===----------------------------------------------------------------------===//

#include "FuzzFile.h"

#include "loomrt/Artifact.h"
#include "loomrt/Dtype.h"
#include "loomrt/Error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

namespace {

using loomrt::Artifact;

// Weights larger than this are not synthesized (a program may declare
// shapes of any size; the point is the loader's checks, not the bytes).
constexpr uint64_t kMaxSyntheticWeightBytes = 1 << 20;

/// The safetensors bytes holding zeros for every runtime-owned input of
/// `a`, as load() expects them; false when they would be too large.
bool synthesizeWeights(const Artifact &a, std::string &out) {
  nlohmann::json header = nlohmann::json::object();
  std::set<std::string> owned;
  uint64_t cursor = 0;
  for (const loomrt::Program &p : a.programs)
    for (const loomrt::InputSpec &in : p.inputs) {
      if (in.role == loomrt::InputRole::Input || !owned.insert(in.name).second)
        continue;
      const std::vector<int64_t> &shape =
          in.shard ? in.shard->globalShape : in.shape;
      uint64_t bytes = c10::elementSize(in.dtype);
      for (int64_t d : shape) {
        if (d != 0 && bytes > kMaxSyntheticWeightBytes / uint64_t(d))
          return false;
        bytes *= uint64_t(d);
      }
      if (bytes > kMaxSyntheticWeightBytes - cursor)
        return false;
      header[in.name] = {{"dtype", loomrt::safetensorsDtypeName(in.dtype)},
                         {"shape", shape},
                         {"data_offsets", {cursor, cursor + bytes}}};
      cursor += bytes;
    }
  std::string text = header.dump();
  uint64_t len = text.size();
  out.assign(reinterpret_cast<const char *>(&len), 8);
  out += text;
  out.append(cursor, '\0');
  return true;
}

std::string container(uint32_t version, const std::string &program,
                      const std::string &weights) {
  std::string out(loomrt::kArtifactHeaderBytes, '\0');
  uint32_t flags = 0;
  uint64_t programLen = program.size(), weightsLen = weights.size();
  std::memcpy(&out[0], loomrt::kArtifactMagic, 8);
  std::memcpy(&out[8], &version, 4);
  std::memcpy(&out[12], &flags, 4);
  std::memcpy(&out[16], &programLen, 8);
  std::memcpy(&out[24], &weightsLen, 8);
  return out + program + weights;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static loomrt::fuzz::FuzzFile file;
  std::string bytes(reinterpret_cast<const char *>(data), size);
  if (bytes.compare(0, 8, loomrt::kArtifactMagic, 8) == 0) {
    file.assign(data, size);
    try {
      (void)Artifact::load(file.path());
    } catch (const loomrt::Error &) {
    }
    return 0;
  }

  std::string weights;
  uint32_t version = 0;
  try {
    Artifact a = Artifact::parseProgram(bytes, "fuzz.json");
    if (!synthesizeWeights(a, weights))
      return 0;
    version = uint32_t(a.version);
  } catch (const loomrt::Error &) {
    return 0;
  }
  std::string whole = container(version, bytes, weights);
  file.assign(whole.data(), whole.size());
  try {
    (void)Artifact::load(file.path());
  } catch (const loomrt::Error &e) {
    std::fprintf(stderr,
                 "parseProgram accepted the program, but load() refused it "
                 "with weights that match its inputs:\n%s\n",
                 e.what());
    std::abort();
  }
  return 0;
}
