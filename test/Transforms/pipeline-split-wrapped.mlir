// loom-pipeline-split on a model under a wrapper: the MLP of
// pipeline-split.mlir as the only child `net` of the root, whose own code
// (the ReLUs, the loss, and here fc3's weight transposes, as a model that
// multiplies by a parameter of its own) runs around its children. The
// units are net's children (the chain of only children is followed down),
// and the balanced cut is the MLP's: {net.fc1} | {net.fc2, net.fc3}.
// `net` spans both stages, so its ops go where the values they read are,
// as the root's do: the log-softmax after fc3 in stage 1, not in the stage
// where `net` starts. fc3's transposed weight (`t`, read by nothing
// computed) goes with its users in stage 1, and so does the backward
// transpose of it. Two buffers no op reads still belong to a stage:
// `net.fc3.scale` to fc3's, `net.count` (net's own, which spans) to the
// first.

// RUN: loom-opt --loom-pipeline-split="stages=2" %S/Inputs/pipeline-wrapped-mlp.mlir | FileCheck %s

// CHECK: module attributes {loom.pipeline_boundaries = ["net.fc2"]
// CHECK-LABEL: func.func @step_s0_forward(
// CHECK-SAME: loom.name = "net.fc1.weight"
// CHECK-SAME: loom.name = "net.count", loom.role = #loom.role<buffer>
// CHECK-NOT: loom.name = "net.fc3.scale"
// CHECK-SAME: attributes {loom.phase = #loom.phase<forward>, loom.pipeline_stage = 0 : i64}
// CHECK: "aten::addmm.default"
// CHECK: "aten::relu.default"
// CHECK-NOT: "aten::_log_softmax.default"
// CHECK: return

// CHECK-LABEL: func.func @step_s0_backward(
// CHECK-NOT: net.count
// CHECK: "aten::threshold_backward.default"
// CHECK: return

// CHECK-LABEL: func.func @step_s1_forward(
// CHECK-SAME: loom.name = "net.fc2.weight"
// CHECK-SAME: loom.name = "net.fc3.weight"
// CHECK-SAME: loom.name = "net.fc3.scale", loom.role = #loom.role<buffer>
// CHECK-NOT: net.count
// CHECK-SAME: loom.pipeline_stage = 1 : i64
// CHECK: "aten::t.default"(%arg3) {{.*}}loom.module = "net", loom.phase = #loom.phase<forward>
// CHECK: "aten::_log_softmax.default"
// CHECK: "aten::nll_loss_forward.default"

// CHECK-LABEL: func.func @step_s1_backward(
// CHECK: "aten::t.default"({{.*}}loom.module = "net", loom.phase = #loom.phase<backward>} : (tensor<64x10xf32>) -> tensor<10x64xf32>
// CHECK: "aten::mm.default"({{.*}}loom.module = "net", loom.phase = #loom.phase<backward>} : (tensor<8x10xf32>, tensor<10x64xf32>) -> tensor<8x64xf32>
// CHECK-NOT: func.func @step(
