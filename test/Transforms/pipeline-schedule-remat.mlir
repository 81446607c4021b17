// A backward's recompute regions that do not read the gradient in transfer
// run before the rank waits for it. Stage 0 holds layers.0 and layers.1,
// both checkpointed; its backward first negates the gradient it receives,
// then needs layers.1's region (its relu), then layers.0's. Under 1F1B the
// backward is whole: its first region goes before the wait (its values are
// read right away); the second stays where it was, after the gradient
// arrives, so that the two blocks' recomputed values are not alive at once.

// RUN: loom-opt %s --loom-remat="mode=full" --loom-pipeline-split="stages=2 boundaries=layers.2" --loom-pipeline-schedule="schedule=1F1B pp=2 microbatches=2" | FileCheck %s

// CHECK-LABEL: func.func @step_pp0(
// CHECK: %[[RECV:.*]] = loom.recv_start on @pp axes ["pp"] peer 1
// CHECK-NOT: loom.wait %[[RECV]]
// CHECK: loom.recompute "layers.1"
// CHECK: %[[G:.*]] = loom.wait %[[RECV]]
// CHECK-NEXT: "aten::neg.default"(%[[G]])
// CHECK: "aten::threshold_backward.default"
// CHECK: loom.recompute "layers.0"
// CHECK: "aten::threshold_backward.default"
// CHECK-LABEL: func.func @step_pp1(

module {
func.func @step(%w0: tensor<8x8xf32> {loom.name = "layers.0.fc.weight", loom.role = #loom.role<parameter>},
                %w1: tensor<8x8xf32> {loom.name = "layers.1.fc.weight", loom.role = #loom.role<parameter>},
                %w2: tensor<8x8xf32> {loom.name = "layers.2.fc.weight", loom.role = #loom.role<parameter>},
                %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.fc.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.fc.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.2.fc.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h0 = loom.aten "aten::mm.default"(%x, %t0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r0 = loom.aten "aten::relu.default"(%h0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d0 = loom.aten "aten::detach.default"(%r0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y0 = loom.aten "aten::mul.Tensor"(%r0, %r0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h1 = loom.aten "aten::mm.default"(%y0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r1 = loom.aten "aten::relu.default"(%h1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d1 = loom.aten "aten::detach.default"(%r1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y1 = loom.aten "aten::mul.Tensor"(%r1, %r1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t2 = loom.aten "aten::t.default"(%w2) {args = [#loom.arg<0>], loom.module = "layers.2.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h2 = loom.aten "aten::mm.default"(%y1, %t2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = loom.aten "aten::sum.default"(%h2) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %ge = loom.aten "aten::expand.default"(%g) {args = [#loom.arg<0>, [4, 8]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<4x8xf32>
  %ge2 = loom.aten "aten::t.default"(%ge) {args = [#loom.arg<0>], loom.module = "layers.2.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw2 = loom.aten "aten::mm.default"(%ge2, %y1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %tt2 = loom.aten "aten::t.default"(%t2) {args = [#loom.arg<0>], loom.module = "layers.2.fc", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gy1 = loom.aten "aten::mm.default"(%ge, %tt2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gn1 = loom.aten "aten::neg.default"(%gy1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %gs1 = loom.aten "aten::mul.Tensor"(%gn1, %r1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr1 = loom.aten "aten::threshold_backward.default"(%gs1, %d1) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr1t = loom.aten "aten::t.default"(%gr1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw1 = loom.aten "aten::mm.default"(%gr1t, %y0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %tt1 = loom.aten "aten::t.default"(%t1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gy0 = loom.aten "aten::mm.default"(%gr1, %tt1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gs0 = loom.aten "aten::mul.Tensor"(%gy0, %r0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr0 = loom.aten "aten::threshold_backward.default"(%gs0, %d0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr0t = loom.aten "aten::t.default"(%gr0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw0 = loom.aten "aten::mm.default"(%gr0t, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %l, %gw0, %gw1, %gw2 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
}
