// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-prefetch="backward-prefetch=pre" | FileCheck %s --check-prefix=ORDER
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-prefetch="backward-prefetch=pre" | FileCheck %s --check-prefix=PRE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-prefetch="backward-prefetch=post" | FileCheck %s --check-prefix=ORDER
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-prefetch="backward-prefetch=post" | FileCheck %s --check-prefix=POST
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-prefetch="backward-prefetch=none" | FileCheck %s --check-prefix=NONE

// PyTorch's FSDP1 test_backward_prefetch
// (test_fsdp_backward_prefetch.py::TestBackwardPrefetch): nn.Transformer's
// unit structure, 6 encoder and 6 decoder layers wrapped, the root holding
// encoder.norm and decoder.norm, FULL_SHARD (every unit but the root
// reshards after forward). Each layer is one Linear + ReLU here.
// Post-forward order: enc0..enc5, dec0..dec5, root.
//
// BACKWARD_PRE (13 records): the root's pre-backward prefetches dec5,
// dec5 -> dec4, ..., dec1 -> dec0, dec0 -> enc5, enc5 -> enc4, ...,
// enc1 -> enc0, enc0 -> None.
// BACKWARD_POST (11 + 2 records): at each post-backward, dec5 -> dec4, ...,
// dec0 -> enc5, ..., enc1 -> enc0, enc0 -> None, and the root's -> None
// (dec5, its candidate, has already run backward; in Loom its next
// all-gather after that point does not exist, so nothing moves).
// None: no prefetch.
//
// Both modes issue the backward all-gathers in the same order; they differ in
// where: pre issues the target before the current unit's gradient compute
// (right after its own all-gather completes), post after it (right before
// its reduce-scatter). One difference from FSDP1: the root's reduce-scatter
// runs as soon as its last gradient (encoder.norm's) is computed, between
// the decoder and encoder backward, where FSDP1 runs the root's
// post-backward last.

// The start order for pre and post.
// ORDER-LABEL: func.func @step(
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.0", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.1", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.2", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.3", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.4", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.5", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.0", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.1", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.2", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.3", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.4", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.5", loom.phase = #loom.phase<forward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.5", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.4", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.5", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.3", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.4", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.2", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.3", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.1", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.2", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "decoder.layers.0", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.1", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.5", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.0", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.4", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.5", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.3", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.4", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.2", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.3", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.1", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.2", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.all_gather_start {{.*}}loom.module = "encoder.layers.0", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.1", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start
// ORDER: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.0", loom.phase = #loom.phase<backward>
// ORDER-NOT: _start

// pre: each target right after the current unit's backward all-gather
// completes; the root (not resharded, no backward all-gather) issues dec5
// before its first backward op.
// PRE-LABEL: func.func @step(
// PRE: loom.aten "aten::view.default"(%arg12) {{.*}}loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "decoder.layers.5", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::ones_like.default"
// PRE: loom.wait {{.*}}loom.module = "decoder.layers.5", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg11)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "decoder.layers.4", loom.phase = #loom.phase<backward>
// PRE: loom.wait {{.*}}loom.module = "decoder.layers.4", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg10)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "decoder.layers.3", loom.phase = #loom.phase<backward>
// PRE: loom.wait {{.*}}loom.module = "decoder.layers.3", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg9)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "decoder.layers.2", loom.phase = #loom.phase<backward>
// PRE: loom.wait {{.*}}loom.module = "decoder.layers.2", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg8)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "decoder.layers.1", loom.phase = #loom.phase<backward>
// PRE: loom.wait {{.*}}loom.module = "decoder.layers.1", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg7)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "decoder.layers.0", loom.phase = #loom.phase<backward>
// PRE: loom.wait {{.*}}loom.module = "decoder.layers.0", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg5)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.5", loom.phase = #loom.phase<backward>
// PRE: loom.wait {{.*}}loom.module = "encoder.layers.5", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg4)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.4", loom.phase = #loom.phase<backward>
// PRE: loom.wait {{.*}}loom.module = "encoder.layers.4", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg3)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.3", loom.phase = #loom.phase<backward>
// PRE: loom.wait {{.*}}loom.module = "encoder.layers.3", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg2)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.2", loom.phase = #loom.phase<backward>
// PRE: loom.wait {{.*}}loom.module = "encoder.layers.2", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg1)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.1", loom.phase = #loom.phase<backward>
// PRE: loom.wait {{.*}}loom.module = "encoder.layers.1", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"(%arg0)
// PRE-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.0", loom.phase = #loom.phase<backward>

// post: each target right before the current unit's reduce-scatter.
// POST-LABEL: func.func @step(
// POST: loom.aten "aten::view.default"(%arg11) {{.*}}loom.module = "decoder.layers.4", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "decoder.layers.4", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.5", loom.phase = #loom.phase<backward>
// POST: loom.aten "aten::view.default"(%arg10) {{.*}}loom.module = "decoder.layers.3", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "decoder.layers.3", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.4", loom.phase = #loom.phase<backward>
// POST: loom.aten "aten::view.default"(%arg9) {{.*}}loom.module = "decoder.layers.2", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "decoder.layers.2", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.3", loom.phase = #loom.phase<backward>
// POST: loom.aten "aten::view.default"(%arg8) {{.*}}loom.module = "decoder.layers.1", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "decoder.layers.1", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.2", loom.phase = #loom.phase<backward>
// POST: loom.aten "aten::view.default"(%arg7) {{.*}}loom.module = "decoder.layers.0", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "decoder.layers.0", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.1", loom.phase = #loom.phase<backward>
// POST: loom.aten "aten::view.default"(%arg5) {{.*}}loom.module = "encoder.layers.5", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.5", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.0", loom.phase = #loom.phase<backward>
// POST: loom.aten "aten::view.default"(%arg4) {{.*}}loom.module = "encoder.layers.4", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.4", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.5", loom.phase = #loom.phase<backward>
// POST: loom.aten "aten::view.default"(%arg3) {{.*}}loom.module = "encoder.layers.3", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.3", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.4", loom.phase = #loom.phase<backward>
// POST: loom.aten "aten::view.default"(%arg2) {{.*}}loom.module = "encoder.layers.2", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.2", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.3", loom.phase = #loom.phase<backward>
// POST: loom.aten "aten::view.default"(%arg1) {{.*}}loom.module = "encoder.layers.1", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.1", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.2", loom.phase = #loom.phase<backward>
// POST: loom.aten "aten::view.default"(%arg0) {{.*}}loom.module = "encoder.layers.0", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.all_gather_start {{.*}}loom.module = "encoder.layers.0", loom.phase = #loom.phase<backward>
// POST-NEXT: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.1", loom.phase = #loom.phase<backward>

// none: each backward all-gather stays at its unit's first backward op.
// NONE-LABEL: func.func @step(
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.0", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.1", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.2", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.3", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.4", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.5", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.0", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.1", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.2", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.3", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.4", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.5", loom.phase = #loom.phase<forward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.5", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.5", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.4", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.4", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.3", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.3", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.2", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.2", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.1", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.1", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "decoder.layers.0", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "decoder.layers.0", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.5", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.5", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.4", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.4", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.3", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.3", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.2", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.2", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.1", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.1", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.all_gather_start {{.*}}loom.module = "encoder.layers.0", loom.phase = #loom.phase<backward>
// NONE-NOT: _start
// NONE: loom.reduce_scatter_start {{.*}}loom.module = "encoder.layers.0", loom.phase = #loom.phase<backward>
// NONE-NOT: _start

func.func @step(%w0: tensor<4x4xf32> {loom.name = "encoder.layers.0.linear.weight", loom.role = #loom.role<parameter>},
    %w1: tensor<4x4xf32> {loom.name = "encoder.layers.1.linear.weight", loom.role = #loom.role<parameter>},
    %w2: tensor<4x4xf32> {loom.name = "encoder.layers.2.linear.weight", loom.role = #loom.role<parameter>},
    %w3: tensor<4x4xf32> {loom.name = "encoder.layers.3.linear.weight", loom.role = #loom.role<parameter>},
    %w4: tensor<4x4xf32> {loom.name = "encoder.layers.4.linear.weight", loom.role = #loom.role<parameter>},
    %w5: tensor<4x4xf32> {loom.name = "encoder.layers.5.linear.weight", loom.role = #loom.role<parameter>},
    %w6: tensor<4x4xf32> {loom.name = "encoder.norm.weight", loom.role = #loom.role<parameter>},
    %w7: tensor<4x4xf32> {loom.name = "decoder.layers.0.linear.weight", loom.role = #loom.role<parameter>},
    %w8: tensor<4x4xf32> {loom.name = "decoder.layers.1.linear.weight", loom.role = #loom.role<parameter>},
    %w9: tensor<4x4xf32> {loom.name = "decoder.layers.2.linear.weight", loom.role = #loom.role<parameter>},
    %w10: tensor<4x4xf32> {loom.name = "decoder.layers.3.linear.weight", loom.role = #loom.role<parameter>},
    %w11: tensor<4x4xf32> {loom.name = "decoder.layers.4.linear.weight", loom.role = #loom.role<parameter>},
    %w12: tensor<4x4xf32> {loom.name = "decoder.layers.5.linear.weight", loom.role = #loom.role<parameter>},
    %w13: tensor<4x4xf32> {loom.name = "decoder.norm.weight", loom.role = #loom.role<parameter>},
    %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "encoder.layers.0.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "encoder.layers.1.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "encoder.layers.2.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "encoder.layers.3.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "encoder.layers.4.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "encoder.layers.5.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "encoder.norm.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "decoder.layers.0.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "decoder.layers.1.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "decoder.layers.2.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "decoder.layers.3.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "decoder.layers.4.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "decoder.layers.5.linear.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "decoder.norm.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "encoder.layers.0.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m0 = loom.aten "aten::mm.default"(%x, %t0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.0.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r0 = loom.aten "aten::relu.default"(%m0) {args = [#loom.arg<0>], loom.module = "encoder.layers.0", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "encoder.layers.1.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = loom.aten "aten::mm.default"(%r0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.1.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r1 = loom.aten "aten::relu.default"(%m1) {args = [#loom.arg<0>], loom.module = "encoder.layers.1", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t2 = loom.aten "aten::t.default"(%w2) {args = [#loom.arg<0>], loom.module = "encoder.layers.2.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = loom.aten "aten::mm.default"(%r1, %t2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.2.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r2 = loom.aten "aten::relu.default"(%m2) {args = [#loom.arg<0>], loom.module = "encoder.layers.2", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t3 = loom.aten "aten::t.default"(%w3) {args = [#loom.arg<0>], loom.module = "encoder.layers.3.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m3 = loom.aten "aten::mm.default"(%r2, %t3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.3.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r3 = loom.aten "aten::relu.default"(%m3) {args = [#loom.arg<0>], loom.module = "encoder.layers.3", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t4 = loom.aten "aten::t.default"(%w4) {args = [#loom.arg<0>], loom.module = "encoder.layers.4.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m4 = loom.aten "aten::mm.default"(%r3, %t4) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.4.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r4 = loom.aten "aten::relu.default"(%m4) {args = [#loom.arg<0>], loom.module = "encoder.layers.4", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t5 = loom.aten "aten::t.default"(%w5) {args = [#loom.arg<0>], loom.module = "encoder.layers.5.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m5 = loom.aten "aten::mm.default"(%r4, %t5) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.5.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r5 = loom.aten "aten::relu.default"(%m5) {args = [#loom.arg<0>], loom.module = "encoder.layers.5", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t6 = loom.aten "aten::t.default"(%w6) {args = [#loom.arg<0>], loom.module = "encoder.norm", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m6 = loom.aten "aten::mm.default"(%r5, %t6) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.norm", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t7 = loom.aten "aten::t.default"(%w7) {args = [#loom.arg<0>], loom.module = "decoder.layers.0.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m7 = loom.aten "aten::mm.default"(%m6, %t7) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.0.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r7 = loom.aten "aten::relu.default"(%m7) {args = [#loom.arg<0>], loom.module = "decoder.layers.0", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t8 = loom.aten "aten::t.default"(%w8) {args = [#loom.arg<0>], loom.module = "decoder.layers.1.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m8 = loom.aten "aten::mm.default"(%r7, %t8) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.1.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r8 = loom.aten "aten::relu.default"(%m8) {args = [#loom.arg<0>], loom.module = "decoder.layers.1", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t9 = loom.aten "aten::t.default"(%w9) {args = [#loom.arg<0>], loom.module = "decoder.layers.2.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m9 = loom.aten "aten::mm.default"(%r8, %t9) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.2.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r9 = loom.aten "aten::relu.default"(%m9) {args = [#loom.arg<0>], loom.module = "decoder.layers.2", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t10 = loom.aten "aten::t.default"(%w10) {args = [#loom.arg<0>], loom.module = "decoder.layers.3.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m10 = loom.aten "aten::mm.default"(%r9, %t10) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.3.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r10 = loom.aten "aten::relu.default"(%m10) {args = [#loom.arg<0>], loom.module = "decoder.layers.3", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t11 = loom.aten "aten::t.default"(%w11) {args = [#loom.arg<0>], loom.module = "decoder.layers.4.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m11 = loom.aten "aten::mm.default"(%r10, %t11) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.4.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r11 = loom.aten "aten::relu.default"(%m11) {args = [#loom.arg<0>], loom.module = "decoder.layers.4", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t12 = loom.aten "aten::t.default"(%w12) {args = [#loom.arg<0>], loom.module = "decoder.layers.5.linear", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m12 = loom.aten "aten::mm.default"(%r11, %t12) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.5.linear", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r12 = loom.aten "aten::relu.default"(%m12) {args = [#loom.arg<0>], loom.module = "decoder.layers.5", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t13 = loom.aten "aten::t.default"(%w13) {args = [#loom.arg<0>], loom.module = "decoder.norm", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m13 = loom.aten "aten::mm.default"(%r12, %t13) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.norm", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%m13) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [2, 4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<2x4xf32>
  %gt13 = loom.aten "aten::t.default"(%g) {args = [#loom.arg<0>], loom.module = "decoder.norm", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw13 = loom.aten "aten::mm.default"(%gt13, %r12) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.norm", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt13 = loom.aten "aten::t.default"(%t13) {args = [#loom.arg<0>], loom.module = "decoder.norm", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh13 = loom.aten "aten::mm.default"(%g, %tt13) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.norm", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr12 = loom.aten "aten::threshold_backward.default"(%gh13, %r12) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "decoder.layers.5", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt12 = loom.aten "aten::t.default"(%gr12) {args = [#loom.arg<0>], loom.module = "decoder.layers.5.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw12 = loom.aten "aten::mm.default"(%gt12, %r11) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.5.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt12 = loom.aten "aten::t.default"(%t12) {args = [#loom.arg<0>], loom.module = "decoder.layers.5.linear", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh12 = loom.aten "aten::mm.default"(%gr12, %tt12) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.5.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr11 = loom.aten "aten::threshold_backward.default"(%gh12, %r11) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "decoder.layers.4", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt11 = loom.aten "aten::t.default"(%gr11) {args = [#loom.arg<0>], loom.module = "decoder.layers.4.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw11 = loom.aten "aten::mm.default"(%gt11, %r10) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.4.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt11 = loom.aten "aten::t.default"(%t11) {args = [#loom.arg<0>], loom.module = "decoder.layers.4.linear", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh11 = loom.aten "aten::mm.default"(%gr11, %tt11) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.4.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr10 = loom.aten "aten::threshold_backward.default"(%gh11, %r10) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "decoder.layers.3", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt10 = loom.aten "aten::t.default"(%gr10) {args = [#loom.arg<0>], loom.module = "decoder.layers.3.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw10 = loom.aten "aten::mm.default"(%gt10, %r9) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.3.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt10 = loom.aten "aten::t.default"(%t10) {args = [#loom.arg<0>], loom.module = "decoder.layers.3.linear", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh10 = loom.aten "aten::mm.default"(%gr10, %tt10) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.3.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr9 = loom.aten "aten::threshold_backward.default"(%gh10, %r9) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "decoder.layers.2", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt9 = loom.aten "aten::t.default"(%gr9) {args = [#loom.arg<0>], loom.module = "decoder.layers.2.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw9 = loom.aten "aten::mm.default"(%gt9, %r8) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.2.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt9 = loom.aten "aten::t.default"(%t9) {args = [#loom.arg<0>], loom.module = "decoder.layers.2.linear", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh9 = loom.aten "aten::mm.default"(%gr9, %tt9) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.2.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr8 = loom.aten "aten::threshold_backward.default"(%gh9, %r8) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "decoder.layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt8 = loom.aten "aten::t.default"(%gr8) {args = [#loom.arg<0>], loom.module = "decoder.layers.1.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw8 = loom.aten "aten::mm.default"(%gt8, %r7) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.1.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt8 = loom.aten "aten::t.default"(%t8) {args = [#loom.arg<0>], loom.module = "decoder.layers.1.linear", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh8 = loom.aten "aten::mm.default"(%gr8, %tt8) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.1.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr7 = loom.aten "aten::threshold_backward.default"(%gh8, %r7) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "decoder.layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt7 = loom.aten "aten::t.default"(%gr7) {args = [#loom.arg<0>], loom.module = "decoder.layers.0.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw7 = loom.aten "aten::mm.default"(%gt7, %m6) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.0.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt7 = loom.aten "aten::t.default"(%t7) {args = [#loom.arg<0>], loom.module = "decoder.layers.0.linear", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh7 = loom.aten "aten::mm.default"(%gr7, %tt7) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "decoder.layers.0.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gt6 = loom.aten "aten::t.default"(%gh7) {args = [#loom.arg<0>], loom.module = "encoder.norm", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw6 = loom.aten "aten::mm.default"(%gt6, %r5) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.norm", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt6 = loom.aten "aten::t.default"(%t6) {args = [#loom.arg<0>], loom.module = "encoder.norm", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh6 = loom.aten "aten::mm.default"(%gh7, %tt6) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.norm", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr5 = loom.aten "aten::threshold_backward.default"(%gh6, %r5) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "encoder.layers.5", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt5 = loom.aten "aten::t.default"(%gr5) {args = [#loom.arg<0>], loom.module = "encoder.layers.5.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw5 = loom.aten "aten::mm.default"(%gt5, %r4) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.5.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt5 = loom.aten "aten::t.default"(%t5) {args = [#loom.arg<0>], loom.module = "encoder.layers.5.linear", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh5 = loom.aten "aten::mm.default"(%gr5, %tt5) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.5.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr4 = loom.aten "aten::threshold_backward.default"(%gh5, %r4) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "encoder.layers.4", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt4 = loom.aten "aten::t.default"(%gr4) {args = [#loom.arg<0>], loom.module = "encoder.layers.4.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw4 = loom.aten "aten::mm.default"(%gt4, %r3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.4.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt4 = loom.aten "aten::t.default"(%t4) {args = [#loom.arg<0>], loom.module = "encoder.layers.4.linear", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh4 = loom.aten "aten::mm.default"(%gr4, %tt4) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.4.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr3 = loom.aten "aten::threshold_backward.default"(%gh4, %r3) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "encoder.layers.3", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt3 = loom.aten "aten::t.default"(%gr3) {args = [#loom.arg<0>], loom.module = "encoder.layers.3.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw3 = loom.aten "aten::mm.default"(%gt3, %r2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.3.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt3 = loom.aten "aten::t.default"(%t3) {args = [#loom.arg<0>], loom.module = "encoder.layers.3.linear", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh3 = loom.aten "aten::mm.default"(%gr3, %tt3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.3.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr2 = loom.aten "aten::threshold_backward.default"(%gh3, %r2) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "encoder.layers.2", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt2 = loom.aten "aten::t.default"(%gr2) {args = [#loom.arg<0>], loom.module = "encoder.layers.2.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw2 = loom.aten "aten::mm.default"(%gt2, %r1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.2.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt2 = loom.aten "aten::t.default"(%t2) {args = [#loom.arg<0>], loom.module = "encoder.layers.2.linear", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh2 = loom.aten "aten::mm.default"(%gr2, %tt2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.2.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr1 = loom.aten "aten::threshold_backward.default"(%gh2, %r1) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "encoder.layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt1 = loom.aten "aten::t.default"(%gr1) {args = [#loom.arg<0>], loom.module = "encoder.layers.1.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw1 = loom.aten "aten::mm.default"(%gt1, %r0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.1.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt1 = loom.aten "aten::t.default"(%t1) {args = [#loom.arg<0>], loom.module = "encoder.layers.1.linear", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh1 = loom.aten "aten::mm.default"(%gr1, %tt1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.1.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr0 = loom.aten "aten::threshold_backward.default"(%gh1, %r0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "encoder.layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt0 = loom.aten "aten::t.default"(%gr0) {args = [#loom.arg<0>], loom.module = "encoder.layers.0.linear", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw0 = loom.aten "aten::mm.default"(%gt0, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "encoder.layers.0.linear", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  return %l, %gw0, %gw1, %gw2, %gw3, %gw4, %gw5, %gw6, %gw7, %gw8, %gw9, %gw10, %gw11, %gw12, %gw13 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
