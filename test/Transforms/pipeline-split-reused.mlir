// loom-pipeline-split on a step whose module `a` runs again after the cut
// (a module called twice, as a shared block): `a`'s forward spans both
// stages, so each of its ops goes where the values it reads are, as the
// root's do. Its parameter is then read by both stages' forward, a shared
// parameter (loom-pipeline-schedule sums its gradient across the ranks
// that hold it, docs/pipeline.md).

// RUN: loom-opt --loom-pipeline-split="stages=2 boundaries=b" %s | FileCheck %s

// CHECK-LABEL: func.func @step_s0_forward(
// CHECK-SAME: loom.name = "a.w"
// CHECK: "aten::add.Tensor"
// CHECK-NOT: "aten::relu.default"
// CHECK: return
// CHECK-LABEL: func.func @step_s1_forward(
// CHECK-SAME: loom.name = "a.w"
// CHECK: "aten::relu.default"
// CHECK: "aten::add.Tensor"({{.*}}loom.module = "a"
// CHECK: "aten::sum.default"
func.func @step(%w: tensor<4xf32> {loom.name = "a.w", loom.role = #loom.role<parameter>},
                %x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "a.w"})
    attributes {loom.step} {
  %0 = loom.aten "aten::add.Tensor"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = loom.aten "aten::relu.default"(%0) {args = [#loom.arg<0>], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = loom.aten "aten::add.Tensor"(%1, %w) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = loom.aten "aten::sum.default"(%2) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<f32>
  %4 = loom.aten "aten::ones_like.default"(%2) {args = [#loom.arg<0>], loom.module = "a", loom.phase = #loom.phase<backward>} : (tensor<4xf32>) -> tensor<4xf32>
  return %3, %4 : tensor<f32>, tensor<4xf32>
}
