// loom-pipeline-schedule runs PyTorch's 1F1B over the two stages of the
// captured MLP (loom-pipeline-split) with 4 microbatches: one MPMD step per
// pipeline rank. Rank 0 (fc1) sends each microbatch's activation as soon as
// its forward made it and receives the gradient back; rank 1 (fc2, fc3, the
// loss) receives, computes, sends the gradient. Tags number the transfers;
// the same transfer has the same tag on both sides. Receives are posted
// where the schedule has RECV_F/RECV_B: on rank 1 the receive of
// microbatch 1 is posted before the backward of microbatch 0 and waited for
// after it. A received value is waited for right before its first reader
// (what a function can do without it overlaps its transfer). An
// activation's send is waited for right before that microbatch's backward
// (its gradient is on the way back, so the send has completed or is about
// to); gradient sends at the end of the step. Gradients and the
// loss are divided by 4 (scale_grads; the mean of the microbatch losses).

// RUN: loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=1F1B microbatches=4" %S/Inputs/pipeline-mlp.mlir | FileCheck %s
// RUN: not loom-opt --loom-pipeline-split="stages=4" --loom-pipeline-schedule="schedule=1F1B microbatches=4" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=UNITS
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=GPipe pp=3 microbatches=4" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=ZBVZeroBubble pp=1 microbatches=4" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=ZB
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=DualPipeV pp=1 microbatches=4" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=DUALPIPE
// RUN: loom-opt --loom-pipeline-split="stages=2 split-backward=true" --loom-pipeline-schedule="schedule=ZBVZeroBubble pp=1 microbatches=2" %S/Inputs/pipeline-mlp.mlir | FileCheck %s --check-prefix=ZBV
// RUN: not loom-opt --loom-pipeline-split="stages=2" --loom-pipeline-schedule="schedule=Zigzag" %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not loom-opt --loom-pipeline-schedule %S/Inputs/pipeline-mlp.mlir 2>&1 | FileCheck %s --check-prefix=NOSTAGES

// CHECK: loom.mesh @pp shape [2] axes ["pp"]
// CHECK-LABEL: func.func @step_pp0(
// CHECK-SAME: tensor<32x32xf32> {loom.batch_index = 0 : i64, loom.name = "x", loom.role = #loom.role<input>}
// CHECK-SAME: -> (tensor<64x32xf32> {loom.role = #loom.role<grad>, loom.target = "fc1.weight"}, tensor<64xf32> {loom.role = #loom.role<grad>, loom.target = "fc1.bias"})
// CHECK-SAME: loom.pipeline_actions = ["0UNSHARD", "0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0F2", "0SEND_F2", "0RECV_B1", "0B1", "0F3", "0SEND_F3", "0RECV_B2", "0B2", "0RECV_B3", "0B3", "0REDUCE_GRAD", "0RESHARD"]
// CHECK-SAME: loom.program_ranks = array<i64: 0>, loom.step
// CHECK: "aten::slice.Tensor"(%arg2) {args = [#loom.arg<0>, 0, 0, 8, 1], loom.microbatch = 0 : i64
// CHECK: %[[S0:.*]] = loom.send_start %{{.*}} on @pp axes ["pp"] peer 1 tag 0 {loom.microbatch = 0 : i64
// CHECK: loom.send_start %{{.*}} on @pp axes ["pp"] peer 1 tag 1 {loom.microbatch = 1 : i64
// CHECK: %[[R0:.*]] = loom.recv_start on @pp axes ["pp"] peer 1 tag 2 {loom.microbatch = 0 : i64
// CHECK-NEXT: loom.wait %[[S0]] {loom.microbatch = 0 : i64, {{.*}}} : !loom.future<none>
// CHECK-NEXT: %[[G0:.*]] = loom.wait %[[R0]]
// CHECK-NEXT: "aten::threshold_backward.default"(%[[G0]],
// CHECK: loom.send_start %{{.*}} peer 1 tag 3 {loom.microbatch = 2 : i64
// CHECK: "aten::add.Tensor"
// CHECK: "aten::div.Tensor"(%{{.*}}) {args = [#loom.arg<0>, 4.000000e+00]
// CHECK: return

// CHECK-LABEL: func.func @step_pp1(
// CHECK-SAME: tensor<32xi64> {loom.batch_index = 1 : i64, loom.name = "y", loom.role = #loom.role<input>}
// CHECK-SAME: -> (tensor<f32> {loom.role = #loom.role<loss>}, tensor<64x64xf32> {loom.role = #loom.role<grad>, loom.target = "fc2.weight"}
// CHECK-SAME: loom.program_ranks = array<i64: 1>
// CHECK: %[[F0:.*]] = loom.recv_start on @pp axes ["pp"] peer 0 tag 0 {loom.microbatch = 0 : i64
// CHECK: %[[A0:.*]] = loom.wait %[[F0]]
// CHECK-NEXT: "aten::addmm.default"(%{{.*}}, %[[A0]],
// CHECK: %[[F1:.*]] = loom.recv_start on @pp axes ["pp"] peer 0 tag 1 {loom.microbatch = 1 : i64
// CHECK: "aten::nll_loss_backward.default"
// CHECK: loom.send_start %{{.*}} on @pp axes ["pp"] peer 0 tag 2 {loom.microbatch = 0 : i64
// CHECK-NOT: "aten::addmm.default"
// CHECK: %[[A1:.*]] = loom.wait %[[F1]]
// CHECK-NEXT: "aten::addmm.default"(%{{.*}}, %[[A1]],
// CHECK: "aten::div.Tensor"(%{{.*}}) {args = [#loom.arg<0>, 4.000000e+00], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<f32>) -> tensor<f32>

// UNITS: 4 stages need at least as many splittable modules, found 3 (fc1, fc2, fc3)
// DIVIDE: error: --loom-pipeline-schedule: 2 stages do not divide over 3 pipeline ranks
// ZB: runs the input- and weight-gradient parts of a backward apart; run loom-pipeline-split with split-backward=true
// DUALPIPE: runs the input- and weight-gradient parts of a backward apart; run loom-pipeline-split with split-backward=true
// ZBV: loom.pipeline_actions = ["0UNSHARD", "1UNSHARD", "0F0", "1F0", "1I0", "1W0", "0F1", "0I0", "0W0", "1F1", "1I1", "1W1", "1REDUCE_GRAD", "1RESHARD", "0I1", "0W1", "0REDUCE_GRAD", "0RESHARD"]
// NAME: error: --loom-pipeline-schedule: {{.*}}Zigzag
// NOSTAGES: error: --loom-pipeline-schedule: no stage functions (func.func with 'loom.pipeline_stage'); run loom-pipeline-split first
