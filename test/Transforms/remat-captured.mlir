// RUN: loom-opt %s --split-input-file --loom-remat="mode=captured" | FileCheck %s

// The checkpoint regions capture recorded (torch.utils.checkpoint with a
// policy): one region per loom.ac_region id, whose module is the common
// module of its ops. Region 1 saves its matmul (must_save) and recomputes
// the rest; region 0 recomputes everything its policy lets it, and its
// dropout, though tagged prefer_recompute, is random and stays saved.

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<8x8xf32> {loom.name = "fc0.weight"
// CHECK-SAME: %[[W1:[^:]*]]: tensor<8x8xf32> {loom.name = "fc1.weight"
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32> {loom.name = "x"
// CHECK: %[[DROP:.*]]:2 = loom.aten "aten::native_dropout.default"
// CHECK: %[[H1:.*]] = loom.aten "aten::mm.default"
// CHECK: loom.recompute "layers.1" (%[[W1]], %[[H1]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: loom.aten "aten::t.default"
// CHECK-NEXT: loom.aten "aten::relu.default"
// CHECK-NEXT: loom.aten "aten::detach.default"
// CHECK-NEXT: loom.yield
// CHECK: loom.aten "aten::native_dropout_backward.default"(%{{.*}}, %[[DROP]]#1)
// CHECK-NEXT: loom.recompute "layers.0" (%[[W0]], %[[X]])
// CHECK-NOT: native_dropout
// CHECK: loom.yield
func.func @step(%w0: tensor<8x8xf32> {loom.name = "fc0.weight", loom.role = #loom.role<parameter>},
                %w1: tensor<8x8xf32> {loom.name = "fc1.weight", loom.role = #loom.role<parameter>},
                %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "fc0.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "fc1.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>, loom.ac_region = 0 : i64, loom.ac_policy = #loom.ac_policy<prefer_recompute>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h0 = loom.aten "aten::mm.default"(%x, %t0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>, loom.ac_region = 0 : i64, loom.ac_policy = #loom.ac_policy<prefer_recompute>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r0 = loom.aten "aten::relu.default"(%h0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>, loom.ac_region = 0 : i64, loom.ac_policy = #loom.ac_policy<prefer_recompute>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d0 = loom.aten "aten::detach.default"(%r0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>, loom.ac_region = 0 : i64, loom.ac_policy = #loom.ac_policy<prefer_recompute>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n0, %m0 = loom.aten "aten::native_dropout.default"(%r0) {args = [#loom.arg<0>, 5.000000e-01, true], loom.module = "layers.0.drop", loom.phase = #loom.phase<forward>, loom.ac_region = 0 : i64, loom.ac_policy = #loom.ac_policy<prefer_recompute>} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  %y0 = loom.aten "aten::add.Tensor"(%n0, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>, loom.ac_region = 0 : i64, loom.ac_policy = #loom.ac_policy<prefer_recompute>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>, loom.ac_region = 1 : i64, loom.ac_policy = #loom.ac_policy<prefer_recompute>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h1 = loom.aten "aten::mm.default"(%y0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>, loom.ac_region = 1 : i64, loom.ac_policy = #loom.ac_policy<must_save>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r1 = loom.aten "aten::relu.default"(%h1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>, loom.ac_region = 1 : i64, loom.ac_policy = #loom.ac_policy<prefer_recompute>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d1 = loom.aten "aten::detach.default"(%r1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>, loom.ac_region = 1 : i64, loom.ac_policy = #loom.ac_policy<prefer_recompute>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
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
