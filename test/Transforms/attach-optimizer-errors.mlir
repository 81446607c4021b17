// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=lion" 2>&1 | FileCheck %s --check-prefix=LION
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adam lr=-1" 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=sgd nesterov=true" 2>&1 | FileCheck %s --check-prefix=NESTEROV
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adamw momentum=0.9" 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adam beta1=1.0" 2>&1 | FileCheck %s --check-prefix=BETA

// An unknown algorithm is refused when the options are parsed, naming the
// known ones.
// LION: for the --optimizer option: 'lion' is not one of none, sgd, adam, adamw
func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "w"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// LR: error: 'func.func' op --loom-attach-optimizer: 'lr' is -1.0, expected a finite value >= 0.0
// NESTEROV: error: 'func.func' op --loom-attach-optimizer: Nesterov momentum requires a momentum > 0 and zero dampening
// MOMENTUM: error: 'func.func' op --loom-attach-optimizer: 'momentum', 'dampening' and 'nesterov' are SGD options; adamw does not take them
// BETA: error: 'func.func' op --loom-attach-optimizer: 'beta1' is 1.0, expected a finite value >= 0.0 and < 1.0
