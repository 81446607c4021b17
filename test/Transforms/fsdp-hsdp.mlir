// RUN: loom-opt %s --loom-fsdp="mesh-shape=2,2" | FileCheck %s
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2,2" | FileCheck %s --check-prefix=COUNT
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2,2 gradient-divide-factor=8" | FileCheck %s --check-prefix=DIV

// HSDP on a (replicate=2, shard=2) mesh: parameters are sharded over
// "shard" and replicated over "replicate"; batches are split over both;
// each unit's gradients are reduce-scattered over "shard", then the shards
// are all-reduced over "replicate" (avg over all 4 data-parallel ranks).

// CHECK: loom.mesh @hsdp shape [2, 2] axes ["replicate", "shard"]
// CHECK-LABEL: func.func @step(
// CHECK-SAME: tensor<8x8xf32> {loom.name = "layers.0.weight", loom.role = #loom.role<parameter>, loom.shard = #loom.shard<@hsdp, axes = ["shard"], dim = 0, global = [15, 8]>}
// CHECK-SAME: tensor<2x8xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@hsdp, axes = ["replicate", "shard"], dim = 0>}
// CHECK-SAME: -> (tensor<f32> {loom.partial = #loom.partial<@hsdp, axes = ["replicate", "shard"], avg>, loom.role = #loom.role<loss>}
// CHECK: loom.all_gather_start %{{.*}} on @hsdp axes ["shard"] dim 0 {loom.module = "layers.0", loom.phase = #loom.phase<forward>} : tensor<72xf32> -> !loom.future<tensor<144xf32>>
// CHECK: %[[RS:.*]] = loom.reduce_scatter_start %{{.*}} on @hsdp axes ["shard"] dim 0 reduce <avg> {loom.module = "", loom.phase = #loom.phase<backward>} : tensor<32xf32> -> !loom.future<tensor<16xf32>>
// CHECK-NEXT: %[[P:.*]] = loom.wait %[[RS]]
// CHECK-NEXT: %[[AR:.*]] = loom.all_reduce_start %[[P]] on @hsdp axes ["replicate"] reduce <avg> {loom.module = "", loom.phase = #loom.phase<backward>} : tensor<16xf32> -> !loom.future<tensor<16xf32>>
// CHECK-NEXT: %[[G:.*]] = loom.wait %[[AR]]
// CHECK-NEXT: loom.aten "aten::view.default"(%[[G]]) {args = [#loom.arg<0>, [2, 8]]
// CHECK: loom.reduce_scatter_start %{{.*}} on @hsdp axes ["shard"] {{.*}} : tensor<144xf32> -> !loom.future<tensor<72xf32>>
// CHECK-NEXT: loom.wait
// CHECK-NEXT: loom.all_reduce_start %{{.*}} on @hsdp axes ["replicate"] reduce <avg> {loom.module = "layers.0", loom.phase = #loom.phase<backward>} : tensor<72xf32>

// One reduce-scatter and one all-reduce per unit (expected_AR =
// expected_RS for a 2-D mesh); all-gathers as for FSDP.
// COUNT-LABEL: func.func @step(
// COUNT-COUNT-3: loom.all_gather_start {{.*}}phase<forward>
// COUNT-NOT: all_reduce_start
// COUNT-COUNT-3: loom.reduce_scatter_start %{{.*}} on @hsdp axes ["shard"]{{.*}}phase<backward>
// COUNT-NOT: loom.reduce_scatter_start

// A custom factor divides once before the reduce-scatter; both
// collectives then sum.
// DIV-LABEL: func.func @step(
// DIV: loom.aten "aten::div.Tensor"(%{{.*}}) {args = [#loom.arg<0>, 8.000000e+00]
// DIV-NEXT: loom.reduce_scatter_start {{.*}} reduce <sum>
// DIV-NEXT: loom.wait
// DIV-NEXT: loom.all_reduce_start {{.*}} axes ["replicate"] reduce <sum>

func.func @step(%w0: tensor<15x8xf32> {loom.name = "layers.0.weight", loom.role = #loom.role<parameter>},
                %b0: tensor<15xf32> {loom.name = "layers.0.bias", loom.role = #loom.role<parameter>},
                %w1: tensor<8x15xf32> {loom.name = "layers.1.weight", loom.role = #loom.role<parameter>},
                %w2: tensor<4x8xf32> {loom.name = "out.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<15x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.weight"},
        tensor<15xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.bias"},
        tensor<8x15xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.weight"},
        tensor<4x8xf32> {loom.role = #loom.role<grad>, loom.target = "out.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<15x8xf32>) -> tensor<8x15xf32>
  %h0 = loom.aten "aten::addmm.default"(%b0, %x, %t0) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<15xf32>, tensor<2x8xf32>, tensor<8x15xf32>) -> tensor<2x15xf32>
  %r0 = loom.aten "aten::relu.default"(%h0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<2x15xf32>) -> tensor<2x15xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<8x15xf32>) -> tensor<15x8xf32>
  %h1 = loom.aten "aten::mm.default"(%r0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<2x15xf32>, tensor<15x8xf32>) -> tensor<2x8xf32>
  %t2 = loom.aten "aten::t.default"(%w2) {args = [#loom.arg<0>], loom.module = "out", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %o = loom.aten "aten::mm.default"(%h1, %t2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "out", loom.phase = #loom.phase<forward>} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%o) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %go = loom.aten "aten::expand.default"(%g) {args = [#loom.arg<0>, [2, 4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<2x4xf32>
  %got = loom.aten "aten::t.default"(%go) {args = [#loom.arg<0>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw2 = loom.aten "aten::mm.default"(%got, %h1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  %t2t = loom.aten "aten::t.default"(%t2) {args = [#loom.arg<0>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %gh1 = loom.aten "aten::mm.default"(%go, %t2t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %gh1t = loom.aten "aten::t.default"(%gh1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %gw1 = loom.aten "aten::mm.default"(%gh1t, %r0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<8x2xf32>, tensor<2x15xf32>) -> tensor<8x15xf32>
  %t1t = loom.aten "aten::t.default"(%t1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<15x8xf32>) -> tensor<8x15xf32>
  %gr0 = loom.aten "aten::mm.default"(%gh1, %t1t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x8xf32>, tensor<8x15xf32>) -> tensor<2x15xf32>
  %gh0 = loom.aten "aten::threshold_backward.default"(%gr0, %r0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x15xf32>, tensor<2x15xf32>) -> tensor<2x15xf32>
  %gh0t = loom.aten "aten::t.default"(%gh0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x15xf32>) -> tensor<15x2xf32>
  %gw0 = loom.aten "aten::mm.default"(%gh0t, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<15x2xf32>, tensor<2x8xf32>) -> tensor<15x8xf32>
  %gb0 = loom.aten "aten::sum.dim_IntList"(%gh0) {args = [#loom.arg<0>, [0], false], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x15xf32>) -> tensor<15xf32>
  return %l, %gw0, %gb0, %gw1, %gw2 : tensor<f32>, tensor<15x8xf32>, tensor<15xf32>, tensor<8x15xf32>, tensor<4x8xf32>
}
