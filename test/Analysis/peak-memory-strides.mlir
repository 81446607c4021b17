// RUN: loom-opt %s --split-input-file --loom-stats -o /dev/null 2>&1 | FileCheck %s

// Whether a reshape copies follows the strides each view gives its base,
// by ATen's rules: a transpose of a transpose is contiguous, so its reshape
// is a view; a permuted or expanded tensor is not, so its reshape copies,
// and a copy (`_to_copy`, as FSDP casts a gradient) keeps a permuted
// tensor's strides. Each case is hand-computed; persistent: w and x,
// 4x6xf32 each, 96 + 96 = 192 bytes.

// Op index: storage [first, last]:
//   0 %a  96 B  [0, 4]  (read through %r by op 4)
//   1 %t, 2 %tt, 3 %r: views of %a (%r reshapes t(t(%a)), contiguous)
//   4 %l   4 B  [4, end] (returned)
// Live per op: 96, 96, 96, 96, 100: the peak is 100 bytes at op 4, 292 in
// all. (Counting %r as a copy, op 3 would hold 192.)
// CHECK: predicted peak memory: 292 bytes (persistent 192 + activations 100, at 'aten::sum.default' in 'transposed')
func.func @step(%w: tensor<4x6xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %x: tensor<4x6xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step} {
  %a = loom.aten "aten::add.Tensor"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %t = loom.aten "aten::t.default"(%a) {args = [#loom.arg<0>]} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %tt = loom.aten "aten::t.default"(%t) {args = [#loom.arg<0>]} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %r = loom.aten "aten::reshape.default"(%tt) {args = [#loom.arg<0>, [24]]} : (tensor<4x6xf32>) -> tensor<24xf32>
  %l = loom.aten "aten::sum.default"(%r) {args = [#loom.arg<0>], loom.module = "transposed"} : (tensor<24xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

//   0 %p  a view of x (permuted)
//   1 %q  96 B  [1, 2]  (a copy: %p is not contiguous)
//   2 %m   4 B  [2, 3]  (read through %e by op 4)
//   3 %e  a view of %m (expanded: strides 0)
//   4 %f  96 B  [4, 5]  (a copy)
//   5 %n   4 B  [5, end] (returned)
// Live per op: 0, 96, 100, 4, 100, 100: the peak is 100 bytes, first at
// op 2, 292 in all. (Counting %q as a view of x, op 2 would hold 4 and the
// peak would be op 4's; counting %f as a view too, 8 bytes.)
// CHECK: predicted peak memory: 292 bytes (persistent 192 + activations 100, at 'aten::sum.default' in 'permuted')
func.func @step(%w: tensor<4x6xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %x: tensor<4x6xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step} {
  %p = loom.aten "aten::permute.default"(%x) {args = [#loom.arg<0>, [1, 0]]} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %q = loom.aten "aten::reshape.default"(%p) {args = [#loom.arg<0>, [24]]} : (tensor<6x4xf32>) -> tensor<24xf32>
  %m = loom.aten "aten::sum.default"(%q) {args = [#loom.arg<0>], loom.module = "permuted"} : (tensor<24xf32>) -> tensor<f32>
  %e = loom.aten "aten::expand.default"(%m) {args = [#loom.arg<0>, [4, 6]]} : (tensor<f32>) -> tensor<4x6xf32>
  %f = loom.aten "aten::reshape.default"(%e) {args = [#loom.arg<0>, [24]]} : (tensor<4x6xf32>) -> tensor<24xf32>
  %n = loom.aten "aten::sum.default"(%f) {args = [#loom.arg<0>], loom.module = "expanded"} : (tensor<24xf32>) -> tensor<f32>
  return %n : tensor<f32>
}

// -----

//   0 %p  a view of x (permuted)
//   1 %c  192 B [1, 2]  (f64, permuted as %p: _to_copy keeps a dense layout)
//   2 %q  192 B [2, 3]  (a copy)
//   3 %m    8 B [3, 4]
//   4 %o    4 B [4, end] (returned)
// Live per op: 0, 192, 384, 200, 12: the peak is 384 bytes at op 2, 576 in
// all. (Counting %c as row-major, %q would be a view and op 2 would hold
// 192.)
// CHECK: predicted peak memory: 576 bytes (persistent 192 + activations 384, at 'aten::reshape.default' in 'cast')
func.func @step(%w: tensor<4x6xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %x: tensor<4x6xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step} {
  %p = loom.aten "aten::permute.default"(%x) {args = [#loom.arg<0>, [1, 0]]} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %c = loom.aten "aten::_to_copy.default"(%p) {args = [#loom.arg<0>], kwargs = {dtype = f64}} : (tensor<6x4xf32>) -> tensor<6x4xf64>
  %q = loom.aten "aten::reshape.default"(%c) {args = [#loom.arg<0>, [24]], loom.module = "cast"} : (tensor<6x4xf64>) -> tensor<24xf64>
  %m = loom.aten "aten::sum.default"(%q) {args = [#loom.arg<0>]} : (tensor<24xf64>) -> tensor<f64>
  %o = loom.aten "aten::_to_copy.default"(%m) {args = [#loom.arg<0>], kwargs = {dtype = f32}} : (tensor<f64>) -> tensor<f32>
  return %o : tensor<f32>
}
