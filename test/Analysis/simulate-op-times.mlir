// RUN: loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json op-times=%S/Inputs/op-times-trace.json" -o /dev/null 2>&1 | FileCheck %s
// RUN: loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json op-times=%S/Inputs/op-times-trace.json json=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=JSON
// RUN: not loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json op-times=%S/Inputs/op-times-other.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: not loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json op-times=%S/Inputs/bad-syntax.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not loom-opt %s --loom-schedule="device=%S/Inputs/round-device.json op-times=%S/Inputs/round-device.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTRACE
// RUN: not loom-compile %s --op-times=%S/Inputs/op-times-trace.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=COMPILE

// Measured op times replace the roofline of the ops whose kernel signature
// the trace has, by the median of the durations after its first step (a
// warm-up): mm fp32 (7, 9, 8 us; 100 in step 0) 8 us, add (3, 5 us) 4 us.
// The view and the bf16 mm, which the trace does not have, keep the
// roofline of Inputs/round-device.json (simulate.mlir): 0 and 2.048576 us.
// Compute = 8 + 4 + 0 + 2.048576 = 14.048576 us (the roofline's 10.209).

// CHECK-LABEL: === loom-simulate @compute on round
// CHECK-NEXT:   step time              14.049 us
// CHECK-NEXT:   compute                14.049 us (4 ops)
// CHECK-NEXT:   measured op times      2 of 4 ops (op-times)

// JSON: "compute_time": 1.40485{{[0-9]*}}e-05
// JSON: "measured_ops": 2,
// JSON: "ops": 4,

// A trace of another step prices nothing here: an error, not the roofline.
// OTHER: error: loom-simulate: op-times: none of the 4 ATen ops here was traced in '{{.*}}op-times-other.json' (same kernel signature)

// SYNTAX: error: loom-simulate: op-times: {{.*}}bad-syntax.json:{{[0-9]+}}:{{[0-9]+}}: invalid JSON

// NOTRACE: error: loom-schedule: op-times: {{.*}}round-device.json: expected a Chrome trace (an object with a 'traceEvents' array, or an array of events)

// COMPILE: op-times needs recompute-budget or schedule (the passes that price ops)
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
