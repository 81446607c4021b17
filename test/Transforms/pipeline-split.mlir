// loom-pipeline-split on the captured MLP (examples/mlp.py: fc1, fc2, fc3,
// cross entropy). Without `layers.N` blocks the units are the root's
// children. Their matmul sizes per row (fc1 32x64, fc2 64x64, fc3 64x10)
// balance best as {fc1} | {fc2, fc3} for two stages (max 2048 + 640 + the
// loss vs 2048 + 4096). Each stage becomes a forward and a backward function; values that
// cross functions are named (loom.pipeline_value) on both sides.

// RUN: loom-opt --loom-pipeline-split="stages=2" %S/Inputs/pipeline-mlp.mlir | FileCheck %s
// RUN: loom-opt --loom-pipeline-split="stages=2 boundaries=fc3" %S/Inputs/pipeline-mlp.mlir | FileCheck %s --check-prefix=FC3
// RUN: loom-opt --loom-pipeline-split="stages=3" %S/Inputs/pipeline-mlp.mlir | FileCheck %s --check-prefix=THREE
// RUN: loom-opt --loom-pipeline-split="stages=2 split-backward=true" %S/Inputs/pipeline-mlp.mlir | FileCheck %s --check-prefix=SPLIT

// Stage 0 forward: fc1 and the ReLU after it (a root op takes the stage of
// its operands); it makes the activation stage 1 reads and the ReLU output
// (detach) its own backward reads.
// CHECK-LABEL: func.func @step_s0_forward(
// CHECK-SAME: {loom.name = "fc1.weight", loom.role = #loom.role<parameter>}
// CHECK-SAME: {loom.batch_index = 0 : i64, loom.name = "x", loom.role = #loom.role<input>})
// CHECK-SAME: -> (tensor<8x64xf32> {loom.pipeline_value = "relu"}, tensor<8x64xf32> {loom.pipeline_value = "detach"})
// CHECK-SAME: attributes {loom.phase = #loom.phase<forward>, loom.pipeline_stage = 0 : i64}
// CHECK: "aten::addmm.default"
// CHECK: "aten::relu.default"
// CHECK-NOT: "aten::addmm.default"
// CHECK: return

// Stage 0 backward: the gradient of its output comes from stage 1 (mm);
// ReLU's backward (a root op) stays with the ReLU's stage.
// CHECK-LABEL: func.func @step_s0_backward(
// CHECK-SAME: tensor<8x64xf32> {loom.pipeline_value = "mm"}, %{{.*}}: tensor<8x64xf32> {loom.pipeline_value = "detach"}
// CHECK-SAME: -> (tensor<64x32xf32> {loom.role = #loom.role<grad>, loom.target = "fc1.weight"}, tensor<64xf32> {loom.role = #loom.role<grad>, loom.target = "fc1.bias"})
// CHECK-SAME: loom.pipeline_stage = 0 : i64
// CHECK: "aten::threshold_backward.default"

// Stage 1 forward reads stage 0's activation and makes the loss.
// CHECK-LABEL: func.func @step_s1_forward(
// CHECK-SAME: tensor<8x64xf32> {loom.pipeline_value = "relu"}
// CHECK-SAME: tensor<f32> {loom.role = #loom.role<loss>}
// CHECK: "aten::nll_loss_forward.default"

// Stage 1 backward sends the gradient of its input back (mm) and makes
// fc2's and fc3's gradients.
// CHECK-LABEL: func.func @step_s1_backward(
// CHECK-SAME: -> (tensor<8x64xf32> {loom.pipeline_value = "mm"}, tensor<64x64xf32> {loom.role = #loom.role<grad>, loom.target = "fc2.weight"}
// CHECK-SAME: loom.target = "fc3.bias"
// CHECK-NOT: func.func @step(

// FC3-LABEL: func.func @step_s0_forward(
// FC3-SAME: loom.name = "fc2.weight"
// FC3-LABEL: func.func @step_s1_forward(
// FC3-NOT: fc2.weight
// FC3-SAME: loom.name = "fc3.weight"

// THREE: func.func @step_s0_forward({{.*}}"fc1.weight"
// THREE: func.func @step_s0_backward(
// THREE: func.func @step_s1_forward({{.*}}"fc2.weight"
// THREE: func.func @step_s1_backward(
// THREE: func.func @step_s2_forward({{.*}}"fc3.weight"
// THREE: func.func @step_s2_backward(

// With split-backward (zero-bubble schedules), each backward is cut into
// the part the gradients sent to earlier stages need (input) and the rest
// (weight). Stage 0 sends nothing back: its input part is empty. Stage 1's
// input part makes the gradient of its input (mm) and hands
// threshold_backward, which fc2's weight gradient also reads, to its weight
// part; the weight part makes every parameter gradient.
// SPLIT-LABEL: func.func @step_s0_backward_input()
// SPLIT-SAME: loom.pipeline_part = "input", loom.pipeline_stage = 0 : i64
// SPLIT-NEXT: return
// SPLIT-LABEL: func.func @step_s0_backward_weight(
// SPLIT-SAME: loom.target = "fc1.weight"
// SPLIT-SAME: loom.pipeline_part = "weight", loom.pipeline_stage = 0 : i64
// SPLIT-LABEL: func.func @step_s1_backward_input(
// SPLIT-SAME: -> (tensor<8x10xf32> {loom.pipeline_value = "_log_softmax_backward_data"}, tensor<8x64xf32> {loom.pipeline_value = "threshold_backward"}, tensor<8x64xf32> {loom.pipeline_value = "mm"})
// SPLIT-NOT: aten::sum
// SPLIT-LABEL: func.func @step_s1_backward_weight(
// SPLIT-SAME: loom.target = "fc2.weight"
// SPLIT-SAME: loom.target = "fc3.bias"
