// RUN: loom-opt %s --split-input-file --loom-remat="mode=full" | FileCheck %s
// The pass is deterministic: two runs print the same IR.
// RUN: loom-opt %s --split-input-file --loom-remat="mode=full" -o %t.1
// RUN: loom-opt %s --split-input-file --loom-remat="mode=full" -o %t.2
// RUN: diff %t.1 %t.2
// Without a mode the pass leaves the step alone.
// RUN: loom-opt %s --split-input-file --loom-remat | FileCheck %s --check-prefix=NONE

// NONE-NOT: loom.recompute

// Full activation checkpointing of the default blocks (every layers.N, as
// loom-fsdp's units): each block's forward is recomputed from what it reads
// from outside (its input and parameters), in one region placed right before
// the block's first backward op that needs a recomputed value. The dropout
// is not recomputed: its mask is saved and read by backward as before. The
// block output %y0 is saved, because layers.1's backward reads it (the next
// block keeps its input, as PyTorch's checkpoint does). Forward detaches
// that only backward read are gone.

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<8x8xf32> {loom.name = "layers.0.fc.weight"
// CHECK-SAME: %[[W1:[^:]*]]: tensor<8x8xf32> {loom.name = "layers.1.fc.weight"
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32> {loom.name = "x"
// CHECK: %[[R0:.*]] = loom.aten "aten::relu.default"
// CHECK-NEXT: %[[DROP:.*]]:2 = loom.aten "aten::native_dropout.default"(%[[R0]])
// CHECK-NEXT: %[[Y0:.*]] = loom.aten "aten::add.Tensor"(%[[DROP]]#0, %[[X]])
// CHECK-NOT: aten::detach
// CHECK: %[[GE:.*]] = loom.aten "aten::expand.default"
// CHECK-NEXT: %[[RC1:.*]]:2 = loom.recompute "layers.1" (%[[W1]], %[[Y0]]) : (tensor<8x8xf32>, tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<8x8xf32>, %[[B:.*]]: tensor<4x8xf32>):
// CHECK-NEXT:   %[[T:.*]] = loom.aten "aten::t.default"(%[[A]]) {{.*}}loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>
// CHECK-NEXT:   %[[M:.*]] = loom.aten "aten::mm.default"(%[[B]], %[[T]])
// CHECK-NEXT:   %[[R:.*]] = loom.aten "aten::relu.default"(%[[M]]) {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// CHECK-NEXT:   %[[D:.*]] = loom.aten "aten::detach.default"(%[[R]])
// CHECK-NEXT:   loom.yield %[[T]], %[[D]] : tensor<8x8xf32>, tensor<4x8xf32>
// CHECK-NEXT: } {loom.module = "layers.1", loom.phase = #loom.phase<backward>}
// CHECK-NEXT: %[[GR1:.*]] = loom.aten "aten::threshold_backward.default"(%[[GE]], %[[RC1]]#1)
// Backward reads the saved block output and, a second time, the region's
// result: one region per block, before its first backward use.
// CHECK: loom.aten "aten::mm.default"(%{{.*}}, %[[Y0]])
// CHECK-NEXT: loom.aten "aten::t.default"(%[[RC1]]#0)
// CHECK-NEXT: %[[GY0:.*]] = loom.aten "aten::mm.default"
// CHECK-NEXT: %[[GN0:.*]] = loom.aten "aten::native_dropout_backward.default"(%[[GY0]], %[[DROP]]#1)
// CHECK-NEXT: %[[RC0:.*]] = loom.recompute "layers.0" (%[[W0]], %[[X]])
// CHECK-NOT: native_dropout
// CHECK: loom.yield
// CHECK-NEXT: } {loom.module = "layers.0", loom.phase = #loom.phase<backward>}
// CHECK-NEXT: loom.aten "aten::threshold_backward.default"(%[[GN0]], %[[RC0]])
// CHECK-COUNT-2: loom.aten
// CHECK-NEXT: return
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

// A block whose values backward never reads (its gradient here needs only
// the parameter) has nothing to recompute and gets no region.
// CHECK-LABEL: func.func @nothing_to_recompute(
// CHECK-NOT: loom.recompute
// CHECK: return
func.func @nothing_to_recompute(%w: tensor<4xf32> {loom.name = "layers.0.w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.w"})
    attributes {loom.step} {
  %e = loom.aten "aten::exp.default"(%w) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%e) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%w) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4xf32>) -> tensor<4xf32>
  %ge = loom.aten "aten::mul.Tensor"(%g, %w) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %l, %ge : tensor<f32>, tensor<4xf32>
}

// -----

// An in-place op is never recomputed, and neither is the value it writes
// (%a, through the view %v) nor the ops that read that value: run again in
// backward they would see it from the wrong side of the write. The exp that
// only reads the input is recomputed.
// CHECK-LABEL: func.func @in_place(
// CHECK: %[[A:.*]] = loom.aten "aten::relu.default"
// CHECK: %[[N:.*]] = loom.aten "aten::neg.default"(%[[A]])
// CHECK: loom.recompute "layers.0" (%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: loom.aten "aten::exp.default"
// CHECK-NEXT: loom.yield
// CHECK: loom.aten "aten::mul.Tensor"(%{{.*}}, %[[A]])
// CHECK-NEXT: loom.aten "aten::mul.Tensor"(%{{.*}}, %[[N]])
func.func @in_place(%w: tensor<4xf32> {loom.name = "layers.0.w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.w"})
    attributes {loom.step} {
  %e = loom.aten "aten::exp.default"(%w) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  %a = loom.aten "aten::relu.default"(%w) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  %n = loom.aten "aten::neg.default"(%a) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  %v = loom.aten "aten::view.default"(%a) {args = [#loom.arg<0>, [4]], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  %i = loom.aten "aten::add_.Tensor"(%v, %e) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%i) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<f32>
  %g = loom.aten "aten::expand.default"(%l) {args = [#loom.arg<0>, [4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<4xf32>
  %ge = loom.aten "aten::mul.Tensor"(%g, %e) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %ga = loom.aten "aten::mul.Tensor"(%ge, %a) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gn = loom.aten "aten::mul.Tensor"(%ga, %n) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %l, %gn : tensor<f32>, tensor<4xf32>
}

// -----

// A block output another block recomputes from is saved: layers.1's region
// takes %e as its input, so %e lives until layers.1's backward anyway and
// layers.0 reads it from there instead of computing it a third time.
// CHECK-LABEL: func.func @input_of_another_region(
// CHECK: %[[E:.*]] = loom.aten "aten::exp.default"
// CHECK: loom.recompute "layers.1" (%[[E]])
// CHECK-NOT: loom.recompute
// CHECK: loom.aten "aten::mul.Tensor"(%{{.*}}, %[[E]])
func.func @input_of_another_region(%w: tensor<4xf32> {loom.name = "layers.0.w", loom.role = #loom.role<parameter>},
                                   %v: tensor<4xf32> {loom.name = "layers.1.w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.w"})
    attributes {loom.step} {
  %e = loom.aten "aten::exp.default"(%w) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  %r = loom.aten "aten::relu.default"(%e) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%r) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%w) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4xf32>) -> tensor<4xf32>
  %gr = loom.aten "aten::threshold_backward.default"(%g, %r) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %ge = loom.aten "aten::mul.Tensor"(%gr, %e) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %l, %ge : tensor<f32>, tensor<4xf32>
}
