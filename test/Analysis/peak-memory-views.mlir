// RUN: loom-opt %s --loom-stats -o /dev/null 2>&1 | FileCheck %s
// RUN: loom-compile %s --optimizer=none --emit=mlir --summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=RT

// Hand-computed predicted peak memory of how FSDP unpacks a gathered buffer:
// a split's pieces are views that keep the whole buffer alive, a reshape of
// a strided piece copies it, and a reshape of a contiguous one (a piece of
// a [1, n] tensor, as on one rank) is a view. Persistent: w and x, 2x12xf32
// each, 96 + 96 = 192 bytes. Activations (op index: storage [first, last]):
//   0 %b  96 B  [0, 3]  (its pieces %p#0 and %p#1 are read by ops 2, 3)
//   1 %p  views of %b, allocate nothing (%p#2 is never read)
//   2 %c  32 B  [2, 4]  (a copy: %p#0 is two strided rows)
//   3 %d  32 B  [3, 4]
//   4 %s  64 B  [4, 8]  (its views %v, %q and %e are read up to op 8)
//   5 %v, 6 %q, 7 %e: views of %s (%q#0 is contiguous, so %e is a view)
//   8 %l   4 B  [8, end] (returned)
// Live per op: 96, 96, 128, 160, 128, 64, 64, 64, 68: the peak is 160 bytes
// at op 3, 192 + 160 = 352 in all. (Counting the pieces as new tensors gives
// 192 at the split; counting %e as a copy, op 7 would hold 96.)

// The lowered program (loomrt.aten, with frees) aliases by the same rule
// (OpClassification's getAliasedOperand), so its prediction is the same.

// CHECK: predicted peak memory: 352 bytes (persistent 192 + activations 160, at 'aten::reshape.default' in 'unpack')
// RT: predicted peak memory 352 bytes (persistent 192 + activations 160)
func.func @step(%w: tensor<2x12xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %x: tensor<2x12xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step} {
  %b = loom.aten "aten::add.Tensor"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x12xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
  %p:3 = loom.aten "aten::split_with_sizes.default"(%b) {args = [#loom.arg<0>, [4, 4, 4], 1]} : (tensor<2x12xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %c = loom.aten "aten::reshape.default"(%p#0) {args = [#loom.arg<0>, [8]]} : (tensor<2x4xf32>) -> tensor<8xf32>
  %d = loom.aten "aten::reshape.default"(%p#1) {args = [#loom.arg<0>, [8]], loom.module = "unpack"} : (tensor<2x4xf32>) -> tensor<8xf32>
  %s = loom.aten "aten::cat.default"(%c, %d) {args = [[#loom.arg<0>, #loom.arg<1>], 0]} : (tensor<8xf32>, tensor<8xf32>) -> tensor<16xf32>
  %v = loom.aten "aten::view.default"(%s) {args = [#loom.arg<0>, [1, 16]]} : (tensor<16xf32>) -> tensor<1x16xf32>
  %q:2 = loom.aten "aten::split_with_sizes.default"(%v) {args = [#loom.arg<0>, [8, 8], 1]} : (tensor<1x16xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>)
  %e = loom.aten "aten::reshape.default"(%q#0) {args = [#loom.arg<0>, [2, 4]]} : (tensor<1x8xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%e) {args = [#loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
