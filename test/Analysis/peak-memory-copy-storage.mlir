// RUN: loom-opt %s --loom-stats -o /dev/null 2>&1 | FileCheck %s
// RUN: loom-compile %s --optimizer=none --emit=mlir --summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=RT

// Hand-computed predicted peak memory of the functional copy and scatter
// kernels (PeakMemory.cpp, getResultStorageBytes): ATen clones the whole
// storage of their first operand and returns a view of the clone, so where
// that operand is a view their result holds its base's storage; through an
// expand (overlapping strides) ATen clones densely instead.
// Persistent: x 8x8xf32 256 B, y 8x1 32 B, z 8x4 128 B: 416 B.
// Activations (op index: storage [first, last]):
//    0 %s   a view of x (column 0, 8x1)
//    1 %c   copy into %s: x's 256 B, not 32     [1, 2]
//    2 %a   4 B                                  [2, 10]
//    3 %s1, 4 %e: a view of x's column 1, expanded to 8x4
//    5 %d   copy into %e: dense, 128 B, not 256  [5, 9]
//    6 %h   a view of x (columns 0..3, 8x4)
//    7 %g   slice_scatter into %h: 256 B, not 128 [7, 8]
//    8 %t, 9 %b, 10 %ab, 11 %l: 4 B each
// Live per op: 0, 256, 260, 4, 4, 132, 132, 388, 392, 140, 16, 12: the
// peak is 392 at op 8, 416 + 392 = 808 in all. (At the types' sizes the
// peak would be 264, at op 8; cloning the expand's base, 520.)

// CHECK: predicted peak memory: 808 bytes (persistent 416 + activations 392, at 'aten::sum.default' in 'tail')
// RT: predicted peak memory 808 bytes (persistent 416 + activations 392)
func.func @step(%x: tensor<8x8xf32> {loom.name = "x", loom.role = #loom.role<input>},
                %y: tensor<8x1xf32> {loom.name = "y", loom.role = #loom.role<input>},
                %z: tensor<8x4xf32> {loom.name = "z", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step} {
  %s = loom.aten "aten::slice.Tensor"(%x) {args = [#loom.arg<0>, 1, 0, 1]} : (tensor<8x8xf32>) -> tensor<8x1xf32>
  %c = loom.aten "aten::copy.default"(%s, %y) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<8x1xf32>, tensor<8x1xf32>) -> tensor<8x1xf32>
  %a = loom.aten "aten::sum.default"(%c) {args = [#loom.arg<0>]} : (tensor<8x1xf32>) -> tensor<f32>
  %s1 = loom.aten "aten::slice.Tensor"(%x) {args = [#loom.arg<0>, 1, 1, 2]} : (tensor<8x8xf32>) -> tensor<8x1xf32>
  %e = loom.aten "aten::expand.default"(%s1) {args = [#loom.arg<0>, [8, 4]]} : (tensor<8x1xf32>) -> tensor<8x4xf32>
  %d = loom.aten "aten::copy.default"(%e, %z) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %h = loom.aten "aten::slice.Tensor"(%x) {args = [#loom.arg<0>, 1, 0, 4]} : (tensor<8x8xf32>) -> tensor<8x4xf32>
  %g = loom.aten "aten::slice_scatter.default"(%h, %y) {args = [#loom.arg<0>, #loom.arg<1>, 1, 0, 1]} : (tensor<8x4xf32>, tensor<8x1xf32>) -> tensor<8x4xf32>
  %t = loom.aten "aten::sum.default"(%g) {args = [#loom.arg<0>], loom.module = "tail"} : (tensor<8x4xf32>) -> tensor<f32>
  %b = loom.aten "aten::sum.default"(%d) {args = [#loom.arg<0>]} : (tensor<8x4xf32>) -> tensor<f32>
  %ab = loom.aten "aten::add.Tensor"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %l = loom.aten "aten::add.Tensor"(%ab, %t) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}
