// RUN: loom-opt %s --split-input-file --loom-lower-to-rt | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-lower-to-rt | loom-opt --split-input-file | FileCheck %s

// A step with an optimizer attached: arguments become bindings in order
// (inputs count their batch_index), ops keep their order, module and phase
// and run on stream 0, updates become in-place loomrt.optimizer, and only
// the loss and the buffer mutation remain as outputs.

// CHECK-LABEL: loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.adam<lr = 0.01> {
// CHECK-NEXT: %fc.weight = loomrt.input "fc.weight" role <parameter> : tensor<3x4xf32>
// CHECK-NEXT: %bn.mean = loomrt.input "bn.mean" role <buffer> : tensor<3xf32>
// CHECK-NEXT: %x = loomrt.input "x" role <input> batch_index 0 : tensor<2x4xf32>
// CHECK-NEXT: %mask = loomrt.input "mask" role <constant> : tensor<2x3xi1>
// CHECK-NEXT: %input1 = loomrt.input "input1" role <input> batch_index 1 : tensor<2xi64>
// CHECK-NEXT: %fc.weight.exp_avg = loomrt.state "fc.weight.exp_avg" param "fc.weight" init <zeros> : tensor<3x4xf32>
// CHECK-NEXT: %fc.weight.exp_avg_sq = loomrt.state "fc.weight.exp_avg_sq" param "fc.weight" init <zeros> : tensor<3x4xf32>
// CHECK-NEXT: %[[WT:.*]] = loomrt.aten "aten::permute.default"(%fc.weight) stream 0 {args = [#loom.arg<0>, [1, 0]], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %[[Y:.*]] = loomrt.aten "aten::mm.default"(%x, %[[WT]]) stream 0 {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<forward>}
// The importer's strings for Device, Layout and MemoryFormat become typed.
// CHECK-NEXT: %[[Z:.*]] = loomrt.aten "aten::scalar_tensor.default"() stream 0 {args = [0], kwargs = {device = #loomrt.device<"cpu">, dtype = f32, layout = #loomrt.layout<strided>}, loom.module = "", loom.phase = #loom.phase<forward>} : () -> tensor<f32>
// CHECK-NEXT: %[[O:.*]] = loomrt.aten "aten::full_like.default"(%[[Y]]) stream 0 {args = [#loom.arg<0>, 1], kwargs = {memory_format = #loomrt.memory_format<channels_last>, pin_memory = false}
// A plain string argument stays a string.
// CHECK-NEXT: %[[D:.*]] = loomrt.aten "aten::div.Tensor_mode"(%[[Y]], %[[O]]) stream 0 {args = [#loom.arg<0>, #loom.arg<1>], kwargs = {rounding_mode = "floor"}
// CHECK-NEXT: %[[M:.*]] = loomrt.aten "aten::add.Tensor"(%bn.mean, %[[Z]])
// CHECK-NEXT: %[[L:.*]] = loomrt.aten "aten::sum.dim_IntList"(%[[D]]) stream 0 {args = [#loom.arg<0>, []]
// CHECK-NEXT: %[[G:.*]] = loomrt.aten "aten::zeros_like.default"(%fc.weight) stream 0
// CHECK-NEXT: loomrt.optimizer %fc.weight grad %[[G]] state [%fc.weight.exp_avg, %fc.weight.exp_avg_sq] stream 0 {loom.module = "fc", loom.phase = #loom.phase<optimizer>} : tensor<3x4xf32>
// CHECK-NEXT: loomrt.output %[[L]] role <loss> : tensor<f32>
// CHECK-NEXT: loomrt.output %[[M]] role <buffer_mutation> target "bn.mean" : tensor<3xf32>
// CHECK-NEXT: loomrt.return
// CHECK-NEXT: }
// CHECK-NOT: func.func
module attributes {loom.weights = "step.weights.safetensors"} {
func.func @step(%w: tensor<3x4xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>},
                %mean: tensor<3xf32> {loom.name = "bn.mean", loom.role = #loom.role<buffer>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>},
                %mask: tensor<2x3xi1> {loom.name = "mask", loom.role = #loom.role<constant>},
                %y: tensor<2xi64> {loom.role = #loom.role<input>},
                %m: tensor<3x4xf32> {loom.name = "fc.weight.exp_avg", loom.role = #loom.role<optimizer_state>, loom.target = "fc.weight"},
                %v: tensor<3x4xf32> {loom.name = "fc.weight.exp_avg_sq", loom.role = #loom.role<optimizer_state>, loom.target = "fc.weight"})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<3xf32> {loom.role = #loom.role<buffer_mutation>, loom.target = "bn.mean"},
        tensor<3x4xf32> {loom.role = #loom.role<param_update>, loom.target = "fc.weight"},
        tensor<3x4xf32> {loom.role = #loom.role<state_update>, loom.target = "fc.weight.exp_avg"},
        tensor<3x4xf32> {loom.role = #loom.role<state_update>, loom.target = "fc.weight.exp_avg_sq"})
    attributes {loom.optimizer = #loom.adam<lr = 0.01>, loom.step} {
  %wt = loom.aten "aten::permute.default"(%w) {args = [#loom.arg<0>, [1, 0]], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %h = loom.aten "aten::mm.default"(%x, %wt) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %z = loom.aten "aten::scalar_tensor.default"() {args = [0], kwargs = {device = "cpu", dtype = f32, layout = "torch.strided"}, loom.module = "", loom.phase = #loom.phase<forward>} : () -> tensor<f32>
  %o = loom.aten "aten::full_like.default"(%h) {args = [#loom.arg<0>, 1], kwargs = {memory_format = "torch.channels_last", pin_memory = false}, loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %d = loom.aten "aten::div.Tensor_mode"(%h, %o) {args = [#loom.arg<0>, #loom.arg<1>], kwargs = {rounding_mode = "floor"}, loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %nm = loom.aten "aten::add.Tensor"(%mean, %z) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "bn", loom.phase = #loom.phase<forward>} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %l = loom.aten "aten::sum.dim_IntList"(%d) {args = [#loom.arg<0>, []], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x3xf32>) -> tensor<f32>
  %g = loom.aten "aten::zeros_like.default"(%w) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %w1, %s:2 = loom.optimizer_update #loom.adam<lr = 0.01> param %w grad %g state [%m, %v] {loom.module = "fc", loom.phase = #loom.phase<optimizer>} : tensor<3x4xf32>
  return %l, %nm, %w1, %s#0, %s#1 : tensor<f32>, tensor<3xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}
}

// -----

// Without an optimizer the gradients are outputs and the program has no
// optimizer; functions that are not steps stay as they are.

// CHECK-LABEL: func.func @helper
// CHECK-LABEL: loomrt.program "grads" rank 0 world_size 1 streams ["compute"] {
// CHECK-NEXT: %w = loomrt.input "w" role <parameter> : tensor<4xf32>
// CHECK-NEXT: %[[L:.*]] = loomrt.aten "aten::sum.default"(%w) stream 0
// CHECK-NEXT: loomrt.output %[[L]] role <loss> : tensor<f32>
// CHECK-NEXT: loomrt.output %w role <grad> target "w" : tensor<4xf32>
// CHECK-NEXT: loomrt.return
func.func @helper(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
func.func @grads(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "w"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}
