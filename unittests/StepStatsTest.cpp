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
} // namespace
