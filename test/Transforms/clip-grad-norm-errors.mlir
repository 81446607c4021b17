// RUN: not loom-opt %s --loom-attach-optimizer="max-grad-norm=-1" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not loom-opt %s --loom-attach-optimizer="max-grad-norm=nan" 2>&1 | FileCheck %s --check-prefix=NAN
// RUN: not loom-opt %s --loom-attach-optimizer="max-grad-norm=1 grad-norm-type=1" 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: not loom-opt %s --loom-attach-optimizer="max-grad-norm=1 grad-norm-type=fro" 2>&1 | FileCheck %s --check-prefix=FRO

// Values clip_grad_norm_ would not clip with, each refused with the option
// and the value it got.
// NEG: error: 'func.func' op --loom-attach-optimizer: 'max-grad-norm' is -1.0{{.*}}, expected a finite value > 0 (0: no clipping)
// NAN: error: 'func.func' op --loom-attach-optimizer: 'max-grad-norm' is nan, expected a finite value > 0
// TYPE: error: 'func.func' op --loom-attach-optimizer: 'grad-norm-type' is '1', expected 2 or inf
// FRO: error: 'func.func' op --loom-attach-optimizer: 'grad-norm-type' is 'fro', expected 2 or inf
func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "w"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}
