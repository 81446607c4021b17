// RUN: loom-opt %s --split-input-file --loom-stats -o /dev/null 2>&1 | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-stats=json=true -o /dev/null 2>&1 | FileCheck %s --check-prefix=JSON
// The loomrt program each step lowers to (the region inlined, frees after
// last uses) predicts the same peak:
// RUN: rm -rf %t && split-file %s %t
// RUN: loom-compile %t/plain.mlir --optimizer=none --emit=mlir --summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=RT-PLAIN
// RUN: loom-compile %t/remat.mlir --optimizer=none --emit=mlir --summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=RT-REMAT
// RUN: loom-compile %t/transient.mlir --optimizer=none --emit=mlir --summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=RT-TRANSIENT

// Predicted peak memory of one step with and without activation
// checkpointing of layers.0, computed by hand.
//
// Two blocks, each mm -> relu -> mm, on a [16, 4] batch: x is 256 B, each
// weight (4x8 or 8x4) 128 B, persistent 256 + 4 * 128 = 768 B. The
// activations a0, h0, a1, h1 and the gradients gh*, ga* are [16, 8] f32,
// 512 B; o0, o1, go0 [16, 4], 256 B; each weight gradient 128 B; the loss
// and ones_like(loss) 4 B. Views (expand, t) allocate nothing.
//
// @plain (op index: storage [first, last op]):
//    0 a0 512 [0,1]    1 h0 512 [1,22]   2 o0 256 [2,15]   3 a1 512 [3,4]
//    4 h1 512 [4,13]   5 o1 256 [5,6]    6 l 4 [6,end]     7 one 4 [7,12]
//   10 gw1b 128 [10,end] 12 gh1 512 [12,13] 13 ga1 512 [13,17]
//   15 gw1a 128 [15,end] 17 go0 256 [17,21] 19 gw0b 128 [19,end]
//   21 gh0 512 [21,22]   22 ga0 512 [22,24] 24 gw0a 128 [24,end]
// Live at op 13 (layers.1's threshold_backward): h0 512 + o0 256 + h1 512
// + l 4 + gw1b 128 + gh1 512 + ga1 512 = 2436, the peak; 768 + 2436 = 3204.
//
// @remat recomputes a0 and h0 in backward, right before h0's first
// backward use (layers.0's t(h0)): the forward h0 lives [1,2] only. The
// region runs as steps 18 (the region: its inputs are read), 19 a0' 512
// [19,20], 20 h0' 512 [20,26] (yielded: the result's uses keep it), 21
// the yield. Live at op 13: 2436 - 512 = 1924. Inside the region: 516
// before it (l, gw1b, gw1a, go0), 1028 at a0', 1540 at h0' (the transient
// peak of the body, a0' and h0' both live), 1028 after it. Live at op 26
// (layers.0's threshold_backward): l 4 + gw1b, gw1a, gw0b 384 + h0' 512 +
// gh0 512 + ga0 512 = 1924 (go0 freed after op 25). The peak is 1924, first
// at op 13: 768 + 1924 = 2692, exactly 512 (h0) below @plain.

// What is live there, by the module and phase of the op that allocated it:
// in @plain layers.1's backward gw1b + gh1 + ga1 = 1152, layers.0's forward
// h0 + o0 = 768, layers.1's forward h1 512, the root's loss 4; in @remat
// layers.0's forward keeps only o0 (256).

// CHECK-LABEL: === loom-stats @plain ===
// CHECK: predicted peak memory: 3204 bytes (persistent 768 + activations 2436, at 'aten::threshold_backward.default' in 'layers.1')
// CHECK-NEXT: live at the peak: layers.1 (backward) 1152; layers.0 (forward) 768; layers.1 (forward) 512; <root> (forward) 4;
// CHECK-LABEL: === loom-stats @remat ===
// CHECK: predicted peak memory: 2692 bytes (persistent 768 + activations 1924, at 'aten::threshold_backward.default' in 'layers.1')
// CHECK-NEXT: live at the peak: layers.1 (backward) 1152; layers.1 (forward) 512; layers.0 (forward) 256; <root> (forward) 4;

// JSON: "function": "plain"
// JSON: "peak_activation_bytes": 2436,
// JSON: "function": "remat"
// JSON: "peak_activation_bytes": 1924,

// RT-PLAIN: predicted peak memory 3204 bytes (persistent 768 + activations 2436)
// RT-REMAT: predicted peak memory 2692 bytes (persistent 768 + activations 1924)

//--- plain.mlir

!act = tensor<16x8xf32>
!io = tensor<16x4xf32>
!wa = tensor<4x8xf32>
!wb = tensor<8x4xf32>
func.func @plain(%x: !io {loom.name = "x", loom.role = #loom.role<input>},
                 %w0a: !wa {loom.name = "layers.0.a.weight", loom.role = #loom.role<parameter>},
                 %w0b: !wb {loom.name = "layers.0.b.weight", loom.role = #loom.role<parameter>},
                 %w1a: !wa {loom.name = "layers.1.a.weight", loom.role = #loom.role<parameter>},
                 %w1b: !wb {loom.name = "layers.1.b.weight", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        !wa {loom.role = #loom.role<grad>, loom.target = "layers.0.a.weight"},
        !wb {loom.role = #loom.role<grad>, loom.target = "layers.0.b.weight"},
        !wa {loom.role = #loom.role<grad>, loom.target = "layers.1.a.weight"},
        !wb {loom.role = #loom.role<grad>, loom.target = "layers.1.b.weight"})
    attributes {loom.step} {
  %a0 = loom.aten "aten::mm.default"(%x, %w0a) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!io, !wa) -> !act
  %h0 = loom.aten "aten::relu.default"(%a0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!act) -> !act
  %o0 = loom.aten "aten::mm.default"(%h0, %w0b) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!act, !wb) -> !io
  %a1 = loom.aten "aten::mm.default"(%o0, %w1a) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (!io, !wa) -> !act
  %h1 = loom.aten "aten::relu.default"(%a1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (!act) -> !act
  %o1 = loom.aten "aten::mm.default"(%h1, %w1b) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (!act, !wb) -> !io
  %l = loom.aten "aten::sum.default"(%o1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (!io) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [16, 4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> !io
  %h1t = loom.aten "aten::t.default"(%h1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!act) -> tensor<8x16xf32>
  %gw1b = loom.aten "aten::mm.default"(%h1t, %g) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<8x16xf32>, !io) -> !wb
  %w1bt = loom.aten "aten::t.default"(%w1b) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!wb) -> !wa
  %gh1 = loom.aten "aten::mm.default"(%g, %w1bt) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!io, !wa) -> !act
  %ga1 = loom.aten "aten::threshold_backward.default"(%gh1, %h1) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!act, !act) -> !act
  %o0t = loom.aten "aten::t.default"(%o0) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!io) -> tensor<4x16xf32>
  %gw1a = loom.aten "aten::mm.default"(%o0t, %ga1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x16xf32>, !act) -> !wa
  %w1at = loom.aten "aten::t.default"(%w1a) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!wa) -> !wb
  %go0 = loom.aten "aten::mm.default"(%ga1, %w1at) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!act, !wb) -> !io
  %h0t = loom.aten "aten::t.default"(%h0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!act) -> tensor<8x16xf32>
  %gw0b = loom.aten "aten::mm.default"(%h0t, %go0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<8x16xf32>, !io) -> !wb
  %w0bt = loom.aten "aten::t.default"(%w0b) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!wb) -> !wa
  %gh0 = loom.aten "aten::mm.default"(%go0, %w0bt) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!io, !wa) -> !act
  %ga0 = loom.aten "aten::threshold_backward.default"(%gh0, %h0) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!act, !act) -> !act
  %xt = loom.aten "aten::t.default"(%x) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!io) -> tensor<4x16xf32>
  %gw0a = loom.aten "aten::mm.default"(%xt, %ga0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x16xf32>, !act) -> !wa
  return %l, %gw0a, %gw0b, %gw1a, %gw1b : tensor<f32>, !wa, !wb, !wa, !wb
}

// -----
//--- remat.mlir

!act = tensor<16x8xf32>
!io = tensor<16x4xf32>
!wa = tensor<4x8xf32>
!wb = tensor<8x4xf32>
func.func @remat(%x: !io {loom.name = "x", loom.role = #loom.role<input>},
                 %w0a: !wa {loom.name = "layers.0.a.weight", loom.role = #loom.role<parameter>},
                 %w0b: !wb {loom.name = "layers.0.b.weight", loom.role = #loom.role<parameter>},
                 %w1a: !wa {loom.name = "layers.1.a.weight", loom.role = #loom.role<parameter>},
                 %w1b: !wb {loom.name = "layers.1.b.weight", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        !wa {loom.role = #loom.role<grad>, loom.target = "layers.0.a.weight"},
        !wb {loom.role = #loom.role<grad>, loom.target = "layers.0.b.weight"},
        !wa {loom.role = #loom.role<grad>, loom.target = "layers.1.a.weight"},
        !wb {loom.role = #loom.role<grad>, loom.target = "layers.1.b.weight"})
    attributes {loom.step} {
  %a0 = loom.aten "aten::mm.default"(%x, %w0a) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!io, !wa) -> !act
  %h0 = loom.aten "aten::relu.default"(%a0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!act) -> !act
  %o0 = loom.aten "aten::mm.default"(%h0, %w0b) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!act, !wb) -> !io
  %a1 = loom.aten "aten::mm.default"(%o0, %w1a) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (!io, !wa) -> !act
  %h1 = loom.aten "aten::relu.default"(%a1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (!act) -> !act
  %o1 = loom.aten "aten::mm.default"(%h1, %w1b) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (!act, !wb) -> !io
  %l = loom.aten "aten::sum.default"(%o1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (!io) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [16, 4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> !io
  %h1t = loom.aten "aten::t.default"(%h1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!act) -> tensor<8x16xf32>
  %gw1b = loom.aten "aten::mm.default"(%h1t, %g) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<8x16xf32>, !io) -> !wb
  %w1bt = loom.aten "aten::t.default"(%w1b) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!wb) -> !wa
  %gh1 = loom.aten "aten::mm.default"(%g, %w1bt) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!io, !wa) -> !act
  %ga1 = loom.aten "aten::threshold_backward.default"(%gh1, %h1) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!act, !act) -> !act
  %o0t = loom.aten "aten::t.default"(%o0) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!io) -> tensor<4x16xf32>
  %gw1a = loom.aten "aten::mm.default"(%o0t, %ga1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x16xf32>, !act) -> !wa
  %w1at = loom.aten "aten::t.default"(%w1a) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!wa) -> !wb
  %go0 = loom.aten "aten::mm.default"(%ga1, %w1at) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (!act, !wb) -> !io
  %r = loom.recompute "layers.0" (%x, %w0a) : (!io, !wa) -> !act {
  ^bb0(%rx: !io, %rw: !wa):
    %ra = loom.aten "aten::mm.default"(%rx, %rw) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!io, !wa) -> !act
    %rh = loom.aten "aten::relu.default"(%ra) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!act) -> !act
    loom.yield %rh : !act
  } {loom.module = "layers.0", loom.phase = #loom.phase<backward>}
  %h0t = loom.aten "aten::t.default"(%r) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!act) -> tensor<8x16xf32>
  %gw0b = loom.aten "aten::mm.default"(%h0t, %go0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<8x16xf32>, !io) -> !wb
  %w0bt = loom.aten "aten::t.default"(%w0b) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!wb) -> !wa
  %gh0 = loom.aten "aten::mm.default"(%go0, %w0bt) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!io, !wa) -> !act
  %ga0 = loom.aten "aten::threshold_backward.default"(%gh0, %r) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!act, !act) -> !act
  %xt = loom.aten "aten::t.default"(%x) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!io) -> tensor<4x16xf32>
  %gw0a = loom.aten "aten::mm.default"(%xt, %ga0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x16xf32>, !act) -> !wa
  return %l, %gw0a, %gw0b, %gw1a, %gw1b : tensor<f32>, !wa, !wb, !wa, !wb
}

// -----
//--- transient.mlir

// @transient: the peak is reached inside a region, and the region yields a
// view. x [32, 4] 512 B and w [4, 4] 64 B are persistent (576 B); a, h, the
// recomputed ra, rh and the gradient e are [32, 4], 512 B; rs [32] 128 B;
// gw 64 B. Steps: 0 a [0,1], 1 h [1,2], 2 l 4 [2,end], 3 one 4 [3,12], 4 g
// (view), 5 the region, 6 ra [6,7], 7 rh [7,8], 8 rs [8,12] (its view rv is
// yielded, the result's view re is read by op 12), 9 rv, 10 the yield, 11
// re, 12 e [12,14], 13 xt, 14 gw [14,end]. Live: 512, 1024, 516, 8, 8, 8,
// 520, 1032 (ra + rh inside the region), 648, 136, 136, 136, 648, 516, 580:
// the peak is 1032 at the recomputed relu, 576 + 1032 = 1608. (Without the
// body's transient the peak would be 1024, in forward.)

// Live there: ra and rh, which the region computes in backward (1024), the
// loss l (forward) and one (backward), 4 B each.

// CHECK-LABEL: === loom-stats @transient ===
// CHECK: predicted peak memory: 1608 bytes (persistent 576 + activations 1032, at 'aten::relu.default' in 'blk', recomputed)
// CHECK-NEXT: live at the peak: blk (backward) 1024; <root> (backward) 4; <root> (forward) 4;
// RT-TRANSIENT: predicted peak memory 1608 bytes (persistent 576 + activations 1032)

func.func @transient(%x: tensor<32x4xf32> {loom.name = "x", loom.role = #loom.role<input>},
                     %w: tensor<4x4xf32> {loom.name = "blk.weight", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "blk.weight"})
    attributes {loom.step} {
  %a = loom.aten "aten::mm.default"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<32x4xf32>, tensor<4x4xf32>) -> tensor<32x4xf32>
  %h = loom.aten "aten::relu.default"(%a) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<32x4xf32>) -> tensor<32x4xf32>
  %l = loom.aten "aten::sum.default"(%h) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<32x4xf32>) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [32, 4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<32x4xf32>
  %r = loom.recompute "blk" (%x, %w) : (tensor<32x4xf32>, tensor<4x4xf32>) -> tensor<32x1xf32> {
  ^bb0(%rx: tensor<32x4xf32>, %rw: tensor<4x4xf32>):
    %ra = loom.aten "aten::mm.default"(%rx, %rw) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<32x4xf32>, tensor<4x4xf32>) -> tensor<32x4xf32>
    %rh = loom.aten "aten::relu.default"(%ra) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<32x4xf32>) -> tensor<32x4xf32>
    %rs = loom.aten "aten::sum.dim_IntList"(%rh) {args = [#loom.arg<0>, [1]], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<32x4xf32>) -> tensor<32xf32>
    %rv = loom.aten "aten::view.default"(%rs) {args = [#loom.arg<0>, [32, 1]], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<32xf32>) -> tensor<32x1xf32>
    loom.yield %rv : tensor<32x1xf32>
  } {loom.module = "blk", loom.phase = #loom.phase<backward>}
  %re = loom.aten "aten::expand.default"(%r) {args = [#loom.arg<0>, [32, 4]], loom.module = "blk", loom.phase = #loom.phase<backward>} : (tensor<32x1xf32>) -> tensor<32x4xf32>
  %e = loom.aten "aten::mul.Tensor"(%g, %re) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (tensor<32x4xf32>, tensor<32x4xf32>) -> tensor<32x4xf32>
  %xt = loom.aten "aten::t.default"(%x) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (tensor<32x4xf32>) -> tensor<4x32xf32>
  %gw = loom.aten "aten::mm.default"(%xt, %e) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (tensor<4x32xf32>, tensor<32x4xf32>) -> tensor<4x4xf32>
  return %l, %gw : tensor<f32>, tensor<4x4xf32>
}
