//===- CApiTest.cpp - The C API: handles, statuses, error strings ---------===//

#include "TestUtil.h"

#include "loomrt/Safetensors.h"
#include "loomrt/loomrt.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>

#include <cstring>

using namespace loomrt;
using namespace loomrt::test;

namespace {

std::string linearArtifact() {
  return writeArtifact("c.loomx", linearProgram(sgdOptimizer()),
                       linearWeights());
}

loomrt_tensor raw(const at::Tensor &t, const char *dtype) {
  return {t.data_ptr(), size_t(t.numel()) * t.element_size(), dtype,
          t.sizes().data(), t.dim()};
}

// A memory region counts what ATen allocates on this thread from the given
// base: two 1 MiB tensors alive at once, then freed, peak at base + 2 MiB.
TEST(CApi, MemoryRegionMeasuresArbitraryCode) {
  ASSERT_EQ(loomrt_memory_region_begin(1000), LOOMRT_OK) << loomrt_last_error();
  EXPECT_EQ(loomrt_memory_region_begin(0), LOOMRT_INVALID_ARGUMENT);
  {
    at::Tensor a = at::empty({1 << 18}, at::kFloat);
    at::Tensor b = at::empty({1 << 18}, at::kFloat);
  }
  at::Tensor c = at::empty({1 << 10}, at::kFloat);
  int64_t peak = 0;
  ASSERT_EQ(loomrt_memory_region_end(&peak), LOOMRT_OK) << loomrt_last_error();
  EXPECT_EQ(peak, 1000 + 2 * (int64_t(1) << 20));
  EXPECT_EQ(loomrt_memory_region_end(&peak), LOOMRT_INVALID_ARGUMENT);
  EXPECT_CONTAINS(loomrt_last_error(), "no memory region is open");
}

TEST(CApi, CreateFailsWithMessage) {
  loomrt_session *s = reinterpret_cast<loomrt_session *>(1);
  EXPECT_EQ(loomrt_session_create("/nonexistent.loomx", &s), LOOMRT_ERROR);
  EXPECT_EQ(s, nullptr);
  EXPECT_CONTAINS(loomrt_last_error(), "/nonexistent.loomx: cannot open");
  EXPECT_EQ(loomrt_session_create(nullptr, &s), LOOMRT_INVALID_ARGUMENT);
  EXPECT_CONTAINS(loomrt_last_error(), "must not be NULL");
}

TEST(CApi, CreateOnADevice) {
  loomrt_session *s = nullptr;
  ASSERT_EQ(loomrt_session_create_on(linearArtifact().c_str(), "cpu", &s),
            LOOMRT_OK)
      << loomrt_last_error();
  loomrt_session_destroy(s);
  ASSERT_EQ(loomrt_session_create_on(linearArtifact().c_str(), nullptr, &s),
            LOOMRT_OK)
      << loomrt_last_error();
  loomrt_session_destroy(s);
  EXPECT_EQ(loomrt_session_create_on(linearArtifact().c_str(), "tpu", &s),
            LOOMRT_INVALID_ARGUMENT);
  EXPECT_CONTAINS(loomrt_last_error(), "device must be \"cpu\", \"cuda\"");
  loomrt_status cuda =
      loomrt_session_create_on(linearArtifact().c_str(), "cuda", &s);
  if (cuda == LOOMRT_OK) {
    loomrt_session_destroy(s);
    GTEST_SKIP() << "a CUDA device is present";
  }
  EXPECT_EQ(cuda, LOOMRT_ERROR);
  EXPECT_EQ(s, nullptr);
  EXPECT_CONTAINS(loomrt_last_error(), "device cuda: ");
}

TEST(CApi, StepFromRawBuffersAndFromBatchesFile) {
  loomrt_session *s = nullptr;
  ASSERT_EQ(loomrt_session_create(linearArtifact().c_str(), &s), LOOMRT_OK)
      << loomrt_last_error();
  EXPECT_STREQ(loomrt_last_error(), "");
  EXPECT_EQ(loomrt_session_steps_run(s), 0);

  std::vector<at::Tensor> b = linearBatch(0);
  loomrt_tensor batch[2] = {raw(b[0], "f32"), raw(b[1], "f32")};
  double loss = 0;
  ASSERT_EQ(loomrt_session_step(s, batch, 2, &loss), LOOMRT_OK)
      << loomrt_last_error();
  EXPECT_EQ(loomrt_session_last_loss(s), loss);
  EXPECT_GT(loomrt_session_last_peak_bytes(s),
            loomrt_session_last_start_bytes(s));
  EXPECT_GT(loomrt_session_last_time_ms(s), 0.0);

  // The same first step through the C++ API gives the same loss.
  Session ref = Session::load(linearArtifact());
  EXPECT_EQ(ref.step(b), loss);

  // Wrong sizes are refused with a message, not a crash.
  batch[0].nbytes -= 4;
  EXPECT_EQ(loomrt_session_step(s, batch, 2, &loss), LOOMRT_ERROR);
  EXPECT_CONTAINS(loomrt_last_error(), "batch[0]: 116 bytes given, f32 [5, 6] "
                                       "needs 120");
  batch[0] = raw(b[0], "float");
  EXPECT_EQ(loomrt_session_step(s, batch, 2, &loss), LOOMRT_ERROR);
  EXPECT_CONTAINS(loomrt_last_error(), "unknown dtype 'float'");
  batch[0] = raw(b[0], "f32");
  EXPECT_EQ(loomrt_session_step(s, batch, 1, &loss), LOOMRT_ERROR);
  EXPECT_CONTAINS(loomrt_last_error(), "the batch has 1 elements");

  EXPECT_EQ(loomrt_session_step_index(s, 0, &loss), LOOMRT_INVALID_ARGUMENT);
  EXPECT_CONTAINS(loomrt_last_error(), "call loomrt_session_set_batches first");
  std::string batches = tempPath("batches.safetensors");
  writeSafetensors(batches, {{"step0.arg0", b[0]}, {"step0.arg1", b[1]}},
                   {{"num_steps", "1"}, {"num_args", "2"}});
  int64_t numSteps = 0;
  ASSERT_EQ(loomrt_session_set_batches(s, batches.c_str(), &numSteps),
            LOOMRT_OK)
      << loomrt_last_error();
  EXPECT_EQ(numSteps, 1);
  ASSERT_EQ(loomrt_session_step_index(s, 7, &loss), LOOMRT_OK)
      << loomrt_last_error();
  EXPECT_EQ(loomrt_session_steps_run(s), 2);
  EXPECT_EQ(ref.step(b), loss);

  std::string params = tempPath("params.safetensors");
  ASSERT_EQ(loomrt_session_save_parameters(s, params.c_str()), LOOMRT_OK);
  loomrt_session *t = nullptr;
  ASSERT_EQ(loomrt_session_create(linearArtifact().c_str(), &t), LOOMRT_OK);
  ASSERT_EQ(loomrt_session_load_parameters(t, params.c_str()), LOOMRT_OK);
  EXPECT_EQ(loomrt_session_load_weights(t, "/nonexistent.safetensors"),
            LOOMRT_ERROR);
  EXPECT_CONTAINS(loomrt_last_error(), "/nonexistent.safetensors");

  loomrt_session_destroy(s);
  loomrt_session_destroy(t);
  loomrt_session_destroy(nullptr);
}

TEST(CApi, Threads) {
  EXPECT_EQ(loomrt_set_num_threads(0), LOOMRT_INVALID_ARGUMENT);
  EXPECT_EQ(loomrt_set_num_threads(1), LOOMRT_OK);
}

} // namespace
