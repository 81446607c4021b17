//===- CostModelTest.cpp - Alpha-beta formulas, placement, specs, replay --===//

#include "loom/Analysis/CostModel.h"
#include "loom/Analysis/Simulator.h"
#include "loom/InitAll.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace loom;

namespace {

constexpr double kTol = 1e-15;

// Ring all-gather / reduce-scatter: (p-1) alpha + (p-1)/p * S / beta.
// p = 4, S = 16384 B, alpha = 1 us, beta = 1e10 B/s: 3 us + 1.2288 us.
TEST(AlphaBeta, RingAllGatherAndReduceScatter) {
  for (CollectiveKind k :
       {CollectiveKind::allGather, CollectiveKind::reduceScatter}) {
    EXPECT_NEAR(
        alphaBetaTime(k, CollectiveAlgorithm::ring, 4, 16384, 1e-6, 1e10),
        4.2288e-6, kTol);
    // NCCL has no tree all-gather or reduce-scatter: tree is ring.
    EXPECT_NEAR(
        alphaBetaTime(k, CollectiveAlgorithm::tree, 4, 16384, 1e-6, 1e10),
        4.2288e-6, kTol);
  }
}

// Ring all-reduce: 2(p-1) alpha + 2(p-1)/p * S / beta; tree: 2 ceil(log2 p)
// alpha + 2 S / beta. p = 8, S = 8e6 B, alpha = 1 us, beta = 1e9 B/s:
// ring 14 us + 14 ms, tree 6 us + 16 ms; auto picks ring. For S = 8 B:
// ring 14 us + 14 ns, tree 6 us + 16 ns; auto picks tree.
TEST(AlphaBeta, AllReduceRingTreeAuto) {
  auto t = [](CollectiveAlgorithm a, double bytes) {
    return alphaBetaTime(CollectiveKind::allReduce, a, 8, bytes, 1e-6, 1e9);
  };
  EXPECT_NEAR(t(CollectiveAlgorithm::ring, 8e6), 14e-6 + 0.014, kTol);
  EXPECT_NEAR(t(CollectiveAlgorithm::tree, 8e6), 6e-6 + 0.016, kTol);
  EXPECT_NEAR(t(CollectiveAlgorithm::autoSelect, 8e6), 14e-6 + 0.014, kTol);
  EXPECT_NEAR(t(CollectiveAlgorithm::ring, 8), 14e-6 + 14e-9, kTol);
  EXPECT_NEAR(t(CollectiveAlgorithm::tree, 8), 6e-6 + 16e-9, kTol);
  EXPECT_NEAR(t(CollectiveAlgorithm::autoSelect, 8), 6e-6 + 16e-9, kTol);
  // ceil(log2 5) = 3 levels.
  EXPECT_NEAR(alphaBetaTime(CollectiveKind::allReduce,
                            CollectiveAlgorithm::tree, 5, 0, 1e-6, 1e9),
              6e-6, kTol);
}

// Broadcast: ring (p-1) alpha + S / beta, tree ceil(log2 p) alpha + S/beta;
// send/recv: alpha + S / beta; one rank: nothing to do.
TEST(AlphaBeta, BroadcastSendAndSingleRank) {
  EXPECT_NEAR(alphaBetaTime(CollectiveKind::broadcast,
                            CollectiveAlgorithm::ring, 4, 1e6, 1e-6, 1e9),
              3e-6 + 1e-3, kTol);
  EXPECT_NEAR(alphaBetaTime(CollectiveKind::broadcast,
                            CollectiveAlgorithm::tree, 4, 1e6, 1e-6, 1e9),
              2e-6 + 1e-3, kTol);
  EXPECT_NEAR(alphaBetaTime(CollectiveKind::sendRecv, CollectiveAlgorithm::ring,
                            2, 1e6, 1e-6, 1e9),
              1e-6 + 1e-3, kTol);
  EXPECT_EQ(alphaBetaTime(CollectiveKind::allReduce, CollectiveAlgorithm::ring,
                          1, 1e6, 1e-6, 1e9),
            0.0);
}

// Mesh [2, 4] (replicate x shard), ranks row-major: shard groups are
// {0,1,2,3} and {4,5,6,7}, replicate groups {0,4}, {1,5}, ...
TEST(Placement, GroupsOverNodes) {
  auto place = [](ArrayRef<int64_t> shape, ArrayRef<unsigned> axes,
                  Topology t) { return placeGroup(shape, axes, t); };
  // 2 nodes of 4: shard groups stay inside a node, replicate groups span 2.
  auto shard = place({2, 4}, {1}, {2, 4});
  ASSERT_TRUE(shard);
  EXPECT_EQ(shard->size, 4);
  EXPECT_EQ(shard->nodesSpanned, 1);
  auto replicate = place({2, 4}, {0}, {2, 4});
  ASSERT_TRUE(replicate);
  EXPECT_EQ(replicate->size, 2);
  EXPECT_EQ(replicate->nodesSpanned, 2);
  // 4 nodes of 2: a shard group {0,1,2,3} spans 2 nodes; both axes 4.
  EXPECT_EQ(place({2, 4}, {1}, {4, 2})->nodesSpanned, 2);
  auto all = place({2, 4}, {0, 1}, {4, 2});
  EXPECT_EQ(all->size, 8);
  EXPECT_EQ(all->nodesSpanned, 4);
  // Everything on one big node.
  EXPECT_EQ(place({2, 4}, {0, 1}, {1, 8})->nodesSpanned, 1);
}

TEST(Placement, MeshLargerThanTopology) {
  std::string error;
  EXPECT_FALSE(placeGroup({8}, {0}, {1, 4}, &error));
  EXPECT_EQ(error,
            "the mesh has 8 ranks but 1 node(s) of 4 device(s) hold only 4");
}

constexpr const char *kSpec = R"json({
  "name": "test",
  "source": "unit test",
  "peak_flops": {"fp32": 1e12, "tf32": 2e12, "bf16": 4e12, "fp16": 4e12},
  "memory_bandwidth": 1e11,
  "intra_node": {"bandwidth": 1e10, "latency": 1e-6},
  "inter_node": {"bandwidth": 1e9, "latency": 1e-5},
  "devices_per_node": 4,
  "efficiency": {"compute": 0.5, "memory": 0.25, "link": 0.5},
  "op_overhead": 1e-6
})json";

TEST(DeviceSpec, ParsesAndAppliesEfficiency) {
  llvm::Expected<DeviceSpec> spec = DeviceSpec::parse(kSpec, "test.json");
  ASSERT_TRUE(bool(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->name, "test");
  EXPECT_EQ(spec->peakFlops(Precision::tf32), 2e12);
  EXPECT_EQ(spec->devicesPerNode, 4);
  EXPECT_EQ(spec->viewOverhead, 0.0); // optional, default 0
  CostModel model(*spec);
  // 1e9 FLOP at 0.5 * 1e12: 2 ms; 1e6 B at 0.25 * 1e11: 40 us; + 1 us.
  EXPECT_NEAR(model.rooflineTime(1e9, 1e6, Precision::fp32), 2e-3 + 1e-6, kTol);
  // 1e6 FLOP at 0.5 * 4e12: 0.5 us; 1e6 B: 40 us (memory-bound); + 1 us.
  EXPECT_NEAR(model.rooflineTime(1e6, 1e6, Precision::bf16), 41e-6, kTol);
  // A ring all-gather of 16384 B over 4 ranks in one node at half the
  // link: 3 us + 0.75 * 16384 / 5e9 = 3 us + 2.4576 us; spanning 2 nodes:
  // 30 us + 0.75 * 16384 / 5e8 = 30 us + 24.576 us.
  CollectiveCost intra = model.collectiveCost(CollectiveKind::allGather, 16384,
                                              GroupPlacement{4, 1});
  EXPECT_FALSE(intra.interNode);
  EXPECT_NEAR(intra.seconds, 5.4576e-6, kTol);
  CollectiveCost inter = model.collectiveCost(CollectiveKind::allGather, 16384,
                                              GroupPlacement{4, 2});
  EXPECT_TRUE(inter.interNode);
  EXPECT_NEAR(inter.seconds, 54.576e-6, kTol);
  // A pipeline transfer is one message between two ranks, whatever the
  // size of its group over "pp": 10 us + 16384 / 5e8 across nodes.
  CollectiveCost transfer = model.collectiveCost(CollectiveKind::sendRecv,
                                                 16384, GroupPlacement{8, 3});
  EXPECT_EQ(transfer.placement.size, 2);
  EXPECT_EQ(transfer.placement.nodesSpanned, 2);
  EXPECT_NEAR(transfer.seconds, 10e-6 + 32.768e-6, kTol);
}

std::string parseError(StringRef text) {
  llvm::Expected<DeviceSpec> spec = DeviceSpec::parse(text, "s.json");
  EXPECT_FALSE(bool(spec));
  return spec ? "" : llvm::toString(spec.takeError());
}

TEST(DeviceSpec, LocatedErrors) {
  std::string text = kSpec;
  auto replaced = [&](StringRef from, StringRef to) {
    std::string t = text;
    t.replace(t.find(from.str()), from.size(), to.str());
    return t;
  };
  EXPECT_EQ(parseError(replaced("\"peak_flops\"", "\"peak_flop\"")),
            "s.json:4:3: at 'peak_flop': unknown field (expected one of: "
            "name, source, peak_flops, memory_bandwidth, intra_node, "
            "inter_node, devices_per_node, efficiency, op_overhead, "
            "view_overhead)");
  EXPECT_EQ(parseError(replaced("\"bf16\": 4e12", "\"bf16\": \"fast\"")),
            "s.json:4:46: at 'peak_flops.bf16': expected a number");
  EXPECT_EQ(parseError(replaced("\"devices_per_node\": 4",
                                "\"devices_per_node\": 2.5")),
            "s.json:8:3: at 'devices_per_node': expected an integer");
  EXPECT_EQ(parseError(replaced("\"memory_bandwidth\": 1e11",
                                "\"memory_bandwidth\": 0")),
            "s.json:5:3: at 'memory_bandwidth': 0 is out of range: expected "
            "(0, inf]");
  EXPECT_EQ(parseError("[1, 2]"),
            "s.json: expected a JSON object at the top level");
  EXPECT_EQ(parseError("{\"name\": }"),
            "s.json:1:10: invalid JSON: Invalid JSON value");
}

TEST(DeviceSpec, UnknownName) {
  llvm::Expected<DeviceSpec> spec =
      DeviceSpec::load("no-such-device", "/nonexistent-dir");
  ASSERT_FALSE(bool(spec));
  EXPECT_EQ(llvm::toString(spec.takeError()),
            "unknown device 'no-such-device' (known in /nonexistent-dir: "
            "none; or give the path of a spec file)");
}

class SimulatorTest : public ::testing::Test {
protected:
  SimulatorTest() {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    llvm::Expected<DeviceSpec> spec = DeviceSpec::parse(R"json({
      "name": "round", "source": "unit test",
      "peak_flops": {"fp32": 1e12, "tf32": 2e12, "bf16": 4e12, "fp16": 4e12},
      "memory_bandwidth": 1e11,
      "intra_node": {"bandwidth": 1e10, "latency": 1e-6},
      "inter_node": {"bandwidth": 1e9, "latency": 1e-5},
      "devices_per_node": 4,
      "efficiency": {"compute": 1, "memory": 1, "link": 1},
      "op_overhead": 1e-6, "view_overhead": 5e-7})json",
                                                        "round.json");
    EXPECT_TRUE(bool(spec));
    CostModelOptions options;
    options.topology = {1, 4};
    model.emplace(*spec, options);
  }

  OwningOpRef<ModuleOp> parse(StringRef text) {
    return parseSourceString<ModuleOp>(text, &context);
  }

  /// The ops of the step's body but its terminator, in block order.
  static SmallVector<Operation *> bodyOps(func::FuncOp step) {
    SmallVector<Operation *> ops;
    for (Operation &op : step.getBody().front().without_terminator())
      ops.push_back(&op);
    return ops;
  }

  MLIRContext context;
  std::optional<CostModel> model;
};

// The `early` step of test/Analysis/simulate.mlir: the gather starts before
// the mm (5.194304 us) and is hidden. Replayed with the start moved after
// the mm, the wait blocks for the whole gather (4.2288 us).
constexpr const char *kEarly = R"mlir(
  loom.mesh @dp shape [4] axes ["shard"]
  func.func @step(%w: tensor<1024xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                  %a: tensor<128x128xf32> {loom.name = "a", loom.role = #loom.role<input>})
      -> (tensor<128x128xf32> {loom.role = #loom.role<loss>}, tensor<4096xf32> {loom.role = #loom.role<output>})
      attributes {loom.step} {
    %f = loom.all_gather_start %w on @dp axes ["shard"] dim 0 : tensor<1024xf32> -> !loom.future<tensor<4096xf32>>
    %m = loom.aten "aten::mm.default"(%a, %a) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
    %v = loom.aten "aten::view.default"(%m) {args = [#loom.arg<0>, [16384]]} : (tensor<128x128xf32>) -> tensor<16384xf32>
    %g = loom.wait %f : !loom.future<tensor<4096xf32>> -> tensor<4096xf32>
    return %m, %g : tensor<128x128xf32>, tensor<4096xf32>
  })mlir";

TEST_F(SimulatorTest, ReplaysBlockOrderAndExplicitOrders) {
  auto module = parse(kEarly);
  ASSERT_TRUE(module);
  auto step = *module->getOps<func::FuncOp>().begin();
  SimOptions options;
  options.recordTimeline = true;
  FailureOr<StepSimulator> sim = StepSimulator::create(step, *model, options);
  ASSERT_TRUE(succeeded(sim));

  SmallVector<Operation *> ops = bodyOps(step);
  Operation *start = ops[0], *mm = ops[1], *view = ops[2], *wait = ops[3];
  EXPECT_NEAR(sim->getOpCost(mm).seconds, 5.194304e-6, kTol);
  EXPECT_TRUE(sim->getOpCost(mm).computeBound);
  EXPECT_TRUE(sim->getOpCost(view).isView);
  EXPECT_NEAR(sim->getOpCost(view).seconds, 5e-7, kTol);
  EXPECT_NEAR(sim->getCollectiveCost(start).seconds, 4.2288e-6, kTol);
  EXPECT_EQ(sim->getStream(start), 1u);

  // Block order: hidden.
  SimulationResult early = sim->run();
  EXPECT_NEAR(early.stepTime, 5.694304e-6, kTol);
  EXPECT_NEAR(early.exposedCommTime, 0, kTol);
  EXPECT_NEAR(early.hiddenCommTime(), 4.2288e-6, kTol);
  ASSERT_EQ(early.timeline.size(), 3u); // start, mm, view (wait blocks 0)

  // The start after the mm and the view: exposed.
  FailureOr<SimulationResult> late = sim->run({mm, view, start, wait});
  ASSERT_TRUE(succeeded(late));
  EXPECT_NEAR(late->stepTime, 5.694304e-6 + 4.2288e-6, kTol);
  EXPECT_NEAR(late->exposedCommTime, 4.2288e-6, kTol);
  // The gathered buffer is allocated later, the peak is the same here (the
  // mm result and the buffer are both returned): 65536 + 16384.
  ASSERT_TRUE(late->memory);
  EXPECT_EQ(late->memory->peakActivationBytes, 81920);
}

TEST_F(SimulatorTest, RejectsOrdersThatAreNotTopological) {
  auto module = parse(kEarly);
  ASSERT_TRUE(module);
  auto step = *module->getOps<func::FuncOp>().begin();
  FailureOr<StepSimulator> sim = StepSimulator::create(step, *model);
  ASSERT_TRUE(succeeded(sim));
  SmallVector<Operation *> ops = bodyOps(step);
  std::string messages;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    messages += d.str() + "\n";
    return success();
  });
  // The wait before its start.
  EXPECT_TRUE(failed(sim->run({ops[3], ops[0], ops[1], ops[2]})));
  // An op missing.
  EXPECT_TRUE(failed(sim->run({ops[0], ops[1], ops[3]})));
  // An op twice.
  EXPECT_TRUE(failed(sim->run({ops[0], ops[1], ops[1], ops[3]})));
  EXPECT_EQ(messages,
            "'loom.wait' op is ordered before the 'loom.all_gather_start' "
            "that defines its operand #0\n"
            "simulation order has 3 ops, the body has 4\n"
            "'loom.aten' op appears twice in the simulation order\n");
}

// A recompute region is one node of the order: it costs its body (mm
// 5.194304 us + relu 131072 B / 1e11 + 1 us = 2.31072 us), its body's ops
// are timeline events of their own, and its body's transient (the mm and
// relu results, 2 * 65536 B, with the gathered 16384 B) is in the peak.
constexpr const char *kRecompute = R"mlir(
  loom.mesh @dp shape [4] axes ["shard"]
  func.func @step(%w: tensor<1024xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                  %a: tensor<128x128xf32> {loom.name = "a", loom.role = #loom.role<input>})
      -> (tensor<128x128xf32> {loom.role = #loom.role<loss>}, tensor<4096xf32> {loom.role = #loom.role<output>})
      attributes {loom.step} {
    %f = loom.all_gather_start %w on @dp axes ["shard"] dim 0 : tensor<1024xf32> -> !loom.future<tensor<4096xf32>>
    %r = loom.recompute "blk" (%a) : (tensor<128x128xf32>) -> tensor<128x128xf32> {
    ^bb0(%x: tensor<128x128xf32>):
      %m = loom.aten "aten::mm.default"(%x, %x) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
      %h = loom.aten "aten::relu.default"(%m) {args = [#loom.arg<0>]} : (tensor<128x128xf32>) -> tensor<128x128xf32>
      loom.yield %h : tensor<128x128xf32>
    } {loom.module = "blk", loom.phase = #loom.phase<backward>}
    %g = loom.wait %f : !loom.future<tensor<4096xf32>> -> tensor<4096xf32>
    return %r, %g : tensor<128x128xf32>, tensor<4096xf32>
  })mlir";

TEST_F(SimulatorTest, RecomputeRegionIsOneNode) {
  auto module = parse(kRecompute);
  ASSERT_TRUE(module);
  auto step = *module->getOps<func::FuncOp>().begin();
  SimOptions options;
  options.recordTimeline = true;
  FailureOr<StepSimulator> sim = StepSimulator::create(step, *model, options);
  ASSERT_TRUE(succeeded(sim));
  SmallVector<Operation *> ops = bodyOps(step);
  Operation *start = ops[0], *region = ops[1], *wait = ops[2];
  const OpCost &cost = sim->getOpCost(region);
  EXPECT_NEAR(cost.seconds, 7.505024e-6, kTol);
  EXPECT_EQ(cost.flops, 4194304);
  EXPECT_TRUE(cost.computeBound); // its longest op, the mm

  SimulationResult hidden = sim->run();
  EXPECT_NEAR(hidden.stepTime, 7.505024e-6, kTol);
  EXPECT_NEAR(hidden.recomputeTime, 7.505024e-6, kTol);
  EXPECT_EQ(hidden.recomputeFlops, 4194304);
  EXPECT_EQ(hidden.numOps, 2);
  EXPECT_EQ(hidden.numRecomputeOps, 2);
  EXPECT_EQ(hidden.numRecomputeRegions, 1);
  ASSERT_EQ(hidden.timeline.size(), 3u); // start, mm, relu
  EXPECT_EQ(hidden.timeline[1].region, region);
  EXPECT_NEAR(hidden.timeline[2].start, 5.194304e-6, kTol);
  ASSERT_TRUE(hidden.memory);
  EXPECT_EQ(hidden.memory->peakActivationBytes, 2 * 65536 + 16384);
  EXPECT_EQ(hidden.memory->peakOp->getParentOp(), region);

  // The gather after the region: exposed.
  FailureOr<SimulationResult> late = sim->run({region, start, wait});
  ASSERT_TRUE(succeeded(late));
  EXPECT_NEAR(late->exposedCommTime, 4.2288e-6, kTol);

  // The body's ops are not ops of the order.
  std::string messages;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    messages += d.str() + "\n";
    return success();
  });
  Operation *mm = &cast<RecomputeOp>(region).getBodyBlock().front();
  EXPECT_TRUE(failed(sim->run({start, mm, region, wait})));
  EXPECT_EQ(messages,
            "simulation order entry 1 is not an op of the step's body\n");
}

// With tf32 allowed an fp32 mm runs at the tf32 peak (2e12): the 128^3 mm
// of 4194304 FLOP takes 2.097152 us of compute against 1.96608 us of
// traffic (196608 B / 1e11), still compute-bound: 3.097152 us with the
// overhead.
TEST_F(SimulatorTest, Tf32Matmuls) {
  auto module = parse(kEarly);
  ASSERT_TRUE(module);
  auto step = *module->getOps<func::FuncOp>().begin();
  Operation *mm = &*std::next(step.getBody().front().begin());
  CostModelOptions options = model->getOptions();
  options.allowTf32 = true;
  CostModel tf32(model->getSpec(), options);
  OpCost cost = tf32.opCost(mm);
  EXPECT_EQ(cost.precision, Precision::tf32);
  EXPECT_TRUE(cost.computeBound);
  EXPECT_NEAR(cost.seconds, 3.097152e-6, kTol);
  EXPECT_EQ(model->opCost(mm).precision, Precision::fp32);
}

// AdamW (weight decay 0.01) on a 1024-float parameter: PyTorch's
// single-tensor update moves 21 parameter-sized tensors (mul_ 2, lerp_ 3,
// mul_+addcmul_ 6, sqrt/div/add_ 6, addcdiv_ 4) in 8 kernels:
// 21 * 4096 B / 1e11 B/s + 8 us.
TEST_F(SimulatorTest, OptimizerUpdateTraffic) {
  auto module = parse(R"mlir(
    func.func @step(%w: tensor<1024xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                    %m: tensor<1024xf32> {loom.name = "w.exp_avg", loom.role = #loom.role<optimizer_state>, loom.target = "w"},
                    %v: tensor<1024xf32> {loom.name = "w.exp_avg_sq", loom.role = #loom.role<optimizer_state>, loom.target = "w"},
                    %g: tensor<1024xf32> {loom.name = "x", loom.role = #loom.role<input>})
        -> (tensor<1024xf32> {loom.role = #loom.role<param_update>, loom.target = "w"},
            tensor<1024xf32> {loom.role = #loom.role<state_update>, loom.target = "w.exp_avg"},
            tensor<1024xf32> {loom.role = #loom.role<state_update>, loom.target = "w.exp_avg_sq"})
        attributes {loom.step} {
      %w1, %s:2 = loom.optimizer_update #loom.adamw<> param %w grad %g state [%m, %v] : tensor<1024xf32>
      return %w1, %s#0, %s#1 : tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>
    })mlir");
  ASSERT_TRUE(module);
  auto step = *module->getOps<func::FuncOp>().begin();
  Operation *update = &step.getBody().front().front();
  OpCost cost = model->opCost(update);
  EXPECT_EQ(cost.bytes, 21 * 4096.0);
  EXPECT_NEAR(cost.seconds, 21 * 4096.0 / 1e11 + 8e-6, kTol);
}

} // namespace
