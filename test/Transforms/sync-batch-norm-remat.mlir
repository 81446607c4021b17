// RUN: loom-opt %s --loom-remat="mode=full modules=bn" --loom-replicate="mesh-shape=2" --loom-sync-batch-norm | FileCheck %s

// Full checkpointing of a block with an nn.SyncBatchNorm: its statistics
// come from a collective, which a recompute region cannot hold, so its
// outputs are saved (as a random op's are) and the region recomputes only
// what follows it.
func.func @step(%w: tensor<3xf32> {loom.name = "bn.weight", loom.role = #loom.role<parameter>},
                %x: tensor<4x3xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<3xf32> {loom.role = #loom.role<grad>, loom.target = "bn.weight"})
    attributes {loom.step} {
  %y:3 = loom.aten "aten::_native_batch_norm_legit.no_stats"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>, unit, true, 1.000000e-01, 1.000000e-05], loom.module = "bn", loom.phase = #loom.phase<forward>, loom.sync_batch_norm} : (tensor<4x3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
  %s = loom.aten "aten::sigmoid.default"(%y#0) {args = [#loom.arg<0>], loom.module = "bn", loom.phase = #loom.phase<forward>} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %t = loom.aten "aten::mul.Tensor"(%s) {args = [#loom.arg<0>, 2.000000e+00], loom.module = "bn", loom.phase = #loom.phase<forward>} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %l = loom.aten "aten::sum.default"(%t) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x3xf32>) -> tensor<f32>
  %dt = loom.aten "aten::ones_like.default"(%t) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %dy = loom.aten "aten::mul.Tensor"(%dt) {args = [#loom.arg<0>, 2.000000e+00], loom.module = "bn", loom.phase = #loom.phase<backward>} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %ds = loom.aten "aten::sigmoid_backward.default"(%dy, %s) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "bn", loom.phase = #loom.phase<backward>} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %g:2 = loom.aten "aten::native_batch_norm_backward.default"(%ds, %x, %w, %y#1, %y#2) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, unit, unit, #loom.arg<3>, #loom.arg<4>, true, 1.000000e-05, [true, true, false]], loom.module = "bn", loom.phase = #loom.phase<backward>, returns = [0, 1, unit]} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>)
  return %l, %g#1 : tensor<f32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @step
// CHECK: loom.all_gather_start
// CHECK: %[[Y:.*]]:3 = loom.aten "aten::_native_batch_norm_legit_no_training.default"
// CHECK: loom.recompute "bn" (%[[Y]]#0)
// CHECK-NOT: batch_norm
// CHECK: loom.aten "aten::sigmoid.default"
// CHECK: loom.yield
// CHECK-NOT: batch_norm
// CHECK: loom.all_reduce_start {{.*}} reduce <sum>
