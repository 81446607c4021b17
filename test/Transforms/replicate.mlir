// RUN: loom-opt %s --loom-replicate="mesh-shape=4" | FileCheck %s
// RUN: loom-opt %s --loom-replicate="mesh-shape=4 bucket-cap-mb=0 first-bucket-cap-mb=0" | FileCheck %s --check-prefix=EACH
// RUN: loom-opt %s --loom-replicate="mesh-shape=4 bucket-cap-mb=0.25 first-bucket-cap-mb=0.25" | FileCheck %s --check-prefix=CAP
// RUN: loom-opt %s --loom-replicate="mesh-shape=4 first-bucket-cap-mb=0.25" | FileCheck %s --check-prefix=FIRST
// RUN: loom-opt %s --loom-replicate="mesh-shape=4 bucket-cap-mb=0" | FileCheck %s --check-prefix=FIRSTMB
// RUN: loom-opt %s --loom-replicate="mesh-shape=1" | FileCheck %s --check-prefix=ONE
// RUN: loom-opt %s --loom-replicate="mesh=rep mesh-shape=2,2 axes=r,s" | FileCheck %s --check-prefix=TWOD
// RUN: loom-opt %s --loom-replicate="mesh-shape=4" --loom-attach-optimizer="optimizer=sgd" | FileCheck %s --check-prefix=OPT
// RUN: loom-opt %s --loom-replicate="mesh-shape=4" | loom-opt | FileCheck %s
// RUN: loom-opt %S/Inputs/remat-step.mlir --loom-replicate="mesh-shape=2" | FileCheck %s --check-prefix=REMAT

// Two linear layers; backward produces the gradients of fc2 before fc1's.
// 256x256 f32 is exactly 0.25 MiB, a bias 1 KiB.

func.func @step(%w1: tensor<256x256xf32> {loom.name = "fc1.weight", loom.role = #loom.role<parameter>},
                %b1: tensor<256xf32> {loom.name = "fc1.bias", loom.role = #loom.role<parameter>},
                %w2: tensor<256x256xf32> {loom.name = "fc2.weight", loom.role = #loom.role<parameter>},
                %b2: tensor<256xf32> {loom.name = "fc2.bias", loom.role = #loom.role<parameter>},
                %x: tensor<2x256xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<256x256xf32> {loom.role = #loom.role<grad>, loom.target = "fc1.weight"},
        tensor<256xf32> {loom.role = #loom.role<grad>, loom.target = "fc1.bias"},
        tensor<256x256xf32> {loom.role = #loom.role<grad>, loom.target = "fc2.weight"},
        tensor<256xf32> {loom.role = #loom.role<grad>, loom.target = "fc2.bias"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x256xf32>) -> tensor<f32>
  %gw2 = loom.aten "aten::zeros_like.default"(%w2) {args = [#loom.arg<0>], loom.module = "fc2", loom.phase = #loom.phase<backward>} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %gb2 = loom.aten "aten::zeros_like.default"(%b2) {args = [#loom.arg<0>], loom.module = "fc2", loom.phase = #loom.phase<backward>} : (tensor<256xf32>) -> tensor<256xf32>
  %gw1 = loom.aten "aten::zeros_like.default"(%w1) {args = [#loom.arg<0>], loom.module = "fc1", loom.phase = #loom.phase<backward>} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %gb1 = loom.aten "aten::zeros_like.default"(%b1) {args = [#loom.arg<0>], loom.module = "fc1", loom.phase = #loom.phase<backward>} : (tensor<256xf32>) -> tensor<256xf32>
  return %l, %gw1, %gb1, %gw2, %gb2 : tensor<f32>, tensor<256x256xf32>, tensor<256xf32>, tensor<256x256xf32>, tensor<256xf32>
}

// The mesh, the split batch and the partial loss.
// CHECK: loom.mesh @dp shape [4] axes ["dp"]
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x256xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["dp"], dim = 0>}
// CHECK-SAME: -> (tensor<f32> {loom.partial = #loom.partial<@dp, axes = ["dp"], avg>, loom.role = #loom.role<loss>}

// Default caps (1 MiB first, 25 MiB after): one bucket of all four gradients
// (0.5 MiB, under the first cap), in backward
// order, each multiplied by 1 / world_size as DDP's reducer copies it into
// the bucket, flattened and concatenated right after the last one is
// produced and summed; waited for and split back right before the return.
// CHECK: %[[GW2:.*]] = loom.aten "aten::zeros_like.default"
// CHECK: %[[GB2:.*]] = loom.aten "aten::zeros_like.default"
// CHECK: %[[GW1:.*]] = loom.aten "aten::zeros_like.default"
// CHECK: %[[GB1:.*]] = loom.aten "aten::zeros_like.default"
// CHECK-NEXT: %[[S0:.*]] = loom.aten "aten::mul.Tensor"(%[[GW2]]) {args = [#loom.arg<0>, 2.500000e-01], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<256x256xf32>) -> tensor<256x256xf32>
// CHECK-NEXT: %[[S1:.*]] = loom.aten "aten::mul.Tensor"(%[[GB2]])
// CHECK-NEXT: %[[S2:.*]] = loom.aten "aten::mul.Tensor"(%[[GW1]])
// CHECK-NEXT: %[[S3:.*]] = loom.aten "aten::mul.Tensor"(%[[GB1]])
// CHECK-NEXT: %[[F0:.*]] = loom.aten "aten::reshape.default"(%[[S0]]) {args = [#loom.arg<0>, [65536]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<256x256xf32>) -> tensor<65536xf32>
// CHECK-NEXT: %[[F1:.*]] = loom.aten "aten::reshape.default"(%[[S1]])
// CHECK-NEXT: %[[F2:.*]] = loom.aten "aten::reshape.default"(%[[S2]])
// CHECK-NEXT: %[[F3:.*]] = loom.aten "aten::reshape.default"(%[[S3]])
// CHECK-NEXT: %[[CAT:.*]] = loom.aten "aten::cat.default"(%[[F0]], %[[F1]], %[[F2]], %[[F3]]) {args = {{\[}}[#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, #loom.arg<3>], 0]
// CHECK-SAME: -> tensor<131584xf32>
// CHECK-NEXT: %[[FUT:.*]] = loom.all_reduce_start %[[CAT]] on @dp axes ["dp"] reduce <sum> {loom.module = "", loom.phase = #loom.phase<backward>} : tensor<131584xf32> -> !loom.future<tensor<131584xf32>>
// CHECK-NEXT: %[[R:.*]] = loom.wait %[[FUT]]
// CHECK-NEXT: %[[P:.*]]:4 = loom.aten "aten::split_with_sizes.default"(%[[R]]) {args = [#loom.arg<0>, [65536, 256, 65536, 256], 0], {{.*}}returns = {{\[\[}}0, 1, 2, 3]]}
// CHECK-NEXT: %[[RW2:.*]] = loom.aten "aten::reshape.default"(%[[P]]#0) {args = [#loom.arg<0>, [256, 256]]
// CHECK-NEXT: %[[RB2:.*]] = loom.aten "aten::reshape.default"(%[[P]]#1)
// CHECK-NEXT: %[[RW1:.*]] = loom.aten "aten::reshape.default"(%[[P]]#2)
// CHECK-NEXT: %[[RB1:.*]] = loom.aten "aten::reshape.default"(%[[P]]#3)
// CHECK-NEXT: return %{{.*}}, %[[RW1]], %[[RB1]], %[[RW2]], %[[RB2]]
// CHECK-NOT: loom.all_reduce_start

// bucket-cap-mb=0 (and first 0, as DDP(bucket_cap_mb=0)): one all-reduce
// per gradient, each started right after
// its gradient, no flattening.
// EACH-LABEL: func.func @step(
// EACH-NOT: aten::cat
// EACH: %[[GW2:.*]] = loom.aten "aten::zeros_like.default"
// EACH-NEXT: %[[SW2:.*]] = loom.aten "aten::mul.Tensor"(%[[GW2]])
// EACH-NEXT: loom.all_reduce_start %[[SW2]] on @dp axes ["dp"] reduce <sum> {loom.module = "fc2", loom.phase = #loom.phase<backward>} : tensor<256x256xf32>
// EACH-NEXT: %[[GB2:.*]] = loom.aten "aten::zeros_like.default"
// EACH-NEXT: %[[SB2:.*]] = loom.aten "aten::mul.Tensor"(%[[GB2]])
// EACH-NEXT: loom.all_reduce_start %[[SB2]]
// EACH-NEXT: loom.aten "aten::zeros_like.default"
// EACH-NEXT: loom.aten "aten::mul.Tensor"
// EACH-NEXT: loom.all_reduce_start
// EACH-NEXT: loom.aten "aten::zeros_like.default"
// EACH-NEXT: loom.aten "aten::mul.Tensor"
// EACH-NEXT: loom.all_reduce_start
// EACH-COUNT-4: loom.wait
// EACH-NEXT: return
// EACH-NOT: loom.all_reduce_start

// bucket-cap-mb=0.25 (both caps, as DDP(bucket_cap_mb=0.25)): a bucket closes
// once it holds 0.25 MiB, so fc2.weight
// fills one alone, fc2.bias and fc1.weight share the next, fc1.bias is last.
// CAP-LABEL: func.func @step(
// CAP: %[[GW2:.*]] = loom.aten "aten::zeros_like.default"
// CAP-NEXT: %[[SW2:.*]] = loom.aten "aten::mul.Tensor"(%[[GW2]])
// CAP-NEXT: loom.all_reduce_start %[[SW2]] {{.*}} : tensor<256x256xf32>
// CAP: loom.aten "aten::cat.default"
// CAP-SAME: -> tensor<65792xf32>
// CAP-NEXT: loom.all_reduce_start {{.*}} {loom.module = "", {{.*}} : tensor<65792xf32>
// CAP-NEXT: %[[GB1:.*]] = loom.aten "aten::zeros_like.default"
// CAP-NEXT: %[[SB1:.*]] = loom.aten "aten::mul.Tensor"(%[[GB1]])
// CAP-NEXT: loom.all_reduce_start %[[SB1]] {{.*}} {loom.module = "fc1", {{.*}} : tensor<256xf32>
// CAP-COUNT-3: loom.wait
// CAP-NOT: loom.all_reduce_start

// first-bucket-cap-mb=0.25, bucket cap 25: the first bucket closes with
// fc2.weight (0.25 MiB); the other three share the second.
// FIRST-LABEL: func.func @step(
// FIRST: %[[GW2:.*]] = loom.aten "aten::zeros_like.default"
// FIRST-NEXT: %[[SW2:.*]] = loom.aten "aten::mul.Tensor"(%[[GW2]])
// FIRST-NEXT: loom.all_reduce_start %[[SW2]] {{.*}} : tensor<256x256xf32>
// FIRST-NEXT: %[[GB2:.*]] = loom.aten "aten::zeros_like.default"
// FIRST-NEXT: %[[GW1:.*]] = loom.aten "aten::zeros_like.default"
// FIRST-NEXT: %[[GB1:.*]] = loom.aten "aten::zeros_like.default"
// FIRST-NEXT: %[[S0:.*]] = loom.aten "aten::mul.Tensor"(%[[GB2]])
// FIRST-NEXT: %[[S1:.*]] = loom.aten "aten::mul.Tensor"(%[[GW1]])
// FIRST-NEXT: %[[S2:.*]] = loom.aten "aten::mul.Tensor"(%[[GB1]])
// FIRST-NEXT: %[[F0:.*]] = loom.aten "aten::reshape.default"(%[[S0]])
// FIRST-NEXT: %[[F1:.*]] = loom.aten "aten::reshape.default"(%[[S1]])
// FIRST-NEXT: %[[F2:.*]] = loom.aten "aten::reshape.default"(%[[S2]])
// FIRST-NEXT: loom.aten "aten::cat.default"(%[[F0]], %[[F1]], %[[F2]])
// FIRST-SAME: -> tensor<66048xf32>
// FIRST-NEXT: loom.all_reduce_start {{.*}} : tensor<66048xf32>
// FIRST-COUNT-2: loom.wait
// FIRST-NOT: loom.all_reduce_start

// bucket-cap-mb=0 alone keeps the 1 MiB first bucket: all four gradients
// (0.5 MiB) fill it without closing it, so it is still one bucket.
// FIRSTMB-LABEL: func.func @step(
// FIRSTMB-COUNT-1: loom.all_reduce_start {{.*}} : tensor<131584xf32>
// FIRSTMB-NOT: loom.all_reduce_start

// One rank: the mesh and attributes, no collectives (as DDP on one rank).
// ONE: loom.mesh @dp shape [1] axes ["dp"]
// ONE: loom.split = #loom.split<@dp, axes = ["dp"], dim = 0>
// ONE: loom.partial = #loom.partial<@dp, axes = ["dp"], avg>
// ONE-NOT: loom.all_reduce_start

// A 2-d mesh: the gradients are averaged over both axes.
// TWOD: loom.mesh @rep shape [2, 2] axes ["r", "s"]
// TWOD: loom.split = #loom.split<@rep, axes = ["r", "s"], dim = 0>
// TWOD: loom.all_reduce_start %{{.*}} on @rep axes ["r", "s"] reduce <sum>

// The optimizer attached afterwards updates with the reduced gradients.
// OPT-LABEL: func.func @step(
// OPT: %[[R:.*]] = loom.wait
// OPT: loom.aten "aten::split_with_sizes.default"(%[[R]])
// OPT: %[[RW2:.*]] = loom.aten "aten::reshape.default"
// OPT: %[[RB2:.*]] = loom.aten "aten::reshape.default"
// OPT: %[[RW1:.*]] = loom.aten "aten::reshape.default"
// OPT: %[[RB1:.*]] = loom.aten "aten::reshape.default"
// OPT: loom.optimizer_update #loom.sgd<> param %{{.*}} grad %[[RW1]]
// OPT: loom.optimizer_update #loom.sgd<> param %{{.*}} grad %[[RB1]]
// OPT: loom.optimizer_update #loom.sgd<> param %{{.*}} grad %[[RW2]]
// OPT: loom.optimizer_update #loom.sgd<> param %{{.*}} grad %[[RB2]]


// A step with recompute regions (Inputs/remat-step.mlir): the regions stay
// as they are, reading the step's own parameters, and the gradients they
// help compute are all-reduced once, after the last of them.
// REMAT-LABEL: func.func @step
// REMAT-NOT: loom.all_reduce_start
// REMAT: loom.recompute "layers.1" (%{{.*}}, %arg2)
// REMAT-NOT: loom.all_reduce_start
// REMAT: loom.recompute "layers.0" (%arg0, %arg1, %arg4)
// REMAT: loom.aten "aten::sum.dim_IntList"
// REMAT-COUNT-1: loom.all_reduce_start
// REMAT-NOT: loom.all_reduce_start
