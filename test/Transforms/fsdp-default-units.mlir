// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" | FileCheck %s
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 units=stack.1" | FileCheck %s --check-prefix=GIVEN
// RUN: loom-compile %s --dp=fsdp --world-size=2 --summary --emit=mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=SUMMARY
// RUN: loom-compile %s --dp=fsdp --world-size=2 --units=stack.1 --summary --emit=mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=SUMMARY-GIVEN

// loom-compile --summary says which units it took and why.
// SUMMARY: loom-compile: fsdp units (default: the model's repeated blocks): stack.0, stack.1, stack.2, <root>
// SUMMARY-GIVEN: loom-compile: fsdp units (--units): stack.1, <root>

// loom-fsdp's default units come from the model's structure: the blocks of
// the container with the most numbered children, whatever it is named, plus
// the root (PyTorch's MLPStack keeps its blocks at `stack.N`, not
// `layers.N`). `head.0` is a container with one numbered child and loses to
// `stack` and stays in the root unit. `--units` still overrides: with
// `units=stack.1` the other blocks are the root's.

// CHECK-LABEL: func.func @stack(
// CHECK: loom.all_gather_start {{.*}}loom.module = "stack.0", loom.phase = #loom.phase<forward>
// CHECK: loom.all_gather_start {{.*}}loom.module = "stack.1", loom.phase = #loom.phase<forward>
// CHECK: loom.all_gather_start {{.*}}loom.module = "stack.2", loom.phase = #loom.phase<forward>
// CHECK: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// CHECK-NOT: loom.all_gather_start {{.*}}phase<forward>
// CHECK-COUNT-4: loom.reduce_scatter_start
// CHECK-NOT: loom.reduce_scatter_start
// CHECK: return
// GIVEN-LABEL: func.func @stack(
// GIVEN: loom.all_gather_start {{.*}}loom.module = "stack.1", loom.phase = #loom.phase<forward>
// GIVEN-NOT: loom.all_gather_start {{.*}}loom.module = "stack.2"
// GIVEN-COUNT-2: loom.reduce_scatter_start
// GIVEN-NOT: loom.reduce_scatter_start
// GIVEN: return
func.func @stack(%w0: tensor<4x4xf32> {loom.name = "stack.0.weight", loom.role = #loom.role<parameter>},
                 %w1: tensor<4x4xf32> {loom.name = "stack.1.weight", loom.role = #loom.role<parameter>},
                 %w2: tensor<4x4xf32> {loom.name = "stack.2.weight", loom.role = #loom.role<parameter>},
                 %wh: tensor<4x4xf32> {loom.name = "head.0.weight", loom.role = #loom.role<parameter>},
                 %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "stack.0.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "stack.1.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "stack.2.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "head.0.weight"})
    attributes {loom.step} {
  %h0 = loom.aten "aten::mm.default"(%x, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "stack.0", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %h1 = loom.aten "aten::mm.default"(%h0, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "stack.1", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %h2 = loom.aten "aten::mm.default"(%h1, %w2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "stack.2", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %h3 = loom.aten "aten::mm.default"(%h2, %wh) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "head.0", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%h3) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %gh = loom.aten "aten::mul.Tensor"(%wh, %wh) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "head.0", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %g2 = loom.aten "aten::mul.Tensor"(%w2, %w2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "stack.2", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %g1 = loom.aten "aten::mul.Tensor"(%w1, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "stack.1", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %g0 = loom.aten "aten::mul.Tensor"(%w0, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "stack.0", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %l, %g0, %g1, %g2, %gh : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
