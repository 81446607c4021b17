// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-bucket | FileCheck %s --check-prefix=OFF
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-bucket="bucket-bytes=128" | FileCheck %s --check-prefix=B128
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-bucket="bucket-bytes=192" | FileCheck %s --check-prefix=B192
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-bucket="bucket-bytes=1000" | FileCheck %s --check-prefix=B1000
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-bucket="bucket-bytes=128" | FileCheck %s --check-prefix=SPLIT
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-prefetch="forward-prefetch=1" --loom-bucket="bucket-bytes=128" | FileCheck %s --check-prefix=PREFETCH
// RUN: not loom-opt %s --loom-fsdp="mesh-shape=2" --loom-bucket="bucket-bytes=-1" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: loom-opt %S/Inputs/remat-step.mlir --loom-fsdp="mesh-shape=2" --loom-prefetch --loom-bucket="bucket-bytes=100000" | FileCheck %s --check-prefix=REMAT

// The units of ModelArgs(n_layers=3) on 2 ranks (fsdp reshard auto): the
// root (tok_embeddings, norm, output: 3 x 16 floats, 192 bytes unsharded),
// layers.0-2 (16 floats, 64 bytes each). Bytes are the unsharded size
// (all-gather output, reduce-scatter input). Forward gathers run root, l0,
// l1, l2; backward gathers l2, l1, l0; reduce-scatters l2, l1, l0, root.

// bucket-bytes=0 (the default) changes nothing.
// OFF-LABEL: func.func @step(
// OFF: loom.all_gather_start {{.*}}<forward>} : tensor<24xf32>
// OFF-COUNT-3: loom.all_gather_start {{.*}}<forward>} : tensor<8xf32>
// OFF: loom.all_gather_start {{.*}}"layers.2", loom.phase = #loom.phase<backward>} : tensor<8xf32>
// OFF: loom.reduce_scatter_start {{.*}}"layers.2", {{.*}} : tensor<16xf32>
// OFF: loom.all_gather_start {{.*}}"layers.1", loom.phase = #loom.phase<backward>} : tensor<8xf32>
// OFF: loom.reduce_scatter_start {{.*}}"layers.1", {{.*}} : tensor<16xf32>
// OFF: loom.all_gather_start {{.*}}"layers.0", loom.phase = #loom.phase<backward>} : tensor<8xf32>
// OFF: loom.reduce_scatter_start {{.*}}"layers.0", {{.*}} : tensor<16xf32>
// OFF: loom.reduce_scatter_start {{.*}}loom.module = ""{{.*}} : tensor<48xf32>

// 128 bytes: two layers fit, the root (192) is larger than the limit and
// stays alone; l2 (after l0+l1 filled the bucket) is alone too.
// B128-LABEL: func.func @step(
// B128: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>} : tensor<24xf32> -> !loom.future<tensor<48xf32>>
// B128-NEXT: loom.wait
// B128: loom.all_gather_start {{.*}}loom.module = "layers", loom.phase = #loom.phase<forward>} : tensor<16xf32> -> !loom.future<tensor<32xf32>>
// B128: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>} : tensor<8xf32>
// B128: loom.all_gather_start {{.*}}loom.module = "layers", loom.phase = #loom.phase<backward>} : tensor<16xf32>
// B128: loom.reduce_scatter_start {{.*}}loom.module = "layers", loom.phase = #loom.phase<backward>} : tensor<32xf32> -> !loom.future<tensor<16xf32>>
// B128: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>} : tensor<8xf32>
// B128: loom.reduce_scatter_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>} : tensor<16xf32>
// B128: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>} : tensor<48xf32>
// B128-NOT: _start

// 192 bytes: the root exactly fits alone; the three layers merge in each
// phase; the root's reduce-scatter cannot join them.
// B192-LABEL: func.func @step(
// B192: loom.all_gather_start {{.*}}loom.module = ""{{.*}} : tensor<24xf32>
// B192: loom.all_gather_start {{.*}}loom.module = "layers", loom.phase = #loom.phase<forward>} : tensor<24xf32>
// B192: loom.all_gather_start {{.*}}loom.module = "layers", loom.phase = #loom.phase<backward>} : tensor<24xf32>
// B192: loom.reduce_scatter_start {{.*}}loom.module = "layers"{{.*}} : tensor<48xf32>
// B192: loom.reduce_scatter_start {{.*}}loom.module = ""{{.*}} : tensor<48xf32>
// B192-NOT: _start

// A large limit: one collective per phase and kind. Phases never mix.
// B1000-LABEL: func.func @step(
// B1000: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>} : tensor<48xf32> -> !loom.future<tensor<96xf32>>
// B1000: loom.all_gather_start {{.*}}loom.module = "layers", loom.phase = #loom.phase<backward>} : tensor<24xf32>
// B1000: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>} : tensor<96xf32> -> !loom.future<tensor<48xf32>>
// B1000-NOT: _start

// The merged all-gather: inputs flattened and concatenated where the first
// member started, the [G, N] result split per member and reshaped to each
// member's own result; layers.1's shard moved up with the start. The merged
// reduce-scatter lays the members' [G, n] blocks side by side and splits the
// reduced chunk per member.
// SPLIT-LABEL: func.func @step(
// SPLIT: %[[V0:.*]] = loom.aten "aten::view.default"(%arg1) {{.*}}loom.module = "layers.0"
// SPLIT-NEXT: %[[V1:.*]] = loom.aten "aten::view.default"(%arg2) {{.*}}loom.module = "layers.1"
// SPLIT-NEXT: %[[C:.*]] = loom.aten "aten::cat.default"(%[[V0]], %[[V1]]) {args = {{\[}}[#loom.arg<0>, #loom.arg<1>], 0]{{.*}} -> tensor<16xf32>
// SPLIT-NEXT: %[[S:.*]] = loom.all_gather_start %[[C]] on @dp axes ["shard"] dim 0
// SPLIT-NEXT: %[[W:.*]] = loom.wait %[[S]]
// SPLIT-NEXT: %[[M:.*]] = loom.aten "aten::reshape.default"(%[[W]]) {args = [#loom.arg<0>, [2, 16]]
// SPLIT-NEXT: %[[P:.*]]:2 = loom.aten "aten::split_with_sizes.default"(%[[M]]) {args = [#loom.arg<0>, [8, 8], 1]
// SPLIT-NEXT: %[[R0:.*]] = loom.aten "aten::reshape.default"(%[[P]]#0) {args = [#loom.arg<0>, [16]]
// SPLIT-NEXT: %[[R1:.*]] = loom.aten "aten::reshape.default"(%[[P]]#1) {args = [#loom.arg<0>, [16]]
// SPLIT-NEXT: loom.aten "aten::view.default"(%[[R0]]) {args = [#loom.arg<0>, [4, 4]], loom.module = "layers.0"
// SPLIT: loom.aten "aten::view.default"(%[[R1]]) {args = [#loom.arg<0>, [4, 4]], loom.module = "layers.1"
// SPLIT: %[[B2:.*]] = loom.aten "aten::reshape.default"(%{{.*}}) {args = [#loom.arg<0>, [2, 8]]
// SPLIT-NEXT: %[[B1:.*]] = loom.aten "aten::reshape.default"(%{{.*}}) {args = [#loom.arg<0>, [2, 8]]
// SPLIT-NEXT: %[[CAT:.*]] = loom.aten "aten::cat.default"(%[[B2]], %[[B1]]) {args = {{\[}}[#loom.arg<0>, #loom.arg<1>], 1]{{.*}} -> tensor<2x16xf32>
// SPLIT-NEXT: %[[FLAT:.*]] = loom.aten "aten::reshape.default"(%[[CAT]]) {args = [#loom.arg<0>, [32]]
// SPLIT-NEXT: %[[RS:.*]] = loom.reduce_scatter_start %[[FLAT]] on @dp axes ["shard"] dim 0 reduce <avg>
// SPLIT-NEXT: %[[RW:.*]] = loom.wait %[[RS]]
// SPLIT-NEXT: %{{.*}}:2 = loom.aten "aten::split_with_sizes.default"(%[[RW]]) {args = [#loom.arg<0>, [8, 8], 0]

// After forward-prefetch=1, layers.0's start sits right after the root's
// wait and layers.1's after layers.0's wait; no other all-gather lies
// between them, so they still merge, at layers.0's prefetched place (before
// the embedding runs).
// PREFETCH-LABEL: func.func @step(
// PREFETCH: loom.wait {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "layers", loom.phase = #loom.phase<forward>} : tensor<16xf32>
// PREFETCH: "aten::mm.default"{{.*}}loom.module = "tok_embeddings"

// NEG: error: --loom-bucket: bucket-bytes -1 is negative

func.func @step(%w0: tensor<4x4xf32> {loom.name = "tok_embeddings.weight", loom.role = #loom.role<parameter>},
    %w1: tensor<4x4xf32> {loom.name = "layers.0.ffn.weight", loom.role = #loom.role<parameter>},
    %w2: tensor<4x4xf32> {loom.name = "layers.1.ffn.weight", loom.role = #loom.role<parameter>},
    %w3: tensor<4x4xf32> {loom.name = "layers.2.ffn.weight", loom.role = #loom.role<parameter>},
    %w4: tensor<4x4xf32> {loom.name = "norm.weight", loom.role = #loom.role<parameter>},
    %w5: tensor<4x4xf32> {loom.name = "output.weight", loom.role = #loom.role<parameter>},
    %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "tok_embeddings.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.ffn.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.ffn.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.2.ffn.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "norm.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "output.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "tok_embeddings", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m0 = loom.aten "aten::mm.default"(%x, %t0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "tok_embeddings", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = loom.aten "aten::mm.default"(%m0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r1 = loom.aten "aten::relu.default"(%m1) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t2 = loom.aten "aten::t.default"(%w2) {args = [#loom.arg<0>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = loom.aten "aten::mm.default"(%r1, %t2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r2 = loom.aten "aten::relu.default"(%m2) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t3 = loom.aten "aten::t.default"(%w3) {args = [#loom.arg<0>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m3 = loom.aten "aten::mm.default"(%r2, %t3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r3 = loom.aten "aten::relu.default"(%m3) {args = [#loom.arg<0>], loom.module = "layers.2", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t4 = loom.aten "aten::t.default"(%w4) {args = [#loom.arg<0>], loom.module = "norm", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m4 = loom.aten "aten::mm.default"(%r3, %t4) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "norm", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t5 = loom.aten "aten::t.default"(%w5) {args = [#loom.arg<0>], loom.module = "output", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m5 = loom.aten "aten::mm.default"(%m4, %t5) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "output", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%m5) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [2, 4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<2x4xf32>
  %gt5 = loom.aten "aten::t.default"(%g) {args = [#loom.arg<0>], loom.module = "output", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw5 = loom.aten "aten::mm.default"(%gt5, %m4) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "output", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt5 = loom.aten "aten::t.default"(%t5) {args = [#loom.arg<0>], loom.module = "output", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh5 = loom.aten "aten::mm.default"(%g, %tt5) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "output", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gt4 = loom.aten "aten::t.default"(%gh5) {args = [#loom.arg<0>], loom.module = "norm", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw4 = loom.aten "aten::mm.default"(%gt4, %r3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "norm", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt4 = loom.aten "aten::t.default"(%t4) {args = [#loom.arg<0>], loom.module = "norm", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh4 = loom.aten "aten::mm.default"(%gh5, %tt4) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "norm", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr3 = loom.aten "aten::threshold_backward.default"(%gh4, %r3) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.2", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt3 = loom.aten "aten::t.default"(%gr3) {args = [#loom.arg<0>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw3 = loom.aten "aten::mm.default"(%gt3, %r2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt3 = loom.aten "aten::t.default"(%t3) {args = [#loom.arg<0>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh3 = loom.aten "aten::mm.default"(%gr3, %tt3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr2 = loom.aten "aten::threshold_backward.default"(%gh3, %r2) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt2 = loom.aten "aten::t.default"(%gr2) {args = [#loom.arg<0>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw2 = loom.aten "aten::mm.default"(%gt2, %r1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt2 = loom.aten "aten::t.default"(%t2) {args = [#loom.arg<0>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh2 = loom.aten "aten::mm.default"(%gr2, %tt2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr1 = loom.aten "aten::threshold_backward.default"(%gh2, %r1) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt1 = loom.aten "aten::t.default"(%gr1) {args = [#loom.arg<0>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw1 = loom.aten "aten::mm.default"(%gt1, %m0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt1 = loom.aten "aten::t.default"(%t1) {args = [#loom.arg<0>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh1 = loom.aten "aten::mm.default"(%gr1, %tt1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gt0 = loom.aten "aten::t.default"(%gh1) {args = [#loom.arg<0>], loom.module = "tok_embeddings", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw0 = loom.aten "aten::mm.default"(%gt0, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "tok_embeddings", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  return %l, %gw0, %gw1, %gw2, %gw3, %gw4, %gw5 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// A step with recompute regions (Inputs/remat-step.mlir): with layers.0's
// backward all-gather prefetched next to layers.1's, the two merge into one
// (of module "layers") and both regions read their parameters from its
// split.
// REMAT-LABEL: func.func @step
// REMAT: %[[F:.*]] = loom.all_gather_start %{{.*}} {loom.module = "layers", loom.phase = #loom.phase<backward>}
// REMAT: %[[W:.*]] = loom.wait %[[F]]
// REMAT-NEXT: %[[M:.*]] = loom.aten "aten::reshape.default"(%[[W]])
// REMAT-NEXT: %[[S:.*]]:2 = loom.aten "aten::split_with_sizes.default"(%[[M]])
// REMAT-NEXT: %[[P1:.*]] = loom.aten "aten::reshape.default"(%[[S]]#0)
// REMAT-NEXT: %[[P0:.*]] = loom.aten "aten::reshape.default"(%[[S]]#1)
// REMAT-NEXT: %[[W1:.*]] = loom.aten "aten::view.default"(%[[P1]])
// REMAT-NEXT: loom.recompute "layers.1" (%{{.*}}, %[[W1]])
// REMAT-NOT: loom.all_gather_start
// REMAT: %[[V0:.*]] = loom.aten "aten::view.default"(%[[P0]])
// REMAT-NEXT: %[[S0:.*]]:2 = loom.aten "aten::split_with_sizes.default"(%[[V0]])
// REMAT-NEXT: %[[W0:.*]] = loom.aten "aten::reshape.default"(%[[S0]]#0)
// REMAT-NEXT: %[[B0:.*]] = loom.aten "aten::reshape.default"(%[[S0]]#1)
// REMAT-NEXT: loom.recompute "layers.0" (%[[W0]], %[[B0]], %arg4)
// REMAT-NOT: loom.all_gather_start
