// loom-pipeline-split refuses what it cannot cut, saying where and why.

// RUN: loom-opt --loom-pipeline-split="stages=3 boundaries=b" %s -verify-diagnostics
// RUN: not loom-opt --loom-pipeline-split="stages=2 boundaries=nowhere" %s 2>&1 | FileCheck %s --check-prefix=NOWHERE
// RUN: not loom-opt --loom-pipeline-split="stages=3" %s 2>&1 | FileCheck %s --check-prefix=UNITS
// RUN: not loom-opt --loom-pipeline-split="stages=2 boundaries=b" %s 2>&1 | FileCheck %s --check-prefix=FLOW
// RUN: loom-import %S/../Import/Inputs/tiny.pt2 --no-weights | not loom-opt --loom-pipeline-split="stages=2" 2>&1 | FileCheck %s --check-prefix=MUTATION

// NOWHERE: boundary 'nowhere' names no module of the step's forward
// UNITS: 3 stages need at least as many splittable modules, found 2 (a, b)
// FLOW: error: 'loom.aten' op (stage 1, module 'b') reads a gradient of an earlier stage (0, module 'a'); pipeline stages must follow the forward order of the model
// FLOW: note: the value is computed here

// MUTATION: result #0 has role buffer_mutation; a pipelined step returns the loss and gradients

// expected-error@+1 {{1 boundaries for 3 stages; give one module path per stage after the first}}
func.func @step(%w: tensor<4xf32> {loom.name = "a.w", loom.role = #loom.role<parameter>},
                %x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "a.w"})
    attributes {loom.step} {
  %0 = loom.aten "aten::add.Tensor"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = loom.aten "aten::relu.default"(%0) {args = [#loom.arg<0>], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = loom.aten "aten::sum.default"(%1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<f32>
  // a's backward op (stage 0) makes a value b's (stage 1) reads.
  %3 = loom.aten "aten::ones_like.default"(%0) {args = [#loom.arg<0>], loom.module = "a", loom.phase = #loom.phase<backward>} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = loom.aten "aten::mul.Tensor"(%3, %1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "b", loom.phase = #loom.phase<backward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2, %4 : tensor<f32>, tensor<4xf32>
}
