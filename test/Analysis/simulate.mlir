// RUN: loom-opt %s --split-input-file --loom-simulate="device=%S/Inputs/round-device.json" -o /dev/null 2>&1 | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-simulate="device=%S/Inputs/round-device.json nodes=2 devices-per-node=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INTER
// RUN: loom-opt %s --split-input-file --loom-simulate="device=%S/Inputs/round-device.json comm-streams=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: loom-opt %s --split-input-file --loom-simulate="device=%S/Inputs/round-device.json json=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=JSON

// Hand-computed times on Inputs/round-device.json: fp32 peak 1e12 FLOP/s,
// bf16 4e12, memory 1e11 B/s, 1 us per op, efficiency 1; intra-node link
// 1e10 B/s and 1 us latency, inter-node 1e9 B/s and 10 us; 4 devices per
// node.
//
// mm 128x128x128 fp32: 2*128^3 = 4194304 FLOP -> 4.194304 us; bytes
// 3 * 65536 = 196608 -> 1.96608 us: compute-bound, 5.194304 us with the
// overhead. add 128x128 fp32: memory-bound, 1.96608 + 1 = 2.96608 us. The
// view costs nothing. mm in bf16: 4194304 / 4e12 = 1.048576 us against
// 98304 B / 1e11 = 0.98304 us: compute-bound, 2.048576 us.
// Compute = 5.194304 + 2.96608 + 2.048576 = 10.20896 us.
//
// Memory: a, b (fp32) and c, d (bf16) persistent, 2*65536 + 2*32768 =
// 196608 B. Activations: %m 65536 [0, 1], %s 65536 [1, end], %h 32768
// [3, end]: the peak is 131072 at op 1 (and at op 3), 327680 in all.

// CHECK-LABEL: === loom-simulate @compute on round (1 node(s) x 4 devices, auto collectives, 2 comm stream(s)) ===
// CHECK-NEXT:   step time              10.209 us
// CHECK-NEXT:   compute                10.209 us (4 ops)
// CHECK-NEXT:   communication          0.000 us (0 collectives)
// CHECK-NEXT:   exposed communication  0.000 us (0.0% of communication)
// CHECK-NEXT:   hidden communication   0.000 us
// CHECK-NEXT:   streams (busy):
// CHECK-NEXT:     compute              10.209 us (100.0% of the step)
// CHECK-NEXT:     comm.all_gather      0.000 us (0.0% of the step)
// CHECK-NEXT:     comm.reduce_scatter  0.000 us (0.0% of the step)
// CHECK-NEXT:   peak memory per rank  327680 bytes (persistent 196608 + activations 131072)

// JSON: "compute_time": 1.02089{{[0-9]*}}e-05
// JSON: "function": "compute"
// JSON: "memory": {
// JSON: "live_at_peak": [
// JSON-NEXT: {
// JSON-NEXT: "bytes": 131072,
// JSON-NEXT: "group": "<root> (untagged)"
// JSON-NEXT: }
// JSON-NEXT: ],
// JSON-NEXT: "peak_activation_bytes": 131072,
// JSON-NEXT: "peak_bytes": 327680,
// JSON: "step_time": 1.02089{{[0-9]*}}e-05
func.func @compute(%a: tensor<128x128xf32> {loom.name = "a", loom.role = #loom.role<parameter>},
                   %b: tensor<128x128xf32> {loom.name = "b", loom.role = #loom.role<input>},
                   %c: tensor<128x128xbf16> {loom.name = "c", loom.role = #loom.role<parameter>},
                   %d: tensor<128x128xbf16> {loom.name = "d", loom.role = #loom.role<input>})
    -> (tensor<128x128xf32> {loom.role = #loom.role<loss>}, tensor<16384xf32> {loom.role = #loom.role<output>},
        tensor<128x128xbf16> {loom.role = #loom.role<output>})
    attributes {loom.step} {
  %m = loom.aten "aten::mm.default"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %s = loom.aten "aten::add.Tensor"(%m, %a) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %v = loom.aten "aten::view.default"(%s) {args = [#loom.arg<0>, [16384]]} : (tensor<128x128xf32>) -> tensor<16384xf32>
  %h = loom.aten "aten::mm.default"(%c, %d) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xbf16>, tensor<128x128xbf16>) -> tensor<128x128xbf16>
  return %s, %v, %h : tensor<128x128xf32>, tensor<16384xf32>, tensor<128x128xbf16>
}

// -----

// A ring all-gather of 4 x 1024 floats: 16384 bytes out. Inside one node:
// 3 * 1 us + 3/4 * 16384 / 1e10 s = 3 + 1.2288 = 4.2288 us. With 2 devices
// per node (nodes=2) the group spans 2 nodes and the inter-node link is the
// bottleneck: 3 * 10 us + 3/4 * 16384 / 1e9 s = 30 + 12.288 = 42.288 us.
//
// Started before the mm (5.194304 us) the gather is hidden: the step takes
// 5.194 us and the wait blocks nothing. Started after it, the wait blocks
// the compute stream for the whole gather: 5.194304 + 4.2288 = 9.423104 us.

loom.mesh @dp shape [4] axes ["shard"]

// CHECK-LABEL: === loom-simulate @early
// CHECK-NEXT:   step time              5.194 us
// CHECK-NEXT:   compute                5.194 us (1 ops)
// CHECK-NEXT:   communication          4.229 us (1 collectives)
// CHECK-NEXT:   exposed communication  0.000 us (0.0% of communication)
// CHECK-NEXT:   hidden communication   4.229 us
// CHECK-NEXT:   streams (busy):
// CHECK-NEXT:     compute              5.194 us (100.0% of the step)
// CHECK-NEXT:     comm.all_gather      4.229 us (81.4% of the step)
// INTER-LABEL: === loom-simulate @early
// INTER-NEXT:   step time              42.288 us
// INTER-NEXT:   compute                5.194 us (1 ops)
// INTER-NEXT:   communication          42.288 us (1 collectives)
// INTER-NEXT:   exposed communication  37.094 us (87.7% of communication)
func.func @early(%w: tensor<1024xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                 %a: tensor<128x128xf32> {loom.name = "a", loom.role = #loom.role<input>})
    -> (tensor<128x128xf32> {loom.role = #loom.role<loss>}, tensor<4096xf32> {loom.role = #loom.role<output>})
    attributes {loom.step} {
  %f = loom.all_gather_start %w on @dp axes ["shard"] dim 0 : tensor<1024xf32> -> !loom.future<tensor<4096xf32>>
  %m = loom.aten "aten::mm.default"(%a, %a) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %g = loom.wait %f : !loom.future<tensor<4096xf32>> -> tensor<4096xf32>
  return %m, %g : tensor<128x128xf32>, tensor<4096xf32>
}

// CHECK-LABEL: === loom-simulate @late
// CHECK-NEXT:   step time              9.423 us
// CHECK-NEXT:   compute                5.194 us (1 ops)
// CHECK-NEXT:   communication          4.229 us (1 collectives)
// CHECK-NEXT:   exposed communication  4.229 us (100.0% of communication)
// CHECK-NEXT:   hidden communication   0.000 us
func.func @late(%w: tensor<1024xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %a: tensor<128x128xf32> {loom.name = "a", loom.role = #loom.role<input>})
    -> (tensor<128x128xf32> {loom.role = #loom.role<loss>}, tensor<4096xf32> {loom.role = #loom.role<output>})
    attributes {loom.step} {
  %m = loom.aten "aten::mm.default"(%a, %a) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %f = loom.all_gather_start %w on @dp axes ["shard"] dim 0 : tensor<1024xf32> -> !loom.future<tensor<4096xf32>>
  %g = loom.wait %f : !loom.future<tensor<4096xf32>> -> tensor<4096xf32>
  return %m, %g : tensor<128x128xf32>, tensor<4096xf32>
}

// -----

// An all-gather and a reduce-scatter of 16384 bytes each (4.2288 us) issued
// together. On separate streams (FSDP2's) they overlap: 4.229 us, all of
// it exposed. On one stream the reduce-scatter queues behind the gather:
// 8.4576 us, and the second wait blocks for the second half.

loom.mesh @dp shape [4] axes ["shard"]

// CHECK-LABEL: === loom-simulate @streams
// CHECK-NEXT:   step time              4.229 us
// CHECK-NEXT:   compute                0.000 us (0 ops)
// CHECK-NEXT:   communication          8.458 us (2 collectives)
// CHECK-NEXT:   exposed communication  4.229 us (50.0% of communication)
// CHECK-NEXT:   hidden communication   4.229 us
// CHECK-NEXT:   streams (busy):
// CHECK-NEXT:     compute              0.000 us (0.0% of the step)
// CHECK-NEXT:     comm.all_gather      4.229 us (100.0% of the step)
// CHECK-NEXT:     comm.reduce_scatter  4.229 us (100.0% of the step)
// ONE-LABEL: === loom-simulate @streams
// ONE-NEXT:   step time              8.458 us
// ONE-NEXT:   compute                0.000 us (0 ops)
// ONE-NEXT:   communication          8.458 us (2 collectives)
// ONE-NEXT:   exposed communication  8.458 us (100.0% of communication)
// ONE-NEXT:   hidden communication   0.000 us
// ONE-NEXT:   streams (busy):
// ONE-NEXT:     compute              0.000 us (0.0% of the step)
// ONE-NEXT:     comm                 8.458 us (100.0% of the step)
// ONE-NEXT:   collectives (count, time, exposed):
// ONE-NEXT:     all_gather              1  4.229 us  4.229 us
// ONE-NEXT:     reduce_scatter          1  4.229 us  4.229 us
func.func @streams(%w: tensor<1024xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                   %x: tensor<4096xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4096xf32> {loom.role = #loom.role<loss>}, tensor<1024xf32> {loom.role = #loom.role<output>})
    attributes {loom.step} {
  %f = loom.all_gather_start %w on @dp axes ["shard"] dim 0 : tensor<1024xf32> -> !loom.future<tensor<4096xf32>>
  %r = loom.reduce_scatter_start %x on @dp axes ["shard"] dim 0 reduce <avg> : tensor<4096xf32> -> !loom.future<tensor<1024xf32>>
  %g = loom.wait %f : !loom.future<tensor<4096xf32>> -> tensor<4096xf32>
  %s = loom.wait %r : !loom.future<tensor<1024xf32>> -> tensor<1024xf32>
  return %g, %s : tensor<4096xf32>, tensor<1024xf32>
}
