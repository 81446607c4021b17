// loom-pipeline-split's default cut counts the FLOPs of recompute regions:
// a checkpointed block costs its forward once more, the head does not.
// Four blocks (layers.N: a Linear, a ReLU, a Linear; 3072 FLOPs each with
// backward, block 0 2560 as it makes no input gradient) and a head of
// 2688 FLOPs, cut in two stages. Without recompute the cut that minimises
// the larger stage is before layers.3 ({0,1,2} 8704 | {3,head} 5760); with
// full recompute each block re-runs its first Linear (+512, block 0 too), so
// {0,1,2} would be 10240 and the cut moves before layers.2 ({0,1} 6656 |
// {2,3,head} 9856).

// RUN: loom-opt %s --loom-pipeline-split="stages=2" | FileCheck %s --check-prefix=PLAIN
// RUN: loom-opt %s --loom-remat="mode=full" --loom-pipeline-split="stages=2" | FileCheck %s --check-prefix=REMAT

// PLAIN-LABEL: func.func @step_s1_forward(
// PLAIN-SAME: loom.name = "layers.3.a.weight"
// PLAIN-NOT: layers.2.a.weight
// REMAT-LABEL: func.func @step_s1_forward(
// REMAT-SAME: loom.name = "layers.2.a.weight"
// REMAT-LABEL: func.func @step_s1_backward(
// REMAT: loom.recompute "layers.3"
// REMAT: loom.recompute "layers.2"

module {
func.func @step(%a0: tensor<8x8xf32> {loom.name = "layers.0.a.weight", loom.role = #loom.role<parameter>},
                %b0: tensor<8x8xf32> {loom.name = "layers.0.b.weight", loom.role = #loom.role<parameter>},
                %a1: tensor<8x8xf32> {loom.name = "layers.1.a.weight", loom.role = #loom.role<parameter>},
                %b1: tensor<8x8xf32> {loom.name = "layers.1.b.weight", loom.role = #loom.role<parameter>},
                %a2: tensor<8x8xf32> {loom.name = "layers.2.a.weight", loom.role = #loom.role<parameter>},
                %b2: tensor<8x8xf32> {loom.name = "layers.2.b.weight", loom.role = #loom.role<parameter>},
                %a3: tensor<8x8xf32> {loom.name = "layers.3.a.weight", loom.role = #loom.role<parameter>},
                %b3: tensor<8x8xf32> {loom.name = "layers.3.b.weight", loom.role = #loom.role<parameter>},
                %wh: tensor<14x8xf32> {loom.name = "head.weight", loom.role = #loom.role<parameter>},
                %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.a.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.b.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.a.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.b.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.2.a.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.2.b.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.3.a.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.3.b.weight"},
        tensor<14x8xf32> {loom.role = #loom.role<grad>, loom.target = "head.weight"})
    attributes {loom.step} {
  %ta0 = loom.aten "aten::t.default"(%a0) {args = [#loom.arg<0>], loom.module = "layers.0.a", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h0 = loom.aten "aten::mm.default"(%x, %ta0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.a", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r0 = loom.aten "aten::relu.default"(%h0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d0 = loom.aten "aten::detach.default"(%r0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %tb0 = loom.aten "aten::t.default"(%b0) {args = [#loom.arg<0>], loom.module = "layers.0.b", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %y0 = loom.aten "aten::mm.default"(%r0, %tb0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.b", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %ta1 = loom.aten "aten::t.default"(%a1) {args = [#loom.arg<0>], loom.module = "layers.1.a", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h1 = loom.aten "aten::mm.default"(%y0, %ta1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.a", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r1 = loom.aten "aten::relu.default"(%h1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d1 = loom.aten "aten::detach.default"(%r1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %tb1 = loom.aten "aten::t.default"(%b1) {args = [#loom.arg<0>], loom.module = "layers.1.b", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %y1 = loom.aten "aten::mm.default"(%r1, %tb1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.b", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %ta2 = loom.aten "aten::t.default"(%a2) {args = [#loom.arg<0>], loom.module = "layers.2.a", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h2 = loom.aten "aten::mm.default"(%y1, %ta2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.a", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r2 = loom.aten "aten::relu.default"(%h2) {args = [#loom.arg<0>], loom.module = "layers.2", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d2 = loom.aten "aten::detach.default"(%r2) {args = [#loom.arg<0>], loom.module = "layers.2", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %tb2 = loom.aten "aten::t.default"(%b2) {args = [#loom.arg<0>], loom.module = "layers.2.b", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %y2 = loom.aten "aten::mm.default"(%r2, %tb2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.b", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %ta3 = loom.aten "aten::t.default"(%a3) {args = [#loom.arg<0>], loom.module = "layers.3.a", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h3 = loom.aten "aten::mm.default"(%y2, %ta3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3.a", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r3 = loom.aten "aten::relu.default"(%h3) {args = [#loom.arg<0>], loom.module = "layers.3", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d3 = loom.aten "aten::detach.default"(%r3) {args = [#loom.arg<0>], loom.module = "layers.3", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %tb3 = loom.aten "aten::t.default"(%b3) {args = [#loom.arg<0>], loom.module = "layers.3.b", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %y3 = loom.aten "aten::mm.default"(%r3, %tb3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3.b", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %th = loom.aten "aten::t.default"(%wh) {args = [#loom.arg<0>], loom.module = "head", loom.phase = #loom.phase<forward>} : (tensor<14x8xf32>) -> tensor<8x14xf32>
  %lo = loom.aten "aten::mm.default"(%y3, %th) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "head", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x14xf32>) -> tensor<4x14xf32>
  %l = loom.aten "aten::sum.default"(%lo) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x14xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %ge = loom.aten "aten::expand.default"(%g) {args = [#loom.arg<0>, [4, 14]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<4x14xf32>
  %get = loom.aten "aten::t.default"(%ge) {args = [#loom.arg<0>], loom.module = "head", loom.phase = #loom.phase<backward>} : (tensor<4x14xf32>) -> tensor<14x4xf32>
  %gwh = loom.aten "aten::mm.default"(%get, %y3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "head", loom.phase = #loom.phase<backward>} : (tensor<14x4xf32>, tensor<4x8xf32>) -> tensor<14x8xf32>
  %tth = loom.aten "aten::t.default"(%th) {args = [#loom.arg<0>], loom.module = "head", loom.phase = #loom.phase<backward>} : (tensor<8x14xf32>) -> tensor<14x8xf32>
  %gh = loom.aten "aten::mm.default"(%ge, %tth) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "head", loom.phase = #loom.phase<backward>} : (tensor<4x14xf32>, tensor<14x8xf32>) -> tensor<4x8xf32>
  %gyt3 = loom.aten "aten::t.default"(%gh) {args = [#loom.arg<0>], loom.module = "layers.3.b", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gb3 = loom.aten "aten::mm.default"(%gyt3, %r3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3.b", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %ttb3 = loom.aten "aten::t.default"(%tb3) {args = [#loom.arg<0>], loom.module = "layers.3.b", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gr3 = loom.aten "aten::mm.default"(%gh, %ttb3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3.b", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gh3 = loom.aten "aten::threshold_backward.default"(%gr3, %d3) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.3", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ght3 = loom.aten "aten::t.default"(%gh3) {args = [#loom.arg<0>], loom.module = "layers.3.a", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %ga3 = loom.aten "aten::mm.default"(%ght3, %y2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3.a", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %tta3 = loom.aten "aten::t.default"(%ta3) {args = [#loom.arg<0>], loom.module = "layers.3.a", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gx3 = loom.aten "aten::mm.default"(%gh3, %tta3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3.a", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gyt2 = loom.aten "aten::t.default"(%gx3) {args = [#loom.arg<0>], loom.module = "layers.2.b", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gb2 = loom.aten "aten::mm.default"(%gyt2, %r2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.b", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %ttb2 = loom.aten "aten::t.default"(%tb2) {args = [#loom.arg<0>], loom.module = "layers.2.b", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gr2 = loom.aten "aten::mm.default"(%gx3, %ttb2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.b", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gh2 = loom.aten "aten::threshold_backward.default"(%gr2, %d2) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.2", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ght2 = loom.aten "aten::t.default"(%gh2) {args = [#loom.arg<0>], loom.module = "layers.2.a", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %ga2 = loom.aten "aten::mm.default"(%ght2, %y1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.a", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %tta2 = loom.aten "aten::t.default"(%ta2) {args = [#loom.arg<0>], loom.module = "layers.2.a", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gx2 = loom.aten "aten::mm.default"(%gh2, %tta2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.a", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gyt1 = loom.aten "aten::t.default"(%gx2) {args = [#loom.arg<0>], loom.module = "layers.1.b", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gb1 = loom.aten "aten::mm.default"(%gyt1, %r1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.b", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %ttb1 = loom.aten "aten::t.default"(%tb1) {args = [#loom.arg<0>], loom.module = "layers.1.b", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gr1 = loom.aten "aten::mm.default"(%gx2, %ttb1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.b", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gh1 = loom.aten "aten::threshold_backward.default"(%gr1, %d1) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ght1 = loom.aten "aten::t.default"(%gh1) {args = [#loom.arg<0>], loom.module = "layers.1.a", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %ga1 = loom.aten "aten::mm.default"(%ght1, %y0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.a", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %tta1 = loom.aten "aten::t.default"(%ta1) {args = [#loom.arg<0>], loom.module = "layers.1.a", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gx1 = loom.aten "aten::mm.default"(%gh1, %tta1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.a", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gyt0 = loom.aten "aten::t.default"(%gx1) {args = [#loom.arg<0>], loom.module = "layers.0.b", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gb0 = loom.aten "aten::mm.default"(%gyt0, %r0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.b", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %ttb0 = loom.aten "aten::t.default"(%tb0) {args = [#loom.arg<0>], loom.module = "layers.0.b", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gr0 = loom.aten "aten::mm.default"(%gx1, %ttb0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.b", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gh0 = loom.aten "aten::threshold_backward.default"(%gr0, %d0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ght0 = loom.aten "aten::t.default"(%gh0) {args = [#loom.arg<0>], loom.module = "layers.0.a", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %ga0 = loom.aten "aten::mm.default"(%ght0, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.a", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %l, %ga0, %gb0, %ga1, %gb1, %ga2, %gb2, %ga3, %gb3, %gwh : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<14x8xf32>
}
}
