// RUN: loom-opt --loom-pipeline-split="stages=2 boundaries=b" --loom-pipeline-schedule="schedule=1F1B microbatches=2 dp=4 replicate=2" --loom-fsdp="mesh=pp shard-axes=shard replicate-axes=replicate" %S/pipeline-split-reused.mlir | FileCheck %s
// RUN: not loom-opt --loom-pipeline-split="stages=2 boundaries=b" --loom-pipeline-schedule="schedule=1F1B microbatches=2 dp=4 replicate=3" %S/pipeline-split-reused.mlir 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not loom-opt --loom-pipeline-split="stages=2 boundaries=b" --loom-pipeline-schedule="schedule=1F1B microbatches=2 dp=4 replicate=2" --loom-fsdp="mesh=pp shard-axes=replicate replicate-axes=shard" %S/pipeline-split-reused.mlir 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: loom-compile --pp=2 --dp=fsdp --world-size=8 --replicate-size=2 --microbatches=2 --print-pipeline | FileCheck %s --check-prefix=COMPILE

// HSDP inside each pipeline stage: the data-parallel axis of the schedule's
// mesh is factored (replicate, shard), the same ranks in the same order;
// loom-fsdp gathers and reduce-scatters over "shard" and all-reduces the
// shards over "replicate"; the batch is split over both.

// CHECK: loom.mesh @pp shape [2, 2, 2] axes ["pp", "replicate", "shard"]
// CHECK-LABEL: func.func @step_pp0(
// CHECK-SAME: loom.split = #loom.split<@pp, axes = ["replicate", "shard"], dim = 0>
// CHECK-SAME: loom.program_ranks = array<i64: 0, 1, 2, 3>
// CHECK: loom.all_gather_start %{{.*}} on @pp axes ["shard"] dim 0
// CHECK: loom.send_start %{{.*}} on @pp axes ["pp"] peer 1
// CHECK: %[[RS:.*]] = loom.reduce_scatter_start %{{.*}} on @pp axes ["shard"] dim 0 reduce <avg>
// CHECK: %[[W:.*]] = loom.wait %[[RS]]
// CHECK: loom.all_reduce_start %[[W]] on @pp axes ["replicate"] reduce <avg>
// CHECK-LABEL: func.func @step_pp1(
// CHECK-SAME: loom.program_ranks = array<i64: 4, 5, 6, 7>

// DIVIDE: error: --loom-pipeline-schedule: replicate=3 must be at least 1 and divide dp=4
// ORDER: replicate-axes names 'shard', which is not an axis of mesh @pp ["pp", "replicate", "shard"] before the shard axis

// COMPILE: loom-pipeline-schedule{dp=4 {{.*}}replicate=2 {{.*}}},loom-fsdp{{.*}}mesh=pp {{.*}}replicate-axes={replicate} {{.*}}shard-axes={shard}
