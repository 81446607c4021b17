// RUN: loom-opt %s --loom-remat="mode=full" --loom-accumulate-gradients="microbatches=2" | FileCheck %s
// RUN: loom-opt %s --loom-accumulate-gradients="microbatches=2" --loom-remat="mode=full" | FileCheck %s --check-prefixes=CHECK,AFTER
// RUN: loom-opt %s --loom-remat="mode=full" --loom-accumulate-gradients="microbatches=2" --loom-fsdp="mesh-shape=2" | FileCheck %s --check-prefix=FSDP

// loom-remat runs before loom-accumulate-gradients, which copies the step,
// regions included, once per microbatch; the result verifies (loom-opt
// prints it only then). On a step already split into microbatches each
// microbatch's ops form their own regions, so both orders give one region
// per block and microbatch, each before its own microbatch's backward.

// CHECK-LABEL: func.func @step(
// CHECK: %[[S0:.*]] = loom.aten "aten::slice.Tensor"
// CHECK: loom.recompute "layers.1" ({{.*}})
// AFTER: } {loom.microbatch = 0 : i64, loom.module = "layers.1", loom.phase = #loom.phase<backward>}
// CHECK: loom.recompute "layers.0" (%{{.*}}, %[[S0]])
// AFTER: } {loom.microbatch = 0 : i64, loom.module = "layers.0", loom.phase = #loom.phase<backward>}
// CHECK: %[[S1:.*]] = loom.aten "aten::slice.Tensor"
// CHECK: loom.recompute "layers.1" ({{.*}})
// AFTER: } {loom.microbatch = 1 : i64, loom.module = "layers.1", loom.phase = #loom.phase<backward>}
// CHECK: loom.recompute "layers.0" (%{{.*}}, %[[S1]])
// AFTER: } {loom.microbatch = 1 : i64, loom.module = "layers.0", loom.phase = #loom.phase<backward>}
// CHECK-NOT: loom.recompute

// FSDP after both: the regions are kept and the step still verifies.
// FSDP-LABEL: func.func @step(
// FSDP-COUNT-2: loom.recompute "layers.1"
// FSDP-NOT: loom.recompute "layers.1"
func.func @step(%w0: tensor<8x8xf32> {loom.name = "layers.0.fc.weight", loom.role = #loom.role<parameter>},
                %w1: tensor<8x8xf32> {loom.name = "layers.1.fc.weight", loom.role = #loom.role<parameter>},
                %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.fc.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.fc.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h0 = loom.aten "aten::mm.default"(%x, %t0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r0 = loom.aten "aten::relu.default"(%h0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d0 = loom.aten "aten::detach.default"(%r0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n0, %m0 = loom.aten "aten::native_dropout.default"(%r0) {args = [#loom.arg<0>, 5.000000e-01, true], loom.module = "layers.0.drop", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  %y0 = loom.aten "aten::add.Tensor"(%n0, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h1 = loom.aten "aten::mm.default"(%y0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r1 = loom.aten "aten::relu.default"(%h1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d1 = loom.aten "aten::detach.default"(%r1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = loom.aten "aten::sum.default"(%r1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %ge = loom.aten "aten::expand.default"(%g) {args = [#loom.arg<0>, [4, 8]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<4x8xf32>
  %gr1 = loom.aten "aten::threshold_backward.default"(%ge, %d1) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr1t = loom.aten "aten::t.default"(%gr1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw1 = loom.aten "aten::mm.default"(%gr1t, %y0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %tt1 = loom.aten "aten::t.default"(%t1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gy0 = loom.aten "aten::mm.default"(%gr1, %tt1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gn0 = loom.aten "aten::native_dropout_backward.default"(%gy0, %m0) {args = [#loom.arg<0>, #loom.arg<1>, 2.000000e+00], loom.module = "layers.0.drop", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xi1>) -> tensor<4x8xf32>
  %gr0 = loom.aten "aten::threshold_backward.default"(%gn0, %d0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr0t = loom.aten "aten::t.default"(%gr0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw0 = loom.aten "aten::mm.default"(%gr0t, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %l, %gw0, %gw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}
