// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-accumulate-gradients="microbatches=2"
// RUN: not loom-opt %s --split-input-file --loom-accumulate-gradients="microbatches=0" 2>&1 | FileCheck %s

// CHECK: --loom-accumulate-gradients: microbatches must be at least 1, got 0

// expected-error@+1 {{result #1 has role output; gradient accumulation handles steps that return the loss, gradients and buffer mutations of the step's buffers}}
func.func @out(%x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<2x4xf32> {loom.role = #loom.role<output>})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<f32>
  %y = loom.aten "aten::neg.default"(%x) {args = [#loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %l, %y : tensor<f32>, tensor<2x4xf32>
}

// -----

// expected-error@+1 {{already has an optimizer attached; run loom-accumulate-gradients before loom-attach-optimizer}}
func.func @opt(%x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.optimizer = #loom.sgd<>} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
