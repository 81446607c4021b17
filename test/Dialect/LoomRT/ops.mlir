// RUN: loom-opt %s | FileCheck %s
// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s

// A program with its slots assigned: values print as their binding name or
// their slot, so slot reuse shows (%s5 is written again once freed).

// CHECK-LABEL: loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 7 optimizer #loom.adamw<lr = 0.01> {
loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 7 optimizer #loom.adamw<lr = 0.01> {
  // CHECK-NEXT: %fc.weight = loomrt.input "fc.weight" role <parameter> slot 0 : tensor<3x4xf32>
  %w = loomrt.input "fc.weight" role <parameter> slot 0 : tensor<3x4xf32>
  // CHECK-NEXT: %bn.mean = loomrt.input "bn.mean" role <buffer> slot 1 : tensor<3xf32>
  %mean = loomrt.input "bn.mean" role <buffer> slot 1 : tensor<3xf32>
  // CHECK-NEXT: %x = loomrt.input "x" role <input> batch_index 0 slot 2 : tensor<2x4xf32>
  %x = loomrt.input "x" role <input> batch_index 0 slot 2 : tensor<2x4xf32>
  // CHECK-NEXT: %fc.weight.exp_avg = loomrt.state "fc.weight.exp_avg" param "fc.weight" init <zeros> slot 3 : tensor<3x4xf32>
  %m = loomrt.state "fc.weight.exp_avg" param "fc.weight" init <zeros> slot 3 : tensor<3x4xf32>
  // CHECK-NEXT: %fc.weight.exp_avg_sq = loomrt.state "fc.weight.exp_avg_sq" param "fc.weight" init <zeros> slot 4 : tensor<3x4xf32>
  %v = loomrt.state "fc.weight.exp_avg_sq" param "fc.weight" init <zeros> slot 4 : tensor<3x4xf32>
  // CHECK-NEXT: %s5 = loomrt.aten "aten::permute.default"(%fc.weight) stream 0 slots [5] {args = [#loom.arg<0>, [1, 0]], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %wt = loomrt.aten "aten::permute.default"(%w) stream 0 slots [5] {args = [#loom.arg<0>, [1, 0]], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  // Typed arguments: dtype, device, layout, memory format, None, floats.
  // CHECK-NEXT: loomrt.aten "aten::empty_like.default"(%x) stream 0 slots [-1] {args = [#loom.arg<0>], kwargs = {device = #loomrt.device<"cpu">, dtype = f32, layout = #loomrt.layout<strided>, memory_format = #loomrt.memory_format<preserve_format>, pin_memory}}
  %e = loomrt.aten "aten::empty_like.default"(%x) stream 0 slots [-1] {args = [#loom.arg<0>], kwargs = {device = #loomrt.device<"cpu">, dtype = f32, layout = #loomrt.layout<strided>, memory_format = #loomrt.memory_format<preserve_format>, pin_memory = unit}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %s6 = loomrt.aten "aten::mm.default"(%x, %s5)
  %y = loomrt.aten "aten::mm.default"(%x, %wt) stream 0 slots [6] {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: loomrt.free %s5 stream 0 : tensor<4x3xf32>
  loomrt.free %wt stream 0 : tensor<4x3xf32>
  // Multiple results, a Tensor?[] with a None, and a float list.
  // CHECK-NEXT: %s5_0:2 = loomrt.aten "aten::_fake.default"(%s6, %x) stream 0 slots [5, -1] {args = {{\[\[}}#loom.arg<0>, unit, #loom.arg<1>], [1.000000e-01, 2.000000e+00]], returns = [0, unit, 1]}
  %r:2 = loomrt.aten "aten::_fake.default"(%y, %x) stream 0 slots [5, -1] {args = [[#loom.arg<0>, unit, #loom.arg<1>], [0.1, 2.0]], returns = [0, unit, 1]} : (tensor<2x3xf32>, tensor<2x4xf32>) -> (tensor<3xf32>, tensor<2xf32>)
  // CHECK-NEXT: loomrt.free %s6, %x stream 0
  loomrt.free %y, %x stream 0 : tensor<2x3xf32>, tensor<2x4xf32>
  %l = loomrt.aten "aten::sum.default"(%r#0) stream 0 slots [2] {args = [#loom.arg<0>]} : (tensor<3xf32>) -> tensor<f32>
  %g = loomrt.aten "aten::zeros_like.default"(%w) stream 0 slots [6] {args = [#loom.arg<0>]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  // CHECK: loomrt.optimizer %fc.weight grad %s6_1 state [%fc.weight.exp_avg, %fc.weight.exp_avg_sq] stream 0 {loom.phase = #loom.phase<optimizer>} : tensor<3x4xf32>
  loomrt.optimizer %w grad %g state [%m, %v] stream 0 {loom.phase = #loom.phase<optimizer>} : tensor<3x4xf32>
  // CHECK-NEXT: loomrt.free %s6_1 stream 0
  loomrt.free %g stream 0 : tensor<3x4xf32>
  // CHECK-NEXT: loomrt.output %s2 role <loss> : tensor<f32>
  loomrt.output %l role <loss> : tensor<f32>
  // CHECK-NEXT: loomrt.output %s5_0#0 role <buffer_mutation> target "bn.mean" : tensor<3xf32>
  loomrt.output %r#0 role <buffer_mutation> target "bn.mean" : tensor<3xf32>
  // CHECK-NEXT: loomrt.return
  loomrt.return
}

// Before slot assignment values print with default names; events order
// work across streams, and SGD without momentum has no state.

// CHECK-LABEL: loomrt.program "step" rank 1 world_size 2 streams ["compute", "comm"] optimizer #loom.sgd<> {
loomrt.program "step" rank 1 world_size 2 streams ["compute", "comm"] optimizer #loom.sgd<> {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %c = loomrt.input "c" role <constant> : tensor<4xf32>
  // CHECK: %[[A:.*]] = loomrt.aten "aten::mul.Tensor"(%w, %c) stream 1
  %a = loomrt.aten "aten::mul.Tensor"(%w, %c) stream 1 {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NEXT: %[[E:.*]] = loomrt.record_event stream 1
  %e = loomrt.record_event stream 1
  // CHECK-NEXT: loomrt.wait_event %[[E]] stream 0
  loomrt.wait_event %e stream 0
  // CHECK-NEXT: %[[L:.*]] = loomrt.aten "aten::sum.default"(%[[A]]) stream 0
  %l = loomrt.aten "aten::sum.default"(%a) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  // CHECK-NEXT: loomrt.optimizer %w grad %[[A]] stream 0 : tensor<4xf32>
  loomrt.optimizer %w grad %a stream 0 : tensor<4xf32>
  // CHECK-NEXT: loomrt.free %[[A]] stream 0
  loomrt.free %a stream 0 : tensor<4xf32>
  loomrt.output %l role <loss> : tensor<f32>
  loomrt.return
}

// A step without an optimizer hands its gradients out.
// CHECK-LABEL: loomrt.program "grads" rank 0 world_size 1 streams ["compute"] {
loomrt.program "grads" rank 0 world_size 1 streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %l = loomrt.aten "aten::sum.default"(%w) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  // CHECK: loomrt.output %{{.*}} role <grad> target "w" : tensor<4xf32>
  loomrt.output %l role <loss> : tensor<f32>
  loomrt.output %w role <grad> target "w" : tensor<4xf32>
  loomrt.return
}
