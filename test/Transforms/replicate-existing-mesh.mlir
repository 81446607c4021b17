// RUN: loom-opt %s --loom-replicate | FileCheck %s

// An existing mesh is reused; a gradient that is also used inside the step
// keeps its local value there; one gradient returned for two results is
// reduced once; a 0-d gradient is flattened to one element.
loom.mesh @dp shape [2] axes ["dp"]
func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %s: tensor<f32> {loom.name = "scale", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "w"},
        tensor<f32> {loom.role = #loom.role<grad>, loom.target = "scale"},
        tensor<4xf32> {loom.role = #loom.role<output>})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %gw = loom.aten "aten::zeros_like.default"(%w) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4xf32>) -> tensor<4xf32>
  %gs = loom.aten "aten::zeros_like.default"(%s) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %use = loom.aten "aten::neg.default"(%gw) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4xf32>) -> tensor<4xf32>
  return %l, %gw, %gs, %use : tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>
}

// CHECK: loom.mesh @dp shape [2] axes ["dp"]
// CHECK-NOT: loom.mesh
// CHECK: %[[GW:.*]] = loom.aten "aten::zeros_like.default"
// CHECK: %[[GS:.*]] = loom.aten "aten::zeros_like.default"
// CHECK-NEXT: %[[SW:.*]] = loom.aten "aten::mul.Tensor"(%[[GW]])
// CHECK-NEXT: %[[SS:.*]] = loom.aten "aten::mul.Tensor"(%[[GS]])
// CHECK-NEXT: loom.aten "aten::reshape.default"(%[[SW]])
// CHECK-NEXT: loom.aten "aten::reshape.default"(%[[SS]]) {args = [#loom.arg<0>, [1]]
// CHECK: %[[USE:.*]] = loom.aten "aten::neg.default"(%[[GW]])
// CHECK: loom.wait
// CHECK: %[[RS:.*]] = loom.aten "aten::reshape.default"(%{{.*}}#1) {args = [#loom.arg<0>, []]{{.*}} -> tensor<f32>
// CHECK: return %{{.*}}, %{{.*}}, %[[RS]], %[[USE]]
