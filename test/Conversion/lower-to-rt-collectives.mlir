// RUN: loom-opt %s --split-input-file --loom-lower-to-rt | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-lower-to-rt --loomrt-finish-pipeline | FileCheck %s --check-prefix=SLOTS

// A data-parallel step: the program runs on every rank of the mesh, with a
// comm stream; the start waits for compute (an event recorded on compute
// after the gradient), compute waits for the wait (an event recorded on
// comm); split inputs and the partial loss reach the binding tables.

loom.mesh @dp shape [2] axes ["dp"]
func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["dp"], dim = 0>})
    -> (tensor<f32> {loom.role = #loom.role<loss>, loom.partial = #loom.partial<@dp, axes = ["dp"], avg>},
        tensor<4xf32> {loom.role = #loom.role<param_update>, loom.target = "w"})
    attributes {loom.step, loom.optimizer = #loom.sgd<>} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %g = loom.aten "aten::sum.dim_IntList"(%x) {args = [#loom.arg<0>, [0]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4xf32>
  %f = loom.all_reduce_start %g on @dp axes ["dp"] reduce <avg> {loom.module = "", loom.phase = #loom.phase<backward>} : tensor<4xf32> -> !loom.future<tensor<4xf32>>
  %r = loom.wait %f {loom.module = "", loom.phase = #loom.phase<backward>} : !loom.future<tensor<4xf32>> -> tensor<4xf32>
  %w1 = loom.optimizer_update #loom.sgd<> param %w grad %r {loom.module = "", loom.phase = #loom.phase<optimizer>} : tensor<4xf32>
  return %l, %w1 : tensor<f32>, tensor<4xf32>
}

// CHECK: loom.mesh @dp shape [2] axes ["dp"]
// CHECK-LABEL: loomrt.program "step" rank 0 world_size 2 mesh @dp streams ["compute", "comm"] optimizer #loom.sgd<> {
// CHECK-NEXT: %w = loomrt.input "w" role <parameter> : tensor<4xf32>
// CHECK-NEXT: %x = loomrt.input "x" role <input> batch_index 0 split <@dp, axes = ["dp"], dim = 0> : tensor<2x4xf32>
// CHECK: %[[G:.*]] = loomrt.aten "aten::sum.dim_IntList"(%x) stream 0
// CHECK-NEXT: %[[E0:.*]] = loomrt.record_event stream 0
// CHECK-NEXT: loomrt.wait_event %[[E0]] stream 1
// CHECK-NEXT: %[[F:.*]] = loomrt.collective_start <all_reduce> %[[G]] axes ["dp"] reduce <avg> stream 1 {loom.module = "", loom.phase = #loom.phase<backward>} : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
// CHECK-NEXT: %[[R:.*]] = loomrt.wait %[[F]] stream 1 {loom.module = "", loom.phase = #loom.phase<backward>} : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
// CHECK-NEXT: %[[E1:.*]] = loomrt.record_event stream 1
// CHECK-NEXT: loomrt.wait_event %[[E1]] stream 0
// CHECK-NEXT: loomrt.optimizer %w grad %[[R]] stream 0
// CHECK-NEXT: loomrt.output %{{.*}} role <loss> partial <@dp, axes = ["dp"], avg> : tensor<f32>

// The future has a slot from start to wait; the gradient is freed after
// the wait (on comm), not after the start.
// SLOTS-LABEL: loomrt.program "step"
// SLOTS: %[[G:s[0-9]+]] = loomrt.aten "aten::sum.dim_IntList"
// SLOTS: loomrt.collective_start <all_reduce> %[[G]] axes ["dp"] reduce <avg> stream 1 slot [[FUT:[0-9]+]]
// SLOTS-NEXT: loomrt.wait %{{.*}} stream 1 slot
// SLOTS-NEXT: loomrt.free %[[G]] stream 1

// -----

// A sharded parameter (FSDP): all-gather before use, reduce-scatter of the
// gradient; loom.shard reaches the bindings.
loom.mesh @fs shape [2] axes ["shard"]
func.func @step(%w: tensor<2x4xf32> {loom.name = "w", loom.role = #loom.role<parameter>, loom.shard = #loom.shard<@fs, axes = ["shard"], dim = 0, global = [3, 4]>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<2x4xf32> {loom.role = #loom.role<grad>, loom.target = "w"})
    attributes {loom.step} {
  %f = loom.all_gather_start %w on @fs axes ["shard"] dim 0 : tensor<2x4xf32> -> !loom.future<tensor<4x4xf32>>
  %full = loom.wait %f : !loom.future<tensor<4x4xf32>> -> tensor<4x4xf32>
  %l = loom.aten "aten::sum.default"(%full) {args = [#loom.arg<0>]} : (tensor<4x4xf32>) -> tensor<f32>
  %f3 = loom.all_slice_start %full on @fs axes ["shard"] dim 1 : tensor<4x4xf32> -> !loom.future<tensor<4x2xf32>>
  %half = loom.wait %f3 : !loom.future<tensor<4x2xf32>> -> tensor<4x2xf32>
  %f2 = loom.reduce_scatter_start %full on @fs axes ["shard"] dim 0 reduce <avg> : tensor<4x4xf32> -> !loom.future<tensor<2x4xf32>>
  %g = loom.wait %f2 : !loom.future<tensor<2x4xf32>> -> tensor<2x4xf32>
  %l2 = loom.aten "aten::sum.default"(%half) {args = [#loom.arg<0>]} : (tensor<4x2xf32>) -> tensor<f32>
  return %l2, %g : tensor<f32>, tensor<2x4xf32>
}

// CHECK-LABEL: loomrt.program "step" rank 0 world_size 2 mesh @fs streams ["compute", "comm"] {
// CHECK-NEXT: %w = loomrt.input "w" role <parameter> shard <@fs, axes = ["shard"], dim = 0, global = [3, 4]> : tensor<2x4xf32>
// CHECK: loomrt.collective_start <all_gather> %w axes ["shard"] dim 0 stream 1
// CHECK: loomrt.collective_start <all_slice> %{{.*}} axes ["shard"] dim 1 stream 1 : tensor<4x4xf32> -> !loomrt.future<tensor<4x2xf32>>
// CHECK: loomrt.collective_start <reduce_scatter> %{{.*}} axes ["shard"] dim 0 reduce <avg> stream 1
// CHECK: loomrt.output %{{.*}} role <grad> target "w" : tensor<2x4xf32>
