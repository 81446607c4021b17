// loom-remat is the first pass of the compile pipeline, before gradient
// accumulation and the distribution passes, as checkpoint_wrapper comes
// before fully_shard; --remat and its lists reach it.
// RUN: loom-compile --print-pipeline --remat=selective --remat-save-ops=aten::gelu --dp=fsdp --world-size=2 --microbatches=2 | FileCheck %s
// CHECK: builtin.module(func.func(loom-remat{mode=selective  save-ops={aten::gelu}}),func.func(loom-accumulate-gradients{microbatches=2}),loom-fsdp{
// RUN: loom-compile --print-pipeline --remat=full --remat-modules=layers.0,layers.1 | FileCheck %s --check-prefix=MODULES
// MODULES: builtin.module(func.func(loom-remat{mode=full modules={layers.0,layers.1} }),func.func(loom-attach-optimizer
// Without --remat there is no such pass.
// RUN: loom-compile --print-pipeline | FileCheck %s --check-prefix=NONE
// NONE-NOT: loom-remat

// The compiled program runs the regions inline: the backward recomputes the
// relu of each block in phase backward (the lowering gives the inlined
// ops the region's phase).
// RUN: loom-compile %s --remat=full --emit=program | FileCheck %s --check-prefix=PROGRAM
// PROGRAM-COUNT-2: "kernel":"aten::relu",{{.*}}"phase":"forward"
// PROGRAM: "kernel":"aten::relu",{{.*}}"module":"layers.1","phase":"backward"
// PROGRAM: "kernel":"aten::relu",{{.*}}"module":"layers.0","phase":"backward"
// PROGRAM-NOT: "kernel":"aten::relu"

module attributes {loom.weights = "none.safetensors"} {
func.func @step(%w0: tensor<8x8xf32> {loom.name = "layers.0.fc.weight", loom.role = #loom.role<parameter>},
                %w1: tensor<8x8xf32> {loom.name = "layers.1.fc.weight", loom.role = #loom.role<parameter>},
                %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.fc.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.fc.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h0 = loom.aten "aten::mm.default"(%x, %t0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r0 = loom.aten "aten::relu.default"(%h0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d0 = loom.aten "aten::detach.default"(%r0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n0, %m0 = loom.aten "aten::native_dropout.default"(%r0) {args = [#loom.arg<0>, 5.000000e-01, true], loom.module = "layers.0.drop", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  %y0 = loom.aten "aten::add.Tensor"(%n0, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h1 = loom.aten "aten::mm.default"(%y0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r1 = loom.aten "aten::relu.default"(%h1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d1 = loom.aten "aten::detach.default"(%r1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = loom.aten "aten::sum.default"(%r1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %ge = loom.aten "aten::expand.default"(%g) {args = [#loom.arg<0>, [4, 8]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<4x8xf32>
  %gr1 = loom.aten "aten::threshold_backward.default"(%ge, %d1) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr1t = loom.aten "aten::t.default"(%gr1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw1 = loom.aten "aten::mm.default"(%gr1t, %y0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %tt1 = loom.aten "aten::t.default"(%t1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gy0 = loom.aten "aten::mm.default"(%gr1, %tt1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gn0 = loom.aten "aten::native_dropout_backward.default"(%gy0, %m0) {args = [#loom.arg<0>, #loom.arg<1>, 2.000000e+00], loom.module = "layers.0.drop", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xi1>) -> tensor<4x8xf32>
  %gr0 = loom.aten "aten::threshold_backward.default"(%gn0, %d0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr0t = loom.aten "aten::t.default"(%gr0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw0 = loom.aten "aten::mm.default"(%gr0t, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %l, %gw0, %gw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}
}
