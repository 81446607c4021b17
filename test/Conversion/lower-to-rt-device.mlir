// A CPU capture records CPU-only kernels; compiling such a step for cuda is
// refused at the kernel, and for the CPU it lowers as always.
// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-lower-to-rt=device=cuda
// RUN: loom-opt %s --split-input-file --loom-lower-to-rt=device=cpu | FileCheck %s --check-prefix=CPU

// CPU: loomrt.aten "aten::_scaled_dot_product_flash_attention_for_cpu.default"
// CPU-NOT: loom.device
func.func @step(%q: tensor<1x1x2x4xf32> {loom.name = "q", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  // expected-error@+1 {{kernel 'aten::_scaled_dot_product_flash_attention_for_cpu.default' runs only on the CPU, so the step cannot be compiled for device=cuda (loom.capture records the CPU's kernels; write the computation with operators both devices have, e.g. attention as matmul and softmax)}}
  %o = loom.aten "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %q, %q) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>]} : (tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  %l = loom.aten "aten::sum.default"(%o) {args = [#loom.arg<0>]} : (tensor<1x1x2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// CPU: loomrt.aten "aten::mkldnn_linear.default"
func.func @step(%x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>},
                %w: tensor<3x4xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  // expected-error@+1 {{kernel 'aten::mkldnn_linear.default' runs only on the CPU}}
  %y = loom.aten "aten::mkldnn_linear.default"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %l = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>]} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Kernels CUDA has lower for cuda as for the CPU.
// CPU: loomrt.aten "aten::mul.Tensor"
func.func @step(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %y = loom.aten "aten::mul.Tensor"(%x, %x) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
