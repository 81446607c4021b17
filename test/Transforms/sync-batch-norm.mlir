// RUN: loom-opt %s --split-input-file --loom-replicate="mesh-shape=2" --loom-sync-batch-norm | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-fsdp="mesh-shape=2,2" --loom-sync-batch-norm | FileCheck %s --check-prefix=HSDP
// RUN: loom-opt %s --split-input-file --loom-replicate="mesh-shape=1" --loom-sync-batch-norm | FileCheck %s --check-prefix=ONE
// RUN: loom-opt %s --split-input-file --loom-sync-batch-norm | FileCheck %s --check-prefix=ONE

// An nn.SyncBatchNorm(3) on a rank's 4 of 8 rows (4x3x5: 20 of 40 values per
// channel), its loss the sum of the output.

func.func @step(%w: tensor<3xf32> {loom.name = "bn.weight", loom.role = #loom.role<parameter>},
                %b: tensor<3xf32> {loom.name = "bn.bias", loom.role = #loom.role<parameter>},
                %rm: tensor<3xf32> {loom.name = "bn.running_mean", loom.role = #loom.role<buffer>},
                %rv: tensor<3xf32> {loom.name = "bn.running_var", loom.role = #loom.role<buffer>},
                %x: tensor<4x3x5xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<3xf32> {loom.role = #loom.role<buffer_mutation>, loom.target = "bn.running_mean"},
        tensor<3xf32> {loom.role = #loom.role<buffer_mutation>, loom.target = "bn.running_var"},
        tensor<f32> {loom.role = #loom.role<loss>},
        tensor<3xf32> {loom.role = #loom.role<grad>, loom.target = "bn.weight"},
        tensor<3xf32> {loom.role = #loom.role<grad>, loom.target = "bn.bias"},
        tensor<4x3x5xf32> {loom.role = #loom.role<output>})
    attributes {loom.step} {
  %y:5 = loom.aten "aten::_native_batch_norm_legit_functional.default"(%x, %w, %b, %rm, %rv) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, #loom.arg<3>, #loom.arg<4>, true, 1.000000e-01, 1.000000e-05], loom.module = "bn", loom.phase = #loom.phase<forward>, loom.sync_batch_norm} : (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  %l = loom.aten "aten::sum.default"(%y#0) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x3x5xf32>) -> tensor<f32>
  %dy = loom.aten "aten::ones_like.default"(%y#0) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x3x5xf32>) -> tensor<4x3x5xf32>
  %g:3 = loom.aten "aten::native_batch_norm_backward.default"(%dy, %x, %w, %y#3, %y#4, %y#1, %y#2) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, #loom.arg<3>, #loom.arg<4>, #loom.arg<5>, #loom.arg<6>, true, 1.000000e-05, [true, true, true]], loom.module = "bn", loom.phase = #loom.phase<backward>} : (tensor<4x3x5xf32>, tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>)
  return %y#3, %y#4, %l, %g#1, %g#2, %g#0 : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<4x3x5xf32>
}

// Forward: this rank's mean and biased variance over dims 0 and 2, both
// ranks' gathered, merged, the output normalized with them.
// CHECK-LABEL: func.func @step
// CHECK-NOT: _native_batch_norm_legit_functional
// CHECK: %[[VM:.*]]:2 = loom.aten "aten::var_mean.correction"(%{{.*}}) {args = [#loom.arg<0>, [0, 2]], kwargs = {correction = 0 : i64, keepdim = false}, loom.module = "bn", loom.phase = #loom.phase<forward>}
// CHECK-NEXT: %[[PACK:.*]] = loom.aten "aten::cat.default"(%[[VM]]#1, %[[VM]]#0) {args = {{\[\[}}#loom.arg<0>, #loom.arg<1>], 0]{{.*}} -> tensor<6xf32>
// CHECK-NEXT: %[[F:.*]] = loom.all_gather_start %[[PACK]] on @dp axes ["dp"] dim 0 {loom.module = "bn", loom.phase = #loom.phase<forward>} : tensor<6xf32> -> !loom.future<tensor<12xf32>>
// CHECK-NEXT: %[[G:.*]] = loom.wait %[[F]]
// CHECK-NEXT: %[[T:.*]] = loom.aten "aten::reshape.default"(%[[G]]) {args = [#loom.arg<0>, [2, 2, 3]]
// CHECK-NEXT: %[[MEANS:.*]] = loom.aten "aten::select.int"(%[[T]]) {args = [#loom.arg<0>, 1, 0]
// CHECK-NEXT: %[[MEAN:.*]] = loom.aten "aten::mean.dim"(%[[MEANS]]) {args = [#loom.arg<0>, [0]]
// CHECK-NEXT: %[[D:.*]] = loom.aten "aten::sub.Tensor"(%[[MEANS]], %[[MEAN]])
// CHECK-NEXT: %[[D2:.*]] = loom.aten "aten::mul.Tensor"(%[[D]], %[[D]])
// CHECK-NEXT: %[[SPREAD:.*]] = loom.aten "aten::mean.dim"(%[[D2]])
// CHECK-NEXT: %[[VARS:.*]] = loom.aten "aten::select.int"(%[[T]]) {args = [#loom.arg<0>, 1, 1]
// CHECK-NEXT: %[[WITHIN:.*]] = loom.aten "aten::mean.dim"(%[[VARS]])
// CHECK-NEXT: %[[VAR:.*]] = loom.aten "aten::add.Tensor"(%[[WITHIN]], %[[SPREAD]])
// CHECK-NEXT: %[[VE:.*]] = loom.aten "aten::add.Tensor"(%[[VAR]]) {args = [#loom.arg<0>, 1.000000e-05]
// CHECK-NEXT: %[[INVSTD:.*]] = loom.aten "aten::rsqrt.default"(%[[VE]])
// CHECK-NEXT: %[[Y:.*]]:3 = loom.aten "aten::_native_batch_norm_legit_no_training.default"(%{{.*}}, %{{.*}}, %{{.*}}, %[[MEAN]], %[[VAR]]) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, #loom.arg<3>, #loom.arg<4>, 1.000000e-01, 1.000000e-05]
// The running statistics: momentum 0.1 toward the mean and the unbiased
// variance of all 40 values (40/39).
// CHECK-NEXT: %[[A:.*]] = loom.aten "aten::mul.Tensor"(%[[MEAN]]) {args = [#loom.arg<0>, 1.000000e-01]
// CHECK-NEXT: %[[B:.*]] = loom.aten "aten::mul.Tensor"(%{{.*}}) {args = [#loom.arg<0>, 9.000000e-01]
// CHECK-NEXT: %[[RM:.*]] = loom.aten "aten::add.Tensor"(%[[A]], %[[B]])
// CHECK-NEXT: %[[UNBIASED:.*]] = loom.aten "aten::mul.Tensor"(%[[VAR]]) {args = [#loom.arg<0>, 1.02564102564{{[0-9]*}}]
// CHECK-NEXT: loom.aten "aten::mul.Tensor"(%[[UNBIASED]]) {args = [#loom.arg<0>, 1.000000e-01]
// CHECK-NEXT: loom.aten "aten::mul.Tensor"(%{{.*}}) {args = [#loom.arg<0>, 9.000000e-01]
// CHECK-NEXT: %[[RV:.*]] = loom.aten "aten::add.Tensor"
// Backward: the two sums, summed over both ranks for the input gradient;
// the weight and bias gradients are this rank's sums, then averaged by DDP.
// CHECK: %[[DY:.*]] = loom.aten "aten::ones_like.default"
// CHECK-NEXT: %[[SUMDY:.*]] = loom.aten "aten::sum.dim_IntList"(%[[DY]]) {args = [#loom.arg<0>, [0, 2]], loom.module = "bn", loom.phase = #loom.phase<backward>}
// CHECK-NEXT: %[[MB:.*]] = loom.aten "aten::reshape.default"(%[[MEAN]]) {args = [#loom.arg<0>, [1, 3, 1]]
// CHECK-NEXT: %[[XMU:.*]] = loom.aten "aten::sub.Tensor"(%{{.*}}, %[[MB]])
// CHECK-NEXT: %[[DYXMU:.*]] = loom.aten "aten::mul.Tensor"(%[[DY]], %[[XMU]])
// CHECK-NEXT: %[[SUMDYXMU:.*]] = loom.aten "aten::sum.dim_IntList"(%[[DYXMU]])
// CHECK-NEXT: %[[P:.*]] = loom.aten "aten::cat.default"(%[[SUMDY]], %[[SUMDYXMU]]) {args = {{\[\[}}#loom.arg<0>, #loom.arg<1>], 0]
// CHECK-NEXT: %[[R:.*]] = loom.all_reduce_start %[[P]] on @dp axes ["dp"] reduce <sum> {loom.module = "bn", loom.phase = #loom.phase<backward>} : tensor<6xf32>
// CHECK-NEXT: %[[S:.*]] = loom.wait %[[R]]
// CHECK-NEXT: %[[H:.*]]:2 = loom.aten "aten::split_with_sizes.default"(%[[S]]) {args = [#loom.arg<0>, [3, 3], 0]
// CHECK-NEXT: %[[MDY:.*]] = loom.aten "aten::div.Tensor"(%[[H]]#0) {args = [#loom.arg<0>, 4.000000e+01]
// CHECK-NEXT: %[[MDYXMU:.*]] = loom.aten "aten::div.Tensor"(%[[H]]#1) {args = [#loom.arg<0>, 4.000000e+01]
// CHECK-NEXT: %[[VAR2:.*]] = loom.aten "aten::mul.Tensor"(%[[INVSTD]], %[[INVSTD]])
// CHECK-NEXT: %[[PROJ:.*]] = loom.aten "aten::mul.Tensor"(%[[VAR2]], %[[MDYXMU]])
// CHECK-NEXT: %[[PROJB:.*]] = loom.aten "aten::reshape.default"(%[[PROJ]])
// CHECK-NEXT: %[[PROJX:.*]] = loom.aten "aten::mul.Tensor"(%[[XMU]], %[[PROJB]])
// CHECK-NEXT: %[[MDYB:.*]] = loom.aten "aten::reshape.default"(%[[MDY]])
// CHECK-NEXT: %[[DY1:.*]] = loom.aten "aten::sub.Tensor"(%[[DY]], %[[MDYB]])
// CHECK-NEXT: %[[INNER:.*]] = loom.aten "aten::sub.Tensor"(%[[DY1]], %[[PROJX]])
// CHECK-NEXT: %[[SCALE:.*]] = loom.aten "aten::mul.Tensor"(%[[INVSTD]], %{{.*}})
// CHECK-NEXT: %[[SCALEB:.*]] = loom.aten "aten::reshape.default"(%[[SCALE]])
// CHECK-NEXT: %[[GX:.*]] = loom.aten "aten::mul.Tensor"(%[[INNER]], %[[SCALEB]])
// CHECK-NEXT: %[[GW:.*]] = loom.aten "aten::mul.Tensor"(%[[SUMDYXMU]], %[[INVSTD]])
// CHECK-NOT: native_batch_norm_backward
// CHECK: loom.all_reduce_start {{.*}} reduce <sum>
// CHECK: return %[[RM]], %[[RV]], %{{.*}}, %{{.*}}, %{{.*}}, %[[GX]]

// Under HSDP the statistics span both mesh axes, all 4 ranks.
// HSDP-LABEL: func.func @step
// HSDP: loom.all_gather_start %{{.*}} on @hsdp axes ["replicate", "shard"] dim 0 {{.*}} : tensor<6xf32> -> !loom.future<tensor<24xf32>>
// HSDP: loom.all_reduce_start %{{.*}} on @hsdp axes ["replicate", "shard"] reduce <sum>

// One rank (or no data parallelism): plain batch norm, still marked.
// ONE-LABEL: func.func @step
// ONE: "aten::_native_batch_norm_legit_functional.default"{{.*}}loom.sync_batch_norm
// ONE-NOT: var_mean
// ONE: "aten::native_batch_norm_backward.default"

// -----

// Without running statistics (track_running_stats=False) and without affine
// parameters: no running update, the input gradient scaled by invstd alone.
func.func @step(%p: tensor<3xf32> {loom.name = "p", loom.role = #loom.role<parameter>},
                %x: tensor<4x3xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<3xf32> {loom.role = #loom.role<grad>, loom.target = "p"})
    attributes {loom.step} {
  %xp = loom.aten "aten::mul.Tensor"(%x, %p) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %y:3 = loom.aten "aten::_native_batch_norm_legit.no_stats"(%xp) {args = [#loom.arg<0>, unit, unit, true, 1.000000e-01, 1.000000e-05], loom.module = "bn", loom.phase = #loom.phase<forward>, loom.sync_batch_norm} : (tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
  %l = loom.aten "aten::sum.default"(%y#0) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x3xf32>) -> tensor<f32>
  %dy = loom.aten "aten::ones_like.default"(%y#0) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %gx = loom.aten "aten::native_batch_norm_backward.default"(%dy, %xp, %y#1, %y#2) {args = [#loom.arg<0>, #loom.arg<1>, unit, unit, unit, #loom.arg<2>, #loom.arg<3>, true, 1.000000e-05, [true, false, false]], loom.module = "bn", loom.phase = #loom.phase<backward>, returns = [0, unit, unit]} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %gp0 = loom.aten "aten::mul.Tensor"(%gx, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %gp = loom.aten "aten::sum.dim_IntList"(%gp0) {args = [#loom.arg<0>, [0]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x3xf32>) -> tensor<3xf32>
  return %l, %gp : tensor<f32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @step
// CHECK: loom.aten "aten::var_mean.correction"(%{{.*}}) {args = [#loom.arg<0>, [0]]
// CHECK: loom.all_gather_start {{.*}} : tensor<6xf32> -> !loom.future<tensor<12xf32>>
// CHECK: "aten::_native_batch_norm_legit_no_training.default"(%{{.*}}, %{{.*}}, %{{.*}}) {args = [#loom.arg<0>, unit, unit, #loom.arg<1>, #loom.arg<2>, 1.000000e-01, 1.000000e-05]
// CHECK-NOT: 9.000000e-01
// CHECK: loom.all_reduce_start {{.*}} reduce <sum>
// CHECK: %[[SPLIT:.*]]:2 = loom.aten "aten::split_with_sizes.default"
// CHECK: %[[MDY:.*]] = loom.aten "aten::div.Tensor"(%[[SPLIT]]#0) {args = [#loom.arg<0>, 8.000000e+00]
// CHECK: %[[DY1:.*]] = loom.aten "aten::sub.Tensor"
// CHECK-NEXT: %[[IN:.*]] = loom.aten "aten::sub.Tensor"(%[[DY1]],
// CHECK-NEXT: %[[RS:.*]] = loom.aten "aten::reshape.default"(%[[INVSTD:[^)]*]]) {args = [#loom.arg<0>, [1, 3]]
// CHECK-NEXT: loom.aten "aten::mul.Tensor"(%[[IN]], %[[RS]])
// CHECK-NOT: native_batch_norm_backward
