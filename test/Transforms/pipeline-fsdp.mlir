// PP x FSDP: loom-fsdp on the MPMD steps of loom-pipeline-schedule shards
// each pipeline rank's parameters over the "dp" axis of the [pp, dp] mesh.
// As PyTorch's schedule drives FSDP2 (UNSHARD before the stage's first
// forward, microbatch backwards that neither reshard nor reduce, REDUCE_GRAD
// once), each unit is all-gathered once per step, before its first forward
// use in microbatch 0, and reduce-scattered once, after the division by the
// microbatch count: with units fc1 and fc2, rank 0 gathers fc1 once and
// rank 1 gathers fc2 and its root unit (fc3) once each, over 4 microbatches.

// RUN: loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4 dp=2" --loom-fsdp="mesh=pp shard-axes=dp units=fc1,fc2" %S/Inputs/pipeline-mlp.mlir | FileCheck %s
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4 dp=2" --loom-fsdp="mesh-shape=2" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=NOMESH
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4 dp=2" --loom-fsdp="mesh=pp shard-axes=dp reshard-after-forward=true" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=RAF
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4 dp=2" --loom-fsdp="mesh=pp shard-axes=dp units=fc9" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=UNIT
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4 dp=2" --loom-fsdp="mesh=mesh2 shard-axes=dp" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4 dp=2" --loom-fsdp="mesh=pp shard-axes=tp" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=AXIS
// RUN: loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4 dp=2" --loom-fsdp="mesh=pp shard-axes=dp param-dtype=bf16" %S/Inputs/pipeline-mlp.mlir | FileCheck %s --check-prefix=MP
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4 dp=2" --loom-fsdp="mesh=pp shard-axes=pp,dp" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=TWO

// CHECK: loom.mesh @pp shape [2, 2] axes ["pp", "dp"]
// CHECK-NOT: loom.mesh
// CHECK-LABEL: func.func @step_pp0(
// CHECK-SAME: tensor<32x32xf32> {loom.name = "fc1.weight", loom.role = #loom.role<parameter>, loom.shard = #loom.shard<@pp, axes = ["dp"], dim = 0, global = [64, 32]>}
// CHECK-SAME: loom.split = #loom.split<@pp, axes = ["dp"], dim = 0>
// CHECK-SAME: loom.program_ranks = array<i64: 0, 1>
// CHECK: loom.all_gather_start {{.*}} on @pp axes ["dp"]
// CHECK-NOT: loom.all_gather_start
// CHECK: loom.send_start {{.*}} on @pp axes ["pp"] peer 1 tag 0 {loom.microbatch = 0
// CHECK-NOT: loom.all_gather_start
// CHECK: loom.send_start {{.*}} on @pp axes ["pp"] peer 1 tag {{[0-9]+}} {loom.microbatch = 3
// CHECK-NOT: loom.all_gather_start
// CHECK-NOT: loom.reduce_scatter_start
// CHECK: aten::div.Tensor
// CHECK: loom.reduce_scatter_start {{.*}} on @pp axes ["dp"] dim 0 reduce <avg> {loom.module = "fc1"
// CHECK-NOT: loom.all_gather_start
// CHECK-NOT: loom.reduce_scatter_start
// CHECK: return
// CHECK-LABEL: func.func @step_pp1(
// CHECK-SAME: loom.partial = #loom.partial<@pp, axes = ["dp"], avg>
// CHECK-SAME: loom.program_ranks = array<i64: 2, 3>
// CHECK: loom.recv_start on @pp axes ["pp"] peer 0 tag 0
// CHECK-COUNT-2: loom.all_gather_start {{.*}} on @pp axes ["dp"]
// CHECK-NOT: loom.all_gather_start
// CHECK-NOT: loom.reduce_scatter_start
// CHECK: aten::div.Tensor
// CHECK-COUNT-2: loom.reduce_scatter_start {{.*}} on @pp axes ["dp"] dim 0 reduce <avg>
// CHECK-NOT: loom.all_gather_start
// CHECK-NOT: loom.reduce_scatter_start
// CHECK: return

// NOMESH: error: 'func.func' op --loom-fsdp: is one program of a pipelined step; shard over the data-parallel axis of its mesh with mesh=pp shard-axes=dp
// RAF: error: 'func.func' op --loom-fsdp: reshard-after-forward=true on a pipelined step: a stage stays unsharded from its first forward to REDUCE_GRAD; use auto or false
// UNIT: error: 'func.func' op --loom-fsdp: unit 'fc9' matches no parameter of any pipeline rank (none is owned or used by a module under it)
// NAME: error: 'func.func' op --loom-fsdp: mesh 'mesh2' names no loom.mesh; 'mesh' takes a mesh declared before this pass (loom-pipeline-schedule declares @pp)
// AXIS: error: 'func.func' op --loom-fsdp: shard-axes names 'tp', which is not an axis of mesh @pp ["pp", "dp"]
// TWO: error: 'func.func' op --loom-fsdp: with mesh=pp, shard-axes must name exactly one of its axes ["pp", "dp"] (got 2)

// Mixed precision: values traced in the parameters' dtype cross between
// stages in the compute dtype, as PyTorch's stages send bf16 activations and
// gradients. Each side applies the same rule to its own transfers: receives
// take bf16, sends carry the bf16 values the lowered ops produce.
// MP-LABEL: func.func @step_pp0(
// MP: loom.send_start {{.*}} : tensor<8x64xbf16> -> !loom.future<none>
// MP: loom.recv_start on @pp axes ["pp"] peer 1 {{.*}} : !loom.future<tensor<8x64xbf16>>
// MP-NOT: tensor<8x64xf32> -> !loom.future<none>
// MP-LABEL: func.func @step_pp1(
// MP: loom.recv_start on @pp axes ["pp"] peer 0 {{.*}} : !loom.future<tensor<8x64xbf16>>
// MP: loom.send_start {{.*}} : tensor<8x64xbf16> -> !loom.future<none>
// MP-NOT: !loom.future<tensor<8x64xf32>>
