// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 units=blk reshard-after-forward=true" | FileCheck %s

// A region may read a saved value computed from parameters alone (here the
// transposed weight): FSDP re-derives it in backward from the unit's
// backward all-gather, as it does for any backward op, so no unsharded
// parameter lives from forward into backward and no extra gather is made.

// CHECK-LABEL: func.func @step
// CHECK-COUNT-1: loom.all_gather_start {{.*}}loom.phase = #loom.phase<forward>
// CHECK: %[[F:.*]] = loom.all_gather_start %{{.*}} {loom.module = "blk", loom.phase = #loom.phase<backward>}
// CHECK-NEXT: %[[G:.*]] = loom.wait %[[F]]
// CHECK-NEXT: %[[W:.*]] = loom.aten "aten::view.default"(%[[G]])
// CHECK-NEXT: %[[T:.*]] = loom.aten "aten::t.default"(%[[W]]) {{.*}}loom.phase = #loom.phase<backward>
// CHECK-NEXT: loom.recompute "blk" (%[[T]], %arg1)
// CHECK-NOT: loom.all_gather_start
func.func @step(%w: tensor<4x4xf32> {loom.name = "blk.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "blk.weight"})
    attributes {loom.step} {
  %t = loom.aten "aten::t.default"(%w) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %h = loom.aten "aten::mm.default"(%x, %t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r = loom.aten "aten::relu.default"(%h) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%r) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [2, 4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<2x4xf32>
  %rr = loom.recompute "blk" (%t, %x) : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%bt: tensor<4x4xf32>, %bx: tensor<2x4xf32>):
    %bh = loom.aten "aten::mm.default"(%bx, %bt) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %br = loom.aten "aten::relu.default"(%bh) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    loom.yield %br : tensor<2x4xf32>
  } {loom.module = "blk", loom.phase = #loom.phase<backward>}
  %d = loom.aten "aten::threshold_backward.default"(%g, %rr) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "blk", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %dt = loom.aten "aten::t.default"(%d) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw = loom.aten "aten::mm.default"(%dt, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  return %l, %gw : tensor<f32>, tensor<4x4xf32>
}
