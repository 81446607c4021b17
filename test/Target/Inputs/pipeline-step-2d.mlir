// The pipelined step of pipeline-step.mlir on a 2-D mesh, pipeline x data
// parallel: each stage runs on a row of two ranks (stage 0 on ranks 0 and 1,
// stage 1 on 2 and 3), each rank with its half of the batch; transfers run
// over "pp" between the ranks of one column, gradients are averaged over
// "dp", and the loss is the average of the two halves' losses.
loom.mesh @pp shape [2, 2] axes ["pp", "dp"]

func.func @stage0(%w0: tensor<8x8xf32> {loom.name = "layers.0.weight", loom.role = #loom.role<parameter>},
                  %x: tensor<2x8xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.batch_index = 0 : i64, loom.split = #loom.split<@pp, axes = ["dp"], dim = 0>})
    -> (tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.weight"})
    attributes {loom.step, loom.program_ranks = array<i64: 0, 1>} {
  %h = loom.aten "aten::mm.default"(%x, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %s = loom.send_start %h on @pp axes ["pp"] peer 1 tag 0 {loom.module = "layers.0", loom.phase = #loom.phase<forward>} : tensor<2x8xf32> -> !loom.future<none>
  %r = loom.recv_start on @pp axes ["pp"] peer 1 tag 1 {loom.module = "layers.0", loom.phase = #loom.phase<backward>} : !loom.future<tensor<2x8xf32>>
  loom.wait %s {loom.module = "layers.0", loom.phase = #loom.phase<forward>} : !loom.future<none>
  %gh = loom.wait %r {loom.module = "layers.0", loom.phase = #loom.phase<backward>} : !loom.future<tensor<2x8xf32>> -> tensor<2x8xf32>
  %xt = loom.aten "aten::t.default"(%x) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %gw0 = loom.aten "aten::mm.default"(%xt, %gh) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<8x2xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  %a0 = loom.all_reduce_start %gw0 on @pp axes ["dp"] reduce <avg> {loom.module = "layers.0", loom.phase = #loom.phase<backward>} : tensor<8x8xf32> -> !loom.future<tensor<8x8xf32>>
  %g0 = loom.wait %a0 {loom.module = "layers.0", loom.phase = #loom.phase<backward>} : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
  return %g0 : tensor<8x8xf32>
}

func.func @stage1(%w1: tensor<8x8xf32> {loom.name = "layers.1.weight", loom.role = #loom.role<parameter>},
                  %t: tensor<2x8xf32> {loom.name = "t", loom.role = #loom.role<input>, loom.batch_index = 1 : i64, loom.split = #loom.split<@pp, axes = ["dp"], dim = 0>})
    -> (tensor<f32> {loom.role = #loom.role<loss>, loom.partial = #loom.partial<@pp, axes = ["dp"], avg>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.weight"})
    attributes {loom.step, loom.program_ranks = array<i64: 2, 3>} {
  %r = loom.recv_start on @pp axes ["pp"] peer 0 tag 0 {loom.module = "layers.1", loom.phase = #loom.phase<forward>} : !loom.future<tensor<2x8xf32>>
  %h = loom.wait %r {loom.module = "layers.1", loom.phase = #loom.phase<forward>} : !loom.future<tensor<2x8xf32>> -> tensor<2x8xf32>
  %y = loom.aten "aten::mm.default"(%h, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %yt = loom.aten "aten::mul.Tensor"(%y, %t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %l = loom.aten "aten::sum.default"(%yt) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x8xf32>) -> tensor<f32>
  %w1t = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gh = loom.aten "aten::mm.default"(%t, %w1t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %s = loom.send_start %gh on @pp axes ["pp"] peer 0 tag 1 {loom.module = "layers.1", loom.phase = #loom.phase<backward>} : tensor<2x8xf32> -> !loom.future<none>
  %ht = loom.aten "aten::t.default"(%h) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %gw1 = loom.aten "aten::mm.default"(%ht, %t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<8x2xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  loom.wait %s {loom.module = "layers.1", loom.phase = #loom.phase<backward>} : !loom.future<none>
  %a1 = loom.all_reduce_start %gw1 on @pp axes ["dp"] reduce <avg> {loom.module = "layers.1", loom.phase = #loom.phase<backward>} : tensor<8x8xf32> -> !loom.future<tensor<8x8xf32>>
  %g1 = loom.wait %a1 {loom.module = "layers.1", loom.phase = #loom.phase<backward>} : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
  return %l, %g1 : tensor<f32>, tensor<8x8xf32>
}
