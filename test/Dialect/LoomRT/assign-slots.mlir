// RUN: loom-opt %s --loomrt-assign-slots | FileCheck %s
// Reassigning gives the same numbers.
// RUN: loom-opt %s --loomrt-assign-slots --loomrt-assign-slots | FileCheck %s
// RUN: loom-opt %s --loomrt-assign-slots=reuse=false | FileCheck %s --check-prefix=NOREUSE

// Bindings take slots 0.. in order; a result takes the lowest slot a
// preceding free released (2 before 5), or a new one; a result nothing
// reads gets -1. Printed names follow the slots.

// CHECK-LABEL: loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 6 {
// CHECK-NEXT: %w = loomrt.input "w" role <parameter> slot 0 : tensor<3x4xf32>
// CHECK-NEXT: %b = loomrt.input "b" role <buffer> slot 1 : tensor<3xf32>
// CHECK-NEXT: %x = loomrt.input "x" role <input> batch_index 0 slot 2 : tensor<2x4xf32>
// CHECK-NEXT: %s3 = loomrt.aten "aten::permute.default"(%w) stream 0 slots [3]
// CHECK-NEXT: %s4 = loomrt.aten "aten::mm.default"(%x, %s3) stream 0 slots [4]
// CHECK-NEXT: loomrt.free %x, %s3 stream 0
// CHECK-NEXT: %s2:2 = loomrt.aten "aten::_fake.default"(%s4) stream 0 slots [2, -1]
// CHECK-NEXT: %s3_0 = loomrt.aten "aten::relu.default"(%s4) stream 0 slots [3]
// CHECK-NEXT: loomrt.free %s4 stream 0
// CHECK-NEXT: %s4_1 = loomrt.aten "aten::add.Tensor"(%b, %s2#0) stream 0 slots [4]
// CHECK-NEXT: %s5 = loomrt.aten "aten::sum.default"(%s3_0) stream 0 slots [5]
// CHECK-NEXT: loomrt.free %s2#0, %s3_0 stream 0
// CHECK-NEXT: loomrt.output %s5 role <loss> : tensor<f32>
// CHECK-NEXT: loomrt.output %s4_1 role <buffer_mutation> target "b" : tensor<3xf32>

// NOREUSE-LABEL: loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 9 {
// NOREUSE: %s5:2 = loomrt.aten "aten::_fake.default"(%s4) stream 0 slots [5, -1]
// NOREUSE: %s8 = loomrt.aten "aten::sum.default"
loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<3x4xf32>
  %b = loomrt.input "b" role <buffer> : tensor<3xf32>
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<2x4xf32>
  %wt = loomrt.aten "aten::permute.default"(%w) stream 0 {args = [#loom.arg<0>, [1, 0]]} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %y = loomrt.aten "aten::mm.default"(%x, %wt) stream 0 {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  loomrt.free %x, %wt stream 0 : tensor<2x4xf32>, tensor<4x3xf32>
  %n:2 = loomrt.aten "aten::_fake.default"(%y) stream 0 {args = [#loom.arg<0>]} : (tensor<2x3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  %r = loomrt.aten "aten::relu.default"(%y) stream 0 {args = [#loom.arg<0>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  loomrt.free %y stream 0 : tensor<2x3xf32>
  %nb = loomrt.aten "aten::add.Tensor"(%b, %n#0) stream 0 {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = loomrt.aten "aten::sum.default"(%r) stream 0 {args = [#loom.arg<0>]} : (tensor<2x3xf32>) -> tensor<f32>
  loomrt.free %n#0, %r stream 0 : tensor<3xf32>, tensor<2x3xf32>
  loomrt.output %l role <loss> : tensor<f32>
  loomrt.output %nb role <buffer_mutation> target "b" : tensor<3xf32>
  loomrt.return
}
