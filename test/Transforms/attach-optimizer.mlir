// RUN: loom-opt %s --split-input-file --loom-attach-optimizer | FileCheck %s --check-prefix=ADAMW
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adam lr=0.01 beta2=0.99" | FileCheck %s --check-prefix=ADAM
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=sgd momentum=0.9 nesterov=true" | FileCheck %s --check-prefix=SGDM
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=sgd" | FileCheck %s --check-prefix=SGD
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer | loom-opt --split-input-file | FileCheck %s --check-prefix=ADAMW
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adamw amsgrad=true" | FileCheck %s --check-prefix=AMSGRAD
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=rmsprop momentum=0.9 centered=true alpha=0.9" | FileCheck %s --check-prefix=RMSPROP
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=rmsprop" | FileCheck %s --check-prefix=RMSPROP-PLAIN
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adagrad adagrad-lr-decay=0.01 initial-accumulator-value=0.1" | FileCheck %s --check-prefix=ADAGRAD
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adamax beta2=0.99" | FileCheck %s --check-prefix=ADAMAX
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=rprop etaminus=0.4 step-size-max=1.0" | FileCheck %s --check-prefix=RPROP
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=asgd t0=10 lambd=0.001" | FileCheck %s --check-prefix=ASGD
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=radam weight-decay=0.1 decoupled-weight-decay=true" | FileCheck %s --check-prefix=RADAM
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adadelta rho=0.95" | FileCheck %s --check-prefix=ADADELTA
// RUN: loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=nadam momentum-decay=0.01 weight-decay=0.1 decoupled-weight-decay=true" | FileCheck %s --check-prefix=NADAM

// Two parameters with gradients and a frozen one (no grad): state arguments
// are appended per parameter in gradient order, updates go before the
// return in the parameter's module, and the grads become param_update
// results followed by the state updates.

// ADAMW-LABEL: func.func @step(
// ADAMW-SAME: %[[W:[^:]+]]: tensor<8x4xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>}
// ADAMW-SAME: %[[B:[^:]+]]: tensor<8xf32> {loom.name = "fc.bias", loom.role = #loom.role<parameter>}
// ADAMW-SAME: %{{[^:]+}}: tensor<8xf32> {loom.name = "frozen", loom.role = #loom.role<parameter>}
// ADAMW-SAME: %{{[^:]+}}: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>}
// ADAMW-SAME: tensor<8xf32> {loom.name = "fc.bias.exp_avg", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"}
// ADAMW-SAME: tensor<8xf32> {loom.name = "fc.bias.exp_avg_sq", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"}
// ADAMW-SAME: tensor<8x4xf32> {loom.name = "fc.weight.exp_avg", loom.role = #loom.role<optimizer_state>, loom.target = "fc.weight"}
// ADAMW-SAME: tensor<8x4xf32> {loom.name = "fc.weight.exp_avg_sq", loom.role = #loom.role<optimizer_state>, loom.target = "fc.weight"})
// ADAMW-SAME: -> (tensor<f32> {loom.role = #loom.role<loss>},
// ADAMW-SAME: tensor<8xf32> {loom.role = #loom.role<param_update>, loom.target = "fc.bias"},
// ADAMW-SAME: tensor<8x4xf32> {loom.role = #loom.role<param_update>, loom.target = "fc.weight"},
// ADAMW-SAME: tensor<8xf32> {loom.role = #loom.role<state_update>, loom.target = "fc.bias.exp_avg"},
// ADAMW-SAME: tensor<8xf32> {loom.role = #loom.role<state_update>, loom.target = "fc.bias.exp_avg_sq"},
// ADAMW-SAME: tensor<8x4xf32> {loom.role = #loom.role<state_update>, loom.target = "fc.weight.exp_avg"},
// ADAMW-SAME: tensor<8x4xf32> {loom.role = #loom.role<state_update>, loom.target = "fc.weight.exp_avg_sq"})
// ADAMW-SAME: attributes {loom.optimizer = #loom.adamw<>, loom.step}

func.func @step(%w: tensor<8x4xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>},
                %b: tensor<8xf32> {loom.name = "fc.bias", loom.role = #loom.role<parameter>},
                %f: tensor<8xf32> {loom.name = "frozen", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8xf32> {loom.role = #loom.role<grad>, loom.target = "fc.bias"},
        tensor<8x4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.weight"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %gw = loom.aten "aten::zeros_like.default"(%w) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %gb = loom.aten "aten::zeros_like.default"(%b) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<8xf32>) -> tensor<8xf32>
  return %l, %gb, %gw : tensor<f32>, tensor<8xf32>, tensor<8x4xf32>
}

// The state of fc.bias comes first (its grad is the first grad result).
// ADAMW: %[[GW:.*]] = loom.aten "aten::zeros_like.default"(%[[W]])
// ADAMW: %[[GB:.*]] = loom.aten "aten::zeros_like.default"(%[[B]])
// ADAMW-NEXT: %[[UB:[^,]+]], %[[SB:[^:]+]]:2 = loom.optimizer_update #loom.adamw<> param %[[B]] grad %[[GB]] state [%[[BM:.*]], %[[BV:.*]]] {loom.module = "fc", loom.phase = #loom.phase<optimizer>} : tensor<8xf32>
// ADAMW-NEXT: %[[UW:[^,]+]], %[[SW:[^:]+]]:2 = loom.optimizer_update #loom.adamw<> param %[[W]] grad %[[GW]] state [%{{.*}}, %{{.*}}] {loom.module = "fc", loom.phase = #loom.phase<optimizer>} : tensor<8x4xf32>
// ADAMW-NEXT: return %{{.*}}, %[[UB]], %[[UW]], %[[SB]]#0, %[[SB]]#1, %[[SW]]#0, %[[SW]]#1

// ADAM-LABEL: func.func @step(
// ADAM-SAME: loom.name = "fc.bias.exp_avg", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"
// ADAM-SAME: loom.name = "fc.bias.exp_avg_sq", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"
// ADAM-SAME: loom.name = "fc.weight.exp_avg", loom.role = #loom.role<optimizer_state>, loom.target = "fc.weight"
// ADAM-SAME: loom.name = "fc.weight.exp_avg_sq", loom.role = #loom.role<optimizer_state>, loom.target = "fc.weight"
// ADAM-SAME: attributes {loom.optimizer = #loom.adam<lr = 0.01, beta2 = 0.99>, loom.step}
// ADAM-COUNT-2: loom.optimizer_update #loom.adam<lr = 0.01, beta2 = 0.99>

// SGD with momentum keeps one buffer per parameter.
// SGDM-LABEL: func.func @step(
// SGDM-SAME: loom.name = "fc.bias.momentum_buffer", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"
// SGDM-SAME: loom.name = "fc.weight.momentum_buffer", loom.role = #loom.role<optimizer_state>, loom.target = "fc.weight"
// SGDM-SAME: attributes {loom.optimizer = #loom.sgd<momentum = 0.9, nesterov = true>, loom.step}
// SGDM: loom.optimizer_update #loom.sgd<momentum = 0.9, nesterov = true> param %{{.*}} grad %{{.*}} state [%{{.*}}]

// Plain SGD keeps no state: no arguments or results are added.
// SGD-LABEL: func.func @step(
// SGD-NOT: optimizer_state
// SGD-SAME: -> (tensor<f32> {loom.role = #loom.role<loss>}, tensor<8xf32> {loom.role = #loom.role<param_update>, loom.target = "fc.bias"}, tensor<8x4xf32> {loom.role = #loom.role<param_update>, loom.target = "fc.weight"})
// SGD-SAME: attributes {loom.optimizer = #loom.sgd<>, loom.step}
// SGD: %[[U1:.*]] = loom.optimizer_update #loom.sgd<> param %{{.*}} grad %{{.*}} {loom.module = "fc"
// SGD-NEXT: %[[U2:.*]] = loom.optimizer_update #loom.sgd<> param %{{.*}} grad %{{.*}} {loom.module = "fc"
// SGD-NEXT: return %{{.*}}, %[[U1]], %[[U2]] : tensor<f32>, tensor<8xf32>, tensor<8x4xf32>

// AMSGrad adds max_exp_avg_sq after Adam's two.
// AMSGRAD-LABEL: func.func @step(
// AMSGRAD-SAME: loom.name = "fc.bias.exp_avg",
// AMSGRAD-SAME: loom.name = "fc.bias.exp_avg_sq",
// AMSGRAD-SAME: loom.name = "fc.bias.max_exp_avg_sq", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"
// AMSGRAD-SAME: loom.name = "fc.weight.exp_avg",
// AMSGRAD-SAME: attributes {loom.optimizer = #loom.adamw<amsgrad = true>, loom.step}
// AMSGRAD: loom.optimizer_update #loom.adamw<amsgrad = true> param %{{.*}} grad %{{.*}} state [%{{.*}}, %{{.*}}, %{{.*}}]

// RMSprop: square_avg, then momentum_buffer with momentum, then grad_avg
// when centered (torch.optim.RMSprop's state order); lr defaults to 1e-2.
// RMSPROP-LABEL: func.func @step(
// RMSPROP-SAME: loom.name = "fc.bias.square_avg",
// RMSPROP-SAME: loom.name = "fc.bias.momentum_buffer",
// RMSPROP-SAME: loom.name = "fc.bias.grad_avg",
// RMSPROP-SAME: attributes {loom.optimizer = #loom.rmsprop<alpha = 0.9, momentum = 0.9, centered = true>, loom.step}
// RMSPROP: loom.optimizer_update #loom.rmsprop<alpha = 0.9, momentum = 0.9, centered = true> param %{{.*}} grad %{{.*}} state [%{{.*}}, %{{.*}}, %{{.*}}]
// RMSPROP-PLAIN-LABEL: func.func @step(
// RMSPROP-PLAIN-NOT: momentum_buffer
// RMSPROP-PLAIN-SAME: loom.name = "fc.weight.square_avg",
// RMSPROP-PLAIN-SAME: attributes {loom.optimizer = #loom.rmsprop<>, loom.step}

// Adagrad keeps its sum; eps defaults to Adagrad's 1e-10.
// ADAGRAD-LABEL: func.func @step(
// ADAGRAD-SAME: loom.name = "fc.bias.sum", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"
// ADAGRAD-SAME: loom.name = "fc.weight.sum",
// ADAGRAD-SAME: attributes {loom.optimizer = #loom.adagrad<lr_decay = 0.01, initial_accumulator_value = 0.1>, loom.step}

// Adamax keeps exp_avg and exp_inf; its default lr is 2e-3.
// ADAMAX-LABEL: func.func @step(
// ADAMAX-SAME: loom.name = "fc.bias.exp_avg",
// ADAMAX-SAME: loom.name = "fc.bias.exp_inf", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"
// ADAMAX-SAME: attributes {loom.optimizer = #loom.adamax<beta2 = 0.99>, loom.step}

// Rprop keeps prev and step_size (filled with the lr by the runtime at the
// parameter's first step); its default lr is 1e-2.
// RPROP-LABEL: func.func @step(
// RPROP-SAME: loom.name = "fc.bias.prev",
// RPROP-SAME: loom.name = "fc.bias.step_size", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"
// RPROP-SAME: attributes {loom.optimizer = #loom.rprop<etaminus = 0.4, step_size_max = 1.0>, loom.step}

// ASGD keeps ax (its eta and mu, scalars, the runtime keeps beside the step
// count); its default lr is 1e-2 and its default alpha 0.75, not RMSprop's.
// ASGD-LABEL: func.func @step(
// ASGD-SAME: loom.name = "fc.bias.ax", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"
// ASGD-NOT: .eta
// ASGD-SAME: attributes {loom.optimizer = #loom.asgd<lambd = 0.001, t0 = 1.0e+01>, loom.step}

// RAdam keeps Adam's two.
// RADAM-LABEL: func.func @step(
// RADAM-SAME: loom.name = "fc.bias.exp_avg",
// RADAM-SAME: loom.name = "fc.bias.exp_avg_sq",
// RADAM-SAME: attributes {loom.optimizer = #loom.radam<weight_decay = 0.1, decoupled_weight_decay = true>, loom.step}

// Adadelta keeps square_avg and acc_delta; its defaults (lr 1.0, eps 1e-6)
// are the attribute's, so only rho is printed.
// ADADELTA-LABEL: func.func @step(
// ADADELTA-SAME: loom.name = "fc.bias.square_avg",
// ADADELTA-SAME: loom.name = "fc.bias.acc_delta", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"
// ADADELTA-SAME: attributes {loom.optimizer = #loom.adadelta<rho = 0.95>, loom.step}

// NAdam keeps Adam's two tensors (its mu_product is a scalar the runtime
// keeps beside the step count); its default lr is 2e-3.
// NADAM-LABEL: func.func @step(
// NADAM-SAME: loom.name = "fc.bias.exp_avg",
// NADAM-SAME: loom.name = "fc.bias.exp_avg_sq", loom.role = #loom.role<optimizer_state>, loom.target = "fc.bias"
// NADAM-SAME: attributes {loom.optimizer = #loom.nadam<weight_decay = 0.1, momentum_decay = 0.01, decoupled_weight_decay = true>, loom.step}

// -----

// Functions that are not steps are left alone; a root-module parameter's
// update belongs to the root module ("").
// ADAMW-LABEL: func.func @helper
// ADAMW-NOT: loom.optimizer_update
func.func @helper(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}

// ADAMW-LABEL: func.func @root
// ADAMW: loom.optimizer_update #loom.adamw<> param %{{.*}} grad %{{.*}} state [%{{.*}}, %{{.*}}] {loom.module = "", loom.phase = #loom.phase<optimizer>}
func.func @root(%s: tensor<f32> {loom.name = "scale", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<f32> {loom.role = #loom.role<grad>, loom.target = "scale"})
    attributes {loom.step} {
  return %s, %s : tensor<f32>, tensor<f32>
}

// -----

// The state of a sharded parameter (loom-fsdp) is sharded like it.
// ADAMW-LABEL: func.func @sharded(
// ADAMW-SAME: tensor<2x4xf32> {loom.name = "w.exp_avg", loom.role = #loom.role<optimizer_state>, loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [3, 4]>, loom.target = "w"}
// ADAMW-SAME: tensor<2x4xf32> {loom.name = "w.exp_avg_sq", loom.role = #loom.role<optimizer_state>, loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [3, 4]>, loom.target = "w"}
loom.mesh @dp shape [2] axes ["shard"]
func.func @sharded(%w: tensor<2x4xf32> {loom.name = "w", loom.role = #loom.role<parameter>, loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [3, 4]>})
    -> (tensor<2x4xf32> {loom.role = #loom.role<grad>, loom.target = "w"}) attributes {loom.step} {
  return %w : tensor<2x4xf32>
}
