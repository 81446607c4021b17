//===- DistributedTest.cpp - Format v2: meshes, groups, collectives -------===//
//
// The version 2 reader's refusals (docs/distributed.md), the groups a mesh
// gives each rank, and collectives run through Sessions: on a one-rank mesh
// (no peers) and on two ranks in two threads of this process.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "loomrt/Artifact.h"
#include "loomrt/Error.h"
#include "loomrt/Session.h"

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/randn.h>

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

using namespace loomrt;
using namespace loomrt::test;

namespace {

Mesh mesh(std::vector<int64_t> shape, std::vector<std::string> axes) {
  Mesh m;
  m.shape = std::move(shape);
  m.axes = std::move(axes);
  return m;
}

TEST(MeshGroups, HsdpMeshTwoByTwo) {
  Mesh m = mesh({2, 2}, {"replicate", "shard"});
  EXPECT_EQ(m.group({"shard"}, 3), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.group({"replicate"}, 3), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(m.group({"shard"}, 0), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(m.group({"replicate"}, 0), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(m.group({"replicate", "shard"}, 2),
            (std::vector<int64_t>{0, 1, 2, 3}));
  // Ordered by the mesh's axes, however `axes` lists them.
  EXPECT_EQ(m.group({"shard", "replicate"}, 2),
            (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(m.groups({"shard"}),
            (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(m.groups({"replicate"}),
            (std::vector<std::vector<int64_t>>{{0, 2}, {1, 3}}));
  EXPECT_EQ(m.groupSize({"shard"}), 2);
  EXPECT_EQ(m.numRanks(), 4);
}

TEST(MeshGroups, ThreeAxes) {
  Mesh m = mesh({2, 3, 2}, {"pp", "dp", "tp"});
  // rank 7 = (1, 0, 1)
  EXPECT_EQ(m.group({"dp"}, 7), (std::vector<int64_t>{7, 9, 11}));
  EXPECT_EQ(m.group({"pp", "tp"}, 7), (std::vector<int64_t>{0, 1, 6, 7}));
}

/// The linear program (no optimizer, grads out) as a version 2 program run
/// by every rank of a 1-D mesh ["shard"], two streams, room for more slots.
json v2Program(int worldSize = 2) {
  json p = linearProgram(nullptr);
  p["version"] = 2;
  p["world_size"] = worldSize;
  p["mesh"] = {{"shape", {worldSize}}, {"axes", {"shard"}}};
  p["num_slots"] = 40;
  json prog = p["programs"][0];
  prog.erase("rank");
  json ranks = json::array();
  for (int r = 0; r < worldSize; ++r)
    ranks.push_back(r);
  prog["ranks"] = ranks;
  prog["streams"] = {"compute", "comm"};
  p["programs"] = json::array({prog});
  return p;
}

json &insts(json &p) { return p["programs"][0]["instructions"]; }

json allReduce(int input, int future, json axes = {"shard"}) {
  return {{"op", "all_reduce_start"}, {"input", input},
          {"future", future},         {"axes", axes},
          {"reduce", "avg"},          {"stream", 1}};
}
json wait(int future, int result) {
  return {
      {"op", "wait"}, {"future", future}, {"result", result}, {"stream", 1}};
}

std::string loadError(const json &program) {
  std::string path = writeArtifact("v2.loomx", program, linearWeights());
  return errorOf([&] { Artifact::load(path); });
}

TEST(ArtifactV2, ValidProgramLoads) {
  json p = v2Program();
  insts(p).push_back({{"op", "record_event"}, {"event", 0}, {"stream", 0}});
  insts(p).push_back({{"op", "wait_event"}, {"event", 0}, {"stream", 1}});
  insts(p).push_back(allReduce(12, 20));
  insts(p).push_back(wait(20, 21));
  std::string path = writeArtifact("v2.loomx", p, linearWeights());
  Artifact a = Artifact::load(path);
  EXPECT_EQ(a.version, 2);
  ASSERT_TRUE(a.mesh);
  EXPECT_EQ(a.programs[0].ranks, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(a.programs[0].instructions[12].op, OpKind::AllReduceStart);
  EXPECT_EQ(a.programs[0].instructions[12].reduce, ReduceOp::Avg);
  EXPECT_EQ(a.groupAxes(), (std::vector<std::vector<std::string>>{{"shard"}}));
}

TEST(ArtifactV2, WaitOnAFutureNeverStarted) {
  json p = v2Program();
  insts(p).push_back(wait(20, 21));
  EXPECT_CONTAINS(loadError(p), "programs[0].instructions[10].future: slot 20 "
                                "holds no future: no collective was started");
}

TEST(ArtifactV2, EventWaitedBeforeRecorded) {
  json p = v2Program();
  insts(p).push_back({{"op", "wait_event"}, {"event", 5}, {"stream", 1}});
  insts(p).push_back({{"op", "record_event"}, {"event", 5}, {"stream", 0}});
  EXPECT_CONTAINS(loadError(p), "programs[0].instructions[10].event: event 5 "
                                "is waited before any record_event");
}

TEST(ArtifactV2, AxesNotInTheMesh) {
  json p = v2Program();
  insts(p).push_back(allReduce(12, 20, {"dp"}));
  insts(p).push_back(wait(20, 21));
  EXPECT_CONTAINS(loadError(p), "programs[0].instructions[10].axes[0]: 'dp' "
                                "is not an axis of the mesh (axes: shard)");
}

TEST(ArtifactV2, GatherDimNegative) {
  json p = v2Program();
  insts(p).push_back({{"op", "all_gather_start"},
                      {"input", 12},
                      {"future", 20},
                      {"axes", {"shard"}},
                      {"dim", -1},
                      {"stream", 1}});
  insts(p).push_back(wait(20, 21));
  EXPECT_CONTAINS(loadError(p), "instructions[10].dim: dim -1 is negative");
}

TEST(ArtifactV2, FutureNeverWaited) {
  json p = v2Program();
  insts(p).push_back(allReduce(12, 20));
  EXPECT_CONTAINS(loadError(p), "programs[0].instructions[10].future: the "
                                "collective started into slot 20 is never "
                                "waited");
}

TEST(ArtifactV2, ReadingAFuture) {
  json p = v2Program();
  insts(p).push_back(allReduce(12, 20));
  insts(p).push_back({{"op", "aten"},
                      {"kernel", "aten::t"},
                      {"overload", "default"},
                      {"args", {{{"tensor", 20}}}},
                      {"results", {22}}});
  insts(p).push_back(wait(20, 21));
  EXPECT_CONTAINS(loadError(p), "instructions[11].args[0]: slot 20 holds the "
                                "future of a collective in flight");
}

TEST(ArtifactV2, WritingTheInputOfACollectiveInFlight) {
  json p = v2Program();
  insts(p).push_back(allReduce(12, 20));
  insts(p).push_back({{"op", "aten"},
                      {"kernel", "aten::t"},
                      {"overload", "default"},
                      {"args", {{{"tensor", 0}}}},
                      {"results", {12}}});
  insts(p).push_back(wait(20, 21));
  EXPECT_CONTAINS(loadError(p), "instructions[11].results[0]: slot 12 is the "
                                "input of the collective started at "
                                "instructions[10] and must not be written "
                                "before its wait");
}

TEST(ArtifactV2, FreeingTheInputOfACollectiveInFlight) {
  json p = v2Program();
  p["outputs"].erase(2); // fc.weight's grad (slot 12) is freed below
  insts(p).push_back(allReduce(12, 20));
  insts(p).push_back({{"op", "free"}, {"slots", {12}}});
  insts(p).push_back(wait(20, 21));
  EXPECT_CONTAINS(loadError(p), "instructions[11].slots[0]: slot 12 is the "
                                "input of the collective started at "
                                "instructions[10] and must not be freed "
                                "before its wait");
}

TEST(ArtifactV2, FreeingAFuture) {
  json p = v2Program();
  insts(p).push_back(allReduce(12, 20));
  insts(p).push_back({{"op", "free"}, {"slots", {20}}});
  insts(p).push_back(wait(20, 21));
  EXPECT_CONTAINS(loadError(p), "instructions[11].slots[0]: slot 20 holds the "
                                "future of a collective in flight; wait for "
                                "it before freeing");
}

TEST(ArtifactV2, FutureInTheInputsSlot) {
  json p = v2Program();
  insts(p).push_back(allReduce(12, 12));
  insts(p).push_back(wait(12, 21));
  EXPECT_CONTAINS(loadError(p), "instructions[10].future: the future cannot "
                                "take the input's slot 12");
}

TEST(ArtifactV2, WaitOfACollectiveWithoutAResult) {
  json p = v2Program();
  insts(p).push_back(allReduce(12, 20));
  insts(p).push_back({{"op", "wait"}, {"future", 20}, {"stream", 1}});
  EXPECT_CONTAINS(loadError(p), "instructions[11].result: missing (the wait "
                                "of a collective or recv delivers its result "
                                "into a slot)");
}

TEST(ArtifactV2, MeshMustMatchWorldSize) {
  json p = v2Program();
  p["mesh"]["shape"] = {3};
  EXPECT_CONTAINS(loadError(p), "world_size: 2 is not the product of "
                                "mesh.shape [3] (3)");
}

TEST(ArtifactV2, MeshRequiredForSeveralRanks) {
  json p = v2Program();
  p.erase("mesh");
  EXPECT_CONTAINS(loadError(p), "mesh: missing (required when world_size > 1)");
}

TEST(ArtifactV2, MeshNeedsVersion2) {
  json p = linearProgram(sgdOptimizer());
  p["mesh"] = {{"shape", {1}}, {"axes", {"shard"}}};
  EXPECT_CONTAINS(
      loadError(p),
      "mesh: 'mesh' needs format version 2 (this program is version 1)");
}

TEST(ArtifactV2, EveryRankRunsAProgram) {
  json p = v2Program();
  p["programs"][0]["ranks"] = {0};
  EXPECT_CONTAINS(loadError(p), "programs: no program runs rank 1");
  p["programs"][0]["ranks"] = {0, 1, 1};
  EXPECT_CONTAINS(loadError(p), "programs[0].ranks[2]: rank 1 also runs "
                                "programs[0]");
}

TEST(ArtifactV2, ShardShapeMustBeTheChunk) {
  json p = v2Program();
  // fc.weight [3, 6] over 2 ranks: chunks of 2 rows (padded to 4).
  p["inputs"][0]["shard"] = {
      {"axes", {"shard"}}, {"dim", 0}, {"global_shape", {3, 6}}};
  EXPECT_CONTAINS(loadError(p),
                  "inputs[0].shard: the local shape is [3, 6], but chunk of "
                  "global_shape [3, 6] padded over 2 ranks on dim 0 is [2, "
                  "6]");
  p["inputs"][0]["shard"]["dim"] = 2;
  EXPECT_CONTAINS(loadError(p), "inputs[0].shard.dim: dim 2 out of range for "
                                "global_shape [3, 6]");
}

TEST(ArtifactV2, OnlyBatchInputsAreSplit) {
  json p = v2Program();
  p["inputs"][0]["split"] = {{"axes", {"shard"}}, {"dim", 0}};
  EXPECT_CONTAINS(loadError(p), "inputs[0].split: only inputs with role "
                                "'input' (batch data) are split");
  p = v2Program();
  p["inputs"][3]["split"] = {{"axes", {"shard"}}, {"dim", 2}};
  EXPECT_CONTAINS(loadError(p), "inputs[3].split.dim: dim 2 out of range for "
                                "shape [5, 6]");
}

TEST(ArtifactV2, OnlyTheLossIsReduced) {
  json p = v2Program();
  p["outputs"][2]["reduce"] = {{"axes", {"shard"}}, {"op", "avg"}};
  EXPECT_CONTAINS(loadError(p), "outputs[2].reduce: only the loss output is "
                                "reduced");
  p = v2Program();
  p["outputs"][0]["reduce"] = {{"axes", {"shard"}}, {"op", "mean"}};
  EXPECT_CONTAINS(loadError(p), "outputs[0].reduce.op: unknown reduction "
                                "'mean'");
}

TEST(ArtifactV2, BroadcastRootInTheGroup) {
  json p = v2Program();
  insts(p).push_back({{"op", "broadcast_start"},
                      {"input", 12},
                      {"future", 20},
                      {"axes", {"shard"}},
                      {"root", 2},
                      {"stream", 1}});
  insts(p).push_back(wait(20, 21));
  EXPECT_CONTAINS(loadError(p), "instructions[10].root: root 2 is not an "
                                "index in a group of 2 ranks");
}

TEST(ArtifactV2, Version1HasNoCollectives) {
  json p = linearProgram(nullptr);
  p["num_slots"] = 40;
  insts(p).push_back(allReduce(12, 20));
  EXPECT_CONTAINS(loadError(p), "unknown instruction 'all_reduce_start' "
                                "(version 1 has aten, free, optimizer)");
}

// A one-rank mesh runs collectives without peers: an avg all-reduce over
// one rank is the identity.
TEST(SessionV2, OneRankMeshRunsCollectives) {
  json p = v2Program(1);
  insts(p).push_back(allReduce(12, 20));
  insts(p).push_back(wait(20, 21));
  p["outputs"][2]["slot"] = 21;
  std::string path = writeArtifact("v2one.loomx", p, linearWeights());
  Session s = Session::load(path);
  std::string plain =
      writeArtifact("v1.loomx", linearProgram(nullptr), linearWeights());
  Session ref = Session::load(plain);
  std::vector<at::Tensor> batch = linearBatch(0);
  EXPECT_EQ(s.step(batch), ref.step(batch));
  EXPECT_TRUE(at::equal(s.gradients().at("fc.weight"),
                        ref.gradients().at("fc.weight")));
  EXPECT_EQ(s.lastStats().collectives.at("all_reduce").count, 1);
  EXPECT_EQ(s.lastStats().collectives.at("all_reduce").bytes, 3 * 6 * 4);
}

TEST(SessionV2, GatherDimOutOfRangeAtRunTime) {
  json p = v2Program(1);
  insts(p).push_back({{"op", "all_gather_start"},
                      {"input", 12},
                      {"future", 20},
                      {"axes", {"shard"}},
                      {"dim", 5},
                      {"stream", 1},
                      {"name", "ag"}});
  insts(p).push_back(wait(20, 21));
  std::string path = writeArtifact("v2dim.loomx", p, linearWeights());
  Session s = Session::load(path);
  EXPECT_CONTAINS(errorOf([&] { s.step(linearBatch(0)); }),
                  "programs[0].instructions[10] (in 'ag') all_gather_start: "
                  "all_gather over axes [shard] ranks [0] (f32 [3, 6], 72 B): "
                  "dim 5 out of range for a 2-d tensor");
}

/// A rendezvous on a port the kernel picked: rank 0's store takes over the
/// listening socket, as under loom-run's launcher, so no concurrent test
/// can take the port first.
struct Rendezvous {
  int fd = -1;
  int port = 0;

  static Rendezvous onFreePort() {
    Rendezvous r;
    r.fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::bind(r.fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr),
              0);
    EXPECT_EQ(::listen(r.fd, SOMAXCONN), 0);
    ::getsockname(r.fd, reinterpret_cast<sockaddr *>(&addr), &len);
    r.port = ntohs(addr.sin_port);
    return r;
  }

  /// Points `c` (whose rank is set) at the rendezvous.
  void configure(DistributedConfig &c) const {
    c.masterPort = port;
    if (c.rank == 0)
      c.masterListenFd = fd;
  }
};

// Two ranks in two threads: a reduce_scatter whose dim is not divisible by
// the group size fails on both, naming the instruction and the collective.
TEST(SessionV2, ReduceScatterNeedsDivisibleDim) {
  json p = v2Program(2);
  insts(p).push_back({{"op", "reduce_scatter_start"},
                      {"input", 13},
                      {"future", 20},
                      {"axes", {"shard"}},
                      {"dim", 0},
                      {"reduce", "sum"},
                      {"stream", 1}});
  insts(p).push_back(wait(20, 21));
  std::string path = writeArtifact("v2rs.loomx", p, linearWeights());
  Rendezvous rendezvous = Rendezvous::onFreePort();
  std::string errors[2];
  auto rank = [&](int r) {
    errors[r] = errorOf([&] {
      DistributedConfig c;
      c.rank = r;
      c.worldSize = 2;
      rendezvous.configure(c);
      c.timeoutSeconds = 20;
      Session s = Session::load(path, c);
      s.step(linearBatch(0));
    });
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  for (int r = 0; r < 2; ++r)
    EXPECT_CONTAINS(errors[r],
                    "rank " + std::to_string(r) +
                        ": programs[0].instructions[10] "
                        "reduce_scatter_start: reduce_scatter over axes "
                        "[shard] ranks [0, 1] (f32 [3], 12 B): dim 0 has size "
                        "3, not divisible by the group size 2");
}

// Two ranks, each with its own slice of a split batch: broadcast from the
// group's index 1 gives both rank 1's slice; a max all-reduce gives the
// elementwise maximum of the slices; the reported loss is the same on both.
TEST(SessionV2, BroadcastAndMaxOnTwoRanks) {
  json p = v2Program(2);
  p["inputs"][3]["split"] = {{"axes", {"shard"}}, {"dim", 0}};
  p["inputs"][4]["split"] = {{"axes", {"shard"}}, {"dim", 0}};
  insts(p).push_back({{"op", "broadcast_start"},
                      {"input", 3},
                      {"future", 20},
                      {"axes", {"shard"}},
                      {"root", 1},
                      {"stream", 1}});
  insts(p).push_back(wait(20, 21));
  insts(p).push_back({{"op", "all_reduce_start"},
                      {"input", 3},
                      {"future", 22},
                      {"axes", {"shard"}},
                      {"reduce", "max"},
                      {"stream", 1}});
  insts(p).push_back(wait(22, 23));
  p["outputs"][2]["slot"] = 21; // "fc.weight" grad: the broadcast
  p["outputs"][3]["slot"] = 23; // "fc.bias" grad: the max
  p["outputs"][0]["reduce"] = {{"axes", {"shard"}}, {"op", "avg"}};
  std::string path = writeArtifact("v2bc.loomx", p, linearWeights());
  at::Tensor x = at::randn({10, 6}), target = at::randn({10, 3});
  Rendezvous rendezvous = Rendezvous::onFreePort();
  std::map<std::string, at::Tensor> grads[2];
  double losses[2] = {0, 0};
  std::string errors[2];
  auto rank = [&](int r) {
    errors[r] = errorOf([&] {
      DistributedConfig c;
      c.rank = r;
      c.worldSize = 2;
      rendezvous.configure(c);
      c.timeoutSeconds = 20;
      Session s = Session::load(path, c);
      losses[r] = s.step({x, target});
      grads[r] = s.gradients();
      throw Error("done");
    });
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "done");
    EXPECT_TRUE(at::equal(grads[r].at("fc.weight"), x.narrow(0, 5, 5)));
    EXPECT_TRUE(at::equal(grads[r].at("fc.bias"),
                          at::maximum(x.narrow(0, 0, 5), x.narrow(0, 5, 5))));
  }
  // The reduced loss is the same on both ranks.
  EXPECT_EQ(losses[0], losses[1]);
}

// reduce_scatter along a dim other than 0: rank r keeps chunk r of that
// dim of the reduction (avg and max) of the two ranks' slices.
TEST(SessionV2, ReduceScatterAlongDimOne) {
  json p = v2Program(2);
  p["inputs"][3]["split"] = {{"axes", {"shard"}}, {"dim", 0}};
  p["inputs"][4]["split"] = {{"axes", {"shard"}}, {"dim", 0}};
  for (auto [future, reduce] : {std::pair{20, "avg"}, std::pair{22, "max"}}) {
    insts(p).push_back({{"op", "reduce_scatter_start"},
                        {"input", 3},
                        {"future", future},
                        {"axes", {"shard"}},
                        {"dim", 1},
                        {"reduce", reduce},
                        {"stream", 1}});
    insts(p).push_back(wait(future, future + 1));
  }
  p["outputs"][2]["slot"] = 21;
  p["outputs"][3]["slot"] = 23;
  std::string path = writeArtifact("v2rs1.loomx", p, linearWeights());
  at::Tensor x = at::randn({10, 6}), target = at::randn({10, 3});
  Rendezvous rendezvous = Rendezvous::onFreePort();
  std::map<std::string, at::Tensor> grads[2];
  std::string errors[2];
  auto rank = [&](int r) {
    errors[r] = errorOf([&] {
      DistributedConfig c;
      c.rank = r;
      c.worldSize = 2;
      rendezvous.configure(c);
      c.timeoutSeconds = 20;
      Session s = Session::load(path, c);
      s.step({x, target});
      grads[r] = s.gradients();
      throw Error("done");
    });
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  at::Tensor a = x.narrow(0, 0, 5), b = x.narrow(0, 5, 5);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "done");
    EXPECT_TRUE(at::allclose(grads[r].at("fc.weight"),
                             a.add(b).div(2).narrow(1, 3 * r, 3)));
    EXPECT_TRUE(at::equal(grads[r].at("fc.bias"),
                          at::maximum(a, b).narrow(1, 3 * r, 3)));
  }
}

// all_slice moves no data: rank r keeps chunk r (of its group) of its own
// tensor along dim, and the step reports it with no bytes.
TEST(SessionV2, AllSliceKeepsTheRanksChunk) {
  json p = v2Program(2);
  p["inputs"][3]["split"] = {{"axes", {"shard"}}, {"dim", 0}};
  p["inputs"][4]["split"] = {{"axes", {"shard"}}, {"dim", 0}};
  insts(p).push_back({{"op", "all_slice_start"},
                      {"input", 3},
                      {"future", 20},
                      {"axes", {"shard"}},
                      {"dim", 1},
                      {"stream", 1}});
  insts(p).push_back(wait(20, 21));
  p["outputs"][2]["slot"] = 21;
  std::string path = writeArtifact("v2slice.loomx", p, linearWeights());
  at::Tensor x = at::randn({10, 6}), target = at::randn({10, 3});
  Rendezvous rendezvous = Rendezvous::onFreePort();
  std::map<std::string, at::Tensor> grads[2];
  std::string errors[2];
  auto rank = [&](int r) {
    errors[r] = errorOf([&] {
      DistributedConfig c;
      c.rank = r;
      c.worldSize = 2;
      rendezvous.configure(c);
      c.timeoutSeconds = 20;
      Session s = Session::load(path, c);
      s.step({x, target});
      grads[r] = s.gradients();
      throw Error("done");
    });
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "done");
    EXPECT_TRUE(at::equal(grads[r].at("fc.weight"),
                          x.narrow(0, 5 * r, 5).narrow(1, 3 * r, 3)));
  }
}

TEST(ArtifactV2, AllSliceNeedsADim) {
  json p = v2Program();
  insts(p).push_back({{"op", "all_slice_start"},
                      {"input", 12},
                      {"future", 20},
                      {"axes", {"shard"}},
                      {"stream", 1}});
  insts(p).push_back(wait(20, 21));
  EXPECT_CONTAINS(loadError(p), "instructions[10].dim: missing");
}

//===----------------------------------------------------------------------===//
// Format version 3: MPMD programs and point-to-point transfers
//===----------------------------------------------------------------------===//

/// The linear program as two MPMD programs on mesh [2] ["pp"]: program 0
/// (rank 0) without the loss output, program 1 (rank 1) with it; each holds
/// its own copy of the tables. Room for more slots.
json v3Program() {
  json p = v2Program(2);
  p["version"] = 3;
  p["mesh"] = {{"shape", {2}}, {"axes", {"pp"}}};
  json programs = json::array();
  for (int r = 0; r < 2; ++r) {
    json prog = p["programs"][0];
    prog["ranks"] = {r};
    prog["streams"] = {"compute"};
    for (const char *key : {"num_slots", "inputs", "state", "outputs"})
      prog[key] = p[key];
    if (r == 0)
      prog["outputs"].erase(0); // the loss
    programs.push_back(prog);
  }
  for (const char *key : {"num_slots", "inputs", "state", "outputs"})
    p.erase(key);
  p["programs"] = programs;
  return p;
}

json &insts(json &p, int program) {
  return p["programs"][program]["instructions"];
}

std::string parseError(const json &program) {
  return errorOf([&] { Artifact::parseProgram(program.dump(), "t.loomx"); });
}

json send(int input, int future, int peer, int tag) {
  return {{"op", "send_start"}, {"input", input}, {"future", future},
          {"axes", {"pp"}},     {"peer", peer},   {"tag", tag}};
}
json recv(int future, int peer, int tag) {
  return {{"op", "recv_start"}, {"future", future}, {"axes", {"pp"}},
          {"peer", peer},       {"tag", tag},       {"dtype", "f32"},
          {"shape", {5, 6}}};
}
json waitSend(int future) { return {{"op", "wait"}, {"future", future}}; }

TEST(ArtifactV3, MpmdProgramsLoad) {
  json p = v3Program();
  insts(p, 0).push_back(send(3, 20, 1, 7));
  insts(p, 0).push_back(waitSend(20));
  insts(p, 1).push_back(recv(20, 0, 7));
  insts(p, 1).push_back({{"op", "wait"}, {"future", 20}, {"result", 21}});
  std::string path = writeArtifact("v3.loomx", p, linearWeights());
  Artifact a = Artifact::load(path);
  EXPECT_TRUE(a.mpmd);
  ASSERT_EQ(a.programs.size(), 2u);
  EXPECT_FALSE(a.programs[0].hasLoss());
  EXPECT_TRUE(a.programs[1].hasLoss());
  EXPECT_EQ(a.lossProgram(), 1u);
  EXPECT_EQ(a.programs[0].outputs.size(), 3u);
  const Instruction &s = a.programs[0].instructions[10];
  EXPECT_EQ(s.op, OpKind::SendStart);
  EXPECT_EQ(s.peer, 1);
  EXPECT_EQ(s.tag, 7);
  EXPECT_EQ(a.programs[0].instructions[11].result, -1);
  EXPECT_EQ(a.programs[1].instructions[10].recvShape,
            (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(a.groupAxes(), (std::vector<std::vector<std::string>>{{"pp"}}));
}

TEST(ArtifactV3, SendIntoItsInputsSlot) {
  json p = v3Program();
  insts(p, 0).push_back(send(3, 3, 1, 7));
  insts(p, 0).push_back(waitSend(3));
  EXPECT_CONTAINS(parseError(p), "programs[0].instructions[10].future: the "
                                 "future cannot take the input's slot 3");
}

TEST(ArtifactV3, SpmdIsOneProgramWithTheTopLevelTables) {
  json p = v2Program(2);
  p["version"] = 3;
  Artifact a = Artifact::parseProgram(p.dump(), "t.loomx");
  EXPECT_FALSE(a.mpmd);
  EXPECT_EQ(a.programs[0].numSlots, 40);
  EXPECT_EQ(a.programs[0].inputs.size(), 5u);
  EXPECT_TRUE(a.programs[0].hasLoss());
}

TEST(ArtifactV3, TablesAtTheTopAndInAProgram) {
  json p = v3Program();
  p["num_slots"] = 40;
  EXPECT_CONTAINS(parseError(p), "t.loomx: programs[0].num_slots: the top "
                                 "level has `num_slots` (one SPMD program)");
}

TEST(ArtifactV3, TablesInSomeProgramsOnly) {
  json p = v3Program();
  for (const char *key : {"num_slots", "inputs", "state", "outputs"})
    p["programs"][0].erase(key);
  EXPECT_CONTAINS(parseError(p), "programs[1].num_slots: programs[1] has its "
                                 "own tables but another program has none");
}

TEST(ArtifactV3, ProgramTablesNeedVersion3) {
  json p = v3Program();
  p["version"] = 2;
  EXPECT_CONTAINS(parseError(p), "programs[0].inputs: 'inputs' needs format "
                                 "version 3 (this program is version 2)");
}

TEST(ArtifactV3, PointToPointNeedsVersion3) {
  json p = v2Program(2);
  p["mesh"] = {{"shape", {2}}, {"axes", {"pp"}}};
  insts(p).push_back(send(3, 20, 1, 0));
  EXPECT_CONTAINS(parseError(p), "programs[0].instructions[10].op: unknown "
                                 "instruction 'send_start' (version 2 has");
}

TEST(ArtifactV3, RankInTwoPrograms) {
  json p = v3Program();
  p["programs"][0]["ranks"] = {0, 1};
  EXPECT_CONTAINS(parseError(p),
                  "programs[1].ranks[0]: rank 1 also runs programs[0]");
}

TEST(ArtifactV3, RankInNoProgram) {
  json p = v3Program();
  p["programs"][0]["ranks"] = {1};
  EXPECT_CONTAINS(parseError(p), "programs[1].ranks[0]: rank 1 also runs");
  p["programs"].erase(0);
  p["programs"][0]["ranks"] = {1};
  EXPECT_CONTAINS(parseError(p),
                  "programs: no program runs rank 0 (world_size 2)");
}

TEST(ArtifactV3, LossInTwoPrograms) {
  json p = v3Program();
  p["programs"][0]["outputs"] = p["programs"][1]["outputs"];
  EXPECT_CONTAINS(parseError(p), "programs[1].outputs: a second program with "
                                 "a 'loss' output (programs[0] has one");
}

TEST(ArtifactV3, LossInNoProgram) {
  json p = v3Program();
  p["programs"][1]["outputs"].erase(0);
  EXPECT_CONTAINS(parseError(p),
                  "programs: no program has an output with role 'loss'");
}

TEST(ArtifactV3, TwoLossesInOneProgram) {
  json p = v3Program();
  p["programs"][1]["outputs"].push_back({{"role", "loss"}, {"slot", 7}});
  EXPECT_CONTAINS(parseError(p), "programs[1].outputs: expected at most one "
                                 "output with role 'loss', found 2");
}

TEST(ArtifactV3, SharedParameterBoundAlike) {
  json p = v3Program();
  p["programs"][1]["inputs"][0]["shape"] = {4, 6};
  EXPECT_CONTAINS(parseError(p),
                  "programs[1].inputs[0]: 'fc.weight' is a parameter f32 "
                  "[4, 6] here, but programs[0].inputs[0] binds it as a "
                  "parameter f32 [3, 6]");
  p = v3Program();
  p["programs"][1]["inputs"][1]["dtype"] = "f64";
  EXPECT_CONTAINS(parseError(p), "programs[1].inputs[1]: 'fc.bias' is a "
                                 "parameter f64 [3] here");
}

TEST(ArtifactV3, ErrorsNameTheProgramsTables) {
  json p = v3Program();
  p["programs"][1]["inputs"][2]["slot"] = 99;
  EXPECT_CONTAINS(parseError(p), "programs[1].inputs[2].slot: slot 99 out of "
                                 "range (40 slots)");
}

TEST(ArtifactV3, PeerIsAnotherMemberOfTheGroup) {
  json p = v3Program();
  insts(p, 0).push_back(send(3, 20, 0, 0));
  insts(p, 0).push_back(waitSend(20));
  EXPECT_CONTAINS(parseError(p), "programs[0].instructions[10].peer: peer 0 "
                                 "is rank 0's own index in its group [0, 1]");
  p = v3Program();
  insts(p, 1).push_back(recv(20, 2, 0));
  insts(p, 1).push_back({{"op", "wait"}, {"future", 20}, {"result", 21}});
  EXPECT_CONTAINS(parseError(p),
                  "programs[1].instructions[10].peer: peer 2 is not an index "
                  "in rank 1's group over the axes (2 ranks: [0, 1])");
}

TEST(ArtifactV3, WaitOfASendHasNoResult) {
  json p = v3Program();
  insts(p, 0).push_back(send(3, 20, 1, 0));
  insts(p, 0).push_back({{"op", "wait"}, {"future", 20}, {"result", 21}});
  EXPECT_CONTAINS(parseError(p),
                  "programs[0].instructions[11].result: the wait of a send "
                  "has no result (slot 20 holds the future of the send "
                  "started at instructions[10])");
}

TEST(ArtifactV3, WaitOfARecvHasAResult) {
  json p = v3Program();
  insts(p, 1).push_back(recv(20, 0, 0));
  insts(p, 1).push_back(waitSend(20));
  EXPECT_CONTAINS(parseError(p), "programs[1].instructions[11].result: "
                                 "missing (the wait of a collective or recv");
}

TEST(ArtifactV3, SendInputStaysUntilItsWait) {
  json p = v3Program();
  insts(p, 0).push_back(send(3, 20, 1, 0));
  insts(p, 0).push_back({{"op", "free"}, {"slots", {3}}});
  insts(p, 0).push_back(waitSend(20));
  EXPECT_CONTAINS(parseError(p), "programs[0].instructions[11].slots[0]: slot "
                                 "3 is the input of the collective started at "
                                 "instructions[10] and must not be freed");
}

TEST(ArtifactV3, NegativeTag) {
  json p = v3Program();
  insts(p, 0).push_back(send(3, 20, 1, -1));
  EXPECT_CONTAINS(parseError(p), "programs[0].instructions[10].tag: tag -1 "
                                 "out of range");
}

/// Runs `path` on two ranks in two threads of this process for one step;
/// returns each rank's error ("done" when the step finished) and fills the
/// losses and gradients.
void runTwoRanks(const std::string &path, const std::vector<at::Tensor> &batch,
                 double timeoutSeconds, std::string errors[2], double losses[2],
                 std::map<std::string, at::Tensor> grads[2]) {
  Rendezvous rendezvous = Rendezvous::onFreePort();
  auto rank = [&](int r) {
    errors[r] = errorOf([&] {
      DistributedConfig c;
      c.rank = r;
      c.worldSize = 2;
      rendezvous.configure(c);
      c.timeoutSeconds = timeoutSeconds;
      Session s = Session::load(path, c);
      losses[r] = s.step(batch);
      grads[r] = s.gradients();
      throw Error("done");
    });
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
}

// Rank 0 (program 0) sends its batch element x to rank 1 (program 1), which
// outputs what it received as a gradient; both report program 1's loss.
TEST(SessionV3, SendAndRecvBetweenPrograms) {
  json p = v3Program();
  insts(p, 0).push_back(send(3, 20, 1, 5));
  insts(p, 0).push_back(waitSend(20));
  insts(p, 1).push_back(recv(20, 0, 5));
  insts(p, 1).push_back({{"op", "wait"}, {"future", 20}, {"result", 21}});
  p["programs"][1]["outputs"][2]["slot"] = 21; // "fc.weight" grad
  std::string path = writeArtifact("v3p2p.loomx", p, linearWeights());
  std::vector<at::Tensor> batch = linearBatch(0);
  std::string errors[2];
  double losses[2] = {0, 0};
  std::map<std::string, at::Tensor> grads[2];
  runTwoRanks(path, batch, 20, errors, losses, grads);
  ASSERT_EQ(errors[0], "done");
  ASSERT_EQ(errors[1], "done");
  EXPECT_TRUE(at::equal(grads[1].at("fc.weight"), batch[0]));
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_NE(losses[1], 0.0);
}

// The recv waits for tag 6, the send sends tag 5: the recv times out and
// names the rank, the peer's global rank, the tag and the instruction.
TEST(SessionV3, UnmatchedTagTimesOut) {
  json p = v3Program();
  insts(p, 0).push_back(send(3, 20, 1, 5));
  insts(p, 0).push_back(waitSend(20));
  json r = recv(20, 0, 6);
  r["name"] = "recv_x";
  r["module"] = "stage1";
  insts(p, 1).push_back(r);
  insts(p, 1).push_back({{"op", "wait"}, {"future", 20}, {"result", 21}});
  std::string path = writeArtifact("v3tag.loomx", p, linearWeights());
  std::string errors[2];
  double losses[2] = {0, 0};
  std::map<std::string, at::Tensor> grads[2];
  runTwoRanks(path, linearBatch(0), 2, errors, losses, grads);
  EXPECT_CONTAINS(errors[1],
                  "rank 1: programs[1].instructions[11] wait: recv from rank "
                  "0 (index 0 of axes [pp] ranks [0, 1]), tag 6 (f32 [5, 6], "
                  "120 B), started by programs[1].instructions[10] (in "
                  "'recv_x') in step 0 [module stage1] failed");
  // The sender does not finish either: its send never matched.
  EXPECT_CONTAINS(errors[0], "rank 0: programs[0].instructions[11] wait: send "
                             "to rank 1 (index 1 of axes [pp] ranks [0, 1]), "
                             "tag 5");
}

} // namespace
