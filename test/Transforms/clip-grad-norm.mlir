// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 max-grad-norm=1.5" | FileCheck %s --check-prefix=ONE
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 max-grad-norm=1.5 grad-norm-type=inf" | FileCheck %s --check-prefix=INF
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1" | FileCheck %s --check-prefix=OFF
// RUN: loom-opt %s --loom-replicate="mesh-shape=4" --loom-attach-optimizer="max-grad-norm=1.5" | FileCheck %s --check-prefix=DDP
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4" --loom-attach-optimizer="max-grad-norm=1.5" | FileCheck %s --check-prefix=FSDP
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4" --loom-attach-optimizer="max-grad-norm=1.5 grad-norm-type=inf" | FileCheck %s --check-prefix=FSDP-INF
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2,2" --loom-attach-optimizer="max-grad-norm=1.5" | FileCheck %s --check-prefix=HSDP

// Gradient clipping (clip_grad_norm_) of a Linear 4->8, whose gradients are
// returned bias first: the norms are stacked in parameter order (weight,
// bias) as model.parameters() lists them.

// ONE-LABEL: func.func @step
// ONE: %[[GW:.*]] = loom.aten "aten::mm.default"
// ONE: %[[GB:.*]] = loom.aten "aten::sum.dim_IntList"
// ONE-NOT: loom.all_reduce_start
// ONE: %[[NW:.*]] = loom.aten "aten::linalg_vector_norm.default"(%[[GW]]) {args = [#loom.arg<0>, 2.000000e+00], loom.module = "", loom.phase = #loom.phase<optimizer>}
// ONE-NEXT: %[[NB:.*]] = loom.aten "aten::linalg_vector_norm.default"(%[[GB]]) {args = [#loom.arg<0>, 2.000000e+00]
// ONE-NEXT: %[[S:.*]] = loom.aten "aten::stack.default"(%[[NW]], %[[NB]]) {args = {{\[}}[#loom.arg<0>, #loom.arg<1>], 0]
// ONE-NEXT: %[[T:.*]] = loom.aten "aten::linalg_vector_norm.default"(%[[S]]) {args = [#loom.arg<0>, 2.000000e+00]
// ONE-NEXT: %[[A:.*]] = loom.aten "aten::add.Tensor"(%[[T]]) {args = [#loom.arg<0>, 9.9999999999999995E-7]
// ONE-NEXT: %[[R:.*]] = loom.aten "aten::reciprocal.default"(%[[A]])
// ONE-NEXT: %[[M:.*]] = loom.aten "aten::mul.Tensor"(%[[R]]) {args = [#loom.arg<0>, 1.500000e+00]
// ONE-NEXT: %[[C:.*]] = loom.aten "aten::clamp.default"(%[[M]]) {args = [#loom.arg<0>, unit, 1.000000e+00]
// ONE-NEXT: %[[CW:.*]] = loom.aten "aten::mul.Tensor"(%[[GW]], %[[C]])
// ONE-NEXT: %[[CB:.*]] = loom.aten "aten::mul.Tensor"(%[[GB]], %[[C]])
// ONE-NEXT: loom.optimizer_update #loom.sgd<lr = 0.1> param %{{.*}} grad %[[CB]]
// ONE-NEXT: loom.optimizer_update #loom.sgd<lr = 0.1> param %{{.*}} grad %[[CW]]

// INF-COUNT-3: loom.aten "aten::linalg_vector_norm.default"({{.*}}) {args = [#loom.arg<0>, 0x7FF0000000000000 : f64]
// INF-NOT: loom.all_reduce_start

// OFF-NOT: linalg_vector_norm
// OFF-NOT: aten::clamp

// Under DDP the gradients are averaged before clipping: the norm is local,
// the only all-reduce is DDP's bucket.
// DDP: loom.all_reduce_start {{.*}} reduce <sum> {{.*}}loom.phase = #loom.phase<backward>
// DDP-NOT: loom.all_reduce_start
// DDP: aten::clamp.default
// DDP-NOT: loom.all_reduce_start

// Under FSDP each rank holds shards: the squared local norm is summed over
// the shard axis before the coefficient, in the optimizer phase.
// FSDP: loom.reduce_scatter_start
// FSDP: loom.aten "aten::stack.default"
// FSDP-NEXT: %[[L:.*]] = loom.aten "aten::linalg_vector_norm.default"(%{{.*}}) {args = [#loom.arg<0>, 2.000000e+00]{{.*}} : (tensor<2xf32>) -> tensor<f32>
// FSDP-NEXT: %[[SQ:.*]] = loom.aten "aten::pow.Tensor_Scalar"(%[[L]]) {args = [#loom.arg<0>, 2.000000e+00]
// FSDP-NEXT: %[[F:.*]] = loom.all_reduce_start %[[SQ]] on @dp axes ["shard"] reduce <sum> {loom.module = "", loom.phase = #loom.phase<optimizer>} : tensor<f32> -> !loom.future<tensor<f32>>
// FSDP-NEXT: %[[W:.*]] = loom.wait %[[F]]
// FSDP-NEXT: %[[T:.*]] = loom.aten "aten::pow.Tensor_Scalar"(%[[W]]) {args = [#loom.arg<0>, 5.000000e-01]
// FSDP-NEXT: loom.aten "aten::add.Tensor"(%[[T]])
// FSDP-NOT: loom.all_reduce_start

// FSDP-INF-NOT: aten::pow
// FSDP-INF: loom.all_reduce_start %{{.*}} on @dp axes ["shard"] reduce <max>
// FSDP-INF-NOT: aten::pow

// Under HSDP the gradient shards are already averaged over "replicate"; the norm
// is completed over "shard" only.
// HSDP: loom.all_reduce_start {{.*}} axes ["replicate"] reduce <avg>
// HSDP: loom.all_reduce_start {{.*}} axes ["shard"] reduce <sum> {loom.module = "", loom.phase = #loom.phase<optimizer>}
// HSDP-NOT: loom.all_reduce_start

func.func @step(%w: tensor<8x4xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>},
                %b: tensor<8xf32> {loom.name = "fc.bias", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8xf32> {loom.role = #loom.role<grad>, loom.target = "fc.bias"},
        tensor<8x4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.weight"})
    attributes {loom.step} {
  %wt = loom.aten "aten::t.default"(%w) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %y = loom.aten "aten::addmm.default"(%b, %x, %wt) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<8xf32>, tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %l = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x8xf32>) -> tensor<f32>
  %ones = loom.aten "aten::ones_like.default"(%y) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %onest = loom.aten "aten::t.default"(%ones) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %gw = loom.aten "aten::mm.default"(%onest, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<8x2xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>
  %gb = loom.aten "aten::sum.dim_IntList"(%ones) {args = [#loom.arg<0>, [0], false], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<2x8xf32>) -> tensor<8xf32>
  return %l, %gb, %gw : tensor<f32>, tensor<8xf32>, tensor<8x4xf32>
}
