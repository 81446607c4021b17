// RUN: loom-opt %s --loom-lower-to-rt | FileCheck %s

// A recompute region runs where it stands: its body's ops take its place in
// the program, in order, read the region's inputs, and take its phase
// (backward) since they run in backward; its uses read the yielded values.

// CHECK-LABEL: loomrt.program "step"
// CHECK: %[[H:.*]] = loomrt.aten "aten::mm.default"(%x, %fc.weight) stream 0 {{{.*}}loom.module = "fc", loom.phase = #loom.phase<forward>}
// CHECK-NEXT: %[[R:.*]] = loomrt.aten "aten::relu.default"(%[[H]]) stream 0 {{{.*}}loom.module = "fc", loom.phase = #loom.phase<forward>}
// CHECK-NEXT: %[[L:.*]] = loomrt.aten "aten::sum.default"(%[[R]])
// CHECK-NEXT: loomrt.aten "aten::ones_like.default"
// CHECK-NEXT: %[[G:.*]] = loomrt.aten "aten::expand.default"
// CHECK-NEXT: %[[H2:.*]] = loomrt.aten "aten::mm.default"(%x, %fc.weight) stream 0 {{{.*}}loom.module = "fc", loom.phase = #loom.phase<backward>}
// CHECK-NEXT: %[[R2:.*]] = loomrt.aten "aten::relu.default"(%[[H2]]) stream 0 {{{.*}}loom.module = "fc", loom.phase = #loom.phase<backward>}
// CHECK-NEXT: %[[D:.*]] = loomrt.aten "aten::threshold_backward.default"(%[[G]], %[[R2]])
// CHECK-NOT: loom.recompute
module {
func.func @step(%w: tensor<4x4xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.weight"})
    attributes {loom.step} {
  %h = loom.aten "aten::mm.default"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r = loom.aten "aten::relu.default"(%h) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%r) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [2, 4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<2x4xf32>
  %rr = loom.recompute "fc" (%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>, %b: tensor<4x4xf32>):
    %0 = loom.aten "aten::mm.default"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = loom.aten "aten::relu.default"(%0) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    loom.yield %1 : tensor<2x4xf32>
  } {loom.module = "fc", loom.phase = #loom.phase<backward>}
  %d = loom.aten "aten::threshold_backward.default"(%g, %rr) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %xt = loom.aten "aten::t.default"(%x) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw = loom.aten "aten::mm.default"(%xt, %d) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  return %l, %gw : tensor<f32>, tensor<4x4xf32>
}
}
