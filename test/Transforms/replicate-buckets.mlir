// DDP's bucket assignment with several element types: one open bucket per
// type, each type's first bucket capped by first-bucket-cap-mb, later ones
// by bucket-cap-mb, buckets still open at the end by their first gradient.
// The expected buckets are what torch 2.9's
// dist._compute_bucket_assignment_by_size(grads in this order, [1 MiB,
// 0.5 MiB], tensor_indices=[0..7]) returns: [[0, 2], [1, 3], [4, 5], [6], [7]].
// RUN: loom-opt %s --loom-replicate="mesh-shape=2 first-bucket-cap-mb=1 bucket-cap-mb=0.5" | FileCheck %s
// RUN: loom-opt %s --loom-replicate="mesh-shape=2 first-bucket-cap-mb=1 bucket-cap-mb=0.5" --mlir-print-debuginfo | FileCheck %s --check-prefix=NAMES

// Gradients in production order (g0 first):
//   g0 f32 0.75 MiB, g1 f64 0.5 MiB, g2 f32 0.5 MiB, g3 f64 0.625 MiB,
//   g4 f32 0.25 MiB, g5 f32 0.25 MiB, g6 f64 2 KiB, g7 f32 1 KiB.
func.func @step(%p0: tensor<196608xf32> {loom.name = "p0", loom.role = #loom.role<parameter>},
                %p1: tensor<65536xf64> {loom.name = "p1", loom.role = #loom.role<parameter>},
                %p2: tensor<131072xf32> {loom.name = "p2", loom.role = #loom.role<parameter>},
                %p3: tensor<81920xf64> {loom.name = "p3", loom.role = #loom.role<parameter>},
                %p4: tensor<65536xf32> {loom.name = "p4", loom.role = #loom.role<parameter>},
                %p5: tensor<65536xf32> {loom.name = "p5", loom.role = #loom.role<parameter>},
                %p6: tensor<256xf64> {loom.name = "p6", loom.role = #loom.role<parameter>},
                %p7: tensor<256xf32> {loom.name = "p7", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<196608xf32> {loom.role = #loom.role<grad>, loom.target = "p0"},
        tensor<65536xf64> {loom.role = #loom.role<grad>, loom.target = "p1"},
        tensor<131072xf32> {loom.role = #loom.role<grad>, loom.target = "p2"},
        tensor<81920xf64> {loom.role = #loom.role<grad>, loom.target = "p3"},
        tensor<65536xf32> {loom.role = #loom.role<grad>, loom.target = "p4"},
        tensor<65536xf32> {loom.role = #loom.role<grad>, loom.target = "p5"},
        tensor<256xf64> {loom.role = #loom.role<grad>, loom.target = "p6"},
        tensor<256xf32> {loom.role = #loom.role<grad>, loom.target = "p7"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %g0 = loom.aten "aten::zeros_like.default"(%p0) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<196608xf32>) -> tensor<196608xf32>
  %g1 = loom.aten "aten::zeros_like.default"(%p1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<65536xf64>) -> tensor<65536xf64>
  %g2 = loom.aten "aten::zeros_like.default"(%p2) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<131072xf32>) -> tensor<131072xf32>
  %g3 = loom.aten "aten::zeros_like.default"(%p3) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<81920xf64>) -> tensor<81920xf64>
  %g4 = loom.aten "aten::zeros_like.default"(%p4) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<65536xf32>) -> tensor<65536xf32>
  %g5 = loom.aten "aten::zeros_like.default"(%p5) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<65536xf32>) -> tensor<65536xf32>
  %g6 = loom.aten "aten::zeros_like.default"(%p6) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<256xf64>) -> tensor<256xf64>
  %g7 = loom.aten "aten::zeros_like.default"(%p7) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<256xf32>) -> tensor<256xf32>
  return %l, %g0, %g1, %g2, %g3, %g4, %g5, %g6, %g7 : tensor<f32>, tensor<196608xf32>, tensor<65536xf64>, tensor<131072xf32>, tensor<81920xf64>, tensor<65536xf32>, tensor<65536xf32>, tensor<256xf64>, tensor<256xf32>
}

// Each bucket is started right after its last gradient; the names give the
// bucket index (the order buckets close, then the open ones).
// CHECK-LABEL: func.func @step(
// CHECK: %[[G0:.*]] = loom.aten "aten::zeros_like.default"(%arg0)
// CHECK-NEXT: %[[G1:.*]] = loom.aten "aten::zeros_like.default"(%arg1)
// CHECK-NEXT: %[[G2:.*]] = loom.aten "aten::zeros_like.default"(%arg2)
// Bucket 0 (f32, the first f32 bucket: 1.25 MiB >= 1 MiB): g0, g2.
// CHECK-NEXT: %[[SA:.*]] = loom.aten "aten::mul.Tensor"(%[[G0]])
// CHECK-NEXT: %[[SB:.*]] = loom.aten "aten::mul.Tensor"(%[[G2]])
// CHECK-NEXT: %[[A:.*]] = loom.aten "aten::reshape.default"(%[[SA]])
// CHECK-NEXT: %[[B:.*]] = loom.aten "aten::reshape.default"(%[[SB]])
// CHECK-NEXT: %[[C0:.*]] = loom.aten "aten::cat.default"(%[[A]], %[[B]]) {{.*}} -> tensor<327680xf32>
// CHECK-NEXT: loom.all_reduce_start %[[C0]] {{.*}} : tensor<327680xf32> -> !loom.future<tensor<327680xf32>>
// CHECK-NEXT: %[[G3:.*]] = loom.aten "aten::zeros_like.default"(%arg3)
// Bucket 1 (f64, its own first bucket: 1.125 MiB >= 1 MiB): g1, g3.
// CHECK-NEXT: %[[SA:.*]] = loom.aten "aten::mul.Tensor"(%[[G1]])
// CHECK-NEXT: %[[SB:.*]] = loom.aten "aten::mul.Tensor"(%[[G3]])
// CHECK-NEXT: %[[A:.*]] = loom.aten "aten::reshape.default"(%[[SA]])
// CHECK-NEXT: %[[B:.*]] = loom.aten "aten::reshape.default"(%[[SB]])
// CHECK-NEXT: %[[C1:.*]] = loom.aten "aten::cat.default"(%[[A]], %[[B]]) {{.*}} -> tensor<147456xf64>
// CHECK-NEXT: loom.all_reduce_start %[[C1]] {{.*}} : tensor<147456xf64>
// CHECK-NEXT: %[[G4:.*]] = loom.aten "aten::zeros_like.default"(%arg4)
// CHECK-NEXT: %[[G5:.*]] = loom.aten "aten::zeros_like.default"(%arg5)
// Bucket 2 (f32, now capped at 0.5 MiB): g4, g5.
// CHECK-NEXT: %[[SA:.*]] = loom.aten "aten::mul.Tensor"(%[[G4]])
// CHECK-NEXT: %[[SB:.*]] = loom.aten "aten::mul.Tensor"(%[[G5]])
// CHECK-NEXT: %[[A:.*]] = loom.aten "aten::reshape.default"(%[[SA]])
// CHECK-NEXT: %[[B:.*]] = loom.aten "aten::reshape.default"(%[[SB]])
// CHECK-NEXT: %[[C2:.*]] = loom.aten "aten::cat.default"(%[[A]], %[[B]]) {{.*}} -> tensor<131072xf32>
// CHECK-NEXT: loom.all_reduce_start %[[C2]] {{.*}} : tensor<131072xf32>
// Buckets 3 (g6, f64) and 4 (g7, f32) never fill: single gradients,
// scaled and reduced as they are.
// CHECK-NEXT: %[[G6:.*]] = loom.aten "aten::zeros_like.default"(%arg6)
// CHECK-NEXT: %[[S6:.*]] = loom.aten "aten::mul.Tensor"(%[[G6]])
// CHECK-NEXT: loom.all_reduce_start %[[S6]] {{.*}} : tensor<256xf64>
// CHECK-NEXT: %[[G7:.*]] = loom.aten "aten::zeros_like.default"(%arg7)
// CHECK-NEXT: %[[S7:.*]] = loom.aten "aten::mul.Tensor"(%[[G7]])
// CHECK-NEXT: loom.all_reduce_start %[[S7]] {{.*}} : tensor<256xf32>
// CHECK-NOT: loom.all_reduce_start
// CHECK-COUNT-5: loom.wait
// CHECK: return

// NAMES: loc("ddp.bucket0.wait"
// NAMES: loc("ddp.bucket1.wait"
// NAMES: loc("ddp.bucket2.wait"
// NAMES: loc("ddp.bucket3.wait"
// NAMES: loc("ddp.bucket4.wait"
