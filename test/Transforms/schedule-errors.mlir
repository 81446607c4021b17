// RUN: not loom-opt %s --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=250000" 2>&1 | FileCheck %s --check-prefix=LOW
// RUN: not loom-opt %s --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=lots" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not loom-opt %s --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=-1MiB" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not loom-opt %s --loom-schedule="device=%S/../Analysis/Inputs/round-device.json max-in-flight=0" 2>&1 | FileCheck %s --check-prefix=FLIGHT
// RUN: not loom-opt %s --loom-schedule="device=%S/../Analysis/Inputs/round-device.json algorithm=magic" 2>&1 | FileCheck %s --check-prefix=ALGO
// RUN: not loom-opt %s --loom-schedule="device=%S/no-such-device.json" 2>&1 | FileCheck %s --check-prefix=DEVICE
// RUN: not loom-opt %s --loom-compile-pipeline="dp=fsdp world-size=4 schedule=true max-in-flight=0" 2>&1 | FileCheck %s --check-prefix=PIPE

// The step's peak in program order is 311296 bytes, reached at the second
// mm (see schedule.mlir); a scheduler that only reorders cannot go below
// it. The error points at that op.
// LOW: schedule-errors.mlir:[[@LINE+17]]:9: error: loom-schedule: memory limit of 250000 bytes is below @three's peak in program order (311296 bytes, reached here at 'aten::mm.default'); the scheduler reorders ops and cannot lower it
// BAD: error: loom-schedule: memory-limit must be a positive byte count such as 1073741824, 512MiB or 2GiB, or 'none'; got
// FLIGHT: error: loom-schedule: max-in-flight must be at least 1, got 0
// ALGO: error: loom-schedule: algorithm must be ring, tree or auto, got 'magic'
// DEVICE: error: loom-schedule: {{.*}}no-such-device.json
// PIPE: max-in-flight must be at least 1, got 0
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
