// RUN: loom-opt --loom-pipeline-split="stages=2" %s | FileCheck %s

// The default cut prices what runs outside the units by where it runs. The
// model under a loss wrapper (`net`) starts with a cheap op of its own and
// ends with an expensive one (a projection to 1024 outputs by a parameter
// of its own, 8 x 16 x 1024 multiply-adds against 8 x 16 x 16 per unit):
// that one runs after the units, so it loads the last stage, and the
// balanced cut is {u0, u1} | {u2, the projection}. It was priced by where
// `net` starts, before the units, as stage 0's, and the cut was
// {u0} | {u1, u2}.

// CHECK: module attributes {loom.pipeline_boundaries = ["net.u2"]}
// CHECK-LABEL: func.func @step_s0_forward(
// CHECK-SAME: loom.name = "net.u0.w"
// CHECK-SAME: loom.name = "net.u1.w"
// CHECK-LABEL: func.func @step_s1_forward(
// CHECK-SAME: loom.name = "net.u2.w"
// CHECK-SAME: loom.name = "net.head"

func.func @step(%w0: tensor<16x16xf32> {loom.name = "net.u0.w", loom.role = #loom.role<parameter>},
                %w1: tensor<16x16xf32> {loom.name = "net.u1.w", loom.role = #loom.role<parameter>},
                %w2: tensor<16x16xf32> {loom.name = "net.u2.w", loom.role = #loom.role<parameter>},
                %wh: tensor<16x1024xf32> {loom.name = "net.head", loom.role = #loom.role<parameter>},
                %x: tensor<8x16xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step} {
  %xs = loom.aten "aten::mul.Tensor"(%x, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "net", loom.phase = #loom.phase<forward>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %h0 = loom.aten "aten::mm.default"(%xs, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "net.u0", loom.phase = #loom.phase<forward>} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %h1 = loom.aten "aten::mm.default"(%h0, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "net.u1", loom.phase = #loom.phase<forward>} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %h2 = loom.aten "aten::mm.default"(%h1, %w2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "net.u2", loom.phase = #loom.phase<forward>} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %o = loom.aten "aten::mm.default"(%h2, %wh) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "net", loom.phase = #loom.phase<forward>} : (tensor<8x16xf32>, tensor<16x1024xf32>) -> tensor<8x1024xf32>
  %l = loom.aten "aten::sum.default"(%o) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<8x1024xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
