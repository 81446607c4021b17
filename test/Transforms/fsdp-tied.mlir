// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 units=a,b" | FileCheck %s
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 units=a,b" --loom-attach-optimizer="optimizer=sgd" | FileCheck %s --check-prefix=OPT

// A tied weight used by the forward ops of units a and b is owned by a
// (its first user), gathered and reduce-scattered once, with a's unit.

// CHECK-LABEL: func.func @tied(
// CHECK: loom.all_gather_start %{{.*}} {loom.module = "a", loom.phase = #loom.phase<forward>} : tensor<12xf32> -> !loom.future<tensor<24xf32>>
// CHECK: loom.all_gather_start %{{.*}} {loom.module = "b", loom.phase = #loom.phase<forward>} : tensor<3xf32> -> !loom.future<tensor<6xf32>>
// CHECK-NOT: all_gather_start {{.*}}phase<forward>
// CHECK: loom.reduce_scatter_start %{{.*}} {loom.module = "b", loom.phase = #loom.phase<backward>} : tensor<6xf32>
// CHECK: %[[GA:.*]] = loom.aten "aten::add.Tensor"
// CHECK-NEXT: loom.aten "aten::reshape.default"(%[[GA]])
// CHECK-NEXT: loom.reduce_scatter_start %{{.*}} {loom.module = "a", loom.phase = #loom.phase<backward>} : tensor<24xf32> -> !loom.future<tensor<12xf32>>
// CHECK-NOT: reduce_scatter_start
// OPT-LABEL: func.func @tied(
// OPT-COUNT-2: loom.optimizer_update #loom.sgd<>
func.func @tied(%w: tensor<6x4xf32> {loom.name = "a.weight", loom.role = #loom.role<parameter>},
                %bb: tensor<6xf32> {loom.name = "b.bias", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<6x4xf32> {loom.role = #loom.role<grad>, loom.target = "a.weight"},
        tensor<6xf32> {loom.role = #loom.role<grad>, loom.target = "b.bias"})
    attributes {loom.step} {
  %ta = loom.aten "aten::t.default"(%w) {args = [#loom.arg<0>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %h = loom.aten "aten::mm.default"(%x, %ta) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x6xf32>) -> tensor<2x6xf32>
  %tb = loom.aten "aten::t.default"(%w) {args = [#loom.arg<0>], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %h2 = loom.aten "aten::mm.default"(%x, %tb) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x6xf32>) -> tensor<2x6xf32>
  %s = loom.aten "aten::add.Tensor"(%h, %h2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %s2 = loom.aten "aten::add.Tensor"(%s, %bb) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  %l = loom.aten "aten::sum.default"(%s2) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x6xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %go = loom.aten "aten::expand.default"(%g) {args = [#loom.arg<0>, [2, 6]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<2x6xf32>
  %gbb = loom.aten "aten::sum.dim_IntList"(%go) {args = [#loom.arg<0>, [0], false], loom.module = "b", loom.phase = #loom.phase<backward>} : (tensor<2x6xf32>) -> tensor<6xf32>
  %got = loom.aten "aten::t.default"(%go) {args = [#loom.arg<0>], loom.module = "b", loom.phase = #loom.phase<backward>} : (tensor<2x6xf32>) -> tensor<6x2xf32>
  %gwb = loom.aten "aten::mm.default"(%got, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "b", loom.phase = #loom.phase<backward>} : (tensor<6x2xf32>, tensor<2x4xf32>) -> tensor<6x4xf32>
  %gwa = loom.aten "aten::mm.default"(%got, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<backward>} : (tensor<6x2xf32>, tensor<2x4xf32>) -> tensor<6x4xf32>
  %gw = loom.aten "aten::add.Tensor"(%gwb, %gwa) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<backward>} : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  return %l, %gw, %gbb : tensor<f32>, tensor<6x4xf32>, tensor<6xf32>
}
