// RUN: not loom-opt %s --loom-attach-optimizer="param-groups=fc.bais:weight-decay=0" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not loom-opt %s --loom-attach-optimizer="param-groups=fc.bias:lr=0.1;fc.weight|fc.bias:lr=0.2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not loom-opt %s --loom-attach-optimizer="param-groups=ndim<2:lr=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not loom-opt %s --loom-attach-optimizer="param-groups=ndim<2:lr=fast" 2>&1 | FileCheck %s --check-prefix=NUMBER
// RUN: not loom-opt %s --loom-attach-optimizer="param-groups=ndim<2:momentum=0.9" 2>&1 | FileCheck %s --check-prefix=KEY
// RUN: not loom-opt %s --loom-attach-optimizer="param-groups=ndim<2:lr=0.1:lr=0.2" 2>&1 | FileCheck %s --check-prefix=DUP
// RUN: not loom-opt %s --loom-attach-optimizer="param-groups=ndim<two:lr=0.1" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not loom-opt %s --loom-attach-optimizer="param-groups=ndim!=2:lr=0.1" 2>&1 | FileCheck %s --check-prefix=CMP
// RUN: not loom-opt %s --loom-attach-optimizer="param-groups=ndim<2" 2>&1 | FileCheck %s --check-prefix=EMPTY

// Every bad rule is refused with its number and text, on the step.
// UNKNOWN: error: 'func.func' op --loom-attach-optimizer: 'param-groups' rule 1 ('fc.bais:weight-decay=0'): 'fc.bais' matches no parameter of the step
// TWICE: error: 'func.func' op --loom-attach-optimizer: 'param-groups' rule 2 ('fc.weight|fc.bias:lr=0.2'): parameter 'fc.bias' is already in the group of rule 1; a parameter belongs to one group
// NEGATIVE: error: 'func.func' op --loom-attach-optimizer: 'param-groups' rule 1 ('ndim<2:lr=-1'): 'lr' is -1, expected a finite value >= 0 (as torch.optim)
// NUMBER: error: 'func.func' op --loom-attach-optimizer: 'param-groups' rule 1 ('ndim<2:lr=fast'): 'lr' needs a number, found 'fast'
// KEY: error: 'func.func' op --loom-attach-optimizer: 'param-groups' rule 1 ('ndim<2:momentum=0.9'): unknown key 'momentum' (a group sets lr or weight-decay)
// DUP: error: 'func.func' op --loom-attach-optimizer: 'param-groups' rule 1 ('ndim<2:lr=0.1:lr=0.2'): 'lr' is given twice
// RANK: error: 'func.func' op --loom-attach-optimizer: 'param-groups' rule 1 ('ndim<two:lr=0.1'): 'two' is not a rank (an integer >= 0)
// CMP: error: 'func.func' op --loom-attach-optimizer: 'param-groups' rule 1 ('ndim!=2:lr=0.1'): expected ndim<N or ndim>=N
// EMPTY: error: 'func.func' op --loom-attach-optimizer: 'param-groups' rule 1 ('ndim<2'): expected MATCH:KEY=VALUE[:KEY=VALUE], found no settings (keys: lr, weight-decay)

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
