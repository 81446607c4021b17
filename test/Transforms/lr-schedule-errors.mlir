// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=cosine" 2>&1 | FileCheck %s --check-prefix=STEPS
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay-steps=10" 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not loom-opt %s --loom-attach-optimizer="lr-warmup-steps=-1" 2>&1 | FileCheck %s --check-prefix=WARMUP
// RUN: not loom-opt %s --loom-attach-optimizer="lr-warmup-steps=5 lr-warmup-start-factor=0" 2>&1 | FileCheck %s --check-prefix=FACTOR
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=linear lr-decay-steps=5 lr-eta-min=0.1" 2>&1 | FileCheck %s --check-prefix=ETA
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=linear lr-decay-steps=5 lr-end-factor=2" 2>&1 | FileCheck %s --check-prefix=END
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=cosine lr-decay-steps=5 lr-end-factor=0.5" 2>&1 | FileCheck %s --check-prefix=ENDCOS
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=onecycle" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=step" 2>&1 | FileCheck %s --check-prefix=STEPSIZE
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=exponential" 2>&1 | FileCheck %s --check-prefix=GAMMA
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=exponential lr-gamma=0.9 lr-decay-steps=3" 2>&1 | FileCheck %s --check-prefix=EXPSTEPS
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=cosine lr-decay-steps=3 lr-gamma=0.9" 2>&1 | FileCheck %s --check-prefix=GAMMACOS
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=step lr-decay-steps=3 lr-gamma=-1" 2>&1 | FileCheck %s --check-prefix=GAMMANEG
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=multistep" 2>&1 | FileCheck %s --check-prefix=MILESTONES
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=multistep lr-milestones=4,4" 2>&1 | FileCheck %s --check-prefix=MILEORDER
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=multistep lr-milestones=0,4" 2>&1 | FileCheck %s --check-prefix=MILEZERO
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=step lr-decay-steps=3 lr-milestones=4" 2>&1 | FileCheck %s --check-prefix=MILESTEP
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=multistep lr-milestones=4 lr-decay-steps=3" 2>&1 | FileCheck %s --check-prefix=MULTISTEPS
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=polynomial" 2>&1 | FileCheck %s --check-prefix=POLYSTEPS
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=polynomial lr-decay-steps=3 lr-power=-2" 2>&1 | FileCheck %s --check-prefix=POWERNEG
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=linear lr-decay-steps=3 lr-power=2" 2>&1 | FileCheck %s --check-prefix=POWERLIN
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=cosine-restarts lr-decay-steps=3 lr-t-mult=0" 2>&1 | FileCheck %s --check-prefix=TMULT
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=cosine lr-decay-steps=3 lr-t-mult=2" 2>&1 | FileCheck %s --check-prefix=TMULTCOS
// RUN: not loom-opt %s --loom-attach-optimizer="lr-decay=cosine-restarts" 2>&1 | FileCheck %s --check-prefix=RESTEPS

// Schedules lr_scheduler's constructors would refuse, each with the option
// at fault.
// STEPS: error: 'func.func' op --loom-attach-optimizer: lr-decay=cosine needs 'lr-decay-steps' >= 1, found 0
// DECAY: error: 'func.func' op --loom-attach-optimizer: 'lr-decay-steps' needs lr-decay=cosine, linear, step, polynomial or cosine-restarts
// WARMUP: error: 'func.func' op --loom-attach-optimizer: 'lr-warmup-steps' is -1, expected a step count >= 0 (0: no warm-up)
// FACTOR: error: 'func.func' op --loom-attach-optimizer: 'lr-warmup-start-factor' is 0{{.*}}, expected a value in (0, 1] (LinearLR's start_factor)
// ETA: error: 'func.func' op --loom-attach-optimizer: 'lr-eta-min' needs lr-decay=cosine or cosine-restarts
// END: error: 'func.func' op --loom-attach-optimizer: 'lr-end-factor' is 2{{.*}}, expected a value in [0, 1] (LinearLR's end_factor)
// ENDCOS: error: 'func.func' op --loom-attach-optimizer: 'lr-end-factor' needs lr-decay=linear
// KIND: for the --lr-decay option: 'onecycle' is not one of constant, cosine, linear, step, exponential, multistep, polynomial, cosine-restarts
// STEPSIZE: error: 'func.func' op --loom-attach-optimizer: lr-decay=step needs 'lr-decay-steps' >= 1, found 0
// GAMMA: error: 'func.func' op --loom-attach-optimizer: lr-decay=exponential needs 'lr-gamma' (ExponentialLR has no default gamma)
// EXPSTEPS: error: 'func.func' op --loom-attach-optimizer: 'lr-decay-steps' needs lr-decay=cosine, linear, step, polynomial or cosine-restarts
// GAMMACOS: error: 'func.func' op --loom-attach-optimizer: 'lr-gamma' needs lr-decay=step, exponential or multistep
// GAMMANEG: error: 'func.func' op --loom-attach-optimizer: 'lr-gamma' is -1{{.*}}, expected a finite value > 0
// MILESTONES: error: 'func.func' op --loom-attach-optimizer: lr-decay=multistep needs 'lr-milestones' (the steps after the warm-up at which the rate falls)
// MILEORDER: error: 'func.func' op --loom-attach-optimizer: 'lr-milestones' entry 1 is 4, expected at least 5 (increasing steps after the warm-up, from 1)
// MILEZERO: error: 'func.func' op --loom-attach-optimizer: 'lr-milestones' entry 0 is 0, expected at least 1 (increasing steps after the warm-up, from 1)
// MILESTEP: error: 'func.func' op --loom-attach-optimizer: 'lr-milestones' needs lr-decay=multistep
// MULTISTEPS: error: 'func.func' op --loom-attach-optimizer: 'lr-decay-steps' needs lr-decay=cosine, linear, step, polynomial or cosine-restarts
// POLYSTEPS: error: 'func.func' op --loom-attach-optimizer: lr-decay=polynomial needs 'lr-decay-steps' >= 1, found 0
// POWERNEG: error: 'func.func' op --loom-attach-optimizer: 'lr-power' is -2{{.*}}, expected a finite value >= 0
// POWERLIN: error: 'func.func' op --loom-attach-optimizer: 'lr-power' needs lr-decay=polynomial
// TMULT: error: 'func.func' op --loom-attach-optimizer: 'lr-t-mult' is 0, expected an integer >= 1 (CosineAnnealingWarmRestarts' T_mult)
// TMULTCOS: error: 'func.func' op --loom-attach-optimizer: 'lr-t-mult' needs lr-decay=cosine-restarts
// RESTEPS: error: 'func.func' op --loom-attach-optimizer: lr-decay=cosine-restarts needs 'lr-decay-steps' >= 1, found 0

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
