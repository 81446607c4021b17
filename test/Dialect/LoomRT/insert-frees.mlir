// RUN: loom-opt %s --split-input-file --loomrt-insert-frees | FileCheck %s
// Running it twice changes nothing.
// RUN: loom-opt %s --split-input-file --loomrt-insert-frees --loomrt-insert-frees | FileCheck %s

// Each value is freed right after its last use, grouped per instruction in
// definition order. Parameters, buffers, constants and state are never
// freed; outputs live to the end; unread results need no free; a batch
// input is freed after its last use; the gradient after its update.

// CHECK-LABEL: loomrt.program "step"
// CHECK: %[[WT:.*]] = loomrt.aten "aten::permute.default"(%w)
// CHECK-NEXT: %[[Y:.*]] = loomrt.aten "aten::mm.default"(%x, %[[WT]])
// CHECK-NEXT: loomrt.free %x, %[[WT]] stream 0 : tensor<2x4xf32>, tensor<4x3xf32>
// CHECK-NEXT: %[[N:.*]]:2 = loomrt.aten "aten::_fake.default"(%[[Y]], %c)
// CHECK-NEXT: %[[R:.*]] = loomrt.aten "aten::relu.default"(%[[Y]])
// CHECK-NEXT: loomrt.free %[[Y]] stream 0 : tensor<2x3xf32>
// CHECK-NEXT: %[[L:.*]] = loomrt.aten "aten::sum.default"(%[[R]])
// CHECK-NEXT: %[[G:.*]] = loomrt.aten "aten::fake_grad.default"(%[[R]], %[[N]]#0)
// CHECK-NEXT: loomrt.free %[[N]]#0, %[[R]] stream 0 : tensor<3xf32>, tensor<2x3xf32>
// CHECK-NEXT: loomrt.optimizer %w grad %[[G]] state [%w.momentum_buffer] stream 0
// CHECK-NEXT: loomrt.free %[[G]] stream 0 : tensor<3x4xf32>
// CHECK-NEXT: loomrt.output %[[L]] role <loss>
// CHECK-NEXT: loomrt.output %b role <grad> target "b"
// CHECK-NEXT: loomrt.return
// CHECK-NOT: loomrt.free
loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.sgd<momentum = 0.9> {
  %w = loomrt.input "w" role <parameter> : tensor<3x4xf32>
  %b = loomrt.input "b" role <parameter> : tensor<3xf32>
  %c = loomrt.input "c" role <constant> : tensor<3xf32>
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<2x4xf32>
  %m = loomrt.state "w.momentum_buffer" param "w" init <zeros> : tensor<3x4xf32>
  %wt = loomrt.aten "aten::permute.default"(%w) stream 0 {args = [#loom.arg<0>, [1, 0]]} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %y = loomrt.aten "aten::mm.default"(%x, %wt) stream 0 {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %n:2 = loomrt.aten "aten::_fake.default"(%y, %c) stream 0 {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  %r = loomrt.aten "aten::relu.default"(%y) stream 0 {args = [#loom.arg<0>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = loomrt.aten "aten::sum.default"(%r) stream 0 {args = [#loom.arg<0>]} : (tensor<2x3xf32>) -> tensor<f32>
  %g = loomrt.aten "aten::fake_grad.default"(%r, %n#0) stream 0 {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  loomrt.optimizer %w grad %g state [%m] stream 0 : tensor<3x4xf32>
  loomrt.output %l role <loss> : tensor<f32>
  loomrt.output %b role <grad> target "b" : tensor<3xf32>
  loomrt.return
}

// -----

// A free goes on the stream of the instruction that last read the value.
// CHECK-LABEL: loomrt.program "streams"
// CHECK: %[[A:.*]] = loomrt.aten "aten::neg.default"(%x) stream 1
// CHECK-NEXT: loomrt.free %x stream 1
// CHECK-NEXT: %[[E:.*]] = loomrt.record_event stream 1
// CHECK-NEXT: loomrt.wait_event %[[E]] stream 0
// CHECK-NEXT: %[[L:.*]] = loomrt.aten "aten::sum.default"(%[[A]]) stream 0
// CHECK-NEXT: loomrt.free %[[A]] stream 0
loomrt.program "streams" rank 0 world_size 1 streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  %a = loomrt.aten "aten::neg.default"(%x) stream 1 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  %e = loomrt.record_event stream 1
  loomrt.wait_event %e stream 0
  %l = loomrt.aten "aten::sum.default"(%a) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  loomrt.output %l role <loss> : tensor<f32>
  loomrt.return
}

// -----

// A send reads its input until its wait, so the input is freed after the
// wait (on comm), not after the send; a recv's result is freed after its
// last reader.
// CHECK-LABEL: loomrt.program "stage0"
// CHECK: %[[H:.*]] = loomrt.aten "aten::neg.default"
// CHECK-NEXT: loomrt.free %x stream 0
// CHECK-NEXT: %[[S:.*]] = loomrt.collective_start <send> %[[H]]
// CHECK-NEXT: %[[R:.*]] = loomrt.collective_start <recv>
// CHECK-NEXT: loomrt.wait %[[S]] stream 1 : !loomrt.future<none>
// CHECK-NEXT: loomrt.free %[[H]] stream 1
// CHECK-NEXT: %[[G:.*]] = loomrt.wait %[[R]] stream 1
// CHECK-NEXT: %[[L:.*]] = loomrt.aten "aten::sum.default"(%[[G]])
// CHECK-NEXT: loomrt.free %[[G]] stream 0
loom.mesh @pp shape [2] axes ["pp"]
loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  %h = loomrt.aten "aten::neg.default"(%x) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  %s = loomrt.collective_start <send> %h axes ["pp"] peer 1 tag 0 stream 1 : tensor<4xf32> -> !loomrt.future<none>
  %r = loomrt.collective_start <recv> axes ["pp"] peer 1 tag 1 stream 1 : !loomrt.future<tensor<4xf32>>
  loomrt.wait %s stream 1 : !loomrt.future<none>
  %g = loomrt.wait %r stream 1 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
  %l = loomrt.aten "aten::sum.default"(%g) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  loomrt.output %l role <loss> : tensor<f32>
  loomrt.return
}
