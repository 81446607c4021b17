// RUN: loom-opt %s --loom-accumulate-gradients="microbatches=2" | FileCheck %s
// RUN: loom-opt %s --loom-replicate="mesh-shape=2" | FileCheck %s --check-prefix=DDP
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" | FileCheck %s --check-prefix=FSDP
// RUN: loom-opt %s --loom-accumulate-gradients="microbatches=2" --loom-fsdp="mesh-shape=2" | FileCheck %s --check-prefix=BOTH

// A sequence-first batch input, (S=3, B=2) with its samples on dim 1
// (capture --batch-dims 1, loom-import's loom.batch_dim), beside x with
// its samples on dim 0. Accumulation slices each on its own batch dim and
// widens that dim; a slice of dim 1 is strided, so it is copied contiguous,
// as the step was traced on a contiguous microbatch. Data parallelism
// splits the same dims.
func.func @step(%w: tensor<4x4xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>},
                %s: tensor<3x2xf32> {loom.name = "s", loom.role = #loom.role<input>, loom.batch_dim = 1 : i64})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.weight"})
    attributes {loom.step} {
  %y = loom.aten "aten::mm.default"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l0 = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %l1 = loom.aten "aten::sum.default"(%s) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<3x2xf32>) -> tensor<f32>
  %l = loom.aten "aten::add.Tensor"(%l0, %l1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::mul.Tensor"(%w, %l) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  return %l, %g : tensor<f32>, tensor<4x4xf32>
}

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x4xf32> {loom.name = "x", loom.role = #loom.role<input>}
// CHECK-SAME: %[[S:[^:]+]]: tensor<3x4xf32> {loom.batch_dim = 1 : i64, loom.name = "s", loom.role = #loom.role<input>})
// CHECK-NEXT: loom.aten "aten::slice.Tensor"(%[[X]]) {args = [#loom.arg<0>, 0, 0, 2, 1]{{.*}} : (tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[S0:.*]] = loom.aten "aten::slice.Tensor"(%[[S]]) {args = [#loom.arg<0>, 1, 0, 2, 1]{{.*}} : (tensor<3x4xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[C0:.*]] = loom.aten "aten::clone.default"(%[[S0]]) {args = [#loom.arg<0>], kwargs = {memory_format = "torch.contiguous_format"}, loom.microbatch = 0 : i64, loom.module = "", loom.phase = #loom.phase<forward>}
// CHECK: loom.aten "aten::sum.default"(%[[C0]])
// CHECK: loom.aten "aten::slice.Tensor"(%[[S]]) {args = [#loom.arg<0>, 1, 2, 4, 1]{{.*}}loom.microbatch = 1 : i64
// CHECK-NEXT: loom.aten "aten::clone.default"

// DDP: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["dp"], dim = 0>}
// DDP-SAME: tensor<3x2xf32> {loom.batch_dim = 1 : i64, loom.name = "s", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["dp"], dim = 1>}

// FSDP: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["shard"], dim = 0>}
// FSDP-SAME: tensor<3x2xf32> {loom.batch_dim = 1 : i64, loom.name = "s", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["shard"], dim = 1>}

// BOTH: tensor<3x4xf32> {loom.batch_dim = 1 : i64, loom.name = "s", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["shard"], dim = 1>}
