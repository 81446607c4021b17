// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-accumulate-gradients="microbatches=2"
// RUN: not loom-opt %s --split-input-file --loom-accumulate-gradients="microbatches=0" 2>&1 | FileCheck %s

// CHECK: --loom-accumulate-gradients: microbatches must be at least 1, got 0

// expected-error@+1 {{result #1 has role buffer_mutation; gradient accumulation handles steps that return the loss and gradients (buffer mutations would chain from one microbatch to the next)}}
func.func @bn(%b: tensor<4xf32> {loom.name = "bn.mean", loom.role = #loom.role<buffer>},
              %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<buffer_mutation>, loom.target = "bn.mean"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<f32>
  %m = loom.aten "aten::neg.default"(%b) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  return %l, %m : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{already has an optimizer attached; run loom-accumulate-gradients before loom-attach-optimizer}}
func.func @opt(%x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.optimizer = #loom.sgd<>} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
