// A step with activation checkpointing, as loom-remat places it: the
// 3-unit MLP stack (layers.0: Linear 8->16 with bias and relu; layers.1:
// Linear 16->8 and relu; out: Linear 8->4; loss = sum) with layers.0 and
// layers.1 recomputed in backward. Each region sits right before the first
// backward use of what it recomputes, reads only saved values (the module's
// input, which the next module also saves, and its parameters) and yields
// what its module's backward reads: layers.1 yields its relu output and
// the transposed weight (a view of its parameter input), layers.0 its relu
// output. The same step without regions is remat-step-plain.mlir; the
// passes downstream of loom-remat must accept this one and, under FSDP,
// issue the same collectives in the same order for both.
func.func @step(%w0: tensor<16x8xf32> {loom.name = "layers.0.weight", loom.role = #loom.role<parameter>},
                %b0: tensor<16xf32> {loom.name = "layers.0.bias", loom.role = #loom.role<parameter>},
                %w1: tensor<8x16xf32> {loom.name = "layers.1.weight", loom.role = #loom.role<parameter>},
                %w2: tensor<4x8xf32> {loom.name = "out.weight", loom.role = #loom.role<parameter>},
                %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<16x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.weight"},
        tensor<16xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.bias"},
        tensor<8x16xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.weight"},
        tensor<4x8xf32> {loom.role = #loom.role<grad>, loom.target = "out.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %h0 = loom.aten "aten::addmm.default"(%b0, %x, %t0) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r0 = loom.aten "aten::relu.default"(%h0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %h1 = loom.aten "aten::mm.default"(%r0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %r1 = loom.aten "aten::relu.default"(%h1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t2 = loom.aten "aten::t.default"(%w2) {args = [#loom.arg<0>], loom.module = "out", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %o = loom.aten "aten::mm.default"(%r1, %t2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "out", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %l = loom.aten "aten::sum.default"(%o) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %go = loom.aten "aten::expand.default"(%g) {args = [#loom.arg<0>, [4, 4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<4x4xf32>
  %got = loom.aten "aten::t.default"(%go) {args = [#loom.arg<0>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gw2 = loom.aten "aten::mm.default"(%got, %r1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t2t = loom.aten "aten::t.default"(%t2) {args = [#loom.arg<0>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %gr1 = loom.aten "aten::mm.default"(%go, %t2t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %rc1:2 = loom.recompute "layers.1" (%r0, %w1) : (tensor<4x16xf32>, tensor<8x16xf32>) -> (tensor<4x8xf32>, tensor<16x8xf32>) {
  ^bb0(%rr0: tensor<4x16xf32>, %rw1: tensor<8x16xf32>):
    %ct1 = loom.aten "aten::t.default"(%rw1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
    %ch1 = loom.aten "aten::mm.default"(%rr0, %ct1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %cr1 = loom.aten "aten::relu.default"(%ch1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    loom.yield %cr1, %ct1 : tensor<4x8xf32>, tensor<16x8xf32>
  } {loom.module = "layers.1", loom.phase = #loom.phase<backward>}
  %gh1 = loom.aten "aten::threshold_backward.default"(%gr1, %rc1#0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gh1t = loom.aten "aten::t.default"(%gh1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw1 = loom.aten "aten::mm.default"(%gh1t, %r0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %t1t = loom.aten "aten::t.default"(%rc1#1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %gr0 = loom.aten "aten::mm.default"(%gh1, %t1t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %rc0 = loom.recompute "layers.0" (%w0, %b0, %x) : (tensor<16x8xf32>, tensor<16xf32>, tensor<4x8xf32>) -> tensor<4x16xf32> {
  ^bb0(%rw0: tensor<16x8xf32>, %rb0: tensor<16xf32>, %rx: tensor<4x8xf32>):
    %ct0 = loom.aten "aten::t.default"(%rw0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %ch0 = loom.aten "aten::addmm.default"(%rb0, %rx, %ct0) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %cr0 = loom.aten "aten::relu.default"(%ch0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    loom.yield %cr0 : tensor<4x16xf32>
  } {loom.module = "layers.0", loom.phase = #loom.phase<backward>}
  %gh0 = loom.aten "aten::threshold_backward.default"(%gr0, %rc0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %gh0t = loom.aten "aten::t.default"(%gh0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %gw0 = loom.aten "aten::mm.default"(%gh0t, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<16x4xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
  %gb0 = loom.aten "aten::sum.dim_IntList"(%gh0) {args = [#loom.arg<0>, [0], false], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x16xf32>) -> tensor<16xf32>
  return %l, %gw0, %gb0, %gw1, %gw2 : tensor<f32>, tensor<16x8xf32>, tensor<16xf32>, tensor<8x16xf32>, tensor<4x8xf32>
}
