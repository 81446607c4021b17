// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-fsdp="mesh-shape=2 param-dtype=bf16" --loom-sync-batch-norm

// Under FSDP's bf16 compute the statistics would be bf16: refused.
func.func @step(%w: tensor<3xf32> {loom.name = "bn.weight", loom.role = #loom.role<parameter>},
                %x: tensor<4x3xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<3xf32> {loom.role = #loom.role<grad>, loom.target = "bn.weight"})
    attributes {loom.step} {
  // expected-error@+1 {{'loom.aten' op --loom-sync-batch-norm: the nn.SyncBatchNorm of module 'bn' runs in 'bf16'; synchronized statistics are supported in f32 and f64 (not under FSDP's mixed precision)}}
  %y:3 = loom.aten "aten::_native_batch_norm_legit.no_stats"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>, unit, true, 1.000000e-01, 1.000000e-05], loom.module = "bn", loom.phase = #loom.phase<forward>, loom.sync_batch_norm} : (tensor<4x3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
  %l = loom.aten "aten::sum.default"(%y#0) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x3xf32>) -> tensor<f32>
  %dy = loom.aten "aten::ones_like.default"(%y#0) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %g:2 = loom.aten "aten::native_batch_norm_backward.default"(%dy, %x, %w, %y#1, %y#2) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, unit, unit, #loom.arg<3>, #loom.arg<4>, true, 1.000000e-05, [true, true, false]], loom.module = "bn", loom.phase = #loom.phase<backward>, returns = [0, 1, unit]} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>)
  return %l, %g#1 : tensor<f32>, tensor<3xf32>
}
