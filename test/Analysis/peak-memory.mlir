// RUN: loom-opt %s --loom-stats -o /dev/null 2>&1 | FileCheck %s
// RUN: loom-opt %s --loom-stats=json=true -o /dev/null 2>&1 | FileCheck %s --check-prefix=JSON

// Hand-computed predicted peak memory. Persistent: w and x, 2x8xf32 each,
// 64 + 64 = 128 bytes. Activations (op index: storage [first, last op]):
//   0 %h  64 B  [0, 5]  (its view %hv is read by op 5)
//   1 %hv view of %h, allocates nothing
//   2 %r  64 B  [2, 4]
//   3 %u 128 B  [3, 3]  (nothing reads it)
//   4 %g  64 B  [4, 6]  (read by the update)
//   5 %l   4 B  [5, end] (returned)
//   6 the update writes %w in place, allocates nothing
// Live per op: 64, 64, 128, 256, 192, 132, 68: the peak is 256 bytes at
// op 3, 128 + 256 = 384 in all. (Without the view keeping %h alive the
// peak would be 192; without counting %u, 192 at op 4.) Live at op 3: %u
// (128 B, module blk) and %h, %r (64 B each, the root module); none has a
// phase.

// CHECK: predicted peak memory: 384 bytes (persistent 128 + activations 256, at 'aten::cat.default' in 'blk')
// CHECK-NEXT: live at the peak: <root> (untagged) 128; blk (untagged) 128;

// JSON: "memory": {
// JSON-NEXT: "largest_at_peak": [
// JSON-NEXT: {
// JSON-NEXT: "bytes": 128,
// JSON-NEXT: "group": "blk (untagged)",
// JSON-NEXT: "name": "aten::cat.default"
// JSON-NEXT: },
// JSON-NEXT: {
// JSON-NEXT: "bytes": 64,
// JSON-NEXT: "group": "<root> (untagged)",
// JSON-NEXT: "name": "aten::add.Tensor"
// JSON-NEXT: },
// JSON-NEXT: {
// JSON-NEXT: "bytes": 64,
// JSON-NEXT: "group": "<root> (untagged)",
// JSON-NEXT: "name": "aten::relu.default"
// JSON-NEXT: }
// JSON-NEXT: ],
// JSON-NEXT: "live_at_peak": [
// JSON-NEXT: {
// JSON-NEXT: "bytes": 128,
// JSON-NEXT: "group": "<root> (untagged)"
// JSON-NEXT: },
// JSON-NEXT: {
// JSON-NEXT: "bytes": 128,
// JSON-NEXT: "group": "blk (untagged)"
// JSON-NEXT: }
// JSON-NEXT: ],
// JSON-NEXT: "peak_activation_bytes": 256,
// JSON-NEXT: "peak_bytes": 384,
// JSON-NEXT: "peak_module": "blk",
// JSON-NEXT: "peak_op": "aten::cat.default",
// JSON-NEXT: "persistent_bytes": 128
func.func @step(%w: tensor<2x8xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %x: tensor<2x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<2x8xf32> {loom.role = #loom.role<param_update>, loom.target = "w"})
    attributes {loom.step} {
  %h = loom.aten "aten::add.Tensor"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %hv = loom.aten "aten::view.default"(%h) {args = [#loom.arg<0>, [16]]} : (tensor<2x8xf32>) -> tensor<16xf32>
  %r = loom.aten "aten::relu.default"(%h) {args = [#loom.arg<0>]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %u = loom.aten "aten::cat.default"(%r, %r) {args = [[#loom.arg<0>, #loom.arg<1>], 0], loom.module = "blk"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  %g = loom.aten "aten::mul.Tensor"(%r, %w) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %l = loom.aten "aten::sum.default"(%hv) {args = [#loom.arg<0>]} : (tensor<16xf32>) -> tensor<f32>
  %w1 = loom.optimizer_update #loom.sgd<> param %w grad %g : tensor<2x8xf32>
  return %l, %w1 : tensor<f32>, tensor<2x8xf32>
}
