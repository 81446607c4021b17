// RUN: loom-opt %s --split-input-file | FileCheck %s
// RUN: loom-opt %s --split-input-file | loom-opt --split-input-file | FileCheck %s
// RUN: loom-opt %s --split-input-file --mlir-print-op-generic | loom-opt --split-input-file | FileCheck %s

// The SPMD program of a data-parallel step: a split batch input, a partial
// loss, and an all-reduce on the comm stream ordered against compute by
// events. The future takes a slot (1, freed by the input before it) from
// its start to its wait; the all-reduce's input is freed after the wait.

// CHECK: loom.mesh @dp shape [2] axes ["dp"]
// CHECK-LABEL: loomrt.program "step" rank 0 world_size 2 mesh @dp streams ["compute", "comm"] slots 5 optimizer #loom.sgd<> {
// CHECK-NEXT: %w = loomrt.input "w" role <parameter> slot 0 : tensor<4xf32>
// CHECK-NEXT: %x = loomrt.input "x" role <input> batch_index 0 slot 1 split <@dp, axes = ["dp"], dim = 0> : tensor<2x4xf32>
// CHECK: %[[E0:.*]] = loomrt.record_event stream 0
// CHECK-NEXT: loomrt.wait_event %[[E0]] stream 1
// CHECK-NEXT: %[[F:.*]] = loomrt.collective_start <all_reduce> %s2 axes ["dp"] reduce <avg> stream 1 slot 1 {loom.phase = #loom.phase<backward>} : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
// CHECK-NEXT: %s4 = loomrt.wait %[[F]] stream 1 slot 4 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
// CHECK-NEXT: loomrt.free %s2 stream 1 : tensor<4xf32>
// CHECK-NEXT: %[[E1:.*]] = loomrt.record_event stream 1
// CHECK-NEXT: loomrt.wait_event %[[E1]] stream 0
// CHECK-NEXT: loomrt.optimizer %w grad %s4 stream 0 : tensor<4xf32>
// CHECK: loomrt.output %s3 role <loss> partial <@dp, axes = ["dp"], avg> : tensor<f32>
loom.mesh @dp shape [2] axes ["dp"]
loomrt.program "step" rank 0 world_size 2 mesh @dp streams ["compute", "comm"] slots 5 optimizer #loom.sgd<> {
  %w = loomrt.input "w" role <parameter> slot 0 : tensor<4xf32>
  %x = loomrt.input "x" role <input> batch_index 0 slot 1 split <@dp, axes = ["dp"], dim = 0> : tensor<2x4xf32>
  %g = loomrt.aten "aten::sum.dim_IntList"(%x) stream 0 slots [2] {args = [#loom.arg<0>, [0]]} : (tensor<2x4xf32>) -> tensor<4xf32>
  %l = loomrt.aten "aten::sum.default"(%x) stream 0 slots [3] {args = [#loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<f32>
  loomrt.free %x stream 0 : tensor<2x4xf32>
  %e0 = loomrt.record_event stream 0
  loomrt.wait_event %e0 stream 1
  %f = loomrt.collective_start <all_reduce> %g axes ["dp"] reduce <avg> stream 1 slot 1 {loom.phase = #loom.phase<backward>} : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  %r = loomrt.wait %f stream 1 slot 4 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
  loomrt.free %g stream 1 : tensor<4xf32>
  %e1 = loomrt.record_event stream 1
  loomrt.wait_event %e1 stream 0
  loomrt.optimizer %w grad %r stream 0 : tensor<4xf32>
  loomrt.free %r stream 0 : tensor<4xf32>
  loomrt.output %l role <loss> partial <@dp, axes = ["dp"], avg> : tensor<f32>
  loomrt.return
}

// -----

// The other collectives, with their dim, reduce and root; a sharded
// parameter and its state.
// CHECK-LABEL: loomrt.program "fsdp" rank 0 world_size 4 mesh @hsdp streams ["compute", "comm"] optimizer #loom.sgd<momentum = 0.9> {
// CHECK-NEXT: %w = loomrt.input "w" role <parameter> shard <@hsdp, axes = ["shard"], dim = 0, global = [7, 4]> : tensor<4x4xf32>
// CHECK-NEXT: %w.m = loomrt.state "w.m" param "w" init <zeros> shard <@hsdp, axes = ["shard"], dim = 0, global = [7, 4]> : tensor<4x4xf32>
// CHECK: loomrt.collective_start <all_gather> %w axes ["shard"] dim 0 stream 1 : tensor<4x4xf32> -> !loomrt.future<tensor<8x4xf32>>
// CHECK: loomrt.collective_start <reduce_scatter> %{{.*}} axes ["shard"] dim 0 reduce <sum> stream 1 : tensor<8x4xf32> -> !loomrt.future<tensor<4x4xf32>>
// CHECK: loomrt.collective_start <all_reduce> %{{.*}} axes ["replicate"] reduce <avg> stream 1 : tensor<4x4xf32> -> !loomrt.future<tensor<4x4xf32>>
// CHECK: loomrt.collective_start <broadcast> %{{.*}} axes ["replicate", "shard"] root 0 stream 1 : tensor<4x4xf32> -> !loomrt.future<tensor<4x4xf32>>
loom.mesh @hsdp shape [2, 2] axes ["replicate", "shard"]
loomrt.program "fsdp" rank 0 world_size 4 mesh @hsdp streams ["compute", "comm"] optimizer #loom.sgd<momentum = 0.9> {
  %w = loomrt.input "w" role <parameter> shard <@hsdp, axes = ["shard"], dim = 0, global = [7, 4]> : tensor<4x4xf32>
  %m = loomrt.state "w.m" param "w" init <zeros> shard <@hsdp, axes = ["shard"], dim = 0, global = [7, 4]> : tensor<4x4xf32>
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<2x4xf32>
  %f0 = loomrt.collective_start <all_gather> %w axes ["shard"] dim 0 stream 1 : tensor<4x4xf32> -> !loomrt.future<tensor<8x4xf32>>
  %full = loomrt.wait %f0 stream 1 : !loomrt.future<tensor<8x4xf32>> -> tensor<8x4xf32>
  %f1 = loomrt.collective_start <reduce_scatter> %full axes ["shard"] dim 0 reduce <sum> stream 1 : tensor<8x4xf32> -> !loomrt.future<tensor<4x4xf32>>
  %g = loomrt.wait %f1 stream 1 : !loomrt.future<tensor<4x4xf32>> -> tensor<4x4xf32>
  %f2 = loomrt.collective_start <all_reduce> %g axes ["replicate"] reduce <avg> stream 1 : tensor<4x4xf32> -> !loomrt.future<tensor<4x4xf32>>
  %g2 = loomrt.wait %f2 stream 1 : !loomrt.future<tensor<4x4xf32>> -> tensor<4x4xf32>
  %f3 = loomrt.collective_start <broadcast> %g2 axes ["replicate", "shard"] root 0 stream 1 : tensor<4x4xf32> -> !loomrt.future<tensor<4x4xf32>>
  %g3 = loomrt.wait %f3 stream 1 : !loomrt.future<tensor<4x4xf32>> -> tensor<4x4xf32>
  %l = loomrt.aten "aten::sum.default"(%x) stream 0 {args = [#loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<f32>
  loomrt.optimizer %w grad %g3 state [%m] stream 0 : tensor<4x4xf32>
  loomrt.output %l role <loss> : tensor<f32>
  loomrt.return
}

// -----

// One MPMD program of a pipelined step: it runs on rank 0 of @pp only. It
// sends an activation (its future, of nothing, holds slot 1 until the wait,
// and the input stays in slot 0 until then) and receives the gradient,
// which has no input and says what it receives in its future's type.
// CHECK-LABEL: loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] slots 3 {
// CHECK: loomrt.collective_start <send> %x axes ["pp"] peer 1 tag 0 stream 1 slot 1 : tensor<2x4xf32> -> !loomrt.future<none>
// CHECK-NEXT: loomrt.collective_start <recv> axes ["pp"] peer 1 tag 1 stream 1 slot 2 : !loomrt.future<tensor<2x4xf32>>
// CHECK-NEXT: loomrt.wait %{{.*}} stream 1 : !loomrt.future<none>
// CHECK-NEXT: loomrt.free %x stream 1 : tensor<2x4xf32>
// CHECK-NEXT: %s0 = loomrt.wait %{{.*}} stream 1 slot 0 : !loomrt.future<tensor<2x4xf32>> -> tensor<2x4xf32>
loom.mesh @pp shape [2] axes ["pp"]
loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] slots 3 {
  %x = loomrt.input "x" role <input> batch_index 0 slot 0 : tensor<2x4xf32>
  %e0 = loomrt.record_event stream 0
  loomrt.wait_event %e0 stream 1
  %s = loomrt.collective_start <send> %x axes ["pp"] peer 1 tag 0 stream 1 slot 1 : tensor<2x4xf32> -> !loomrt.future<none>
  %r = loomrt.collective_start <recv> axes ["pp"] peer 1 tag 1 stream 1 slot 2 : !loomrt.future<tensor<2x4xf32>>
  loomrt.wait %s stream 1 : !loomrt.future<none>
  loomrt.free %x stream 1 : tensor<2x4xf32>
  %g = loomrt.wait %r stream 1 slot 0 : !loomrt.future<tensor<2x4xf32>> -> tensor<2x4xf32>
  %e1 = loomrt.record_event stream 1
  loomrt.wait_event %e1 stream 0
  loomrt.free %g stream 0 : tensor<2x4xf32>
  loomrt.return
}
