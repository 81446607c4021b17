// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json" | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json report=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=311296" | FileCheck %s --check-prefix=LIMIT
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=304KiB report=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LIMIT-REPORT
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json max-in-flight=1" | FileCheck %s --check-prefix=ONE
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json max-in-flight=1 report=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ONE-REPORT
// The order depends only on the IR and the options (every rank computes
// the same one):
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=311296" > %t.1
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=311296" > %t.2
// RUN: diff %t.1 %t.2
// The bounds decide the memory checks as sweeping the whole completion
// every time does:
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=311296 sweep-every-check=true" > %t.3
// RUN: diff %t.1 %t.3
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=304KiB report=true sweep-every-check=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SWEEP-REPORT

// Three FSDP-like units on 4 ranks, on Inputs/round-device.json (fp32
// 1e12 FLOP/s, 1e11 B/s, 1 us per op; intra-node link 1e10 B/s, 1 us):
//
// - each all-gather of a 128x128 fp32 weight (65536 bytes out) is a ring
//   of 4: 3 * 1 us + 3/4 * 65536 B / 1e10 B/s = 7.9152 us;
// - each mm 128x128x128 is compute-bound: 4194304 FLOP / 1e12 + 1 us
//   = 5.194304 us.
//
// Program order serializes them: 3 * (7.9152 + 5.194304) = 39.328512 us,
// all 23.7456 us of communication exposed.
//
// Scheduled (max-in-flight 2, no limit): s0 and s1 start at 0 (s1 queued
// behind s0 on the all-gather stream: [7.9152, 15.8304]); waiting s0 at
// 7.9152 frees a slot, so s2 is issued then and runs [15.8304, 23.7456].
// mm0 ends at 13.109504, the wait for s1 blocks 2.720896 us, mm1 ends at
// 21.024704, the wait for s2 blocks 2.720896, mm2 ends at 28.939904 us.
// Exposed: 7.9152 + 2 * 2.720896 = 13.356992 us.
//
// Memory: the weights' shards and x are persistent, 3 * 16384 + 65536 =
// 114688 bytes. In program order at most three 65536-byte activations are
// live (h0, g1, h1 at mm1): 311296 bytes. Prefetching s2 during mm1 makes
// it four: 376832 bytes.

// REPORT-LABEL: === loom-schedule @three on round ===
// REPORT-NEXT:   program order:  step 39.329 us, exposed communication 23.746 us, peak 311296 B
// REPORT-NEXT:   scheduled:      step 28.940 us, exposed communication 13.357 us, peak 376832 B
// REPORT-NEXT:   kept:           scheduled (limit none, max-in-flight 2)
// CHECK-LABEL: func.func @three
// CHECK:      %[[F0:.*]] = loom.all_gather_start %arg0
// CHECK-NEXT: %[[F1:.*]] = loom.all_gather_start %arg1
// CHECK-NEXT: %[[G0:.*]] = loom.wait %[[F0]]
// CHECK-NEXT: %[[F2:.*]] = loom.all_gather_start %arg2
// CHECK-NEXT: %[[H0:.*]] = loom.aten "aten::mm.default"(%arg3, %[[G0]])
// CHECK-NEXT: %[[G1:.*]] = loom.wait %[[F1]]
// CHECK-NEXT: %[[H1:.*]] = loom.aten "aten::mm.default"(%[[H0]], %[[G1]])
// CHECK-NEXT: %[[G2:.*]] = loom.wait %[[F2]]
// CHECK-NEXT: loom.aten "aten::mm.default"(%[[H1]], %[[G2]])

// With the limit at program order's peak, s1 may still be prefetched
// during mm0 (g0, g1, h0: three buffers) but s2 may not be during mm1: it
// is issued after mm1. s0 [0, 7.9152], s1 [7.9152, 15.8304], mm0 ends
// 13.109504, wait s1 blocks 2.720896, mm1 ends 21.024704, s2 runs
// [21.024704, 28.939904] fully exposed, mm2 ends 34.134208.
// Exposed: 7.9152 + 2.720896 + 7.9152 = 18.551296 us.

// LIMIT-REPORT-LABEL: === loom-schedule @three on round ===
// LIMIT-REPORT-NEXT:   program order:  step 39.329 us, exposed communication 23.746 us, peak 311296 B
// LIMIT-REPORT-NEXT:   scheduled:      step 34.134 us, exposed communication 18.551 us, peak 311296 B
// LIMIT-REPORT-NEXT:   kept:           scheduled (limit 311296 B, max-in-flight 2)
// LIMIT-REPORT-NEXT:   memory checks:  3 admitted and 3 refused by the bounds, 0 swept
// SWEEP-REPORT-LABEL: === loom-schedule @three on round ===
// SWEEP-REPORT:         scheduled:      step 34.134 us, exposed communication 18.551 us, peak 311296 B
// SWEEP-REPORT:         memory checks:  0 admitted and 0 refused by the bounds, 4 swept
// LIMIT-LABEL: func.func @three
// LIMIT:      %[[F0:.*]] = loom.all_gather_start %arg0
// LIMIT-NEXT: %[[F1:.*]] = loom.all_gather_start %arg1
// LIMIT-NEXT: %[[G0:.*]] = loom.wait %[[F0]]
// LIMIT-NEXT: %[[H0:.*]] = loom.aten "aten::mm.default"(%arg3, %[[G0]])
// LIMIT-NEXT: %[[G1:.*]] = loom.wait %[[F1]]
// LIMIT-NEXT: %[[H1:.*]] = loom.aten "aten::mm.default"(%[[H0]], %[[G1]])
// LIMIT-NEXT: %[[F2:.*]] = loom.all_gather_start %arg2
// LIMIT-NEXT: %[[G2:.*]] = loom.wait %[[F2]]

// One collective in flight: each all-gather is issued right after the
// previous wait, one unit ahead, and the stream is as busy as with two.
// ONE-REPORT-LABEL: === loom-schedule @three on round ===
// ONE-REPORT:        scheduled:      step 28.940 us, exposed communication 13.357 us, peak 376832 B
// ONE-LABEL: func.func @three
// ONE:      %[[F0:.*]] = loom.all_gather_start %arg0
// ONE-NEXT: %[[G0:.*]] = loom.wait %[[F0]]
// ONE-NEXT: %[[F1:.*]] = loom.all_gather_start %arg1
// ONE-NEXT: loom.aten "aten::mm.default"(%arg3, %[[G0]])
// ONE-NEXT: %[[G1:.*]] = loom.wait %[[F1]]
// ONE-NEXT: %[[F2:.*]] = loom.all_gather_start %arg2

loom.mesh @dp shape [4] axes ["shard"]
func.func @three(%w0: tensor<32x128xf32> {loom.name = "l0.w", loom.role = #loom.role<parameter>},
                 %w1: tensor<32x128xf32> {loom.name = "l1.w", loom.role = #loom.role<parameter>},
                 %w2: tensor<32x128xf32> {loom.name = "l2.w", loom.role = #loom.role<parameter>},
                 %x: tensor<128x128xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<128x128xf32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %f0 = loom.all_gather_start %w0 on @dp axes ["shard"] dim 0 : tensor<32x128xf32> -> !loom.future<tensor<128x128xf32>>
  %g0 = loom.wait %f0 : !loom.future<tensor<128x128xf32>> -> tensor<128x128xf32>
  %h0 = loom.aten "aten::mm.default"(%x, %g0) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %f1 = loom.all_gather_start %w1 on @dp axes ["shard"] dim 0 : tensor<32x128xf32> -> !loom.future<tensor<128x128xf32>>
  %g1 = loom.wait %f1 : !loom.future<tensor<128x128xf32>> -> tensor<128x128xf32>
  %h1 = loom.aten "aten::mm.default"(%h0, %g1) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %f2 = loom.all_gather_start %w2 on @dp axes ["shard"] dim 0 : tensor<32x128xf32> -> !loom.future<tensor<128x128xf32>>
  %g2 = loom.wait %f2 : !loom.future<tensor<128x128xf32>> -> tensor<128x128xf32>
  %h2 = loom.aten "aten::mm.default"(%h1, %g2) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  return %h2 : tensor<128x128xf32>
}

// -----

// Gradients: a reduce-scatter leaves as soon as its gradient exists and
// its wait moves toward the optimizer update that needs it. The second
// gradient's mm does not depend on the all-gather, so it runs while the
// all-gather is in flight and its reduce-scatter overlaps the first
// gradient's mm. Each update overwrites its parameter in place, after the
// all-gather reading %w0 has been waited.
//
// SGD update: 3 * 16384 B / 1e11 + 1 us = 1.49152 us.
// Program order: ag [0, 7.9152], mm 13.109504, rs_a [.., 21.024704]
// exposed, mm 26.219008, rs_b [.., 34.134208] exposed, two updates:
// 37.117248 us, 23.7456 us exposed.
// Scheduled: ag on the all-gather stream [0, 7.9152]; mm_b 0 -> 5.194304;
// rs_b on the reduce-scatter stream [5.194304, 13.109504]; the wait for ag
// blocks 2.720896 us; mm_a 7.9152 -> 13.109504; rs_b is done by then (its
// wait is free); rs_a [13.109504, 21.024704] blocks 7.9152 us; updates end
// at 24.007744 us. Exposed: 2.720896 + 7.9152 = 10.636096 us.

// REPORT-LABEL: === loom-schedule @grads on round ===
// REPORT-NEXT:   program order:  step 37.117 us, exposed communication 23.746 us, peak 229376 B
// REPORT-NEXT:   scheduled:      step 24.008 us, exposed communication 10.636 us
// CHECK-LABEL: func.func @grads
// CHECK:      %[[AG:.*]] = loom.all_gather_start %arg0
// CHECK-NEXT: %[[GB:.*]] = loom.aten "aten::mm.default"(%arg2, %arg2)
// CHECK-NEXT: %[[RB:.*]] = loom.reduce_scatter_start %[[GB]]
// CHECK-NEXT: %[[W:.*]] = loom.wait %[[AG]]
// CHECK-NEXT: %[[GA:.*]] = loom.aten "aten::mm.default"(%arg2, %[[W]])
// CHECK-NEXT: %[[SB:.*]] = loom.wait %[[RB]]
// CHECK-NEXT: %[[RA:.*]] = loom.reduce_scatter_start %[[GA]]
// CHECK-NEXT: %[[SA:.*]] = loom.wait %[[RA]]
// CHECK-NEXT: loom.optimizer_update #loom.sgd<> param %arg0 grad %[[SA]]
// CHECK-NEXT: loom.optimizer_update #loom.sgd<> param %arg1 grad %[[SB]]

loom.mesh @dp shape [4] axes ["shard"]
func.func @grads(%w0: tensor<32x128xf32> {loom.name = "l0.w", loom.role = #loom.role<parameter>},
                 %w1: tensor<32x128xf32> {loom.name = "l1.w", loom.role = #loom.role<parameter>},
                 %x: tensor<128x128xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<32x128xf32> {loom.role = #loom.role<param_update>, loom.target = "l0.w"},
        tensor<32x128xf32> {loom.role = #loom.role<param_update>, loom.target = "l1.w"})
    attributes {loom.step, loom.optimizer = #loom.sgd<>} {
  %f = loom.all_gather_start %w0 on @dp axes ["shard"] dim 0 : tensor<32x128xf32> -> !loom.future<tensor<128x128xf32>>
  %g = loom.wait %f : !loom.future<tensor<128x128xf32>> -> tensor<128x128xf32>
  %ga = loom.aten "aten::mm.default"(%x, %g) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %ra = loom.reduce_scatter_start %ga on @dp axes ["shard"] dim 0 reduce <avg> : tensor<128x128xf32> -> !loom.future<tensor<32x128xf32>>
  %sa = loom.wait %ra : !loom.future<tensor<32x128xf32>> -> tensor<32x128xf32>
  %gb = loom.aten "aten::mm.default"(%x, %x) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %rb = loom.reduce_scatter_start %gb on @dp axes ["shard"] dim 0 reduce <avg> : tensor<128x128xf32> -> !loom.future<tensor<32x128xf32>>
  %sb = loom.wait %rb : !loom.future<tensor<32x128xf32>> -> tensor<32x128xf32>
  %u0 = loom.optimizer_update #loom.sgd<> param %w0 grad %sa state [] : tensor<32x128xf32>
  %u1 = loom.optimizer_update #loom.sgd<> param %w1 grad %sb state [] : tensor<32x128xf32>
  return %u0, %u1 : tensor<32x128xf32>, tensor<32x128xf32>
}
