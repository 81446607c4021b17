// RUN: loom-opt %s --loom-replicate="mesh-shape=2 broadcast-buffers=true" | FileCheck %s
// RUN: loom-opt %s --loom-replicate="mesh-shape=2" | FileCheck %s --check-prefix=OFF
// RUN: loom-opt %s --loom-replicate="mesh-shape=1 broadcast-buffers=true" | FileCheck %s --check-prefix=OFF
// RUN: not loom-opt %s --loom-replicate="mesh-shape=2 grouping=units broadcast-buffers=true" 2>&1 | FileCheck %s --check-prefix=UNITS
// RUN: not loom-compile %s --dp=fsdp --world-size=2 --broadcast-buffers=true -o %t.loomx 2>&1 | FileCheck %s --check-prefix=COMPILE
// RUN: not loom-compile %s --dp=replicate --grouping=units --world-size=2 --broadcast-buffers=true -o %t.loomx 2>&1 | FileCheck %s --check-prefix=COMPILE

// Batch norm's running statistics (f32) and its step count (i64), updated by
// forward; a constant f32 buffer forward only reads.

func.func @step(%w: tensor<3xf32> {loom.name = "bn.weight", loom.role = #loom.role<parameter>},
                %rm: tensor<3xf32> {loom.name = "bn.running_mean", loom.role = #loom.role<buffer>},
                %n: tensor<i64> {loom.name = "bn.num_batches_tracked", loom.role = #loom.role<buffer>},
                %c: tensor<3xf32> {loom.name = "scale", loom.role = #loom.role<buffer>},
                %x: tensor<4x3xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<3xf32> {loom.role = #loom.role<buffer_mutation>, loom.target = "bn.running_mean"},
        tensor<i64> {loom.role = #loom.role<buffer_mutation>, loom.target = "bn.num_batches_tracked"},
        tensor<f32> {loom.role = #loom.role<loss>},
        tensor<3xf32> {loom.role = #loom.role<grad>, loom.target = "bn.weight"})
    attributes {loom.step} {
  %n1 = loom.aten "aten::add.Tensor"(%n) {args = [#loom.arg<0>, 1], loom.module = "bn", loom.phase = #loom.phase<forward>} : (tensor<i64>) -> tensor<i64>
  %m = loom.aten "aten::mean.dim"(%x) {args = [#loom.arg<0>, [0]], loom.module = "bn", loom.phase = #loom.phase<forward>} : (tensor<4x3xf32>) -> tensor<3xf32>
  %rm1 = loom.aten "aten::lerp.Scalar"(%rm, %m) {args = [#loom.arg<0>, #loom.arg<1>, 1.000000e-01], loom.module = "bn", loom.phase = #loom.phase<forward>} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %y = loom.aten "aten::mul.Tensor"(%x, %c) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %z = loom.aten "aten::mul.Tensor"(%y, %w) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "bn", loom.phase = #loom.phase<forward>} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = loom.aten "aten::sum.default"(%z) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x3xf32>) -> tensor<f32>
  %g = loom.aten "aten::sum.dim_IntList"(%y) {args = [#loom.arg<0>, [0]], loom.module = "bn", loom.phase = #loom.phase<backward>} : (tensor<4x3xf32>) -> tensor<3xf32>
  return %rm1, %n1, %l, %g : tensor<3xf32>, tensor<i64>, tensor<f32>, tensor<3xf32>
}

// Before anything else: one broadcast from the group's first rank per
// element type, the f32 buffers flattened into one, in argument order; every
// use of a buffer reads rank 0's value.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%{{[^:]+}}: tensor<3xf32> {{.*}}, %[[RM:[^:]+]]: tensor<3xf32> {{.*}}, %[[N:[^:]+]]: tensor<i64> {{.*}}, %[[C:[^:]+]]: tensor<3xf32>
// CHECK-NEXT: %[[F0:.*]] = loom.aten "aten::reshape.default"(%[[RM]]) {args = [#loom.arg<0>, [3]], loom.module = "", loom.phase = #loom.phase<forward>}
// CHECK-NEXT: %[[F1:.*]] = loom.aten "aten::reshape.default"(%[[C]])
// CHECK-NEXT: %[[CAT:.*]] = loom.aten "aten::cat.default"(%[[F0]], %[[F1]]) {{.*}} -> tensor<6xf32>
// CHECK-NEXT: %[[B0:.*]] = loom.broadcast_start %[[CAT]] on @dp axes ["dp"] root 0 {loom.module = "", loom.phase = #loom.phase<forward>} : tensor<6xf32> -> !loom.future<tensor<6xf32>>
// CHECK-NEXT: %[[W0:.*]] = loom.wait %[[B0]]
// CHECK-NEXT: %[[S:.*]]:2 = loom.aten "aten::split_with_sizes.default"(%[[W0]])
// CHECK-NEXT: %[[RM0:.*]] = loom.aten "aten::reshape.default"(%[[S]]#0)
// CHECK-NEXT: %[[C0:.*]] = loom.aten "aten::reshape.default"(%[[S]]#1)
// CHECK-NEXT: %[[B1:.*]] = loom.broadcast_start %[[N]] on @dp axes ["dp"] root 0 {loom.module = "bn", loom.phase = #loom.phase<forward>} : tensor<i64> -> !loom.future<tensor<i64>>
// CHECK-NEXT: %[[N0:.*]] = loom.wait %[[B1]]
// CHECK-NEXT: loom.aten "aten::add.Tensor"(%[[N0]])
// CHECK-NEXT: %[[M:.*]] = loom.aten "aten::mean.dim"
// CHECK-NEXT: loom.aten "aten::lerp.Scalar"(%[[RM0]], %[[M]])
// CHECK-NEXT: loom.aten "aten::mul.Tensor"(%{{.*}}, %[[C0]])
// CHECK-NOT: loom.broadcast_start
// CHECK: loom.all_reduce_start {{.*}} reduce <sum>

// OFF-LABEL: func.func @step
// OFF-NOT: loom.broadcast_start

// COMPILE: broadcast-buffers is DDP's broadcast_buffers: it needs dp=replicate with grouping=buckets (fully_shard and FSDP2's replicate keep each rank's buffers)
// UNITS: error: --loom-replicate: broadcast-buffers is DDP's broadcast_buffers; FSDP2's replicate (grouping=units) keeps each rank's buffers
