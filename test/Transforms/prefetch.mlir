// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="backward-prefetch=pre" | FileCheck %s --check-prefix=TRUE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="backward-prefetch=pre" | FileCheck %s --check-prefix=PRE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=2" --loom-prefetch="backward-prefetch=pre" | FileCheck %s --check-prefix=TRUE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-prefetch="backward-prefetch=pre" | FileCheck %s --check-prefix=AUTO
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=false" --loom-prefetch="backward-prefetch=pre" | FileCheck %s --check-prefix=FALSE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="backward-prefetch=post" | FileCheck %s --check-prefix=TRUE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="backward-prefetch=post" | FileCheck %s --check-prefix=POST
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="backward-prefetch=none" | FileCheck %s --check-prefix=NONE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="forward-prefetch=1" | FileCheck %s --check-prefix=TRUE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="forward-prefetch=1" | FileCheck %s --check-prefix=FWD1
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="forward-prefetch=2 backward-prefetch=none" | FileCheck %s --check-prefix=FWD2
// RUN: loom-opt %s --loom-fsdp="mesh-shape=1" --loom-prefetch="forward-prefetch=2" | FileCheck %s --check-prefix=WS1
// RUN: loom-opt %S/Inputs/remat-step.mlir --loom-fsdp="mesh-shape=2" --loom-prefetch="backward-prefetch=pre" | FileCheck %s --check-prefix=REMAT

// PyTorch's test_fully_shard_backward_prefetch
// (test_fully_shard_comm.py::TestFullyShardPrefetch) on
// ModelArgs(n_layers=3)'s unit structure:
// fully_shard on layers.0-2 and the root (tok_embeddings before the layers,
// norm and output after them). Each layer is one Linear + ReLU here; the
// unit structure, not the layer's contents, decides the events. The
// "unshard" events are the all-gather starts (FORWARD in forward,
// PRE_BACKWARD in backward), "post_backward" the reduce-scatter starts;
// FileCheck pins their exact issue order (no other start in between).
//
// PyTorch expects, for every reshard_after_forward:
//   forward:  unshard "", layers.0, layers.1, layers.2
//   backward: (unshard "" if raf is not None) + unshard layers.2,
//             unshard layers.1, post_backward layers.2, unshard layers.0,
//             post_backward layers.1, post_backward layers.0, post_backward ""
//   raf False: every backward unshard removed.
// FSDP2's default backward prefetch (pre; named explicitly, since Loom's
// default, bounded, may issue later to keep the peak, prefetch-bounded.mlir)
// moves each unit's backward all-gather to the pre-backward point of the
// unit after it in post-forward order: the root prefetches layers.2,
// layers.2 prefetches layers.1, and so on.
// (raf=2 on 2 ranks is the shard size, i.e. True. Activation checkpointing,
// which PyTorch also checks does not change the events, has no counterpart
// in the captured step.)


// raf True (and 2):
// TRUE-LABEL: func.func @step(
// TRUE: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// TRUE-NOT: _start
// TRUE: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// TRUE-NOT: _start
// TRUE: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// TRUE-NOT: _start
// TRUE: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// TRUE-NOT: _start
// TRUE: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// TRUE-NOT: _start
// TRUE: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// TRUE-NOT: _start
// TRUE: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// TRUE-NOT: _start
// TRUE: loom.reduce_scatter_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// TRUE-NOT: _start
// TRUE: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// TRUE-NOT: _start
// TRUE: loom.reduce_scatter_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// TRUE-NOT: _start
// TRUE: loom.reduce_scatter_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// TRUE-NOT: _start
// TRUE: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// TRUE-NOT: _start

// raf None (auto): the root keeps its parameters, so no root unshard in
// backward; the root's pre-backward point (its first backward op) still
// prefetches layers.2.
// AUTO-LABEL: func.func @step(
// AUTO: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// AUTO-NOT: _start
// AUTO: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// AUTO-NOT: _start
// AUTO: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// AUTO-NOT: _start
// AUTO: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// AUTO-NOT: _start
// AUTO: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// AUTO-NOT: _start
// AUTO: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// AUTO-NOT: _start
// AUTO: loom.reduce_scatter_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// AUTO-NOT: _start
// AUTO: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// AUTO-NOT: _start
// AUTO: loom.reduce_scatter_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// AUTO-NOT: _start
// AUTO: loom.reduce_scatter_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// AUTO-NOT: _start
// AUTO: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// AUTO-NOT: _start

// raf False: nothing is gathered in backward.
// FALSE-LABEL: func.func @step(
// FALSE: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// FALSE-NOT: _start
// FALSE: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// FALSE-NOT: _start
// FALSE: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// FALSE-NOT: _start
// FALSE: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// FALSE-NOT: _start
// FALSE: loom.reduce_scatter_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// FALSE-NOT: _start
// FALSE: loom.reduce_scatter_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// FALSE-NOT: _start
// FALSE: loom.reduce_scatter_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// FALSE-NOT: _start
// FALSE: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// FALSE-NOT: _start

// With backward-prefetch=none each backward all-gather stays at its unit's
// first backward op (no overlap): FSDP1's backward_prefetch=None.
// NONE-LABEL: func.func @step(
// NONE: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// NONE-NOT: _start

// Where the starts go. With pre, layers.1's all-gather is issued right after
// layers.2's backward all-gather completes (layers.2's pre-backward point),
// before layers.2's gradient compute; its wait stays before layers.1's first
// backward op. Only the start and the view of the local shard moved.
// PRE-LABEL: func.func @step(
// PRE: %[[W2:.*]] = loom.wait {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// PRE-NEXT: %[[V1:.*]] = loom.aten "aten::view.default"(%arg2) {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.all_gather_start %[[V1]] {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%[[W2]])
// PRE-NEXT: loom.aten "aten::threshold_backward.default"
// PRE: loom.reduce_scatter_start {{.*}}loom.module = "layers.2"
// PRE: loom.wait {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg1)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>

// With post (FSDP1 BACKWARD_POST), the same target is issued after the
// unit's gradients, right before its reduce-scatter.
// POST-LABEL: func.func @step(
// POST: loom.wait {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.aten "aten::view.default"
// POST-NEXT: loom.aten "aten::threshold_backward.default"
// POST: loom.aten "aten::view.default"(%arg2) {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "layers.2"

// forward-prefetch=1: every unit issues the next unit's all-gather right
// after its own completes (the root prefetches layers.0 before the embedding
// runs, layers.0 prefetches layers.1 before its compute).
// FWD1-LABEL: func.func @step(
// FWD1: loom.wait {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// FWD1-NEXT: loom.aten "aten::view.default"(%arg1)
// FWD1-NEXT: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// FWD1: "aten::mm.default"{{.*}}loom.module = "tok_embeddings"
// FWD1-NEXT: loom.wait {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// FWD1-NEXT: loom.aten "aten::view.default"(%arg2)
// FWD1-NEXT: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>

// forward-prefetch=2: the root issues layers.0 and layers.1, layers.0 then
// issues layers.2 (layers.1 is already in flight).
// FWD2-LABEL: func.func @step(
// FWD2: loom.wait {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// FWD2-NEXT: loom.aten "aten::view.default"(%arg1)
// FWD2-NEXT: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// FWD2-NEXT: loom.aten "aten::view.default"(%arg2)
// FWD2-NEXT: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// FWD2: loom.wait {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// FWD2-NEXT: loom.aten "aten::view.default"(%arg3)
// FWD2-NEXT: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// FWD2-NOT: loom.all_gather_start {{.*}}<forward>

// One rank: no collectives, nothing to move.
// WS1-LABEL: func.func @step(
// WS1-NOT: _start

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

// A step with recompute regions (Inputs/remat-step.mlir): a region is its
// unit's first backward op, so BACKWARD_PRE issues layers.0's all-gather at
// layers.1's pre-backward point, right after layers.1's wait and before
// layers.1's region, which reads layers.1's gathered weight.
// REMAT-LABEL: func.func @step
// REMAT: %[[W1:.*]] = loom.wait %{{.*}} {loom.module = "layers.1", loom.phase = #loom.phase<backward>}
// REMAT-NEXT: loom.aten "aten::view.default"(%arg0)
// REMAT-NEXT: loom.aten "aten::cat.default"
// REMAT-NEXT: %[[F0:.*]] = loom.all_gather_start %{{.*}} {loom.module = "layers.0", loom.phase = #loom.phase<backward>}
// REMAT-NEXT: %[[V1:.*]] = loom.aten "aten::view.default"(%[[W1]])
// REMAT-NEXT: loom.recompute "layers.1" (%{{.*}}, %[[V1]])
// REMAT: loom.wait %[[F0]]
// REMAT: loom.recompute "layers.0"
