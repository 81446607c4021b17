// Recompute composes with pipelining: loom-remat runs first, and each
// block's loom.recompute region travels into the backward of the stage
// whose forward it re-runs. With split-backward (zero-bubble schedules) the
// region goes to the input-gradient part that needs it, and the
// weight-gradient part reads the recomputed values from there instead of
// recomputing them again.

// RUN: loom-opt %s --loom-remat="mode=full" --loom-pipeline-split="stages=2" | FileCheck %s
// RUN: loom-opt %s --loom-remat="mode=full" --loom-pipeline-split="stages=2 split-backward=true" | FileCheck %s --check-prefix=SPLIT
// loom-compile puts loom-remat before the split.
// RUN: loom-compile --print-pipeline --pp=2 --pp-schedule=ZBVZeroBubble --remat=selective | FileCheck %s --check-prefix=COMPILE
// A region that re-runs ops of two stages cannot run in one stage's backward.
// RUN: not loom-opt %s --loom-remat="mode=full modules=layers" --loom-pipeline-split="stages=2" 2>&1 | FileCheck %s --check-prefix=SPAN
// loom-remat after the split would see no whole step: refused, not ignored.
// RUN: not loom-opt %s --loom-pipeline-split="stages=2" --loom-remat="mode=full" 2>&1 | FileCheck %s --check-prefix=AFTER

// layers.0's relu output is saved (layers.1 reads it, and so does
// layers.1's weight gradient), so layers.0 recomputes nothing: the detach
// threshold_backward reads shares the saved relu's storage, and the forward
// hands it to its backward as it is (taking it again would free nothing).
// CHECK-LABEL: func.func @step_s0_forward(
// CHECK-SAME: -> (tensor<4x8xf32> {loom.pipeline_value = "relu"}, tensor<4x8xf32> {loom.pipeline_value = "detach"})
// CHECK-LABEL: func.func @step_s0_backward(
// CHECK-SAME: %[[D:[^:]*]]: tensor<4x8xf32> {loom.pipeline_value = "detach"}
// CHECK-SAME: loom.pipeline_stage = 0 : i64
// CHECK-NOT: loom.recompute "layers.0"
// CHECK: "aten::threshold_backward.default"(%{{[^,]*}}, %[[D]])
// layers.1 re-runs its matmul and relu from its saved input and weight.
// CHECK-LABEL: func.func @step_s1_forward(
// CHECK-NOT: aten::detach
// CHECK: return
// CHECK-LABEL: func.func @step_s1_backward(
// CHECK-SAME: loom.pipeline_stage = 1 : i64
// CHECK: loom.recompute "layers.1"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "aten::t.default"
// CHECK-NEXT: "aten::mm.default"
// CHECK-NEXT: "aten::relu.default"
// CHECK-NEXT: "aten::detach.default"
// CHECK-NOT: loom.recompute
// CHECK: return

// Stage 1's input part needs the recomputed relu (threshold_backward) and
// the recomputed transpose of the weight (the gradient of the input); the
// weight part reads the threshold_backward it made and recomputes nothing.
// Stage 0 sends no gradient back: its whole backward is its weight part,
// which reads the forward's detach (layers.0 recomputes nothing).
// SPLIT-LABEL: func.func @step_s0_backward_input()
// SPLIT-NEXT: return
// SPLIT-LABEL: func.func @step_s0_backward_weight(
// SPLIT-SAME: {loom.pipeline_value = "detach"}
// SPLIT-NOT: loom.recompute
// SPLIT: "aten::threshold_backward.default"
// SPLIT-LABEL: func.func @step_s1_backward_input(
// SPLIT-SAME: -> (tensor<4x8xf32> {loom.pipeline_value = "threshold_backward"}, tensor<4x8xf32> {loom.pipeline_value = "mm"})
// SPLIT-SAME: loom.pipeline_part = "input"
// SPLIT-COUNT-1: loom.recompute "layers.1"
// SPLIT: "aten::threshold_backward.default"
// SPLIT-LABEL: func.func @step_s1_backward_weight(
// SPLIT-SAME: %arg0: tensor<4x8xf32> {loom.pipeline_value = "threshold_backward"}
// SPLIT-SAME: loom.pipeline_part = "weight"
// SPLIT-NOT: loom.recompute
// SPLIT: "aten::mm.default"
// SPLIT-NOT: loom.recompute
// SPLIT: return

// COMPILE: builtin.module(func.func(loom-remat{mode=selective {{.*}}}),loom-pipeline-split{ split-backward=true stages=4},loom-pipeline-schedule{

// SPAN: error: 'loom.recompute' op recomputes forward ops of stages 0 (module 'layers.0.fc') and 1 (module 'layers.1.fc'); a recompute region runs in one stage's backward
// SPAN: note: re-runs this op of stage 0
// SPAN: note: and this op of stage 1

// AFTER: error: 'func.func' op --loom-remat: 'step_s0_forward' is a pipeline stage or a scheduled pipeline rank; run loom-remat before loom-pipeline-split

module {
func.func @step(%w0: tensor<8x8xf32> {loom.name = "layers.0.fc.weight", loom.role = #loom.role<parameter>},
                %w1: tensor<8x8xf32> {loom.name = "layers.1.fc.weight", loom.role = #loom.role<parameter>},
                %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.fc.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.fc.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h0 = loom.aten "aten::mm.default"(%x, %t0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r0 = loom.aten "aten::relu.default"(%h0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d0 = loom.aten "aten::detach.default"(%r0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h1 = loom.aten "aten::mm.default"(%r0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r1 = loom.aten "aten::relu.default"(%h1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d1 = loom.aten "aten::detach.default"(%r1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = loom.aten "aten::sum.default"(%r1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %ge = loom.aten "aten::expand.default"(%g) {args = [#loom.arg<0>, [4, 8]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<4x8xf32>
  %gr1 = loom.aten "aten::threshold_backward.default"(%ge, %d1) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr1t = loom.aten "aten::t.default"(%gr1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw1 = loom.aten "aten::mm.default"(%gr1t, %r0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %tt1 = loom.aten "aten::t.default"(%t1) {args = [#loom.arg<0>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %gy0 = loom.aten "aten::mm.default"(%gr1, %tt1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gr0 = loom.aten "aten::threshold_backward.default"(%gy0, %d0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gr0t = loom.aten "aten::t.default"(%gr0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw0 = loom.aten "aten::mm.default"(%gr0t, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %l, %gw0, %gw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}
}
