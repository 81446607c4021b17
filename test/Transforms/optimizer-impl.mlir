// RUN: loom-opt %s --loom-attach-optimizer="optimizer=adamw impl=fused" | FileCheck %s --check-prefix=FUSED
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 momentum=0.9 impl=fused" --loom-lower-to-rt | FileCheck %s --check-prefix=RT
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=adamw" | FileCheck %s --check-prefix=LOOP
// RUN: not loom-opt %s --loom-attach-optimizer="optimizer=adamw impl=foreach" 2>&1 | FileCheck %s --check-prefix=BAD

// impl=fused is recorded once, on the step, and carried to the program for
// the runtime; forloop, the default, records nothing, so steps compiled
// before the option are unchanged.
// FUSED-LABEL: func.func @step
// FUSED-SAME: loom.optimizer_impl = "fused"
// FUSED-COUNT-2: loom.optimizer_update
// RT: loomrt.program "step" {{.*}} optimizer #loom.sgd<lr = 0.1, momentum = 0.9> attributes {loom.optimizer_impl = "fused"}
// LOOP-NOT: loom.optimizer_impl
// An unknown implementation is refused when the options are parsed.
// BAD: for the --impl option: 'foreach' is not one of forloop, fused
func.func @step(%w: tensor<8x4xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>},
                %b: tensor<8xf32> {loom.name = "fc.bias", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8xf32> {loom.role = #loom.role<grad>, loom.target = "fc.bias"},
        tensor<8x4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.weight"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%w) {args = [#loom.arg<0>]} : (tensor<8x4xf32>) -> tensor<f32>
  return %l, %b, %w : tensor<f32>, tensor<8xf32>, tensor<8x4xf32>
}
