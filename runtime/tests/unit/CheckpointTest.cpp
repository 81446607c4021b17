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
  EXPECT_CONTAINS(parseError(j),
                  "ix.json: index.version: is 7, this loomrt reads versions "
                  "1 to 2");
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

/// A version 2 index of a two-rank pipeline: two programs, the tensor held
/// by both and written by the first.
json validPipelineIndex() {
  json j = validIndex();
  j["version"] = 2;
  j["world_size"] = 2;
  j["files"].push_back({{"path", "rank-00001.safetensors"},
                        {"rank", 1},
                        {"bytes", 10},
                        {"crc32", "00001234"}});
  j["rng"].push_back({{"file", 1}, {"key", "rng/cpu"}});
  j["layout"] = json::parse(R"({"mesh": {"shape": [2], "axes": ["pp"]},
                                "programs": [[0], [1]], "mpmd": true})");
  j["tensors"][0]["programs"] = {0, 1};
  return j;
}

TEST(Checkpoint, IndexLayout) {
  // Version 1 had no layout: one program on every rank.
  CheckpointIndex v1 = CheckpointIndex::parse(validIndex().dump(), "ix.json");
  EXPECT_EQ(v1.layout.programs, (std::vector<std::vector<int64_t>>{{0}}));
  EXPECT_EQ(v1.tensors[0].programs, (std::vector<size_t>{0}));
  EXPECT_EQ(v1.layout.describe(), "1 rank");

  CheckpointIndex x =
      CheckpointIndex::parse(validPipelineIndex().dump(), "ix.json");
  EXPECT_TRUE(x.layout.mpmd);
  EXPECT_EQ(x.tensors[0].programs, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(x.layout.describe(), "pipeline of 2 programs on mesh [2] (pp)");
  EXPECT_EQ(CheckpointIndex::parse(x.dump(), "again").dump(), x.dump());

  json j = validPipelineIndex();
  j.erase("layout");
  EXPECT_CONTAINS(parseError(j), "ix.json: index: has no 'layout'");
  j = validPipelineIndex();
  j["layout"]["programs"] = json::parse("[[0, 1], [1]]");
  EXPECT_CONTAINS(parseError(j), "index.layout.programs[1]: must hold ranks "
                                 "in [0, world_size) that no other program "
                                 "holds, found 1");
  j = validPipelineIndex();
  j["layout"]["programs"] = json::parse("[[0]]");
  EXPECT_CONTAINS(parseError(j),
                  "index.layout.programs: must give every rank a program");
  j = validPipelineIndex();
  j["layout"]["mesh"]["shape"] = {1};
  EXPECT_CONTAINS(parseError(j),
                  "index.layout.mesh: has 1 ranks, world_size is 2");
  j = validPipelineIndex();
  j["tensors"][0]["programs"] = {0, 2};
  EXPECT_CONTAINS(parseError(j),
                  "index.tensors['w'].programs: must hold distinct indices "
                  "into index.layout.programs (2), found 2");
  j = validPipelineIndex();
  j["files"][0]["crc32"] = " 000abcd";
  EXPECT_CONTAINS(parseError(j), "index.files[0].crc32: must be 8 hex");
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
