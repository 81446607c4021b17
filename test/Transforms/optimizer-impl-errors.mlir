// RUN: not loom-opt %s --loom-attach-optimizer="optimizer=adam impl=fused" 2>&1 | FileCheck %s

// PyTorch's fused optimizers have no complex kernels; the step is refused
// at compile time, naming the parameter, before the update's verifier
// (which refuses every non-float parameter) would.
// CHECK: error: 'func.func' op --loom-attach-optimizer: impl=fused does not support the complex parameter 'z' ('tensor<4xcomplex<f32>>'), as torch.optim's fused=True does not
func.func @step(%z: tensor<4xcomplex<f32>> {loom.name = "z", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xcomplex<f32>> {loom.role = #loom.role<grad>, loom.target = "z"})
    attributes {loom.step} {
  %r = loom.aten "aten::view_as_real.default"(%z) {args = [#loom.arg<0>]} : (tensor<4xcomplex<f32>>) -> tensor<4x2xf32>
  %l = loom.aten "aten::sum.default"(%r) {args = [#loom.arg<0>]} : (tensor<4x2xf32>) -> tensor<f32>
  return %l, %z : tensor<f32>, tensor<4xcomplex<f32>>
}
