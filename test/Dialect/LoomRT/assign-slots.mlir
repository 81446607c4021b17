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

// An MPMD program of a pipeline stage is numbered on its own. A future takes
// a slot from its start to its wait; the wait of a send yields nothing and
// takes none, and releases the send's future (1), the free its input (0):
// the recv's result takes 0, and the sum 1, the recv's future's slot having
// gone back at its wait too.
// CHECK-LABEL: loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] slots 3 {
// CHECK-NEXT: %x = loomrt.input "x" role <input> batch_index 0 slot 0 : tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = loomrt.collective_start <send> %x axes ["pp"] peer 1 tag 0 stream 1 slot 1
// CHECK-NEXT: %[[R:.*]] = loomrt.collective_start <recv> axes ["pp"] peer 1 tag 1 stream 1 slot 2
// CHECK-NEXT: loomrt.wait %[[S]] stream 1 : !loomrt.future<none>
// CHECK-NEXT: loomrt.free %x stream 1
// CHECK-NEXT: %s0 = loomrt.wait %[[R]] stream 1 slot 0
// CHECK-NEXT: %s1 = loomrt.aten "aten::sum.default"(%s0) stream 0 slots [1]
loom.mesh @pp shape [2] axes ["pp"]
loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  %s = loomrt.collective_start <send> %x axes ["pp"] peer 1 tag 0 stream 1 : tensor<4xf32> -> !loomrt.future<none>
  %r = loomrt.collective_start <recv> axes ["pp"] peer 1 tag 1 stream 1 : !loomrt.future<tensor<4xf32>>
  loomrt.wait %s stream 1 : !loomrt.future<none>
  loomrt.free %x stream 1 : tensor<4xf32>
  %g = loomrt.wait %r stream 1 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
  %l = loomrt.aten "aten::sum.default"(%g) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  loomrt.free %g stream 0 : tensor<4xf32>
  loomrt.output %l role <loss> : tensor<f32>
  loomrt.return
}
