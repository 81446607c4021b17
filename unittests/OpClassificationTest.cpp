//===- OpClassificationTest.cpp - Which ops are random, views, collectives ===//

#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/InitAll.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace loom;

namespace {

// Every op that draws random numbers, under the names the importer writes
// (with an overload), and the in-place and functional variants: the passes
// that move or recompute ops must all leave these alone.
TEST(OpClassificationTest, RandomOps) {
  for (StringRef name : {"aten::rand.default",
                         "aten::rand_like.default",
                         "aten::randn",
                         "aten::randn_like.default",
                         "aten::randint.low",
                         "aten::randint_like",
                         "aten::randperm.default",
                         "aten::random_.from",
                         "aten::bernoulli.p",
                         "aten::bernoulli_.float",
                         "aten::bernoulli.default",
                         "aten::native_dropout.default",
                         "aten::dropout.default",
                         "aten::feature_alpha_dropout_",
                         "aten::_fused_dropout.default",
                         "aten::normal.Tensor_float",
                         "aten::normal_.default",
                         "aten::normal_functional.default",
                         "aten::uniform.default",
                         "aten::uniform_.default",
                         "aten::exponential_.default",
                         "aten::geometric_",
                         "aten::cauchy_",
                         "aten::log_normal_",
                         "aten::multinomial.default",
                         "aten::poisson.default",
                         "aten::rrelu_with_noise.default"})
    EXPECT_TRUE(isRandomAtenOp(name)) << name.str();
}

// The old substring tests took these for random: the backward of dropout
// replays its saved mask, and the others only share letters.
TEST(OpClassificationTest, NotRandomOps) {
  for (StringRef name :
       {"aten::native_dropout_backward.default", "aten::mm.default",
        "aten::grid_sampler_2d.default", "aten::randomize",
        "aten::_to_copy.default", "aten::native_layer_norm.default",
        "aten::empty_like.default", "prims::rand", "rand_like"})
    EXPECT_FALSE(isRandomAtenOp(name)) << name.str();
}

TEST(OpClassificationTest, ViewOps) {
  for (StringRef name :
       {"aten::view.default", "aten::_unsafe_view.default", "aten::t.default",
        "aten::permute.default", "aten::transpose.int", "aten::expand.default",
        "aten::alias.default", "aten::slice.Tensor", "aten::select.int",
        "aten::unsqueeze.default", "aten::squeeze.dim", "aten::detach.default",
        "aten::as_strided.default", "aten::view"})
    EXPECT_TRUE(isViewAtenOp(name)) << name.str();
  for (StringRef name :
       {"aten::reshape.default", "aten::clone.default", "aten::tanh.default",
        "aten::view_copy.default", "aten::t_.default", "aten::contiguous"})
    EXPECT_FALSE(isViewAtenOp(name)) << name.str();
}

TEST(OpClassificationTest, InPlaceOps) {
  for (StringRef name :
       {"aten::add_.Tensor", "aten::bernoulli_.float", "aten::copy_.default",
        "aten::normal_", "aten::__iand__.Tensor", "aten::t_"})
    EXPECT_TRUE(isInPlaceAtenOp(name)) << name.str();
  for (StringRef name :
       {"aten::add.Tensor", "aten::_to_copy.default", "aten::__and__.Tensor",
        "aten::_unsafe_view.default", "aten::bernoulli.p", "aten::_"})
    EXPECT_FALSE(isInPlaceAtenOp(name)) << name.str();
}

// `layers.1` vs `layers.10`: prefixes match whole components only.
TEST(OpClassificationTest, ModulePaths) {
  EXPECT_TRUE(isInModule("layers.1", "layers.1"));
  EXPECT_TRUE(isInModule("layers.1.attn.wq", "layers.1"));
  EXPECT_TRUE(isInModule("layers.1", "layers"));
  EXPECT_TRUE(isInModule("layers.1", ""));
  EXPECT_TRUE(isInModule("", ""));
  EXPECT_FALSE(isInModule("layers.10", "layers.1"));
  EXPECT_FALSE(isInModule("layers.10.attn", "layers.1"));
  EXPECT_FALSE(isInModule("layers", "layers.1"));
  EXPECT_FALSE(isInModule("", "layers"));
  EXPECT_FALSE(isInModule("layersx", "layers"));

  EXPECT_EQ(getCommonModule({"layers.1.attn", "layers.10"}), "layers");
  EXPECT_EQ(getCommonModule({"layers.1.attn", "layers.1.mlp"}), "layers.1");
  EXPECT_EQ(getCommonModule({"layers.1", "layers.1"}), "layers.1");
  EXPECT_EQ(getCommonModule({"layers.1", "head"}), "");
  EXPECT_EQ(getCommonModule({"layers.1", ""}), "");
  EXPECT_EQ(getCommonModule({}), "");

  EXPECT_EQ(getOwnerModule("layers.1.attn.wq.weight"), "layers.1.attn.wq");
  EXPECT_EQ(getOwnerModule("bias"), "");
}

// The blocks fully_shard and checkpoint_wrapper default to: the blocks of
// the container with the most numbered children, whatever it is named, each
// once in first order, only where a block owns a tensor; tied containers all
// count; with minBlocks, a container needs that many.
TEST(OpClassificationTest, RepeatedBlocks) {
  EXPECT_EQ(
      getLayerBlocks({"tok.weight", "layers.1.attn.wq.weight",
                      "layers.0.ln.bias", "layers.1.ln.bias",
                      "model.layers.10.w", "layers.x.w", "layers.2"}),
      (SmallVector<std::string>{"layers.1", "layers.0"}));
  EXPECT_EQ(getLayerBlocks({"stack.0.w", "stack.1.w", "stack.2.w",
                            "head.0.w", "out.bias"}),
            (SmallVector<std::string>{"stack.0", "stack.1", "stack.2"}));
  // A root Sequential: its blocks are `0`, `1`.
  EXPECT_EQ(getLayerBlocks({"0.weight", "0.bias", "1.weight"}),
            (SmallVector<std::string>{"0", "1"}));
  // An encoder's and a decoder's layers, tied at two each.
  EXPECT_EQ(getLayerBlocks({"enc.layers.0.w", "enc.layers.1.w",
                            "dec.layers.0.w", "dec.layers.1.w"}),
            (SmallVector<std::string>{"enc.layers.0", "enc.layers.1",
                                      "dec.layers.0", "dec.layers.1"}));
  EXPECT_TRUE(getLayerBlocks({"fc1.weight", "head.bias"}).empty());
  EXPECT_TRUE(getRepeatedBlocks({"head.0.w", "fc.bias"}, 2).empty());
  EXPECT_EQ(getRepeatedBlocks({"head.0.w", "fc.bias"}),
            (SmallVector<std::string>{"head.0"}));
}

class OpClassificationIRTest : public ::testing::Test {
protected:
  OpClassificationIRTest() {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  MLIRContext context;
};

TEST_F(OpClassificationIRTest, CollectiveKindsAndAtenOps) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"mlir(
    loom.mesh @dp shape [2] axes ["shard"]
    func.func @f(%x: tensor<8xf32>) {
      %0 = loom.all_gather_start %x on @dp axes ["shard"] dim 0 : tensor<8xf32> -> !loom.future<tensor<16xf32>>
      %1 = loom.wait %0 : !loom.future<tensor<16xf32>> -> tensor<16xf32>
      %2 = loom.reduce_scatter_start %x on @dp axes ["shard"] dim 0 reduce <sum> : tensor<8xf32> -> !loom.future<tensor<4xf32>>
      %3 = loom.wait %2 : !loom.future<tensor<4xf32>> -> tensor<4xf32>
      %4 = loom.all_reduce_start %x on @dp axes ["shard"] reduce <avg> : tensor<8xf32> -> !loom.future<tensor<8xf32>>
      %5 = loom.wait %4 : !loom.future<tensor<8xf32>> -> tensor<8xf32>
      %6 = loom.all_slice_start %x on @dp axes ["shard"] dim 0 : tensor<8xf32> -> !loom.future<tensor<4xf32>>
      %7 = loom.wait %6 : !loom.future<tensor<4xf32>> -> tensor<4xf32>
      %8:2 = loom.aten "aten::native_dropout.default"(%x) {args = [#loom.arg<0>, 0.5, true]} : (tensor<8xf32>) -> (tensor<8xf32>, tensor<8xi1>)
      %9 = loom.aten "aten::view.default"(%x) {args = [#loom.arg<0>, [2, 4]]} : (tensor<8xf32>) -> tensor<2x4xf32>
      return
    }
  )mlir",
                                                             &context);
  ASSERT_TRUE(module);
  // The first op of each name.
  llvm::StringMap<Operation *> ops;
  module->walk([&](Operation *op) {
    ops.try_emplace(op->getName().getStringRef(), op);
  });
  EXPECT_EQ(getCollectiveKind(ops["loom.all_gather_start"]),
            CollectiveKind::allGather);
  EXPECT_EQ(getCollectiveKind(ops["loom.reduce_scatter_start"]),
            CollectiveKind::reduceScatter);
  EXPECT_EQ(getCollectiveKind(ops["loom.all_reduce_start"]),
            CollectiveKind::allReduce);
  // Each rank keeps its own slice: nothing crosses the network.
  EXPECT_EQ(getCollectiveKind(ops["loom.all_slice_start"]), std::nullopt);
  EXPECT_EQ(getCollectiveKind(ops["loom.wait"]), std::nullopt);
  EXPECT_TRUE(isGroupCollective(CollectiveKind::broadcast));
  EXPECT_FALSE(isGroupCollective(CollectiveKind::sendRecv));
  EXPECT_EQ(stringifyCollectiveKind(CollectiveKind::reduceScatter),
            "reduce_scatter");

  Operation *dropout = nullptr, *view = nullptr;
  module->walk([&](AtenOp op) {
    (op.getOpName() == "aten::native_dropout" ? dropout : view) = op;
  });
  ASSERT_TRUE(dropout && view);
  EXPECT_TRUE(isRandomAtenOp(dropout));
  EXPECT_FALSE(isViewAtenOp(dropout));
  EXPECT_TRUE(isViewAtenOp(view));
  EXPECT_FALSE(isRandomAtenOp(view));
  // Only `loom.aten` ops are ATen ops.
  EXPECT_FALSE(isRandomAtenOp(ops["loom.all_gather_start"]));
  EXPECT_FALSE(isViewAtenOp(ops["loom.wait"]));
}

} // namespace
