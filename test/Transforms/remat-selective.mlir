// RUN: loom-opt %s --split-input-file --loom-remat="mode=selective" | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-remat="mode=full modules=layers.1 save-ops=aten::relu" | FileCheck %s --check-prefix=SAVE
// A save-ops entry no op of the recomputed modules matches saves nothing: a
// warning (a list shared across models names ops some lack), not an error.
// RUN: loom-opt %s --split-input-file --loom-remat="mode=full modules=layers.1 save-ops=aten::relu,aten::no_such_op" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNMATCHED
// @step's layers.1 has a relu, @kinds's none.
// UNMATCHED-NOT: save-ops entry 'aten::relu'
// UNMATCHED: warning: --loom-remat: save-ops entry 'aten::no_such_op' matches no forward op of the recomputed modules; it saves nothing
// UNMATCHED-NOT: save-ops entry 'aten::relu'
// UNMATCHED: warning: --loom-remat: save-ops entry 'aten::relu' matches no forward op of the recomputed modules; it saves nothing
// UNMATCHED: warning: --loom-remat: save-ops entry 'aten::no_such_op' matches no forward op

// Selective checkpointing, torchtitan's op-level policy: the matmul outputs
// (%h0, %h1) are saved and read by the regions; the views of the weights
// (t) and the pointwise ops (relu, detach) are recomputed from them. A view
// of a saved value costs nothing to redo, so the region takes the saved
// base (the weight) and views it again.

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<8x8xf32> {loom.name = "layers.0.fc.weight"
// CHECK-SAME: %[[W1:[^:]*]]: tensor<8x8xf32> {loom.name = "layers.1.fc.weight"
// CHECK: %[[H0:.*]] = loom.aten "aten::mm.default"
// CHECK: %[[H1:.*]] = loom.aten "aten::mm.default"
// CHECK: loom.recompute "layers.1" (%[[W1]], %[[H1]]) : (tensor<8x8xf32>, tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<8x8xf32>, %[[B:.*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[T:.*]] = loom.aten "aten::t.default"(%[[A]])
// CHECK-NEXT: %[[R:.*]] = loom.aten "aten::relu.default"(%[[B]])
// CHECK-NEXT: %[[D:.*]] = loom.aten "aten::detach.default"(%[[R]])
// CHECK-NEXT: loom.yield %[[T]], %[[D]]
// CHECK: loom.recompute "layers.0" (%[[H0]]) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: loom.aten "aten::relu.default"
// CHECK-NEXT: loom.aten "aten::detach.default"
// CHECK-NEXT: loom.yield

// save-ops adds ops to what the mode saves (here the relu of full
// checkpointing), and modules picks the blocks: layers.0 is left alone.
// The detach of the saved relu shares its storage, so backward reads the
// forward's detach instead of taking it again in the region (which would
// keep nothing less alive); the weight's view is taken again.
// SAVE-LABEL: func.func @step(
// SAVE: %[[R1:.*]] = loom.aten "aten::relu.default"{{.*}}loom.module = "layers.1"
// SAVE-NEXT: %[[D1:.*]] = loom.aten "aten::detach.default"(%[[R1]])
// SAVE: "aten::threshold_backward.default"(%{{.*}}, %[[D1]])
// SAVE: loom.recompute "layers.1" (%{{[^,]*}}) : (tensor<8x8xf32>) -> tensor<8x8xf32>
// SAVE-NEXT: ^bb0
// SAVE-NEXT: loom.aten "aten::t.default"
// SAVE-NEXT: loom.yield
// SAVE-NOT: loom.recompute
// SAVE: return
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

// -----

// Convolutions and attention kernels are saved too (here every flavour the
// policy names is represented by one); the exp is recomputed from the saved
// convolution output, and the attention output is read as saved.
// CHECK-LABEL: func.func @kinds(
// CHECK: %[[C:.*]] = loom.aten "aten::convolution.default"
// CHECK: %[[S:.*]]:2 = loom.aten "aten::_scaled_dot_product_flash_attention_for_cpu.default"
// CHECK: loom.recompute "layers.1" (%[[C]]) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: loom.aten "aten::exp.default"
// CHECK-NEXT: loom.yield
// CHECK: loom.aten "aten::mul.Tensor"(%[[S]]#0, %[[S]]#0)
// SAVE-LABEL: func.func @kinds(
func.func @kinds(%x: tensor<1x2x4x4xf32> {loom.name = "x", loom.role = #loom.role<input>},
                 %w: tensor<2x2x1x1xf32> {loom.name = "layers.1.conv.weight", loom.role = #loom.role<parameter>},
                 %q: tensor<1x2x4x8xf32> {loom.name = "q", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %c = loom.aten "aten::convolution.default"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>, unit, [1, 1], [0, 0], [1, 1], false, [0, 0], 1], loom.module = "layers.1.conv", loom.phase = #loom.phase<forward>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %s:2 = loom.aten "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %q, %q) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, 0.0, true], loom.module = "layers.1.attn", loom.phase = #loom.phase<forward>} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  %e = loom.aten "aten::exp.default"(%c) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %l = loom.aten "aten::sum.default"(%e) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<1x2x4x4xf32>) -> tensor<f32>
  %g1 = loom.aten "aten::mul.Tensor"(%e, %c) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %g2 = loom.aten "aten::mul.Tensor"(%s#0, %s#0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.attn", loom.phase = #loom.phase<backward>} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %l : tensor<f32>
}
