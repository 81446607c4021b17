// RUN: loom-opt %s --loom-attach-optimizer="optimizer=adamw lr=0.01 weight-decay=0.1 param-groups=ndim<2:weight-decay=0" | FileCheck %s --check-prefix=NDIM
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 param-groups=fc.bias:lr=0.5;fc.*:lr=0.2:weight-decay=0.01" | FileCheck %s --check-prefix=FIRST
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=sgd lr=0.1 param-groups=ndim>=2:lr=0.3" | FileCheck %s --check-prefix=REST
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=adamw lr=0.01 param-groups=ndim<2:weight-decay=0" --loom-lower-to-rt | FileCheck %s --check-prefix=RT
// RUN: loom-opt %s --loom-attach-optimizer="optimizer=adamw lr=0.01 param-groups=ndim<2:weight-decay=0" --loom-lower-to-rt | loom-opt | FileCheck %s --check-prefix=RT

// Parameter groups of a Linear 4->8: each update carries its group's
// hyperparameters; the step's loom.optimizer stays the defaults.

// The usual "no weight decay on biases and norm weights": 1-D parameters.
// NDIM-LABEL: func.func @step
// NDIM-SAME: loom.optimizer = #loom.adamw<lr = 0.01, weight_decay = 0.1>
// NDIM: loom.optimizer_update #loom.adamw<lr = 0.01, weight_decay = 0.0> param %arg1
// NDIM-NEXT: loom.optimizer_update #loom.adamw<lr = 0.01, weight_decay = 0.1> param %arg0

// The first rule that matches wins: fc.bias takes rule 1, fc.weight the
// glob of rule 2.
// FIRST: loom.optimizer_update #loom.sgd<lr = 0.5> param %arg1
// FIRST-NEXT: loom.optimizer_update #loom.sgd<lr = 0.2, weight_decay = 0.01> param %arg0

// A parameter no rule matches takes the defaults.
// REST: loom.optimizer_update #loom.sgd<lr = 0.1> param %arg1
// REST-NEXT: loom.optimizer_update #loom.sgd<lr = 0.3> param %arg0

// Lowered, an update whose group differs from the program's optimizer
// keeps its own; the others use the program's.
// RT: loomrt.program "step" {{.*}} optimizer #loom.adamw<lr = 0.01>
// RT: loomrt.optimizer %fc.bias grad %{{.*}} stream 0 {loom.module = "fc", loom.phase = #loom.phase<optimizer>, optimizer = #loom.adamw<lr = 0.01, weight_decay = 0.0>} : tensor<8xf32>
// RT-NEXT: loomrt.optimizer %fc.weight grad %{{.*}} stream 0 {loom.module = "fc", loom.phase = #loom.phase<optimizer>} : tensor<8x4xf32>

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
