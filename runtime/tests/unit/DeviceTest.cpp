//===- DeviceTest.cpp - The device layer's calls, seen on the CPU ---------===//
//
// The interpreter's device-independent logic, recorded: which stream each
// collective issues on, that a wait makes compute wait on the event its
// start recorded before it waits for the work, and where values made on a
// collective's stream are released. A recording device wraps the CPU
// backend, so the steps compute what they compute on the CPU; the CUDA
// backend gets the same calls.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "Device.h"

#include "loomrt/Dtype.h"
#include "loomrt/Error.h"
#include "loomrt/Session.h"

#include <ATen/ops/equal.h>

#include <gtest/gtest.h>

#include <set>

using namespace loomrt;
using namespace loomrt::test;

namespace {

class RecordedEvent final : public DeviceEvent {
public:
  explicit RecordedEvent(int id) : id(id) {}
  int id;
};

/// The CPU backend, with every stream, event and release call logged.
class RecordingDevice final : public Device {
public:
  /// `inPlace`: gather dim 0 as the CUDA backend does, with one
  /// _allgather_base (which Gloo has too) instead of a broadcast per rank.
  RecordingDevice(const DeviceOptions &options, std::vector<std::string> &log,
                  bool inPlace)
      : Device(DeviceKind::Cpu, c10::Device(c10::DeviceType::CPU)),
        cpu_(makeCpuDevice(options.tracker)), log_(log), inPlace_(inPlace) {}

  c10::intrusive_ptr<c10d::Backend>
  createProcessGroup(const c10::intrusive_ptr<c10d::Store> &store,
                     int64_t index, int64_t size,
                     std::chrono::milliseconds timeout) override {
    return cpu_->createProcessGroup(store, index, size, timeout);
  }
  void beginCollective(StreamKind stream) override {
    log_.push_back(std::string("begin ") + toString(stream));
  }
  std::shared_ptr<DeviceEvent> endCollective(StreamKind stream) override {
    log_.push_back(std::string("end ") + toString(stream) + " -> e" +
                   std::to_string(++events_));
    return std::make_shared<RecordedEvent>(events_);
  }
  void waitCollective(StreamKind stream, const DeviceEvent *event) override {
    log_.push_back(
        std::string("compute waits ") + toString(stream) + " e" +
        std::to_string(static_cast<const RecordedEvent *>(event)->id));
  }
  void waitWork(c10d::Work &work, std::chrono::milliseconds timeout) override {
    log_.push_back("work");
    cpu_->waitWork(work, timeout);
  }
  bool workerReleasesLate() const override {
    return cpu_->workerReleasesLate();
  }
  bool gathersInPlace() const override { return inPlace_; }
  void release(const at::Tensor &value, StreamSet usedOn) override {
    std::string streams;
    for (int k = 0; k < kNumStreamKinds; ++k)
      if (usedOn & streamBit(StreamKind(k)))
        streams +=
            std::string(streams.empty() ? "" : ",") + toString(StreamKind(k));
    log_.push_back("release " + formatShape(value.sizes()) + " used on " +
                   streams);
  }
  void beginStep(int64_t liveBytes) override { cpu_->beginStep(liveBytes); }
  DeviceMemory memory() override { return cpu_->memory(); }

private:
  std::unique_ptr<Device> cpu_;
  std::vector<std::string> &log_;
  bool inPlace_;
  int events_ = 0;
};

/// Installs the recording device for its lifetime.
class Recording {
public:
  explicit Recording(bool inPlace = false) {
    setDeviceFactoryForTesting([this, inPlace](const DeviceOptions &o) {
      return std::make_unique<RecordingDevice>(o, log, inPlace);
    });
  }
  ~Recording() { setDeviceFactoryForTesting(nullptr); }
  std::vector<std::string> log;
};

/// The linear program on a one-rank mesh ["shard"] (collectives without
/// peers), with room for more slots.
json oneRankProgram() {
  json p = linearProgram(nullptr);
  p["version"] = 2;
  p["mesh"] = {{"shape", {1}}, {"axes", {"shard"}}};
  p["num_slots"] = 40;
  json &prog = p["programs"][0];
  prog.erase("rank");
  prog["ranks"] = {0};
  prog["streams"] = {"compute", "comm"};
  return p;
}

json &insts(json &p) { return p["programs"][0]["instructions"]; }

json start(const char *op, int input, int future) {
  json j = {{"op", op},          {"input", input}, {"future", future},
            {"axes", {"shard"}}, {"dim", 0},       {"stream", 1}};
  if (std::string(op) == "reduce_scatter_start")
    j["reduce"] = "sum";
  return j;
}
json wait(int future, int result) {
  return {
      {"op", "wait"}, {"future", future}, {"result", result}, {"stream", 1}};
}

TEST(Device, EachCollectiveKindHasItsOwnStream) {
  const OpKind starts[] = {OpKind::AllGatherStart, OpKind::ReduceScatterStart,
                           OpKind::AllReduceStart, OpKind::BroadcastStart,
                           OpKind::AllSliceStart,  OpKind::SendStart};
  std::set<StreamKind> seen;
  for (OpKind op : starts) {
    StreamKind s = streamFor(op);
    EXPECT_NE(s, StreamKind::Compute) << toString(op);
    EXPECT_TRUE(seen.insert(s).second) << toString(op) << " shares a stream";
  }
  // A send and a recv pair up on one stream, as NCCL orders them.
  EXPECT_EQ(streamFor(OpKind::RecvStart), streamFor(OpKind::SendStart));
  for (OpKind op : {OpKind::Wait, OpKind::Aten, OpKind::Free, OpKind::Optimizer,
                    OpKind::RecordEvent, OpKind::WaitEvent})
    EXPECT_EQ(streamFor(op), StreamKind::Compute) << toString(op);
}

// An FSDP-like tail: the weight's all-gather and the bias gradient's
// reduce-scatter in flight together, waited in the other order, the
// gathered weight freed, the scattered gradient kept as an output.
TEST(Device, StartsWaitsAndReleasesInProgramOrder) {
  json p = oneRankProgram();
  insts(p).push_back(start("all_gather_start", 12, 20));     // 10
  insts(p).push_back(start("reduce_scatter_start", 13, 22)); // 11
  insts(p).push_back(wait(22, 23));                          // 12
  insts(p).push_back(wait(20, 21));                          // 13
  insts(p).push_back({{"op", "free"}, {"slots", {21}}, {"stream", 0}});
  p["outputs"][3]["slot"] = 23;
  std::string path = writeArtifact("device.loomx", p, linearWeights());

  std::string plain =
      writeArtifact("plain.loomx", linearProgram(nullptr), linearWeights());
  Session ref = Session::load(plain);
  double refLoss = ref.step(linearBatch(0));

  Recording rec;
  Session s = Session::load(path);
  EXPECT_EQ(s.step(linearBatch(0)), refLoss);
  EXPECT_TRUE(
      at::equal(s.gradients().at("fc.bias"), ref.gradients().at("fc.bias")));
  const std::vector<std::string> want = {
      "begin all_gather",
      "end all_gather -> e1",
      "begin reduce_scatter",
      "end reduce_scatter -> e2",
      // Compute waits for the event before the work is waited for and its
      // result read.
      "compute waits reduce_scatter e2",
      "work",
      "compute waits all_gather e1",
      "work",
      // The gathered weight at its free; the kept gradient at the end.
      "release [3, 6] used on compute",
      "release [3] used on compute",
  };
  EXPECT_EQ(rec.log, want);

  // The second step makes the same calls (events numbered on).
  rec.log.clear();
  s.step(linearBatch(1));
  ASSERT_EQ(rec.log.size(), want.size());
  EXPECT_EQ(rec.log[1], "end all_gather -> e3");
  EXPECT_EQ(rec.log.back(), "release [3] used on compute");
}

// The CUDA backend's gather, one _allgather_base into the gathered tensor,
// computes the same step and makes the same device calls.
TEST(Device, GatherInPlaceIsTheSameStep) {
  json p = oneRankProgram();
  insts(p).push_back(start("all_gather_start", 12, 20)); // 10
  insts(p).push_back(wait(20, 21));                      // 11
  p["outputs"][2]["slot"] = 21; // the weight's gradient, gathered
  std::string path = writeArtifact("inplace.loomx", p, linearWeights());
  Session ref = Session::load(
      writeArtifact("plain.loomx", linearProgram(nullptr), linearWeights()));
  ref.step(linearBatch(0));
  std::vector<std::vector<std::string>> logs;
  std::vector<at::Tensor> gathered;
  for (bool inPlace : {false, true}) {
    Recording rec(inPlace);
    Session s = Session::load(path);
    s.step(linearBatch(0));
    gathered.push_back(s.gradients().at("fc.weight"));
    logs.push_back(rec.log);
  }
  EXPECT_TRUE(at::equal(gathered[0], ref.gradients().at("fc.weight")));
  EXPECT_TRUE(at::equal(gathered[1], ref.gradients().at("fc.weight")));
  EXPECT_EQ(logs[0], logs[1]);
  EXPECT_EQ(logs[1].front(), "begin all_gather");
}

// A value from a wait whose slot is written again is released before the
// instruction that overwrites it.
TEST(Device, ReleasedBeforeItsSlotIsOverwritten) {
  json p = oneRankProgram();
  insts(p).push_back(start("all_reduce_start", 12, 20)); // 10
  insts(p).back()["reduce"] = "sum";
  insts(p).back().erase("dim");
  insts(p).push_back(wait(20, 21)); // 11
  // 12: slot 21 takes a new value (the bias gradient, doubled).
  insts(p).push_back({{"op", "aten"},
                      {"kernel", "aten::add"},
                      {"overload", "Tensor"},
                      {"args", {{{"tensor", 13}}, {{"tensor", 13}}}},
                      {"results", {21}},
                      {"stream", 0}});
  p["outputs"][3]["slot"] = 21;
  std::string path = writeArtifact("overwrite.loomx", p, linearWeights());
  Recording rec;
  Session s = Session::load(path);
  s.step(linearBatch(0));
  const std::vector<std::string> want = {
      "begin all_reduce",
      "end all_reduce -> e1",
      "compute waits all_reduce e1",
      "work",
      "release [3, 6] used on compute", // before instruction 12 writes 21
  };
  EXPECT_EQ(rec.log, want);
}

// A start that fails still leaves its stream: later work is on compute.
TEST(Device, FailedStartEndsItsStream) {
  json p = oneRankProgram();
  insts(p).push_back(start("all_gather_start", 12, 20));
  insts(p).back()["dim"] = 5;
  insts(p).push_back(wait(20, 21));
  std::string path = writeArtifact("bad.loomx", p, linearWeights());
  Recording rec;
  Session s = Session::load(path);
  EXPECT_CONTAINS(errorOf([&] { s.step(linearBatch(0)); }),
                  "dim 5 out of range");
  EXPECT_EQ(rec.log, (std::vector<std::string>{"begin all_gather",
                                               "end all_gather -> e1"}));
}

// Without a GPU (or a runtime built without CUDA) a cuda session is one
// line naming the device, before anything else is set up.
TEST(Device, CudaWithoutAGpuIsOneLine) {
  DeviceOptions o;
  o.kind = DeviceKind::Cuda;
  std::string error;
  try {
    makeDevice(o);
  } catch (const Error &e) {
    error = e.what();
  }
  if (error.empty())
    GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(error.rfind("device cuda: ", 0), 0u) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;

  std::string path =
      writeArtifact("cpu.loomx", linearProgram(nullptr), linearWeights());
  DistributedConfig c;
  c.device = DeviceKind::Cuda;
  EXPECT_EQ(errorOf([&] { Session::load(path, c); }), error);
}

} // namespace
