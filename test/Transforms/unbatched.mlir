// RUN: loom-opt %s --loom-accumulate-gradients="microbatches=2" | FileCheck %s
// RUN: loom-opt %s --loom-replicate="mesh-shape=2" | FileCheck %s --check-prefix=DDP
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" | FileCheck %s --check-prefix=FSDP
// RUN: loom-opt %s --loom-accumulate-gradients="microbatches=2" --loom-fsdp="mesh-shape=2" | FileCheck %s --check-prefix=BOTH

// Batch inputs without a batch dim (capture --batch-dims ...,none, and a
// 0-d batch tensor; loom-import's loom.unbatched): a 4x4 mask every sample
// shares and a per-step scalar, beside x with its samples on dim 0.
// Accumulation slices and widens x only and hands both microbatches the
// whole mask and scalar; data parallelism splits x only, so every rank
// takes them whole.
func.func @step(%w: tensor<4x4xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>},
                %m: tensor<4x4xf32> {loom.name = "m", loom.role = #loom.role<input>, loom.unbatched},
                %t: tensor<f32> {loom.name = "t", loom.role = #loom.role<input>, loom.unbatched})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.weight"})
    attributes {loom.step} {
  %wm = loom.aten "aten::mul.Tensor"(%w, %m) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = loom.aten "aten::mm.default"(%x, %wm) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %l = loom.aten "aten::div.Tensor"(%s, %t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::mul.Tensor"(%m, %l) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  return %l, %g : tensor<f32>, tensor<4x4xf32>
}

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x4xf32> {loom.name = "x", loom.role = #loom.role<input>}
// CHECK-SAME: %[[M:[^:]+]]: tensor<4x4xf32> {loom.name = "m", loom.role = #loom.role<input>, loom.unbatched}
// CHECK-SAME: %[[T:[^:]+]]: tensor<f32> {loom.name = "t", loom.role = #loom.role<input>, loom.unbatched})
// CHECK-NOT: "aten::slice.Tensor"(%[[M]])
// CHECK: %[[X0:.*]] = loom.aten "aten::slice.Tensor"(%[[X]]) {args = [#loom.arg<0>, 0, 0, 2, 1]{{.*}} : (tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK: loom.aten "aten::mul.Tensor"(%{{.*}}, %[[M]]) {{.*}}loom.microbatch = 0 : i64
// CHECK: loom.aten "aten::div.Tensor"(%{{.*}}, %[[T]]) {{.*}}loom.microbatch = 0 : i64
// CHECK: %[[X1:.*]] = loom.aten "aten::slice.Tensor"(%[[X]]) {args = [#loom.arg<0>, 0, 2, 4, 1]
// CHECK: loom.aten "aten::mul.Tensor"(%{{.*}}, %[[M]]) {{.*}}loom.microbatch = 1 : i64
// CHECK: loom.aten "aten::div.Tensor"(%{{.*}}, %[[T]]) {{.*}}loom.microbatch = 1 : i64

// DDP: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["dp"], dim = 0>}
// DDP-SAME: tensor<4x4xf32> {loom.name = "m", loom.role = #loom.role<input>, loom.unbatched}
// DDP-SAME: tensor<f32> {loom.name = "t", loom.role = #loom.role<input>, loom.unbatched})

// FSDP: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["shard"], dim = 0>}
// FSDP-SAME: tensor<4x4xf32> {loom.name = "m", loom.role = #loom.role<input>, loom.unbatched}
// FSDP-SAME: tensor<f32> {loom.name = "t", loom.role = #loom.role<input>, loom.unbatched})

// BOTH: tensor<4x4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["shard"], dim = 0>}
// BOTH-SAME: tensor<4x4xf32> {loom.name = "m", loom.role = #loom.role<input>, loom.unbatched}
// BOTH-SAME: tensor<f32> {loom.name = "t", loom.role = #loom.role<input>, loom.unbatched})
