// RUN: loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json" -o /dev/null 2>&1 | FileCheck %s
// RUN: loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json json=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=JSON
// RUN: loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json timeline=%t.json" -o /dev/null 2>/dev/null
// RUN: %python -c "import json, sys; [print(json.dumps(e, sort_keys=True)) for e in json.load(open(sys.argv[1]), parse_float=lambda s: round(float(s), 6))['traceEvents']]" %t.json | FileCheck %s --check-prefix=TRACE
// RUN: loom-opt %s --loom-stats -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: loom-opt %s --loom-stats=json=true -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS-JSON

// The recompute time of a region: its body's ops run on the compute stream
// in backward, where the region stands. Hand-computed on
// Inputs/round-device.json (fp32 1e12 FLOP/s, 1e11 B/s, 1 us per op, views
// free; a [128, 128] f32 tensor is 65536 B):
//   mm 128^3:  2 * 128^3 = 4194304 FLOP -> 4.194304 us against 196608 B ->
//              1.96608 us: compute-bound, 5.194304 us
//   relu:      131072 B -> 1.31072 + 1 = 2.31072 us
//   sum:       65540 B -> 0.6554 + 1 = 1.6554 us
//   ones_like: 8 B -> 0.00008 + 1 = 1.00008 us
//   threshold_backward: 196608 B -> 2.96608 us
//   expand, t: views, 0
// @plain: mm, relu, sum, ones_like, expand, threshold_backward, t, mm:
// 5.194304 + 2.31072 + 1.6554 + 1.00008 + 2.96608 + 5.194304 = 18.320888 us
// in 8 ops. @remat runs the forward mm and relu again in backward: the
// region costs 5.194304 + 2.31072 = 7.505024 us and 4194304 FLOP, the step
// 18.320888 + 7.505024 = 25.825912 us in 10 ops (the region's two, not the
// region itself).

// CHECK-LABEL: === loom-simulate @plain
// CHECK-NEXT:   step time              18.321 us
// CHECK-NEXT:   compute                18.321 us (8 ops)
// CHECK-NEXT:   communication          0.000 us (0 collectives)
// CHECK-LABEL: === loom-simulate @remat
// CHECK-NEXT:   step time              25.826 us
// CHECK-NEXT:   compute                25.826 us (10 ops)
// CHECK-NEXT:   of which recompute     7.505 us (2 ops in 1 regions, 4194304 FLOP)
// CHECK-NEXT:   communication          0.000 us (0 collectives)

// JSON: "function": "plain"
// JSON: "recompute_flops": 0,
// JSON-NEXT: "recompute_ops": 0,
// JSON-NEXT: "recompute_time": 0,
// JSON: "function": "remat"
// JSON: "recompute_flops": 4194304,
// JSON-NEXT: "recompute_ops": 2,
// JSON-NEXT: "recompute_time": 7.50502{{[0-9]*}}e-06,
// JSON-NEXT: "step_time": 2.58259{{[0-9]*}}e-05,

// In the trace the body's ops are events of their own on the compute
// stream, in backward, tagged with the region's module, right after
// ones_like (10.160504 us) and before threshold_backward.
// TRACE: {"args": {"name": "@remat"}, "name": "process_name", "ph": "M", "pid": 1}
// TRACE: "name": "aten::ones_like.default"
// TRACE: {"args": {"bytes": 196608, "flops": 4194304, "module": "blk", "phase": "backward", "recompute": "blk"}, "cat": "recompute", "dur": 5.194304, "name": "aten::mm.default", "ph": "X", "pid": 1, "tid": 0, "ts": 10.160504}
// TRACE-NEXT: {"args": {"bytes": 131072, "module": "blk", "phase": "backward", "recompute": "blk"}, "cat": "recompute", "dur": 2.31072, "name": "aten::relu.default", "ph": "X", "pid": 1, "tid": 0, "ts": 15.354808}
// TRACE-NEXT: {"args": {"bytes": 196608, "module": "blk", "phase": "backward"}, "cat": "compute", "dur": 2.96608, "name": "aten::threshold_backward.default", "ph": "X", "pid": 1, "tid": 0, "ts": 17.665528}

// FLOPs: the forward and backward mms, 4194304 each, in both steps; the
// recomputed mm adds 4194304 to @remat's total, reported apart; its ops
// count in backward (5 ops in @plain's backward, 7 in @remat's).
// STATS-LABEL: === loom-stats @plain ===
// STATS-NOT: recompute:
// STATS: total {{ *}}4194304 {{ *}}4194304 {{ *}}8388608
// STATS-LABEL: === loom-stats @remat ===
// STATS: backward {{ *}}7
// STATS: recompute: 1 region(s), 2 op(s), 4194304 FLOPs in backward
// STATS-NEXT: FLOPs by module (exact path; forward / backward / recompute / inclusive):
// STATS-NEXT: blk {{ *}}4194304 {{ *}}4194304 {{ *}}4194304 {{ *}}12582912
// STATS-NEXT: total {{ *}}4194304 {{ *}}4194304 {{ *}}4194304 {{ *}}12582912

// STATS-JSON: "function": "plain"
// STATS-JSON: "flops": {
// STATS-JSON-NEXT: "backward": 4194304,
// STATS-JSON-NEXT: "forward": 4194304,
// STATS-JSON-NEXT: "other": 0,
// STATS-JSON-NEXT: "recompute": 4194304,
// STATS-JSON-NEXT: "total": 12582912
// STATS-JSON: "function": "remat"
// STATS-JSON: "recompute": {
// STATS-JSON-NEXT: "flops": 4194304,
// STATS-JSON-NEXT: "ops": 2,
// STATS-JSON-NEXT: "regions": 1

!t = tensor<128x128xf32>
func.func @plain(%a: !t {loom.name = "blk.weight", loom.role = #loom.role<parameter>},
                 %x: !t {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        !t {loom.role = #loom.role<grad>, loom.target = "blk.weight"})
    attributes {loom.step} {
  %m = loom.aten "aten::mm.default"(%x, %a) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (!t, !t) -> !t
  %r = loom.aten "aten::relu.default"(%m) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (!t) -> !t
  %l = loom.aten "aten::sum.default"(%r) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (!t) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [128, 128]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> !t
  %d = loom.aten "aten::threshold_backward.default"(%g, %r) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "blk", loom.phase = #loom.phase<backward>} : (!t, !t) -> !t
  %xt = loom.aten "aten::t.default"(%x) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (!t) -> !t
  %gw = loom.aten "aten::mm.default"(%xt, %d) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (!t, !t) -> !t
  return %l, %gw : tensor<f32>, !t
}

func.func @remat(%a: !t {loom.name = "blk.weight", loom.role = #loom.role<parameter>},
                 %x: !t {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        !t {loom.role = #loom.role<grad>, loom.target = "blk.weight"})
    attributes {loom.step} {
  %m = loom.aten "aten::mm.default"(%x, %a) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (!t, !t) -> !t
  %r = loom.aten "aten::relu.default"(%m) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (!t) -> !t
  %l = loom.aten "aten::sum.default"(%r) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (!t) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [128, 128]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> !t
  %rr = loom.recompute "blk" (%x, %a) : (!t, !t) -> !t {
  ^bb0(%bx: !t, %ba: !t):
    %bm = loom.aten "aten::mm.default"(%bx, %ba) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (!t, !t) -> !t
    %br = loom.aten "aten::relu.default"(%bm) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (!t) -> !t
    loom.yield %br : !t
  } {loom.module = "blk", loom.phase = #loom.phase<backward>}
  %d = loom.aten "aten::threshold_backward.default"(%g, %rr) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "blk", loom.phase = #loom.phase<backward>} : (!t, !t) -> !t
  %xt = loom.aten "aten::t.default"(%x) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (!t) -> !t
  %gw = loom.aten "aten::mm.default"(%xt, %d) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (!t, !t) -> !t
  return %l, %gw : tensor<f32>, !t
}
