//===- StepStatsTest.cpp - FLOP and byte arithmetic of loom-stats ---------===//

#include "loom/Analysis/StepStats.h"
#include "loom/InitAll.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace loom;

namespace {
class StepStatsTest : public ::testing::Test {
protected:
  StepStatsTest() {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  OwningOpRef<ModuleOp> parse(StringRef text) {
    return parseSourceString<ModuleOp>(text, &context);
  }

  MLIRContext context;
};

TEST_F(StepStatsTest, ElementBytes) {
  Builder b(&context);
  EXPECT_EQ(getElementBytes(b.getF32Type()), 4);
  EXPECT_EQ(getElementBytes(b.getBF16Type()), 2);
  EXPECT_EQ(getElementBytes(b.getI1Type()), 1);
  EXPECT_EQ(getElementBytes(b.getI64Type()), 8);
  EXPECT_EQ(getTensorBytes(RankedTensorType::get({3, 5}, b.getF16Type())), 30);
}

// Hand-computed: mm [4x16]x[16x8] = 2*4*8*16 = 1024; addmm with the same
// matrices also 1024 (bias adds are not counted, as in flop_counter);
// bmm [2x4x16]x[2x16x8] = 2*2*4*8*16 = 2048; conv 1x3x8x8 with 6x3x3x3,
// stride 1, no padding -> 1x6x6x6: 2 * 1 * (6*3*3*3) * 36 = 11664.
TEST_F(StepStatsTest, FlopsOfMatmulsAndConv) {
  auto module = parse(R"mlir(
    func.func @step(%a: tensor<4x16xf32> {loom.name = "a", loom.role = #loom.role<input>},
                    %b: tensor<16x8xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                    %c: tensor<8xf32> {loom.name = "bias", loom.role = #loom.role<parameter>},
                    %x: tensor<2x4x16xf32> {loom.name = "x", loom.role = #loom.role<input>},
                    %y: tensor<2x16x8xf32> {loom.name = "y", loom.role = #loom.role<input>},
                    %img: tensor<1x3x8x8xf32> {loom.name = "img", loom.role = #loom.role<input>},
                    %k: tensor<6x3x3x3xf32> {loom.name = "conv.weight", loom.role = #loom.role<parameter>})
        attributes {loom.step} {
      %0 = loom.aten "aten::mm.default"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "l1", loom.phase = #loom.phase<forward>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
      %1 = loom.aten "aten::addmm.default"(%c, %a, %b) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.module = "l1.sub", loom.phase = #loom.phase<backward>} : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
      %2 = loom.aten "aten::bmm.default"(%x, %y) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "l2", loom.phase = #loom.phase<forward>} : (tensor<2x4x16xf32>, tensor<2x16x8xf32>) -> tensor<2x4x8xf32>
      %3 = loom.aten "aten::convolution.default"(%img, %k) {args = [#loom.arg<0>, #loom.arg<1>, unit, [1, 1], [0, 0], [1, 1], false, [0, 0], 1], loom.module = "conv", loom.phase = #loom.phase<forward>} : (tensor<1x3x8x8xf32>, tensor<6x3x3x3xf32>) -> tensor<1x6x6x6xf32>
      %4 = loom.aten "aten::relu.default"(%3) {args = [#loom.arg<0>], loom.module = "conv", loom.phase = #loom.phase<forward>} : (tensor<1x6x6x6xf32>) -> tensor<1x6x6x6xf32>
      return
    }
  )mlir");
  ASSERT_TRUE(module);
  auto func = *module->getOps<func::FuncOp>().begin();
  StepStats stats(func);
  EXPECT_EQ(stats.flopsByModule.lookup("l1").forward, 1024);
  EXPECT_EQ(stats.flopsByModule.lookup("l1.sub").backward, 1024);
  EXPECT_EQ(stats.flopsByModule.lookup("l2").forward, 2048);
  EXPECT_EQ(stats.flopsByModule.lookup("conv").forward, 11664);
  EXPECT_EQ(stats.inclusiveFlops("l1").total(), 2048);
  EXPECT_EQ(stats.totalFlops.forward, 1024 + 2048 + 11664);
  EXPECT_EQ(stats.totalFlops.backward, 1024);
  EXPECT_EQ(stats.opsByPhase.lookup("forward"), 4);
  EXPECT_EQ(stats.opsByPhase.lookup("backward"), 1);
  // Parameters: 16*8 + 8 + 6*3*3*3 = 298 floats.
  EXPECT_EQ(stats.argsByRole.lookup("parameter").elements, 298);
  EXPECT_EQ(stats.argsByRole.lookup("parameter").bytes, 298 * 4);
  EXPECT_EQ(stats.argsByRole.lookup("parameter").count, 3);
}
// Hand-computed convolution backward FLOPs.
// Depthwise (groups 8): x [2,8,6,6], w [8,1,3,3], grad_out [2,8,4,4].
//   grad_input  = 2 * N2 * Cout8 * Cin/g1 * k9 * out16      = 4608
//   grad_weight = 2 * (8*1*9 weights) * (N2 * 4*4 positions) = 4608
// Transposed (stride 2): x [1,4,3,3], w [4,2,2,2], grad_out [1,2,6,6]:
//   forward = 2 * 1 * 4 * 2 * 4 * 9 = 576; each gradient costs the same.
TEST_F(StepStatsTest, FlopsOfConvolutionBackward) {
  auto module = parse(R"mlir(
    func.func @f(%g: tensor<2x8x4x4xf32>, %x: tensor<2x8x6x6xf32>, %w: tensor<8x1x3x3xf32>,
                 %tg: tensor<1x2x6x6xf32>, %tx: tensor<1x4x3x3xf32>, %tw: tensor<4x2x2x2xf32>) {
      %gi, %gw = loom.aten "aten::convolution_backward.default"(%g, %x, %w) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, unit, [1, 1], [0, 0], [1, 1], false, [0, 0], 8, [true, true, false]], returns = [0, 1, unit]} : (tensor<2x8x4x4xf32>, tensor<2x8x6x6xf32>, tensor<8x1x3x3xf32>) -> (tensor<2x8x6x6xf32>, tensor<8x1x3x3xf32>)
      %y = loom.aten "aten::convolution.default"(%tx, %tw) {args = [#loom.arg<0>, #loom.arg<1>, unit, [2, 2], [0, 0], [1, 1], true, [0, 0], 1]} : (tensor<1x4x3x3xf32>, tensor<4x2x2x2xf32>) -> tensor<1x2x6x6xf32>
      %ti, %tw2 = loom.aten "aten::convolution_backward.default"(%tg, %tx, %tw) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, unit, [2, 2], [0, 0], [1, 1], true, [0, 0], 1, [true, true, false]], returns = [0, 1, unit]} : (tensor<1x2x6x6xf32>, tensor<1x4x3x3xf32>, tensor<4x2x2x2xf32>) -> (tensor<1x4x3x3xf32>, tensor<4x2x2x2xf32>)
      return
    }
  )mlir");
  ASSERT_TRUE(module);
  SmallVector<AtenOp> ops;
  module->walk([&](AtenOp op) { ops.push_back(op); });
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(countFlops(ops[0]), 4608 + 4608);
  EXPECT_EQ(countFlops(ops[1]), 576);
  EXPECT_EQ(countFlops(ops[2]), 576 + 576);
}

// Attention q,k,v [2,4,16,8]: forward two bmms 2*8*16*16*(8+8) = 65536;
// backward five (scores recomputed) 2*8*16*16*(3*8+2*8) = 163840.
TEST_F(StepStatsTest, FlopsOfAttention) {
  auto module = parse(R"mlir(
    func.func @f(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>, %go: tensor<2x4x16x8xf32>) {
      %o, %lse = loom.aten "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %k, %v) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, 0.0, true]} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
      %dq, %dk, %dv = loom.aten "aten::_scaled_dot_product_flash_attention_for_cpu_backward.default"(%go, %q, %k, %v, %o, %lse) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, #loom.arg<3>, #loom.arg<4>, #loom.arg<5>, 0.0, true]} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
      return
    }
  )mlir");
  ASSERT_TRUE(module);
  SmallVector<AtenOp> ops;
  module->walk([&](AtenOp op) { ops.push_back(op); });
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(countFlops(ops[0]), 65536);
  EXPECT_EQ(countFlops(ops[1]), 163840);
}
} // namespace
