// RUN: loom-opt %s --loom-stats -o /dev/null 2>&1 | FileCheck %s

// Point-to-point transfers in the predicted peak, hand-computed. Persistent:
// x, 2x8xf32, 64 bytes. Activations (op index: storage [first, last op]):
//   0 the recv's buffer  64 B  [0, 6]  (allocated when it starts; the wait
//                                      hands it out as %g, which op 6 reads)
//   1 %h                 64 B  [1, 4]  (the send reads it until its wait)
//   2 the send           nothing
//   3 %u                 64 B  [3, 3]  (nothing reads it)
//   4 the send's wait, 5 the recv's wait: nothing new
//   6 %l                  4 B  [6, end] (returned)
// Live per op: 64, 128, 128, 192, 128, 64, 68: the peak is 192 bytes at op
// 3, 256 in all. (Counting the recv from its wait, or the send's input only
// to the send, the peak would be 128.)

// CHECK: predicted peak memory: 256 bytes (persistent 64 + activations 192, at 'aten::neg.default' in 'stage')
loom.mesh @pp shape [2] axes ["pp"]
func.func @stage(%x: tensor<2x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.program_ranks = array<i64: 0, 1>} {
  %r = loom.recv_start on @pp axes ["pp"] peer 1 tag 0 : !loom.future<tensor<2x8xf32>>
  %h = loom.aten "aten::relu.default"(%x) {args = [#loom.arg<0>]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = loom.send_start %h on @pp axes ["pp"] peer 1 tag 1 : tensor<2x8xf32> -> !loom.future<none>
  %u = loom.aten "aten::neg.default"(%x) {args = [#loom.arg<0>], loom.module = "stage"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  loom.wait %s : !loom.future<none>
  %g = loom.wait %r : !loom.future<tensor<2x8xf32>> -> tensor<2x8xf32>
  %l = loom.aten "aten::sum.default"(%g) {args = [#loom.arg<0>]} : (tensor<2x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
