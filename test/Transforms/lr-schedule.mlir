// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 lr-warmup-steps=5 lr-warmup-start-factor=0.1 lr-decay=cosine lr-decay-steps=15 lr-eta-min=0.001" | FileCheck %s --check-prefix=COSINE
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 lr-decay=linear lr-decay-steps=10 lr-end-factor=0.5" | FileCheck %s --check-prefix=LINEAR
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 lr-warmup-steps=3" | FileCheck %s --check-prefix=WARMUP
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 lr-decay=step lr-decay-steps=4" | FileCheck %s --check-prefix=STEP
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 lr-warmup-steps=2 lr-decay=exponential lr-gamma=0.9" | FileCheck %s --check-prefix=EXP
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 lr-warmup-steps=2 lr-decay=multistep lr-milestones=3,8" | FileCheck %s --check-prefix=MULTI
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 lr-decay=polynomial lr-decay-steps=10 lr-power=0.9" | FileCheck %s --check-prefix=POLY
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 lr-decay=polynomial lr-decay-steps=10" | FileCheck %s --check-prefix=POLY1
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 lr-warmup-steps=2 lr-decay=cosine-restarts lr-decay-steps=3 lr-t-mult=2 lr-eta-min=0.001" | FileCheck %s --check-prefix=RESTARTS
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1" | FileCheck %s --check-prefix=NONE
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 lr-warmup-steps=5 lr-decay=cosine lr-decay-steps=15" --loom-lower-to-rt | FileCheck %s --check-prefix=RT

// The schedule is recorded once, on the step, for the runtime: warm-up
// (LinearLR), then the decay (CosineAnnealingLR or LinearLR).
// COSINE: func.func @step
// COSINE-SAME: loom.lr_schedule = {decay = "cosine", decay_steps = 15 : i64, end_factor = 0.000000e+00 : f64, eta_min = 1.000000e-03 : f64, warmup_start_factor = 1.000000e-01 : f64, warmup_steps = 5 : i64}
// LINEAR: func.func @step
// LINEAR-SAME: loom.lr_schedule = {decay = "linear", decay_steps = 10 : i64, end_factor = 5.000000e-01 : f64, eta_min = 0.000000e+00 : f64, warmup_start_factor = 0.33333333333333331 : f64, warmup_steps = 0 : i64}
// WARMUP: func.func @step
// WARMUP-SAME: loom.lr_schedule = {decay = "constant", decay_steps = 0 : i64, end_factor = 0.000000e+00 : f64, eta_min = 0.000000e+00 : f64, warmup_start_factor = 0.33333333333333331 : f64, warmup_steps = 3 : i64}
// StepLR's gamma is 0.1 unless given; ExponentialLR's is given.
// STEP: func.func @step
// STEP-SAME: loom.lr_schedule = {decay = "step", decay_steps = 4 : i64, end_factor = 0.000000e+00 : f64, eta_min = 0.000000e+00 : f64, gamma = 1.000000e-01 : f64, warmup_start_factor = 0.33333333333333331 : f64, warmup_steps = 0 : i64}
// EXP: func.func @step
// EXP-SAME: loom.lr_schedule = {decay = "exponential", decay_steps = 0 : i64, end_factor = 0.000000e+00 : f64, eta_min = 0.000000e+00 : f64, gamma = 9.000000e-01 : f64, warmup_start_factor = 0.33333333333333331 : f64, warmup_steps = 2 : i64}
// MultiStepLR's gamma is 0.1 unless given, its milestones count steps after
// the warm-up; PolynomialLR's power is 1 unless given.
// MULTI: func.func @step
// MULTI-SAME: loom.lr_schedule = {decay = "multistep", decay_steps = 0 : i64, end_factor = 0.000000e+00 : f64, eta_min = 0.000000e+00 : f64, gamma = 1.000000e-01 : f64, milestones = [3, 8], warmup_start_factor = 0.33333333333333331 : f64, warmup_steps = 2 : i64}
// POLY: func.func @step
// POLY-SAME: loom.lr_schedule = {decay = "polynomial", decay_steps = 10 : i64, end_factor = 0.000000e+00 : f64, eta_min = 0.000000e+00 : f64, power = 9.000000e-01 : f64, warmup_start_factor = 0.33333333333333331 : f64, warmup_steps = 0 : i64}
// POLY1: loom.lr_schedule = {decay = "polynomial", {{.*}} power = 1.000000e+00 : f64,
// CosineAnnealingWarmRestarts: T_0 is lr-decay-steps, T_mult its own.
// RESTARTS: func.func @step
// RESTARTS-SAME: loom.lr_schedule = {decay = "cosine-restarts", decay_steps = 3 : i64, end_factor = 0.000000e+00 : f64, eta_min = 1.000000e-03 : f64, t_mult = 2 : i64, warmup_start_factor = 0.33333333333333331 : f64, warmup_steps = 2 : i64}
// A constant rate is no schedule.
// NONE-NOT: loom.lr_schedule

// The lowered program carries it to the artifact.
// RT: loomrt.program "step" {{.*}} optimizer #loom.sgd<lr = 0.1> attributes {loom.lr_schedule = {decay = "cosine"

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
