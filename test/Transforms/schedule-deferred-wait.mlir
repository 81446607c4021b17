// RUN: loom-opt %s --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=245760 report=true" 2>&1 | FileCheck %s
// RUN: loom-opt %s --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=245760 sweep-every-check=true report=true" 2>&1 | FileCheck %s

// Taking a collective start in program order changes the completion: its
// wait then goes right before its first dependent (the optimizer update)
// instead of where program order has it, so the reduce-scatter holds its
// 64 KiB input and 16 KiB buffer across what runs in between. That is a
// move like any other and must be checked against the limit; it was taken
// unchecked, and the scheduled step peaked at 311296 B under a 245760 B
// limit.
//
// Bytes: %x, %w0, %w1 are persistent (64 + 16 + 16 KiB = 96 KiB); each
// 128x128 f32 is 64 KiB, each shard 16 KiB. Program order peaks at %gb:
// %sa + %h + %gb = 144 KiB, 240 KiB (245760 B) in all. With %sa's wait
// deferred to its update, %gb would run beside %ga and the buffer: 64 + 16
// + 64 + 64 = 208 KiB, 304 KiB (311296 B) in all. So the reduce-scatter of
// %ga is waited at once, and only %h runs ahead of it (%ga + %h: 128 KiB).

// CHECK-LABEL: === loom-schedule @deferred on round ===
// CHECK-NEXT:   program order:  step 31.513 us, exposed communication 15.830 us, peak 245760 B
// CHECK-NEXT:   scheduled:      step 30.021 us, exposed communication 14.339 us, peak 245760 B
// CHECK-NEXT:   kept:           scheduled (limit 245760 B, max-in-flight 2)
// CHECK-LABEL: func.func @deferred
// CHECK:      %[[GA:.*]] = loom.aten "aten::mm.default"(%arg2, %arg2)
// CHECK-NEXT: %[[H:.*]] = loom.aten "aten::relu.default"(%arg2)
// CHECK-NEXT: %[[RA:.*]] = loom.reduce_scatter_start %[[GA]]
// CHECK-NEXT: %[[SA:.*]] = loom.wait %[[RA]]
// CHECK-NEXT: %[[GB:.*]] = loom.aten "aten::mm.default"(%[[H]], %arg2)
// CHECK-NEXT: %[[RB:.*]] = loom.reduce_scatter_start %[[GB]]
// CHECK-NEXT: loom.optimizer_update #loom.sgd<> param %arg0 grad %[[SA]]
// CHECK-NEXT: %[[SB:.*]] = loom.wait %[[RB]]
// CHECK-NEXT: loom.optimizer_update #loom.sgd<> param %arg1 grad %[[SB]]

loom.mesh @dp shape [4] axes ["shard"]
func.func @deferred(%w0: tensor<32x128xf32> {loom.name = "l0.w", loom.role = #loom.role<parameter>},
                    %w1: tensor<32x128xf32> {loom.name = "l1.w", loom.role = #loom.role<parameter>},
                    %x: tensor<128x128xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<32x128xf32> {loom.role = #loom.role<param_update>, loom.target = "l0.w"},
        tensor<32x128xf32> {loom.role = #loom.role<param_update>, loom.target = "l1.w"})
    attributes {loom.step, loom.optimizer = #loom.sgd<>} {
  %ga = loom.aten "aten::mm.default"(%x, %x) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %ra = loom.reduce_scatter_start %ga on @dp axes ["shard"] dim 0 reduce <avg> : tensor<128x128xf32> -> !loom.future<tensor<32x128xf32>>
  %sa = loom.wait %ra : !loom.future<tensor<32x128xf32>> -> tensor<32x128xf32>
  %h = loom.aten "aten::relu.default"(%x) {args = [#loom.arg<0>]} : (tensor<128x128xf32>) -> tensor<128x128xf32>
  %gb = loom.aten "aten::mm.default"(%h, %x) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %rb = loom.reduce_scatter_start %gb on @dp axes ["shard"] dim 0 reduce <avg> : tensor<128x128xf32> -> !loom.future<tensor<32x128xf32>>
  %sb = loom.wait %rb : !loom.future<tensor<32x128xf32>> -> tensor<32x128xf32>
  %u0 = loom.optimizer_update #loom.sgd<> param %w0 grad %sa state [] : tensor<32x128xf32>
  %u1 = loom.optimizer_update #loom.sgd<> param %w1 grad %sb state [] : tensor<32x128xf32>
  return %u0, %u1 : tensor<32x128xf32>, tensor<32x128xf32>
}
