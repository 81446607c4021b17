// RUN: loom-opt %s --loom-accumulate-gradients="microbatches=3" | FileCheck %s
// RUN: loom-opt %s --loom-accumulate-gradients="microbatches=1" | FileCheck %s --check-prefix=ONE
// RUN: loom-opt %s --loom-accumulate-gradients="microbatches=2" --loom-replicate="mesh-shape=2" | FileCheck %s --check-prefix=DDP
// RUN: loom-opt %S/Inputs/remat-step.mlir --loom-accumulate-gradients="microbatches=2" | FileCheck %s --check-prefix=REMAT

// Three microbatches of 2 rows: the batch input takes 6 rows, the body runs
// on each slice in turn, the loss and gradient are running sums divided by 3.
func.func @step(%w: tensor<4x4xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.weight"})
    attributes {loom.step} {
  %y = loom.aten "aten::mm.default"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %g = loom.aten "aten::mul.Tensor"(%w, %l) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  return %l, %g : tensor<f32>, tensor<4x4xf32>
}

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[W:[^:]+]]: tensor<4x4xf32> {loom.name = "fc.weight"
// CHECK-SAME: %[[X:[^:]+]]: tensor<6x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
// CHECK-NEXT: %[[X0:.*]] = loom.aten "aten::slice.Tensor"(%[[X]]) {args = [#loom.arg<0>, 0, 0, 2, 1]{{.*}} : (tensor<6x4xf32>) -> tensor<2x4xf32>
// Every copy records its microbatch (loom-fsdp gathers per microbatch);
// the accumulation belongs to none.
// CHECK-NEXT: %[[Y0:.*]] = loom.aten "aten::mm.default"(%[[X0]], %[[W]]) {args = [#loom.arg<0>, #loom.arg<1>], loom.microbatch = 0 : i64, loom.module = "fc"
// CHECK-NEXT: %[[L0:.*]] = loom.aten "aten::sum.default"(%[[Y0]])
// CHECK-NEXT: %[[G0:.*]] = loom.aten "aten::mul.Tensor"(%[[W]], %[[L0]])
// CHECK-NEXT: %[[X1:.*]] = loom.aten "aten::slice.Tensor"(%[[X]]) {args = [#loom.arg<0>, 0, 2, 4, 1]
// CHECK-NEXT: %[[Y1:.*]] = loom.aten "aten::mm.default"(%[[X1]], %[[W]]) {args = [#loom.arg<0>, #loom.arg<1>], loom.microbatch = 1 : i64, loom.module = "fc"
// CHECK-NEXT: %[[L1:.*]] = loom.aten "aten::sum.default"(%[[Y1]])
// CHECK-NEXT: %[[G1:.*]] = loom.aten "aten::mul.Tensor"(%[[W]], %[[L1]])
// CHECK-NEXT: %[[LS1:.*]] = loom.aten "aten::add.Tensor"(%[[L0]], %[[L1]]) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>}
// CHECK-NEXT: %[[GS1:.*]] = loom.aten "aten::add.Tensor"(%[[G0]], %[[G1]]) {{.*}}loom.phase = #loom.phase<backward>
// CHECK-NEXT: loom.aten "aten::slice.Tensor"(%[[X]]) {args = [#loom.arg<0>, 0, 4, 6, 1], loom.microbatch = 2 : i64
// CHECK-COUNT-3: loom.aten
// CHECK-NEXT: %[[LS2:.*]] = loom.aten "aten::add.Tensor"(%[[LS1]],
// CHECK-NEXT: %[[GS2:.*]] = loom.aten "aten::add.Tensor"(%[[GS1]],
// CHECK-NEXT: %[[L:.*]] = loom.aten "aten::div.Tensor"(%[[LS2]]) {args = [#loom.arg<0>, 3.000000e+00]
// CHECK-NEXT: %[[G:.*]] = loom.aten "aten::div.Tensor"(%[[GS2]]) {args = [#loom.arg<0>, 3.000000e+00]
// CHECK-NEXT: return %[[L]], %[[G]]

// ONE-LABEL: func.func @step(
// ONE-SAME: tensor<2x4xf32>
// ONE-NOT: aten::slice

// With DDP after it, the accumulated gradient is reduced once per step.
// DDP: loom.split = #loom.split<@dp, axes = ["dp"], dim = 0>
// DDP-COUNT-1: loom.all_reduce_start
// DDP-NOT: loom.all_reduce_start


// A step with recompute regions (Inputs/remat-step.mlir): every microbatch
// clones its regions with it, tagged with the microbatch, each reading that
// microbatch's slice of the batch.
// REMAT-LABEL: func.func @step
// REMAT: %[[X0:.*]] = loom.aten "aten::slice.Tensor"(%arg4) {args = [#loom.arg<0>, 0, 0, 4, 1]
// REMAT: loom.recompute "layers.1"
// REMAT: } {loom.microbatch = 0 : i64, loom.module = "layers.1", loom.phase = #loom.phase<backward>}
// REMAT: loom.recompute "layers.0" (%arg0, %arg1, %[[X0]])
// REMAT: } {loom.microbatch = 0 : i64, loom.module = "layers.0", loom.phase = #loom.phase<backward>}
// REMAT: %[[X1:.*]] = loom.aten "aten::slice.Tensor"(%arg4) {args = [#loom.arg<0>, 0, 4, 8, 1]
// REMAT: loom.recompute "layers.1"
// REMAT: } {loom.microbatch = 1 : i64, loom.module = "layers.1", loom.phase = #loom.phase<backward>}
// REMAT: loom.recompute "layers.0" (%arg0, %arg1, %[[X1]])
// REMAT: } {loom.microbatch = 1 : i64, loom.module = "layers.0", loom.phase = #loom.phase<backward>}
// REMAT-NOT: loom.recompute
