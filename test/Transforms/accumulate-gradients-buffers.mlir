// RUN: loom-opt %s --loom-accumulate-gradients="microbatches=3" | FileCheck %s

// Buffer mutations chain through the microbatches, as a loop that runs the
// module M times updates batch norm's running statistics M times: each
// microbatch reads what the one before wrote, and the step returns what the
// last one wrote (not a mean). The loss is still the microbatches' mean.

// CHECK-LABEL: func.func @bn(
// CHECK-SAME: %[[B:.*]]: tensor<4xf32> {loom.name = "bn.mean"
// CHECK: %[[M0:.*]] = loom.aten "aten::neg.default"(%[[B]]) {{.*}}loom.microbatch = 0
// CHECK: %[[M1:.*]] = loom.aten "aten::neg.default"(%[[M0]]) {{.*}}loom.microbatch = 1
// CHECK: %[[M2:.*]] = loom.aten "aten::neg.default"(%[[M1]]) {{.*}}loom.microbatch = 2
// CHECK: %[[MEAN:.*]] = loom.aten "aten::div.Tensor"
// CHECK-NOT: aten::div.Tensor
// CHECK: return %[[MEAN]], %[[M2]]
func.func @bn(%b: tensor<4xf32> {loom.name = "bn.mean", loom.role = #loom.role<buffer>},
              %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<buffer_mutation>, loom.target = "bn.mean"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<f32>
  %m = loom.aten "aten::neg.default"(%b) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  return %l, %m : tensor<f32>, tensor<4xf32>
}
