// RUN: loom-opt %s | FileCheck %s
// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s

// CHECK: loom.mesh @dp shape [4] axes ["shard"]
loom.mesh @dp shape [4] axes ["shard"]
// CHECK: loom.mesh @hsdp shape [2, 2] axes ["replicate", "shard"]
loom.mesh @hsdp shape [2, 2] axes ["replicate", "shard"]
loom.mesh @pp shape [2] axes ["pp"]

// CHECK-LABEL: func.func @step
// CHECK-SAME: loom.name = "w", loom.role = #loom.role<parameter>
// CHECK-SAME: loom.role = #loom.role<loss>
// CHECK-SAME: loom.role = #loom.role<grad>, loom.target = "w"
func.func @step(%w: tensor<8x4xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x4xf32> {loom.role = #loom.role<grad>, loom.target = "w"})
    attributes {loom.step} {
  // CHECK: loom.aten "aten::permute.default"(%{{.*}}) {args = [#loom.arg<0>, [1, 0]], loom.module = "l1", loom.phase = #loom.phase<forward>}
  %wt = loom.aten "aten::permute.default"(%w) {args = [#loom.arg<0>, [1, 0]], loom.module = "l1", loom.phase = #loom.phase<forward>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %y = loom.aten "aten::mm.default"(%x, %wt) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "l1", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  // CHECK: kwargs = {dtype = f64}
  %d = loom.aten "aten::_to_copy.default"(%y) {args = [#loom.arg<0>], kwargs = {dtype = f64}} : (tensor<2x8xf32>) -> tensor<2x8xf64>
  %l = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>]} : (tensor<2x8xf32>) -> tensor<f32>
  %c = loom.aten "aten::cat.default"(%y, %y) {args = [[#loom.arg<0>, #loom.arg<1>], 0]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  // CHECK: returns = [0, unit, 1]
  %gi, %gw = loom.aten "aten::native_layer_norm_backward.default"(%y, %y) {args = [#loom.arg<0>, #loom.arg<1>], returns = [0, unit, 1]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  %g = loom.aten "aten::zeros_like.default"(%w) {args = [#loom.arg<0>], loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %l, %g : tensor<f32>, tensor<8x4xf32>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%s: tensor<2x8xf32>, %g: tensor<8x8xf32>, %h: tensor<4x8xbf16>) {
  // CHECK: %[[F:.*]] = loom.all_gather_start %{{.*}} on @dp axes ["shard"] dim 0 : tensor<2x8xf32> -> !loom.future<tensor<8x8xf32>>
  // CHECK: loom.wait %[[F]] : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
  %f0 = loom.all_gather_start %s on @dp axes ["shard"] dim 0 : tensor<2x8xf32> -> !loom.future<tensor<8x8xf32>>
  %full = loom.wait %f0 : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
  // CHECK: loom.reduce_scatter_start %{{.*}} on @dp axes ["shard"] dim 0 reduce <avg>
  %f1 = loom.reduce_scatter_start %g on @dp axes ["shard"] dim 0 reduce <avg> : tensor<8x8xf32> -> !loom.future<tensor<2x8xf32>>
  %shard = loom.wait %f1 : !loom.future<tensor<2x8xf32>> -> tensor<2x8xf32>
  // CHECK: loom.all_slice_start %{{.*}} on @dp axes ["shard"] dim 1 : tensor<8x8xf32> -> !loom.future<tensor<8x2xf32>>
  %fs = loom.all_slice_start %g on @dp axes ["shard"] dim 1 : tensor<8x8xf32> -> !loom.future<tensor<8x2xf32>>
  %slice = loom.wait %fs : !loom.future<tensor<8x2xf32>> -> tensor<8x2xf32>
  // HSDP: reduce-scatter on the shard axis, all-reduce on the replicate axis.
  // CHECK: loom.reduce_scatter_start %{{.*}} on @hsdp axes ["shard"] dim 1 reduce <sum>
  // CHECK: loom.all_reduce_start %{{.*}} on @hsdp axes ["replicate"] reduce <avg>
  %f2 = loom.reduce_scatter_start %g on @hsdp axes ["shard"] dim 1 reduce <sum> : tensor<8x8xf32> -> !loom.future<tensor<8x4xf32>>
  %p = loom.wait %f2 : !loom.future<tensor<8x4xf32>> -> tensor<8x4xf32>
  %f3 = loom.all_reduce_start %p on @hsdp axes ["replicate"] reduce <avg> : tensor<8x4xf32> -> !loom.future<tensor<8x4xf32>>
  %r = loom.wait %f3 : !loom.future<tensor<8x4xf32>> -> tensor<8x4xf32>
  // Both axes of a 2-D mesh form one group of 4.
  // CHECK: loom.all_gather_start %{{.*}} on @hsdp axes ["replicate", "shard"] dim 0
  %f4 = loom.all_gather_start %s on @hsdp axes ["replicate", "shard"] dim 0 : tensor<2x8xf32> -> !loom.future<tensor<8x8xf32>>
  %all = loom.wait %f4 : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
  // CHECK: loom.broadcast_start %{{.*}} on @dp axes ["shard"] root 3
  %f5 = loom.broadcast_start %h on @dp axes ["shard"] root 3 : tensor<4x8xbf16> -> !loom.future<tensor<4x8xbf16>>
  %b = loom.wait %f5 : !loom.future<tensor<4x8xbf16>> -> tensor<4x8xbf16>
  // CHECK: loom.send_start %{{.*}} on @pp axes ["pp"] peer 1 tag 0 : tensor<2x8xf32> -> !loom.future<none>
  // CHECK: loom.wait %{{.*}} : !loom.future<none>
  %f6 = loom.send_start %s on @pp axes ["pp"] peer 1 tag 0 : tensor<2x8xf32> -> !loom.future<none>
  loom.wait %f6 : !loom.future<none>
  // CHECK: loom.recv_start on @pp axes ["pp"] peer 0 tag 3 : !loom.future<tensor<2x8xf32>>
  %f7 = loom.recv_start on @pp axes ["pp"] peer 0 tag 3 : !loom.future<tensor<2x8xf32>>
  %act = loom.wait %f7 : !loom.future<tensor<2x8xf32>> -> tensor<2x8xf32>
  return
}

// Optimizer hyperparameters print only what differs from PyTorch's
// defaults, with the fewest digits that read back exactly.
// CHECK-LABEL: func.func @optimizer
// CHECK-SAME: loom.name = "w.exp_avg", loom.role = #loom.role<optimizer_state>, loom.target = "w"
// CHECK-SAME: loom.role = #loom.role<param_update>, loom.target = "w"
// CHECK-SAME: loom.role = #loom.role<state_update>, loom.target = "w.exp_avg"
// CHECK-SAME: loom.optimizer = #loom.adamw<>
func.func @optimizer(%w: tensor<8x4xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                     %m: tensor<8x4xf32> {loom.name = "w.exp_avg", loom.role = #loom.role<optimizer_state>, loom.target = "w"},
                     %v: tensor<8x4xf32> {loom.name = "w.exp_avg_sq", loom.role = #loom.role<optimizer_state>, loom.target = "w"},
                     %g: tensor<8x4xf32> {loom.name = "g", loom.role = #loom.role<input>})
    -> (tensor<8x4xf32> {loom.role = #loom.role<param_update>, loom.target = "w"},
        tensor<8x4xf32> {loom.role = #loom.role<state_update>, loom.target = "w.exp_avg"},
        tensor<8x4xf32> {loom.role = #loom.role<state_update>, loom.target = "w.exp_avg_sq"})
    attributes {loom.step, loom.optimizer = #loom.adamw<lr = 1.0e-3, weight_decay = 0.01>} {
  // CHECK: loom.optimizer_update #loom.adamw<lr = 0.01> param %{{.*}} grad %{{.*}} state [%{{.*}}, %{{.*}}] {loom.module = "", loom.phase = #loom.phase<optimizer>} : tensor<8x4xf32>
  %w1, %s:2 = loom.optimizer_update #loom.adamw<lr = 0.01> param %w grad %g state [%m, %v] {loom.module = "", loom.phase = #loom.phase<optimizer>} : tensor<8x4xf32>
  // CHECK: loom.optimizer_update #loom.adam<lr = 0.0003, beta1 = 0.8, beta2 = 0.95, eps = 1.0e-06, weight_decay = 0.1, maximize = true>
  %a:3 = loom.optimizer_update #loom.adam<lr = 3.0e-4, beta1 = 0.8, beta2 = 0.95, eps = 1.0e-6, weight_decay = 0.1, maximize = true> param %w grad %g state [%m, %v] : tensor<8x4xf32>
  // CHECK: loom.optimizer_update #loom.sgd<lr = 0.1, momentum = 0.9, dampening = 0.5> param %{{.*}} grad %{{.*}} state [%{{.*}}] : tensor<8x4xf32>
  %b:2 = loom.optimizer_update #loom.sgd<lr = 0.1, momentum = 0.9, dampening = 0.5> param %w grad %g state [%m] : tensor<8x4xf32>
  // CHECK: loom.optimizer_update #loom.sgd<> param %{{.*}} grad %{{.*}} : tensor<8x4xf32>
  %c = loom.optimizer_update #loom.sgd<lr = 0.001> param %w grad %g : tensor<8x4xf32>
  // AMSGrad keeps a third state tensor, max_exp_avg_sq.
  // CHECK: loom.optimizer_update #loom.adam<amsgrad = true> param %{{.*}} grad %{{.*}} state [%{{.*}}, %{{.*}}, %{{.*}}] : tensor<8x4xf32>
  %d:4 = loom.optimizer_update #loom.adam<amsgrad = true> param %w grad %g state [%m, %v, %v] : tensor<8x4xf32>
  // RMSprop: square_avg, momentum_buffer, grad_avg; defaults omitted.
  // CHECK: loom.optimizer_update #loom.rmsprop<alpha = 0.9, momentum = 0.5, centered = true> param %{{.*}} grad %{{.*}} state [%{{.*}}, %{{.*}}, %{{.*}}] : tensor<8x4xf32>
  %e:4 = loom.optimizer_update #loom.rmsprop<lr = 0.01, alpha = 0.9, momentum = 0.5, centered = true> param %w grad %g state [%m, %v, %v] : tensor<8x4xf32>
  // CHECK: loom.optimizer_update #loom.rmsprop<> param %{{.*}} grad %{{.*}} state [%{{.*}}] : tensor<8x4xf32>
  %f:2 = loom.optimizer_update #loom.rmsprop<> param %w grad %g state [%m] : tensor<8x4xf32>
  // Adamax: exp_avg, exp_inf.
  // CHECK: loom.optimizer_update #loom.adamax<beta2 = 0.99> param %{{.*}} grad %{{.*}} state [%{{.*}}, %{{.*}}] : tensor<8x4xf32>
  %i:3 = loom.optimizer_update #loom.adamax<lr = 2.0e-3, beta2 = 0.99> param %w grad %g state [%m, %v] : tensor<8x4xf32>
  // RAdam: exp_avg, exp_avg_sq.
  // CHECK: loom.optimizer_update #loom.radam<decoupled_weight_decay = true> param %{{.*}} grad %{{.*}} state [%{{.*}}, %{{.*}}] : tensor<8x4xf32>
  %j:3 = loom.optimizer_update #loom.radam<decoupled_weight_decay = true> param %w grad %g state [%m, %v] : tensor<8x4xf32>
  // Adadelta: square_avg, acc_delta; lr 1.0 and eps 1e-6 are its defaults.
  // CHECK: loom.optimizer_update #loom.adadelta<rho = 0.95, weight_decay = 0.1> param %{{.*}} grad %{{.*}} state [%{{.*}}, %{{.*}}] : tensor<8x4xf32>
  %k:3 = loom.optimizer_update #loom.adadelta<lr = 1.0, rho = 0.95, eps = 1.0e-6, weight_decay = 0.1> param %w grad %g state [%m, %v] : tensor<8x4xf32>
  // NAdam: exp_avg, exp_avg_sq.
  // CHECK: loom.optimizer_update #loom.nadam<momentum_decay = 0.01, decoupled_weight_decay = true> param %{{.*}} grad %{{.*}} state [%{{.*}}, %{{.*}}] : tensor<8x4xf32>
  %l:3 = loom.optimizer_update #loom.nadam<lr = 2.0e-3, momentum_decay = 1.0e-2, decoupled_weight_decay = true> param %w grad %g state [%m, %v] : tensor<8x4xf32>
  // Rprop: prev, step_size.
  // CHECK: loom.optimizer_update #loom.rprop<etaplus = 1.3, step_size_max = 1.0> param %{{.*}} grad %{{.*}} state [%{{.*}}, %{{.*}}] : tensor<8x4xf32>
  %r:3 = loom.optimizer_update #loom.rprop<lr = 1.0e-2, etaplus = 1.3, step_size_max = 1.0> param %w grad %g state [%m, %v] : tensor<8x4xf32>
  // ASGD: ax (its eta and mu are scalars the runtime keeps); lambd may be
  // negative, as torch.optim.ASGD allows.
  // CHECK: loom.optimizer_update #loom.asgd<lambd = -0.001, t0 = 1.0e+01, weight_decay = 0.1> param %{{.*}} grad %{{.*}} state [%{{.*}}] : tensor<8x4xf32>
  %q:2 = loom.optimizer_update #loom.asgd<lr = 1.0e-2, lambd = -1.0e-3, t0 = 10.0, weight_decay = 0.1> param %w grad %g state [%m] : tensor<8x4xf32>
  // Adagrad: sum.
  // CHECK: loom.optimizer_update #loom.adagrad<lr = 0.1, lr_decay = 0.01, initial_accumulator_value = 0.1> param %{{.*}} grad %{{.*}} state [%{{.*}}] : tensor<8x4xf32>
  %h:2 = loom.optimizer_update #loom.adagrad<lr = 0.1, lr_decay = 0.01, initial_accumulator_value = 0.1, eps = 1.0e-10> param %w grad %g state [%m] : tensor<8x4xf32>
  return %w1, %s#0, %s#1 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}

// A data-parallel step: a parameter sharded (10 rows padded to 12 over 4
// ranks: 3 each), the batch split, the loss partial over the ranks.
// CHECK-LABEL: func.func @dp_step
// CHECK-SAME: loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [10, 4]>
// CHECK-SAME: loom.split = #loom.split<@dp, axes = ["shard"], dim = 0>
// CHECK-SAME: loom.partial = #loom.partial<@dp, axes = ["shard"], avg>
func.func @dp_step(%w: tensor<3x4xf32> {loom.name = "w", loom.role = #loom.role<parameter>, loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [10, 4]>},
                   %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["shard"], dim = 0>})
    -> (tensor<f32> {loom.role = #loom.role<loss>, loom.partial = #loom.partial<@dp, axes = ["shard"], avg>})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// An MPMD step: the pipeline rank that does not hold the last stage has no
// loss result.
loom.mesh @pp2 shape [2] axes ["pp"]
// CHECK-LABEL: func.func @stage0
// CHECK-SAME: loom.program_ranks = array<i64: 0>
func.func @stage0(%x: tensor<2x8xf32> {loom.role = #loom.role<input>})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  %f = loom.send_start %x on @pp2 axes ["pp"] peer 1 tag 0 : tensor<2x8xf32> -> !loom.future<none>
  loom.wait %f : !loom.future<none>
  return
}
