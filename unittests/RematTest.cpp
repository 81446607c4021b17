//===- RematTest.cpp - applyRecompute under every choice of saved ops -----===//

#include "loom/Transforms/Remat.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/InitAll.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/StringMap.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace loom;

namespace {

// Two blocks, as a captured step has them: views of the weights, matmuls,
// a dropout, a residual add, and backward reading forward values directly
// and through views.
constexpr const char *kStep = R"mlir(
func.func @step(%w0: tensor<8x8xf32> {loom.name = "layers.0.fc.weight", loom.role = #loom.role<parameter>},
                %w1: tensor<8x8xf32> {loom.name = "layers.1.fc.weight", loom.role = #loom.role<parameter>},
                %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.fc.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.fc.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h0 = loom.aten "aten::mm.default"(%x, %t0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r0 = loom.aten "aten::relu.default"(%h0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d0 = loom.aten "aten::detach.default"(%r0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n0, %m0 = loom.aten "aten::native_dropout.default"(%r0) {args = [#loom.arg<0>, 5.000000e-01, true], loom.module = "layers.0.drop", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  %y0 = loom.aten "aten::add.Tensor"(%n0, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h1 = loom.aten "aten::mm.default"(%y0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r1 = loom.aten "aten::relu.default"(%h1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d1 = loom.aten "aten::detach.default"(%r1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = loom.aten "aten::sum.default"(%r1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %ge = loom.aten "aten::expand.default"(%g) {args = [#loom.arg<0>, [4, 8]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<4x8xf32>
  %gr1 = loom.aten "aten::threshold_backward.default"(%ge, %d1) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr1t = loom.aten "aten::t.default"(%gr1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw1 = loom.aten "aten::mm.default"(%gr1t, %y0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %tt1 = loom.aten "aten::t.default"(%t1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gy0 = loom.aten "aten::mm.default"(%gr1, %tt1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gn0 = loom.aten "aten::native_dropout_backward.default"(%gy0, %m0) {args = [#loom.arg<0>, #loom.arg<1>, 2.000000e+00], loom.module = "layers.0.drop", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xi1>) -> tensor<4x8xf32>
  %gr0 = loom.aten "aten::threshold_backward.default"(%gn0, %d0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr0t = loom.aten "aten::t.default"(%gr0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw0 = loom.aten "aten::mm.default"(%gr0t, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %l, %gw0, %gw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}
)mlir";

class RematTest : public ::testing::Test {
protected:
  RematTest() {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  MLIRContext context;
};

/// A group of the forward ops of `block` (layers.0 or layers.1), in program
/// order, named `name`.
RecomputeGroup blockGroup(func::FuncOp step, StringRef block, StringRef name) {
  SmallVector<Operation *> ops;
  for (Operation &op : step.getBody().front())
    if (getPhase(&op) == Phase::forward &&
        isInModule(getModulePath(&op), block))
      ops.push_back(&op);
  RecomputeGroup group;
  group.module = name.str();
  group.ops = ops;
  return group;
}

/// The step of kStep, parsed into `module`.
func::FuncOp parseStep(MLIRContext &context, OwningOpRef<ModuleOp> &module) {
  module = parseSourceString<ModuleOp>(kStep, ParserConfig(&context));
  return module ? *module->getOps<func::FuncOp>().begin() : func::FuncOp();
}

// A memory solver may save any subset of a block's ops. For every one of
// the 2^10 choices over both blocks the step stays valid (the verifier
// checks dominance and the region bodies), a region reads no value its own
// group recomputes (only saved ones, arguments and other blocks' values), no
// backward op reads a recomputed forward value any more, and the random op is
// never copied.
TEST_F(RematTest, EverySaveSetGivesAValidStep) {
  for (unsigned mask = 0; mask < (1u << 10); ++mask) {
    OwningOpRef<ModuleOp> module;
    func::FuncOp step = parseStep(context, module);
    ASSERT_TRUE(step);
    SmallVector<RecomputeGroup> groups = {
        blockGroup(step, "layers.0", "layers.0"),
        blockGroup(step, "layers.1", "layers.1")};
    ASSERT_EQ(groups[0].ops.size() + groups[1].ops.size(), 10u);
    unsigned bit = 0;
    llvm::SmallPtrSet<Operation *, 16> recomputed;
    llvm::StringMap<llvm::SmallPtrSet<Operation *, 8>> recomputedBy;
    for (RecomputeGroup &group : groups) {
      llvm::SmallPtrSet<Operation *, 8> inGroup(group.ops.begin(),
                                                group.ops.end());
      for (Operation *op : group.ops) {
        if (mask & (1u << bit++)) {
          group.saved.insert(op);
          continue;
        }
        // A view of what the group keeps is read from forward.
        Value base = getAliasedOperand(op);
        Operation *def = base ? base.getDefiningOp() : nullptr;
        if (def && inGroup.contains(def) && !recomputed.contains(def))
          continue;
        if (isRecomputable(op)) {
          recomputed.insert(op);
          recomputedBy[group.module].insert(op);
        }
      }
    }

    ASSERT_TRUE(succeeded(applyRecompute(step, groups))) << "mask " << mask;
    ASSERT_TRUE(succeeded(verify(*module))) << "mask " << mask;
    // A value another block recomputes is read as forward computed it:
    // this region keeps it alive, as PyTorch's next block saves its input.
    step.walk([&](RecomputeOp region) {
      for (Value input : region.getInputs())
        EXPECT_FALSE(
            recomputedBy[region.getModule()].contains(input.getDefiningOp()))
            << "mask " << mask << ": region '" << region.getModule().str()
            << "' reads a recomputed value";
      region.getBodyBlock().walk([&](AtenOp op) {
        EXPECT_NE(op.getKernel().str(), "aten::native_dropout.default");
      });
    });
    for (Operation *op : recomputed) {
      // Erased when backward was its only reader; otherwise only forward
      // and regions may read it.
      bool erased = llvm::none_of(step.getBody().front(),
                                  [&](Operation &o) { return &o == op; });
      if (erased)
        continue;
      for (Operation *user : op->getUsers())
        EXPECT_TRUE(getPhase(user) == Phase::forward || isa<RecomputeOp>(user))
            << "mask " << mask;
    }
  }
}

// An op cannot be in two regions, and only forward ops are recomputed.
TEST_F(RematTest, RejectsOverlappingAndBackwardGroups) {
  OwningOpRef<ModuleOp> module;
  func::FuncOp step = parseStep(context, module);
  ASSERT_TRUE(step);
  SmallVector<RecomputeGroup> groups = {blockGroup(step, "layers.1", "a"),
                                        blockGroup(step, "layers.1", "b")};
  context.getDiagEngine().registerHandler([](Diagnostic &) {});
  EXPECT_TRUE(failed(applyRecompute(step, groups)));

  SmallVector<RecomputeGroup> backward(1);
  backward[0].module = "layers.1";
  for (Operation &op : step.getBody().front())
    if (getPhase(&op) == Phase::backward)
      backward[0].ops.push_back(&op);
  EXPECT_TRUE(failed(applyRecompute(step, backward)));
}

} // namespace
