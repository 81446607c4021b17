// PP x DDP: loom-pipeline-schedule with dp=2 lays the ranks out on a [pp, dp]
// mesh (row-major: pipeline rank r runs on ranks 2r and 2r+1), sends and
// receives stay over "pp", and loom-replicate on the existing mesh reduces
// over "dp" only: one all-reduce per bucket per stage, after the stage's
// REDUCE_GRAD (the division by the microbatch count) and never inside a
// microbatch (DDP's no_sync on all but the last backward), batch inputs split
// over "dp", the loss (on the last stage's rank) a partial average over "dp".

// RUN: loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4 dp=2" --loom-replicate="mesh=pp mesh-shape=2,2 axes=pp,dp reduce-axes=dp" %S/Inputs/pipeline-mlp.mlir | FileCheck %s
// RUN: loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=GPipe microbatches=4 dp=2" --loom-replicate="mesh=pp reduce-axes=dp bucket-cap-mb=0 first-bucket-cap-mb=0" %S/Inputs/pipeline-mlp.mlir | FileCheck %s --check-prefix=BUCKETS
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4 dp=2" --loom-replicate="mesh=pp reduce-axes=tp" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=AXIS
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4 dp=0" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=DP

// CHECK: loom.mesh @pp shape [2, 2] axes ["pp", "dp"]
// CHECK-NOT: loom.mesh
// CHECK-LABEL: func.func @step_pp0(
// CHECK-SAME: loom.role = #loom.role<input>, loom.split = #loom.split<@pp, axes = ["dp"], dim = 0>
// CHECK-SAME: loom.program_ranks = array<i64: 0, 1>
// CHECK: loom.send_start {{.*}} on @pp axes ["pp"] peer 1
// CHECK: aten::div.Tensor
// CHECK-NOT: loom.all_reduce_start
// CHECK: loom.all_reduce_start %{{.*}} on @pp axes ["dp"] reduce <sum>
// CHECK-NOT: loom.all_reduce_start
// CHECK: return
// CHECK-LABEL: func.func @step_pp1(
// CHECK-SAME: loom.role = #loom.role<input>, loom.split = #loom.split<@pp, axes = ["dp"], dim = 0>
// CHECK-SAME: loom.partial = #loom.partial<@pp, axes = ["dp"], avg>
// CHECK-SAME: loom.program_ranks = array<i64: 2, 3>
// CHECK: loom.recv_start on @pp axes ["pp"] peer 0
// CHECK: aten::div.Tensor
// CHECK-NOT: loom.all_reduce_start
// CHECK: loom.all_reduce_start %{{.*}} on @pp axes ["dp"] reduce <sum>
// CHECK-NOT: loom.all_reduce_start
// CHECK: return

// bucket-cap-mb=0: one all-reduce per gradient, fc1's two on rank 0, fc2's
// and fc3's four on rank 1.
// BUCKETS-LABEL: func.func @step_pp0(
// BUCKETS-COUNT-2: loom.all_reduce_start
// BUCKETS-NOT: loom.all_reduce_start
// BUCKETS-LABEL: func.func @step_pp1(
// BUCKETS-COUNT-4: loom.all_reduce_start
// BUCKETS-NOT: loom.all_reduce_start

// AXIS: error: 'loom.mesh' op --loom-replicate: reduce-axes names 'tp', which is not an axis of this mesh
// DP: error: --loom-pipeline-schedule: dp must be at least 1, got 0
