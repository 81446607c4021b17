// loom-prefetch's default backward prefetch (bounded) issues the next unit's
// all-gather as early as it can without raising the step's predicted peak;
// pre issues it at the pre-backward point whatever it costs.
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch | FileCheck %s --check-prefix=BOUNDED
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch --loom-stats -o /dev/null 2>&1 | FileCheck %s --check-prefix=PEAK-BOUNDED
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="backward-prefetch=pre" | FileCheck %s --check-prefix=PRE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="backward-prefetch=pre" --loom-stats -o /dev/null 2>&1 | FileCheck %s --check-prefix=PEAK-PRE
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="backward-prefetch=none" --loom-stats -o /dev/null 2>&1 | FileCheck %s --check-prefix=PEAK-NONE

// Two units of one 4x4 weight each on 2 ranks (a rank holds a 2x4 shard,
// 32 bytes, and gathers 16 floats, 64 bytes; the all-gather's input is a
// view of the shard, so it holds nothing more). layers.1's backward first
// builds a 1024-byte temporary (%big, 64x4 floats) and reduces it; the step
// peaks while that reduction runs. Live then, besides the persistent 96
// bytes (the two shards and x): h0 32 (read by layers.1's weight gradient),
// the loss 4, the loss gradient 32, layers.1's gathered weight 64, %big 1024
// and the reduction's result 16: 1172 bytes of activations, 1268 in all.
//
// pre issues layers.0's backward all-gather right after layers.1's wait:
// its 64-byte buffer is live across the peak, 1332 bytes. bounded may not
// exceed 1268: moved before the repeat the buffer would sit on top of 1156
// live bytes (1220 > 1172), before the reduction on 1172, so the earliest
// place is right after the reduction, where %big is dead; the all-gather
// still runs across the rest of layers.1's backward.

//
// By the module and phase of what allocated them: layers.1's backward %big
// and the reduction (1040), layers.1's gathered weight (a collective's
// buffer, 64), the root's loss gradient (backward, 32) and h0 (layers.0's
// forward, 32), then the loss (4); pre adds layers.0's gathered weight.

// PEAK-NONE: predicted peak memory: 1268 bytes (persistent 96 + activations 1172, at 'aten::sum.dim_IntList' in 'layers.1')
// PEAK-NONE-NEXT: live at the peak: layers.1 (backward) 1040; layers.1 (collective) 64; <root> (backward) 32; layers.0 (forward) 32; 1 more 4;
// PEAK-BOUNDED: predicted peak memory: 1268 bytes (persistent 96 + activations 1172, at 'aten::sum.dim_IntList' in 'layers.1')
// PEAK-BOUNDED-NEXT: live at the peak: layers.1 (backward) 1040; layers.1 (collective) 64; <root> (backward) 32; layers.0 (forward) 32; 1 more 4;
// PEAK-PRE: predicted peak memory: 1332 bytes (persistent 96 + activations 1236, at 'aten::sum.dim_IntList' in 'layers.1')
// PEAK-PRE-NEXT: live at the peak: layers.1 (backward) 1040; layers.0 (collective) 64; layers.1 (collective) 64; <root> (backward) 32; 2 more 36;

// BOUNDED-LABEL: func.func @step(
// BOUNDED: loom.wait %{{.*}} {loom.module = "layers.1", loom.phase = #loom.phase<backward>}
// BOUNDED-NEXT: loom.aten "aten::view.default"
// BOUNDED-NEXT: loom.aten "aten::repeat.default"
// BOUNDED-NEXT: loom.aten "aten::sum.dim_IntList"
// BOUNDED-NEXT: loom.aten "aten::view.default"(%arg0)
// BOUNDED-NEXT: %[[G0:.*]] = loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// BOUNDED-NEXT: loom.aten "aten::mul.Tensor"
// BOUNDED: loom.reduce_scatter_start {{.*}}loom.module = "layers.1"
// BOUNDED: loom.wait %[[G0]]

// PRE-LABEL: func.func @step(
// PRE: loom.wait %{{.*}} {loom.module = "layers.1", loom.phase = #loom.phase<backward>}
// PRE-NEXT: loom.aten "aten::view.default"(%arg0)
// PRE-NEXT: %[[G0:.*]] = loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// PRE-NEXT: loom.aten "aten::view.default"
// PRE-NEXT: loom.aten "aten::repeat.default"
// PRE: loom.wait %[[G0]]

func.func @step(%w0: tensor<4x4xf32> {loom.name = "layers.0.weight", loom.role = #loom.role<parameter>},
                %w1: tensor<4x4xf32> {loom.name = "layers.1.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %h0 = loom.aten "aten::mm.default"(%x, %t0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %h1 = loom.aten "aten::mm.default"(%h0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%h1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %g = loom.aten "aten::ones_like.default"(%h1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %big = loom.aten "aten::repeat.default"(%g) {args = [#loom.arg<0>, [32, 1]], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<64x4xf32>
  %gs = loom.aten "aten::sum.dim_IntList"(%big) {args = [#loom.arg<0>, [0], true], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<64x4xf32>) -> tensor<1x4xf32>
  %gb = loom.aten "aten::mul.Tensor"(%g, %gs) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  %gt1 = loom.aten "aten::t.default"(%gb) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw1 = loom.aten "aten::mm.default"(%gt1, %h0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %gh0 = loom.aten "aten::mm.default"(%gb, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gt0 = loom.aten "aten::t.default"(%gh0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw0 = loom.aten "aten::mm.default"(%gt0, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  return %l, %gw0, %gw1 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
}
