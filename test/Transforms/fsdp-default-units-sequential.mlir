// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" | FileCheck %s
// RUN: loom-compile %s --dp=fsdp --world-size=2 --summary --emit=mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=SUMMARY

// SUMMARY: loom-compile: fsdp units (default: the model's repeated blocks): 0, 1, <root>

// A root `Sequential` (PyTorch's MLPStack itself): its blocks are `0` and
// `1`, the default units of loom-fsdp.
// CHECK-LABEL: func.func @sequential(
// CHECK: loom.all_gather_start {{.*}}loom.module = "0", loom.phase = #loom.phase<forward>
// CHECK: loom.all_gather_start {{.*}}loom.module = "1", loom.phase = #loom.phase<forward>
// CHECK-COUNT-2: loom.reduce_scatter_start
// CHECK-NOT: loom.reduce_scatter_start
// CHECK: return
func.func @sequential(%w0: tensor<4x4xf32> {loom.name = "0.weight", loom.role = #loom.role<parameter>},
                      %w1: tensor<4x4xf32> {loom.name = "1.weight", loom.role = #loom.role<parameter>},
                      %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "0.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "1.weight"})
    attributes {loom.step} {
  %h0 = loom.aten "aten::mm.default"(%x, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "0", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %h1 = loom.aten "aten::mm.default"(%h0, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "1", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%h1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %g1 = loom.aten "aten::mul.Tensor"(%w1, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "1", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %g0 = loom.aten "aten::mul.Tensor"(%w0, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "0", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %l, %g0, %g1 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
}
