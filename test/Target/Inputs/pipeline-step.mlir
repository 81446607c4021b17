// A pipelined step by hand, as loom-pipeline-schedule makes one
// (docs/pipeline.md): two stages of one linear layer each on a mesh of two
// pipeline ranks, one microbatch. Rank 0 runs the first layer's forward,
// sends the activation, receives its gradient and runs the backward; rank
// 1 receives the activation, runs the second layer and the loss
// (sum(y * t)), its backward, and sends the activation's gradient back.
// Used by test/Conversion/lower-to-rt-pipeline.mlir and
// test/Target/pipeline-artifact.test (through add_weights.py).
loom.mesh @pp shape [2] axes ["pp"]

func.func @stage0(%w0: tensor<8x8xf32> {loom.name = "layers.0.weight", loom.role = #loom.role<parameter>},
                  %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.batch_index = 0 : i64})
    -> (tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.weight"})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  %h = loom.aten "aten::mm.default"(%x, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = loom.send_start %h on @pp axes ["pp"] peer 1 tag 0 {loom.module = "layers.0", loom.phase = #loom.phase<forward>} : tensor<4x8xf32> -> !loom.future<none>
  %r = loom.recv_start on @pp axes ["pp"] peer 1 tag 1 {loom.module = "layers.0", loom.phase = #loom.phase<backward>} : !loom.future<tensor<4x8xf32>>
  loom.wait %s {loom.module = "layers.0", loom.phase = #loom.phase<forward>} : !loom.future<none>
  %gh = loom.wait %r {loom.module = "layers.0", loom.phase = #loom.phase<backward>} : !loom.future<tensor<4x8xf32>> -> tensor<4x8xf32>
  %xt = loom.aten "aten::t.default"(%x) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw0 = loom.aten "aten::mm.default"(%xt, %gh) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %gw0 : tensor<8x8xf32>
}

func.func @stage1(%w1: tensor<8x8xf32> {loom.name = "layers.1.weight", loom.role = #loom.role<parameter>},
                  %t: tensor<4x8xf32> {loom.name = "t", loom.role = #loom.role<input>, loom.batch_index = 1 : i64})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.weight"})
    attributes {loom.step, loom.program_ranks = array<i64: 1>} {
  %r = loom.recv_start on @pp axes ["pp"] peer 0 tag 0 {loom.module = "layers.1", loom.phase = #loom.phase<forward>} : !loom.future<tensor<4x8xf32>>
  %h = loom.wait %r {loom.module = "layers.1", loom.phase = #loom.phase<forward>} : !loom.future<tensor<4x8xf32>> -> tensor<4x8xf32>
  %y = loom.aten "aten::mm.default"(%h, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %yt = loom.aten "aten::mul.Tensor"(%y, %t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = loom.aten "aten::sum.default"(%yt) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %w1t = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gh = loom.aten "aten::mm.default"(%t, %w1t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = loom.send_start %gh on @pp axes ["pp"] peer 0 tag 1 {loom.module = "layers.1", loom.phase = #loom.phase<backward>} : tensor<4x8xf32> -> !loom.future<none>
  %ht = loom.aten "aten::t.default"(%h) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw1 = loom.aten "aten::mm.default"(%ht, %t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  loom.wait %s {loom.module = "layers.1", loom.phase = #loom.phase<backward>} : !loom.future<none>
  return %l, %gw1 : tensor<f32>, tensor<8x8xf32>
}
