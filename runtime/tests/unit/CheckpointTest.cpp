//===- CheckpointTest.cpp - Checkpoint index parsing and the C API's resume
//===//

#include "TestUtil.h"

#include "loomrt/Checkpoint.h"
#include "loomrt/loomrt.h"

#include <ATen/ops/equal.h>

#include <filesystem>

using namespace loomrt;
using namespace loomrt::test;

namespace {

std::string linearArtifact() {
  return writeArtifact("ck.loomx", linearProgram(sgdOptimizer()),
                       linearWeights());
}

/// A one-rank index with one file and one tensor, to break field by field.
json validIndex() {
  return json::parse(R"({
    "format": "loom-checkpoint", "version": 1, "artifact": "a.loomx",
    "step": 2, "data_position": 2, "world_size": 1, "optimizer": "sgd",
    "files": [{"path": "rank-00000.safetensors", "rank": 0, "bytes": 10,
               "crc32": "0000abcd"}],
    "tensors": [{"name": "w", "kind": "parameter", "dtype": "f32",
                 "shape": [4, 2], "shard_dim": 0,
                 "pieces": [{"file": 0, "key": "w", "rows": [0, 4]}]}],
    "rng": [{"file": 0, "key": "rng/cpu"}]})");
}

std::string parseError(const json &j) {
  return errorOf([&] { CheckpointIndex::parse(j.dump(), "ix.json"); });
}

TEST(Checkpoint, IndexRoundTrips) {
  CheckpointIndex x = CheckpointIndex::parse(validIndex().dump(), "ix.json");
  EXPECT_EQ(x.step, 2);
  EXPECT_EQ(x.files[0].crc32, 0xabcdu);
  ASSERT_EQ(x.tensors.size(), 1u);
  EXPECT_EQ(x.tensors[0].shardDim, 0);
  CheckpointIndex y = CheckpointIndex::parse(x.dump(), "again");
  EXPECT_EQ(y.dump(), x.dump());
}

// Every malformed field is refused with the file and the field's path.
TEST(Checkpoint, IndexErrorsNameTheField) {
  json j = validIndex();
  j["version"] = 7;
  EXPECT_CONTAINS(parseError(j), "ix.json: index.version: is 7");
  j = validIndex();
  j["files"][0]["path"] = "../escape";
  EXPECT_CONTAINS(parseError(j), "index.files[0].path: must be a file name");
  j = validIndex();
  j["files"][0]["crc32"] = "xyz";
  EXPECT_CONTAINS(parseError(j), "index.files[0].crc32: must be 8 hex");
  j = validIndex();
  j["tensors"][0]["pieces"][0]["rows"] = json::array({0, 3});
  EXPECT_CONTAINS(parseError(j),
                  "index.tensors['w'].pieces: cover rows 0..3 of 4");
  j = validIndex();
  j["tensors"][0]["pieces"].push_back(
      {{"file", 0}, {"key", "w2"}, {"rows", {2, 4}}});
  EXPECT_CONTAINS(parseError(j), "rows 4..2 are in two pieces");
  j = validIndex();
  j["tensors"][0]["pieces"][0]["file"] = 3;
  EXPECT_CONTAINS(parseError(j), "pieces[0].file: is 3, but there are 1");
  j = validIndex();
  j["tensors"][0]["dtype"] = "float";
  EXPECT_CONTAINS(parseError(j), "index.tensors['w'].dtype: 'float'");
  j = validIndex();
  j.erase("rng");
  EXPECT_CONTAINS(parseError(j), "ix.json: index: has no 'rng'");
  EXPECT_CONTAINS(errorOf([] { CheckpointIndex::parse("{", "ix.json"); }),
                  "ix.json: not valid JSON");
}

/// One step on linearBatch(seed) through the C API.
double stepOn(loomrt_session *s, int seed) {
  std::vector<at::Tensor> b = linearBatch(seed);
  std::vector<int64_t> s0 = b[0].sizes().vec(), s1 = b[1].sizes().vec();
  loomrt_tensor batch[2] = {
      {b[0].data_ptr(), size_t(b[0].nbytes()), "f32", s0.data(), b[0].dim()},
      {b[1].data_ptr(), size_t(b[1].nbytes()), "f32", s1.data(), b[1].dim()}};
  double loss = 0;
  EXPECT_EQ(loomrt_session_step(s, batch, 2, &loss), LOOMRT_OK)
      << loomrt_last_error();
  return loss;
}

// Through the C API: a session restored from step 2 continues exactly as
// the one that saved it (SGD with momentum: the momentum buffers and the
// step counts matter).
TEST(Checkpoint, CApiResumesBitwise) {
  std::string dir = tempPath("ckpts");
  loomrt_session *a = nullptr, *b = nullptr;
  ASSERT_EQ(loomrt_session_create(linearArtifact().c_str(), &a), LOOMRT_OK);
  ASSERT_EQ(loomrt_session_create(linearArtifact().c_str(), &b), LOOMRT_OK);
  stepOn(a, 0);
  stepOn(a, 1);
  ASSERT_EQ(loomrt_session_save_checkpoint(a, dir.c_str(), 2, 0), LOOMRT_OK)
      << loomrt_last_error();
  double a2 = stepOn(a, 2), a3 = stepOn(a, 3);

  int64_t position = -1;
  ASSERT_EQ(loomrt_session_load_checkpoint(b, dir.c_str(), &position),
            LOOMRT_OK)
      << loomrt_last_error();
  EXPECT_EQ(position, 2);
  EXPECT_EQ(loomrt_session_steps_run(b), 2);
  EXPECT_EQ(stepOn(b, 2), a2);
  EXPECT_EQ(stepOn(b, 3), a3);

  // A complete checkpoint is never replaced.
  ASSERT_EQ(loomrt_session_save_checkpoint(b, dir.c_str(), 4, 0), LOOMRT_OK);
  EXPECT_EQ(loomrt_session_save_checkpoint(a, dir.c_str(), 4, 0), LOOMRT_ERROR);
  EXPECT_CONTAINS(loomrt_last_error(), "step-00000004: a complete checkpoint "
                                       "is already there; not overwriting");
  EXPECT_EQ(loomrt_session_load_checkpoint(b, "/nonexistent", nullptr),
            LOOMRT_ERROR);
  EXPECT_CONTAINS(loomrt_last_error(), "/nonexistent: no checkpoint");
  loomrt_session_destroy(a);
  loomrt_session_destroy(b);
}

} // namespace
