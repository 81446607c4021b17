//===- SessionTest.cpp - Running steps, owned state, memory, traces -------===//

#include "TestUtil.h"

#include "MemoryTracker.h"

#include "loomrt/Check.h"
#include "loomrt/Safetensors.h"
#include "loomrt/Trace.h"
#include <thread>

#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/randn.h>

#include <fstream>
#include <sstream>
#include <unordered_set>

using namespace loomrt;
using namespace loomrt::test;

namespace {

Session linearSession(const json &optimizer = sgdOptimizer()) {
  return Session::load(
      writeArtifact("linear.loomx", linearProgram(optimizer), linearWeights()));
}

TEST(Session, StepComputesTheLossAndUpdates) {
  Session s = linearSession();
  NamedTensors w = linearWeights();
  std::vector<at::Tensor> batch = linearBatch(0);
  // The loss of the first step is the eager forward on the initial weights.
  at::Tensor want =
      at::mse_loss(batch[0].matmul(w[0].second.t()).add(w[1].second), batch[1]);
  double loss = s.step(batch);
  EXPECT_NEAR(loss, want.item<double>(), 1e-6);
  EXPECT_EQ(s.lastStats().loss, loss);
  EXPECT_FALSE(at::equal(s.parameter("fc.weight"), w[0].second));
  EXPECT_EQ(s.stepCount("fc.weight"), 1.0);
  // The buffer mutation counts calls.
  EXPECT_EQ(s.buffer("calls").item<int64_t>(), 1);
  s.step(linearBatch(1));
  EXPECT_EQ(s.buffer("calls").item<int64_t>(), 2);
  EXPECT_EQ(s.stepsRun(), 2);
  EXPECT_EQ(s.lastStats().step, 1);
  // grad outputs are kept, by parameter name.
  ASSERT_EQ(s.gradients().count("fc.bias"), 1u);
  EXPECT_EQ(s.gradients().at("fc.bias").sizes(), (c10::IntArrayRef{3}));
  // The momentum buffers are the optimizer state.
  NamedTensors state = s.optimizerState();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].first, "fc.weight.s0");
}

TEST(Session, NoOptimizerLeavesParameters) {
  Session s = linearSession(nullptr);
  at::Tensor before = s.parameter("fc.weight").clone();
  s.step(linearBatch(0));
  EXPECT_TRUE(at::equal(s.parameter("fc.weight"), before));
  EXPECT_EQ(s.gradients().size(), 2u);
}

TEST(Session, BatchIsChecked) {
  Session s = linearSession();
  std::vector<at::Tensor> batch = linearBatch(0);
  EXPECT_EQ(s.numBatchElements(), 2u);
  EXPECT_CONTAINS(errorOf([&] { s.step({batch[0]}); }),
                  "the batch has 1 elements, but inputs[4] ('target') takes "
                  "element 1");
  EXPECT_CONTAINS(errorOf([&] {
                    s.step({batch[0].narrow(0, 0, 4), batch[1]});
                  }),
                  "batch element 0 is f32 [4, 6], but inputs[3] ('x') "
                  "declares f32 [5, 6]");
  EXPECT_CONTAINS(errorOf([&] {
                    s.step({batch[0].to(at::kDouble), batch[1]});
                  }),
                  "batch element 0 is f64 [5, 6]");
  EXPECT_EQ(s.stepsRun(), 0);
}

TEST(Session, KernelErrorNamesTheInstruction) {
  // Declare x as [5, 7]: every load-time check passes, addmm fails at run.
  json p = linearProgram(sgdOptimizer());
  p["inputs"][3]["shape"] = {5, 7};
  Session s = Session::load(writeArtifact("bad.loomx", p, linearWeights()));
  std::vector<at::Tensor> batch = {at::randn({5, 7}), at::randn({5, 3})};
  std::string e = errorOf([&] { s.step(batch); });
  EXPECT_CONTAINS(e, "programs[0].instructions[1] (in 'addmm') "
                     "aten::addmm.default: ");
  EXPECT_CONTAINS(e, "cannot be multiplied");
  // The failed step dropped its slots; the session still works.
  json good = linearProgram(sgdOptimizer());
  EXPECT_NO_THROW(
      Session::load(writeArtifact("good.loomx", good, linearWeights()))
          .step(linearBatch(0)));
}

TEST(Session, LossMustBeZeroDimensional) {
  json p = linearProgram(sgdOptimizer());
  p["outputs"][0]["slot"] = 13; // the bias gradient, [3]
  Session s = Session::load(writeArtifact("bad.loomx", p, linearWeights()));
  EXPECT_CONTAINS(errorOf([&] { s.step(linearBatch(0)); }),
                  "outputs[0]: the loss must be a real 0-d tensor, found f32 "
                  "[3]");
}

TEST(Session, SaveAndLoadParameters) {
  Session a = linearSession();
  a.step(linearBatch(0));
  a.step(linearBatch(1));
  std::string path = tempPath("params.safetensors");
  a.saveParameters(path);
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.entries().size(), 3u); // two parameters, one buffer
  EXPECT_EQ(f.metadata().at("steps"), "2");

  Session b = linearSession();
  at::Tensor weightView = b.parameter("fc.weight");
  b.loadParameters(path);
  EXPECT_TRUE(at::equal(b.parameter("fc.weight"), a.parameter("fc.weight")));
  EXPECT_TRUE(at::equal(b.buffer("calls"), a.buffer("calls")));
  // Loaded in place: tensors handed out before stay the session's.
  EXPECT_TRUE(weightView.is_same(b.parameter("fc.weight")));

  writeSafetensors(path, {{"fc.weight", at::randn({6, 3})}});
  EXPECT_CONTAINS(errorOf([&] { b.loadParameters(path); }),
                  "'fc.weight' is f32 [6, 3], the artifact declares f32 [3, "
                  "6]");
  writeSafetensors(path, {{"fc.weight", at::randn({3, 6})}});
  EXPECT_CONTAINS(errorOf([&] { b.loadParameters(path); }),
                  "no tensor for parameter 'fc.bias'");
}

TEST(Session, LoadWeightsResetsTraining) {
  Session s = linearSession();
  s.step(linearBatch(0));
  std::string path = tempPath("w.safetensors");
  NamedTensors w = linearWeights();
  w.emplace_back("unrelated", at::randn({2})); // ignored
  writeSafetensors(path, w);
  s.loadWeights(path);
  EXPECT_TRUE(at::equal(s.parameter("fc.weight"), w[0].second));
  EXPECT_EQ(s.stepCount("fc.weight"), 0.0);
  EXPECT_EQ(s.buffer("calls").item<int64_t>(), 0);
  // Two sessions from the same weights take the same steps.
  Session fresh = linearSession();
  EXPECT_EQ(s.step(linearBatch(0)), fresh.step(linearBatch(0)));

  writeSafetensors(path, {w[0], w[1]});
  EXPECT_CONTAINS(errorOf([&] { s.loadWeights(path); }),
                  "no tensor 'calls' (the artifact's buffer)");
}

TEST(Session, Accessors) {
  Session s = linearSession();
  EXPECT_EQ(s.parameters().size(), 2u);
  EXPECT_EQ(s.buffers().size(), 1u);
  EXPECT_TRUE(s.constants().empty());
  EXPECT_CONTAINS(errorOf([&] { s.parameter("calls"); }),
                  "there is no parameter 'calls'");
}

// --- Memory accounting ------------------------------------------------------

TEST(Memory, CPUAllocatorReportsToTheTracker) {
  // The hook the runtime relies on: DefaultCPUAllocator reports allocations
  // and frees to the thread's PROFILER_STATE debug info.
  auto tracker = std::make_shared<MemoryTracker>();
  tracker->reset(0);
  {
    MemoryTracker::Scope scope(tracker);
    at::Tensor a = at::empty({1000}, at::kFloat);
    EXPECT_EQ(tracker->current(), 4000);
    {
      at::Tensor b = at::empty({250}, at::kDouble);
      EXPECT_EQ(tracker->current(), 6000);
    }
    EXPECT_EQ(tracker->current(), 4000);
    EXPECT_EQ(tracker->peak(), 6000);
    EXPECT_EQ(tracker->allocations(), 2);
  }
  // Outside the scope nothing is reported.
  at::Tensor c = at::empty({1000}, at::kFloat);
  EXPECT_EQ(tracker->allocations(), 2);
}

TEST(Memory, OtherThreadsCountOnlyFreesOfTheOwnersBlocks) {
  // A thread that runs under the owner's thread-local state (as Gloo's
  // workers do) reports to the same tracker: its own blocks are not
  // counted, a free of one of the owner's blocks is.
  auto tracker = std::make_shared<MemoryTracker>();
  tracker->reset(0);
  MemoryTracker::Scope scope(tracker);
  at::Tensor mine = at::empty({1000}, at::kFloat);
  EXPECT_EQ(tracker->current(), 4000);
  std::thread worker([&] {
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, tracker);
    at::Tensor theirs = at::empty({500}, at::kFloat);
    mine.reset(); // the last reference: freed on this thread
  });
  worker.join();
  EXPECT_EQ(tracker->current(), 0);
  EXPECT_EQ(tracker->peak(), 4000);
  EXPECT_EQ(tracker->allocations(), 1);
}

TEST(Memory, StagingCountsUntilTheCollectivesWait) {
  auto tracker = std::make_shared<MemoryTracker>();
  tracker->reset(0);
  MemoryTracker::Scope scope(tracker);
  EXPECT_EQ(MemoryTracker::installed(), tracker.get());
  int64_t first = tracker->beginStaging();
  at::Tensor copy = at::empty({100}, at::kFloat); // freed before the wait
  at::Tensor kept = at::empty({200}, at::kFloat); // freed after it
  tracker->endStaging();
  at::Tensor result = at::empty({10}, at::kFloat); // not staging
  EXPECT_EQ(tracker->current(), 400 + 800 + 40);
  copy.reset();
  EXPECT_EQ(tracker->current(), 400 + 800 + 40); // counted until the wait
  tracker->releaseStaging(first);
  EXPECT_EQ(tracker->current(), 40);
  kept.reset(); // already released: not subtracted twice
  EXPECT_EQ(tracker->current(), 40);
  result.reset();
  EXPECT_EQ(tracker->current(), 0);
  EXPECT_EQ(tracker->peak(), 1240);
}

int64_t storageBytes(const std::vector<at::Tensor> &tensors) {
  std::unordered_set<const void *> seen;
  int64_t n = 0;
  for (const at::Tensor &t : tensors)
    if (t.defined() && seen.insert(t.storage().unsafeGetStorageImpl()).second)
      n += int64_t(t.storage().nbytes());
  return n;
}

TEST(Memory, StepStatsAreConsistent) {
  Session s = linearSession();
  std::vector<at::Tensor> batch = linearBatch(0);
  s.step(batch);
  s.step(batch);
  const StepStats &st = s.lastStats();
  std::vector<at::Tensor> held = batch;
  for (auto &[n, t] : s.parameters())
    held.push_back(t);
  for (auto &[n, t] : s.buffers())
    held.push_back(t);
  for (auto &[n, t] : s.optimizerState())
    held.push_back(t);
  for (auto &[n, t] : s.gradients())
    held.push_back(t);
  // In steady state the step starts and ends holding exactly the owned
  // state, the batch and the gradients it hands out; every intermediate the
  // allocator reported was freed again.
  EXPECT_EQ(st.startBytes, storageBytes(held));
  EXPECT_EQ(st.endBytes, st.startBytes);
  EXPECT_GT(st.allocations, 8);
  // At least addmm's output (5x3 f32) and mse_loss_backward's (5x3) were
  // alive together with the weight gradient (3x6).
  EXPECT_GE(st.peakBytes, st.startBytes + (15 + 15 + 18) * 4);
  EXPECT_GT(st.timeMs, 0.0);
}

// --- Tracing ----------------------------------------------------------------

TEST(Trace, InstructionTimingsAndChromeTrace) {
  Session s = linearSession();
  s.setTracing(true);
  TraceWriter trace(s.artifact());
  s.step(linearBatch(0));
  trace.addStep(s.lastStats());
  s.step(linearBatch(1));
  trace.addStep(s.lastStats());
  size_t numInstructions = s.artifact().programs[0].instructions.size();
  ASSERT_EQ(s.lastStats().instructions.size(), numInstructions);
  for (size_t i = 1; i < numInstructions; ++i)
    EXPECT_GE(s.lastStats().instructions[i].startUs,
              s.lastStats().instructions[i - 1].startUs);

  std::string path = tempPath("trace.json");
  trace.write(path);
  std::ifstream in(path);
  json t = json::parse(in);
  size_t complete = 0, named = 0;
  for (const json &e : t["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      if (e["name"] == "addmm") {
        ++named;
        EXPECT_EQ(e["args"]["kernel"], "aten::addmm.default");
        EXPECT_EQ(e["args"]["phase"], "forward");
        EXPECT_EQ(e["tid"], 1);
      }
    }
  }
  EXPECT_EQ(complete, 2 * (numInstructions + 1));
  EXPECT_EQ(named, 2u);

  s.setTracing(false);
  s.step(linearBatch(0));
  EXPECT_TRUE(s.lastStats().instructions.empty());
}

TEST(Trace, RankPaths) {
  EXPECT_EQ(rankTracePath("t.json", 1), "t.rank1.json");
  EXPECT_EQ(rankTracePath("out/run.v2/t.json", 0), "out/run.v2/t.rank0.json");
  EXPECT_EQ(rankTracePath("out/run.v2/trace", 3), "out/run.v2/trace.rank3");
  EXPECT_EQ(rankTracePath(".trace", 2), ".trace.rank2");
}

TEST(Trace, MergeShiftsRanksToOneClock) {
  // Two ranks whose sessions started 250 us apart: rank 1's events move
  // 250 us later; metadata without ts is kept as is.
  std::vector<std::string> parts;
  for (int r = 0; r < 2; ++r) {
    json t = {{"traceEvents",
               {{{"ph", "M"},
                 {"name", "process_name"},
                 {"pid", r},
                 {"args", {{"name", "rank " + std::to_string(r)}}}},
                {{"ph", "X"},
                 {"name", "mm"},
                 {"pid", r},
                 {"tid", 1},
                 {"ts", 10.0},
                 {"dur", 5.0}}}},
              {"otherData", {{"steady_clock_epoch_us", 1000.0 + 250.0 * r}}}};
    parts.push_back(tempPath("part" + std::to_string(r) + ".json"));
    std::ofstream(parts.back()) << t.dump();
  }
  std::string path = tempPath("merged.json");
  mergeTraces(parts, path);
  std::ifstream in(path);
  json m = json::parse(in);
  std::vector<double> ts;
  for (const json &e : m["traceEvents"])
    if (e["ph"] == "X")
      ts.push_back(e["ts"].get<double>());
  EXPECT_EQ(ts, (std::vector<double>{10.0, 260.0}));
  EXPECT_EQ(m["traceEvents"].size(), 4u);
  EXPECT_EQ(m["otherData"]["steady_clock_epoch_us"], 1000.0);

  std::ofstream(parts[1]) << "{\"events\": []}";
  EXPECT_THROW(mergeTraces(parts, path), Error);
}

// --- Batches file -----------------------------------------------------------

TEST(BatchFile, ReadsCaptureLayout) {
  std::string path = tempPath("batches.safetensors");
  NamedTensors t;
  for (int i = 0; i < 3; ++i) {
    std::vector<at::Tensor> b = linearBatch(i);
    t.emplace_back("step" + std::to_string(i) + ".arg0", b[0]);
    t.emplace_back("step" + std::to_string(i) + ".arg1", b[1]);
  }
  writeSafetensors(path, t, {{"num_steps", "3"}, {"num_args", "2"}});
  BatchFile f = BatchFile::open(path);
  EXPECT_EQ(f.numSteps(), 3);
  EXPECT_EQ(f.numArgs(), 2);
  EXPECT_TRUE(at::equal(f.batch(4)[1], linearBatch(1)[1]));

  writeSafetensors(path, t, {{"num_steps", "3"}});
  EXPECT_CONTAINS(errorOf([&] { BatchFile::open(path); }),
                  "metadata has no 'num_args'");
  writeSafetensors(path, t, {{"num_steps", "2"}, {"num_args", "3"}});
  EXPECT_CONTAINS(errorOf([&] { BatchFile::open(path); }),
                  "no tensor 'step0.arg2'");
  writeSafetensors(path, t, {{"num_steps", "x3"}, {"num_args", "2"}});
  EXPECT_CONTAINS(errorOf([&] { BatchFile::open(path); }),
                  "metadata 'num_steps' is 'x3', not a non-negative integer");
}

// --- Reference checks -------------------------------------------------------

TEST(Check, LossTolerance) {
  EXPECT_TRUE(compareLoss(1.0, 1.0).ok);
  EXPECT_TRUE(compareLoss(2.00001, 2.0).ok);
  EXPECT_FALSE(compareLoss(2.0001, 2.0).ok);
  EXPECT_FALSE(compareLoss(std::nan(""), 2.0).ok);
  EXPECT_NEAR(compareLoss(1.5, 1.0).relError, 0.5, 1e-12);
  // max(atol, rtol * |want|).
  EXPECT_TRUE(compareLoss(2.0001, 2.0, 1e-4).ok);
  EXPECT_FALSE(compareLoss(2.0001, 2.0, 1e-5, 1e-5).ok);
  EXPECT_TRUE(compareLoss(2.0001, 2.0, 1e-5, 2e-4).ok);
  EXPECT_TRUE(compareLoss(1e-9, 0.0, 1e-5, 1e-8).ok);
  EXPECT_FALSE(compareLoss(1e-9, 0.0).ok);
  EXPECT_TRUE(compareLoss(2.0, 2.0, 0, 0).ok);
}

// A reference's losses are read from untrusted JSON: every parser failure,
// including a number too large for a double (an out_of_range, not a
// parse_error), is an Error naming the file, never an escaping exception.
TEST(Check, ReferenceThatIsNotJsonIsAnError) {
  std::string dir = tempPath("badref");
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  for (const char *text : {R"({"losses": [1e999]})", R"({"losses": [1.0)"}) {
    {
      std::ofstream j(dir + "/reference.json");
      j << text;
    }
    try {
      Reference::load(dir + "/reference.json");
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("reference.json: not valid JSON"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Check, TensorsWithTiedAlias) {
  Session s = linearSession();
  std::string dir = tempPath("ref");
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  {
    std::ofstream j(dir + "/reference.json");
    j << R"({"losses": [1.0], "tied_parameters": {"head.weight": "fc.weight"}})";
  }
  at::Tensor w = s.parameter("fc.weight").clone();
  w[0][0].add_(1e-3);
  writeSafetensors(dir + "/reference.safetensors",
                   {{"fc.weight", w},
                    {"fc.bias", s.parameter("fc.bias")},
                    {"calls", s.buffer("calls")},
                    {"extra", at::randn({1})}});
  Reference ref = Reference::load(dir + "/reference.json");
  EXPECT_EQ(ref.tiedParameters.at("head.weight"), "fc.weight");
  std::vector<TensorComparison> c = compareTensors(s, ref);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].name, "fc.weight");
  EXPECT_FALSE(c[0].ok);
  EXPECT_NEAR(c[0].maxAbsDiff, 1e-3, 1e-6);
  EXPECT_TRUE(c[1].ok);
  EXPECT_TRUE(c[2].ok);
  EXPECT_EQ(c[3].name, "extra");
  EXPECT_CONTAINS(c[3].problem, "the artifact has no parameter");
  EXPECT_EQ(c[0].failing, 1);
  EXPECT_EQ(c[0].numel, s.parameter("fc.weight").numel());
  EXPECT_NEAR(c[0].worstDiff, 1e-3, 1e-6);
  EXPECT_NEAR(c[0].worstRef, std::fabs(w[0][0].item<double>()), 1e-6);
  EXPECT_NEAR(c[0].toleranceUsed, 1e-3 / (1e-5 * std::max(1.0, c[0].worstRef)),
              0.1);
  EXPECT_EQ(c[1].failing, 0);

  // |a - b| <= max(atol, rtol * |b|): 1e-3 passes with atol 2e-3, and with
  // rtol 1 when |b| >= 1e-3.
  c = compareTensors(s, ref, 1e-5, 2e-3);
  EXPECT_TRUE(c[0].ok);
  EXPECT_NEAR(c[0].toleranceUsed, 0.5, 1e-3);
  c = compareTensors(s, ref, 0, 0);
  EXPECT_FALSE(c[0].ok);
  EXPECT_TRUE(c[1].ok); // equal tensors pass an exact comparison
  EXPECT_EQ(c[1].toleranceUsed, 0);
}

} // namespace
