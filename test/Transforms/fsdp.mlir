// RUN: loom-opt %s --loom-fsdp="mesh-shape=4" | FileCheck %s
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4" | FileCheck %s --check-prefix=AG-AUTO
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4 reshard-after-forward=true" | FileCheck %s --check-prefix=AG-TRUE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4 reshard-after-forward=4" | FileCheck %s --check-prefix=AG-TRUE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4 reshard-after-forward=false" | FileCheck %s --check-prefix=AG-FALSE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4 reshard-after-forward=1" | FileCheck %s --check-prefix=AG-FALSE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4 reshard-after-forward=false" | FileCheck %s --check-prefix=RS
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4 units=layers.0,layers.1" | FileCheck %s --check-prefix=AG-AUTO
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4 param-dtype=bf16 reduce-dtype=f32" | FileCheck %s --check-prefix=MP
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4 gradient-divide-factor=8" | FileCheck %s --check-prefix=DIV
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4 reduce-dtype=f16" | FileCheck %s --check-prefix=FP16
// RUN: loom-opt %s --loom-fsdp="mesh-shape=1" | FileCheck %s --check-prefix=WS1
// RUN: loom-opt %s --loom-fsdp="mesh-shape=4" --loom-attach-optimizer | FileCheck %s --check-prefix=OPT

// A 3-unit MLP stack as the importer produces it: fully_shard on layers.0
// (Linear 8->15 with bias), layers.1 (Linear 15->8) and the root (out,
// Linear 8->4), on 4 ranks. 15 rows shard as 4 per rank, padded to 16.

// CHECK: loom.mesh @dp shape [4] axes ["shard"]
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[W0:[^:]+]]: tensor<4x8xf32> {loom.name = "layers.0.weight", loom.role = #loom.role<parameter>, loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [15, 8]>}
// CHECK-SAME: %[[B0:[^:]+]]: tensor<4xf32> {loom.name = "layers.0.bias", loom.role = #loom.role<parameter>, loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [15]>}
// CHECK-SAME: %[[W1:[^:]+]]: tensor<2x15xf32> {{{.*}}loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [8, 15]>}
// CHECK-SAME: %[[W2:[^:]+]]: tensor<1x8xf32> {{{.*}}loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [4, 8]>}
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x8xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["shard"], dim = 0>}
// CHECK-SAME: -> (tensor<f32> {loom.partial = #loom.partial<@dp, axes = ["shard"], avg>, loom.role = #loom.role<loss>},
// CHECK-SAME: tensor<4x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.weight"}, tensor<4xf32> {{.*}}, tensor<2x15xf32> {{.*}}, tensor<1x8xf32> {{.*}})
// One all-gather for the whole unit: flatten, concatenate, gather, split
// the [G, N] view per parameter, drop the padding.
// CHECK-NEXT: %[[F0:.*]] = loom.aten "aten::view.default"(%[[W0]]) {args = [#loom.arg<0>, [32]], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<32xf32>
// CHECK-NEXT: %[[C0:.*]] = loom.aten "aten::cat.default"(%[[F0]], %[[B0]]) {args = {{\[}}[#loom.arg<0>, #loom.arg<1>], 0]{{.*}} -> tensor<36xf32>
// CHECK-NEXT: %[[S0:.*]] = loom.all_gather_start %[[C0]] on @dp axes ["shard"] dim 0 {loom.module = "layers.0", loom.phase = #loom.phase<forward>} : tensor<36xf32> -> !loom.future<tensor<144xf32>>
// CHECK-NEXT: %[[G0:.*]] = loom.wait %[[S0]] {{.*}} -> tensor<144xf32>
// CHECK-NEXT: %[[M0:.*]] = loom.aten "aten::view.default"(%[[G0]]) {args = [#loom.arg<0>, [4, 36]]
// CHECK-NEXT: %[[P0:.*]]:2 = loom.aten "aten::split_with_sizes.default"(%[[M0]]) {args = [#loom.arg<0>, [32, 4], 1], {{.*}}returns = {{\[}}[0, 1]]} : (tensor<4x36xf32>) -> (tensor<4x32xf32>, tensor<4x4xf32>)
// CHECK-NEXT: %[[R0:.*]] = loom.aten "aten::reshape.default"(%[[P0]]#0) {args = [#loom.arg<0>, [16, 8]]
// CHECK-NEXT: %[[FW0:.*]] = loom.aten "aten::slice.Tensor"(%[[R0]]) {args = [#loom.arg<0>, 0, 0, 15, 1]{{.*}} -> tensor<15x8xf32>
// CHECK-NEXT: %[[R1:.*]] = loom.aten "aten::reshape.default"(%[[P0]]#1) {args = [#loom.arg<0>, [16]]
// CHECK-NEXT: %[[FB0:.*]] = loom.aten "aten::slice.Tensor"(%[[R1]]) {{.*}} -> tensor<15xf32>
// CHECK-NEXT: %[[T0:.*]] = loom.aten "aten::t.default"(%[[FW0]])
// CHECK-NEXT: loom.aten "aten::addmm.default"(%[[FB0]], %[[X]], %[[T0]])
// A single-parameter unit needs no concatenation.
// CHECK: %[[F1:.*]] = loom.aten "aten::view.default"(%[[W1]]) {args = [#loom.arg<0>, [30]]
// CHECK-NEXT: loom.all_gather_start %[[F1]] on @dp axes ["shard"] dim 0 {loom.module = "layers.1", loom.phase = #loom.phase<forward>} : tensor<30xf32> -> !loom.future<tensor<120xf32>>
// CHECK: %[[FT1:.*]] = loom.aten "aten::t.default"(%{{.*}}) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>}
// CHECK: loom.all_gather_start %{{.*}} {loom.module = "", loom.phase = #loom.phase<forward>} : tensor<8xf32> -> !loom.future<tensor<32xf32>>
// CHECK: %[[T2:.*]] = loom.aten "aten::t.default"(%{{.*}}) {args = [#loom.arg<0>], loom.module = "out", loom.phase = #loom.phase<forward>}
// The root keeps its gathered weight for backward (auto); its gradient is
// reduce-scattered right after it is computed.
// CHECK: %[[GW2:.*]] = loom.aten "aten::mm.default"{{.*}}loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[V2:.*]] = loom.aten "aten::reshape.default"(%[[GW2]]) {args = [#loom.arg<0>, [32]]
// CHECK-NEXT: %[[RS2:.*]] = loom.reduce_scatter_start %[[V2]] on @dp axes ["shard"] dim 0 reduce <avg> {{.*}} : tensor<32xf32> -> !loom.future<tensor<8xf32>>
// CHECK-NEXT: %[[WR2:.*]] = loom.wait %[[RS2]]
// CHECK-NEXT: %[[SH2:.*]] = loom.aten "aten::view.default"(%[[WR2]]) {args = [#loom.arg<0>, [1, 8]]
// CHECK-NEXT: loom.aten "aten::t.default"(%[[T2]]) {{.*}}loom.phase = #loom.phase<backward>
// layers.1 resharded: a second all-gather before its first backward op,
// and the transposed weight is recomputed from it.
// CHECK: loom.all_gather_start %{{.*}} {loom.module = "layers.1", loom.phase = #loom.phase<backward>} : tensor<30xf32>
// CHECK-NEXT: loom.wait
// CHECK-NEXT: %[[BW1:.*]] = loom.aten "aten::view.default"(%{{.*}}) {args = [#loom.arg<0>, [8, 15]], loom.module = "layers.1", loom.phase = #loom.phase<backward>}
// CHECK-NEXT: loom.aten "aten::t.default"{{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>}
// CHECK: loom.reduce_scatter_start %{{.*}} {loom.module = "layers.1", loom.phase = #loom.phase<backward>} : tensor<120xf32> -> !loom.future<tensor<30xf32>>
// CHECK: %[[BT1:.*]] = loom.aten "aten::t.default"(%[[BW1]]) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>}
// CHECK-NEXT: loom.aten "aten::t.default"(%[[BT1]])
// layers.0 is unsharded by its pre-backward hook although no backward op
// reads its weight (FSDP2's count).
// CHECK: loom.all_gather_start %{{.*}} {loom.module = "layers.0", loom.phase = #loom.phase<backward>} : tensor<36xf32>
// Gradients are padded on dim 0 and laid out per rank chunk.
// CHECK: %[[GW0:.*]] = loom.aten "aten::mm.default"{{.*}} -> tensor<15x8xf32>
// CHECK-NEXT: %[[GB0:.*]] = loom.aten "aten::sum.dim_IntList"
// CHECK-NEXT: %[[PW0:.*]] = loom.aten "aten::constant_pad_nd.default"(%[[GW0]]) {args = [#loom.arg<0>, [0, 0, 0, 1], 0.000000e+00]{{.*}} : (tensor<15x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: %[[VW0:.*]] = loom.aten "aten::reshape.default"(%[[PW0]]) {args = [#loom.arg<0>, [4, 32]]
// CHECK-NEXT: %[[PB0:.*]] = loom.aten "aten::constant_pad_nd.default"(%[[GB0]]) {args = [#loom.arg<0>, [0, 1], 0.000000e+00]{{.*}} -> tensor<16xf32>
// CHECK-NEXT: %[[VB0:.*]] = loom.aten "aten::reshape.default"(%[[PB0]]) {args = [#loom.arg<0>, [4, 4]]
// CHECK-NEXT: %[[CAT:.*]] = loom.aten "aten::cat.default"(%[[VW0]], %[[VB0]]) {args = {{\[}}[#loom.arg<0>, #loom.arg<1>], 1]{{.*}} -> tensor<4x36xf32>
// CHECK-NEXT: %[[FLAT:.*]] = loom.aten "aten::reshape.default"(%[[CAT]]) {args = [#loom.arg<0>, [144]]
// CHECK-NEXT: %[[RS0:.*]] = loom.reduce_scatter_start %[[FLAT]] on @dp axes ["shard"] dim 0 reduce <avg> {loom.module = "layers.0", loom.phase = #loom.phase<backward>} : tensor<144xf32> -> !loom.future<tensor<36xf32>>
// CHECK-NEXT: %[[RED:.*]] = loom.wait %[[RS0]]
// CHECK-NEXT: %[[SPL:.*]]:2 = loom.aten "aten::split_with_sizes.default"(%[[RED]]) {args = [#loom.arg<0>, [32, 4], 0]
// CHECK-NEXT: %[[SW0:.*]] = loom.aten "aten::view.default"(%[[SPL]]#0) {args = [#loom.arg<0>, [4, 8]]
// CHECK-NEXT: return %{{.*}}, %[[SW0]], %[[SPL]]#1, %{{.*}}, %[[SH2]] : tensor<f32>, tensor<4x8xf32>, tensor<4xf32>, tensor<2x15xf32>, tensor<1x8xf32>

// PyTorch's counts (test_fully_shard_comm, 2 non-root units + root):
// forward 3 all-gathers; backward 2 more with reshard_after_forward=None
// (the root keeps its parameters), 3 with True (or the shard size), none
// with False (or 1); one reduce-scatter per unit.
// AG-AUTO-LABEL: func.func @step(
// AG-AUTO-COUNT-3: loom.all_gather_start {{.*}}loom.phase<forward>
// AG-AUTO-COUNT-2: loom.all_gather_start {{.*}}loom.phase<backward>
// AG-AUTO-NOT: loom.all_gather_start
// AG-TRUE-LABEL: func.func @step(
// AG-TRUE-COUNT-3: loom.all_gather_start {{.*}}loom.phase<forward>
// AG-TRUE-COUNT-3: loom.all_gather_start {{.*}}loom.phase<backward>
// AG-TRUE-NOT: loom.all_gather_start
// AG-FALSE-LABEL: func.func @step(
// AG-FALSE-COUNT-3: loom.all_gather_start {{.*}}loom.phase<forward>
// AG-FALSE-NOT: loom.all_gather_start
// RS-LABEL: func.func @step(
// RS-COUNT-3: loom.reduce_scatter_start {{.*}} reduce <avg>
// RS-NOT: loom.reduce_scatter_start

// Mixed precision: shards are cast to bf16 before the gather, compute runs
// in bf16 (the batch input is cast too), gradients are cast to f32 for the
// reduce-scatter and stay f32 shards; the loss is returned as f32.
// MP-LABEL: func.func @step(
// The batch input is cast once, as FSDP2's cast_forward_inputs.
// MP: %[[X:.*]] = loom.aten "aten::_to_copy.default"(%arg4) {args = [#loom.arg<0>], kwargs = {dtype = bf16}, loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x8xf32>) -> tensor<2x8xbf16>
// MP: %[[C:.*]] = loom.aten "aten::_to_copy.default"(%arg0) {args = [#loom.arg<0>], kwargs = {dtype = bf16}, loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// MP: loom.all_gather_start {{.*}} : tensor<36xbf16> -> !loom.future<tensor<144xbf16>>
// MP: loom.aten "aten::addmm.default"(%{{.*}}, %[[X]], %{{.*}}){{.*}} -> tensor<2x15xbf16>
// MP: loom.aten "aten::_to_copy.default"{{.*}}kwargs = {dtype = f32}{{.*}} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// MP: loom.reduce_scatter_start {{.*}} reduce <avg> {{.*}} : tensor<32xf32> -> !loom.future<tensor<8xf32>>
// MP: %[[L:.*]] = loom.aten "aten::_to_copy.default"{{.*}}kwargs = {dtype = f32}{{.*}} : (tensor<bf16>) -> tensor<f32>
// MP-NEXT: return %[[L]], {{.*}} : tensor<f32>, tensor<4x8xf32>, tensor<4xf32>, tensor<2x15xf32>, tensor<1x8xf32>

// A divide factor other than the data-parallel size: divide first, then
// sum (PyTorch's pre-multiplied sum).
// DIV-LABEL: func.func @step(
// DIV: %[[D:.*]] = loom.aten "aten::div.Tensor"(%{{.*}}) {args = [#loom.arg<0>, 8.000000e+00]{{.*}} -> tensor<32xf32>
// DIV-NEXT: loom.reduce_scatter_start %[[D]] on @dp axes ["shard"] dim 0 reduce <sum>
// DIV-NOT: reduce <avg>

// fp16 reductions split the factor 4 into a pre-division by 2 and a
// post-division by 2 around summing collectives.
// FP16-LABEL: func.func @step(
// FP16: %[[D:.*]] = loom.aten "aten::div.Tensor"(%{{.*}}) {args = [#loom.arg<0>, 2.000000e+00]{{.*}} -> tensor<32xf16>
// FP16-NEXT: loom.reduce_scatter_start %[[D]] on @dp axes ["shard"] dim 0 reduce <sum>
// FP16-NEXT: %[[W:.*]] = loom.wait
// FP16-NEXT: loom.aten "aten::div.Tensor"(%[[W]]) {args = [#loom.arg<0>, 2.000000e+00]

// World size 1 issues no collectives.
// WS1-LABEL: func.func @step(
// WS1-SAME: tensor<15x8xf32> {{{.*}}global = [15, 8]>}
// WS1-NOT: _start

// The optimizer updates local shards; its state is sharded like them.
// OPT-LABEL: func.func @step(
// OPT-SAME: tensor<4x8xf32> {loom.name = "layers.0.weight.exp_avg", loom.role = #loom.role<optimizer_state>, loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [15, 8]>, loom.target = "layers.0.weight"}
// OPT: loom.optimizer_update #loom.adamw<> param %arg0 grad %{{.*}} state [%{{.*}}, %{{.*}}] {{.*}} : tensor<4x8xf32>

func.func @step(%w0: tensor<15x8xf32> {loom.name = "layers.0.weight", loom.role = #loom.role<parameter>},
                %b0: tensor<15xf32> {loom.name = "layers.0.bias", loom.role = #loom.role<parameter>},
                %w1: tensor<8x15xf32> {loom.name = "layers.1.weight", loom.role = #loom.role<parameter>},
                %w2: tensor<4x8xf32> {loom.name = "out.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<15x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.weight"},
        tensor<15xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.bias"},
        tensor<8x15xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.weight"},
        tensor<4x8xf32> {loom.role = #loom.role<grad>, loom.target = "out.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<15x8xf32>) -> tensor<8x15xf32>
  %h0 = loom.aten "aten::addmm.default"(%b0, %x, %t0) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<15xf32>, tensor<2x8xf32>, tensor<8x15xf32>) -> tensor<2x15xf32>
  %r0 = loom.aten "aten::relu.default"(%h0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<2x15xf32>) -> tensor<2x15xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<8x15xf32>) -> tensor<15x8xf32>
  %h1 = loom.aten "aten::mm.default"(%r0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<2x15xf32>, tensor<15x8xf32>) -> tensor<2x8xf32>
  %t2 = loom.aten "aten::t.default"(%w2) {args = [#loom.arg<0>], loom.module = "out", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %o = loom.aten "aten::mm.default"(%h1, %t2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "out", loom.phase = #loom.phase<forward>} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%o) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %go = loom.aten "aten::expand.default"(%g) {args = [#loom.arg<0>, [2, 4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<2x4xf32>
  %got = loom.aten "aten::t.default"(%go) {args = [#loom.arg<0>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw2 = loom.aten "aten::mm.default"(%got, %h1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  %t2t = loom.aten "aten::t.default"(%t2) {args = [#loom.arg<0>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %gh1 = loom.aten "aten::mm.default"(%go, %t2t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "out", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %gh1t = loom.aten "aten::t.default"(%gh1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %gw1 = loom.aten "aten::mm.default"(%gh1t, %r0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<8x2xf32>, tensor<2x15xf32>) -> tensor<8x15xf32>
  %t1t = loom.aten "aten::t.default"(%t1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<15x8xf32>) -> tensor<8x15xf32>
  %gr0 = loom.aten "aten::mm.default"(%gh1, %t1t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x8xf32>, tensor<8x15xf32>) -> tensor<2x15xf32>
  %gh0 = loom.aten "aten::threshold_backward.default"(%gr0, %r0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x15xf32>, tensor<2x15xf32>) -> tensor<2x15xf32>
  %gh0t = loom.aten "aten::t.default"(%gh0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x15xf32>) -> tensor<15x2xf32>
  %gw0 = loom.aten "aten::mm.default"(%gh0t, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<15x2xf32>, tensor<2x8xf32>) -> tensor<15x8xf32>
  %gb0 = loom.aten "aten::sum.dim_IntList"(%gh0) {args = [#loom.arg<0>, [0], false], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x15xf32>) -> tensor<15xf32>
  return %l, %gw0, %gb0, %gw1, %gw2 : tensor<f32>, tensor<15x8xf32>, tensor<15xf32>, tensor<8x15xf32>, tensor<4x8xf32>
}
