//===- TestUtil.h - Hand-built artifacts for the runtime's tests -*- C++
//-*-===//
//
// Builds .loomx files byte by byte from a JSON program and named weights, so
// every test can start from a valid artifact and break exactly one thing.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_TESTS_TESTUTIL_H
#define LOOMRT_TESTS_TESTUTIL_H

#include "loomrt/Error.h"
#include "loomrt/Session.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>

namespace loomrt::test {

using nlohmann::json;

/// A fresh path in this process's temporary folder (removed at exit).
std::string tempPath(const std::string &name);

/// The bytes of a safetensors file holding `tensors`.
std::string safetensorsBytes(const NamedTensors &tensors);

/// The bytes of an artifact; the header fields can be overridden to test
/// the container checks.
struct ArtifactBytes {
  std::string magic = std::string("LOOMX\r\n\x1a", 8);
  uint32_t version = 1;
  uint32_t flags = 0;
  std::string build(const std::string &program,
                    const std::string &weights) const;
};

/// Writes `program` and `weights` as an artifact at a fresh path.
std::string writeArtifact(const std::string &name, const json &program,
                          const NamedTensors &weights);
std::string writeFile(const std::string &name, const std::string &bytes);

/// A linear layer + MSE loss + optimizer, like runtime/tests/make_linear.py:
/// inputs fc.weight [3, 6] (slot 0), fc.bias [3] (1), calls (i64 buffer, 2),
/// x [5, 6] (3, batch 0), target [5, 3] (4, batch 1); loss in slot 7.
json linearProgram(const json &optimizer);
json sgdOptimizer(double momentum = 0.9);
NamedTensors linearWeights();
std::vector<at::Tensor> linearBatch(int seed);

/// Whether `text` contains `part`, with both in the failure message.
::testing::AssertionResult contains(const std::string &text,
                                    const std::string &part);
#define EXPECT_CONTAINS(text, part)                                            \
  EXPECT_TRUE(::loomrt::test::contains((text), (part)))

/// The message of the loomrt::Error `fn` throws; a test failure when it
/// throws nothing or something else.
std::string errorOf(const std::function<void()> &fn);

} // namespace loomrt::test

#endif // LOOMRT_TESTS_TESTUTIL_H
