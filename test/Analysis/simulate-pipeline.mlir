// RUN: loom-opt %s --loom-simulate="device=%S/Inputs/pipe-device.json" -o /dev/null 2>&1 | FileCheck %s
// RUN: loom-opt %s --loom-simulate="device=%S/Inputs/pipe-device.json comm-streams=1" -o /dev/null 2>&1 | FileCheck %s
// RUN: loom-opt %s --loom-simulate="device=%S/Inputs/pipe-device.json json=true" -o /dev/null 2>&1 | %python -c "import json, sys; r = json.load(sys.stdin); print('bubble %.6f step %.6f' % (r['bubble_fraction'], r['step_time'] * 1e6)); [print(p['function'], p['ranks'], '%.6f %.6f %.6f' % (p['step_time'] * 1e6, p['compute_time'] * 1e6, p['idle_time'] * 1e6)) for p in r['programs']]" | FileCheck %s --check-prefix=JSON
// RUN: loom-opt %s --loom-simulate="device=%S/Inputs/pipe-device.json timeline=%t.json" -o /dev/null 2>/dev/null
// RUN: %python -c "import json, sys; [print(json.dumps(e, sort_keys=True)) for e in json.load(open(sys.argv[1]), parse_float=lambda s: round(float(s), 6))['traceEvents'] if e['ph'] == 'X' or e['name'] == 'process_name']" %t.json | FileCheck %s --check-prefix=TRACE
// RUN: %python %S/../../scripts/render_timeline.py %t.json -o %t.svg | FileCheck %s --check-prefix=SVG
// RUN: FileCheck %s --check-prefix=ROWS < %t.svg

// GPipe on two pipeline ranks with two microbatches, by hand. On the pipe
// device every compute op costs 1 us and every transfer t = 0.5 us. A
// forward F is one op, a backward B two. Rank 0 runs F0 F1 B0 B1, rank 1
// (the last stage) F0 F1 B0 B1, each F after its activation arrives and
// rank 0's B after its gradient arrives:
//   rank 0: F0 [0, 1], F1 [1, 2], idle until B0's gradient at 5 + 3t,
//           B0 [6.5, 8.5], B1 [8.5, 10.5] (its gradient came at 7 + 3t).
//   rank 1: activation 0 arrives at 1 + t, F0 [1.5, 2.5]; activation 1 is
//           sent at 2 but received only once rank 1 posts its recv after F0,
//           at 2 + t: it arrives at 2 + 2t, F1 [3, 4], B0 [4, 6],
//           B1 [6, 8]; the send of B1's gradient ends at 8.5.
// Step 9 + 3t = 10.5 us; each rank computes 6 us, so the bubble is
// 1 - 12 / (2 * 10.5) = 0.428571 (with free transfers 1 - 6/9 = 1/3,
// PyTorch's (p-1)/(m+p-1)).

// CHECK: === loom-simulate: pipelined step of 2 programs on pipe
// CHECK-NEXT: step time              10.500 us
// CHECK-NEXT: bubble fraction        42.9% (2 pipeline ranks)
// CHECK-NEXT: per program (rank): step time, compute busy, idle
// CHECK-NEXT: @stage0 (rank 0)         10.500 us  6.000 us  4.500 us
// CHECK-NEXT: @stage1 (rank 1)         8.500 us  6.000 us  4.500 us
// CHECK: --- @stage0 ---
// CHECK: p2p.send             1.000 us
// CHECK-NEXT: p2p.recv             1.000 us

// JSON: bubble 0.428571 step 10.500000
// JSON-NEXT: stage0 [0] 10.500000 6.000000 4.500000
// JSON-NEXT: stage1 [1] 8.500000 6.000000 4.500000

// One process per rank, in rank order; rank 1's forwards start as the
// activations arrive, rank 0's backwards as the gradients do.
// TRACE: {"args": {"name": "@stage0 (rank 0)"}, "name": "process_name", "ph": "M", "pid": 0}
// TRACE-NEXT: {"args": {{.*}}"phase": "forward"}, "cat": "compute", "dur": 1.0, "name": "aten::mm.default", "ph": "X", "pid": 0, "tid": 0, "ts": 0}
// TRACE-NEXT: {"args": {{.*}}}, "cat": "comm", "dur": 0.5, "name": "send_recv", "ph": "X", "pid": 0, "tid": 3, "ts": 1.0}
// TRACE-NEXT: {"args": {{.*}}"phase": "forward"}, "cat": "compute", "dur": 1.0, "name": "aten::mm.default", "ph": "X", "pid": 0, "tid": 0, "ts": 1.0}
// TRACE-NEXT: {"args": {{.*}}}, "cat": "comm", "dur": 0.5, "name": "send_recv", "ph": "X", "pid": 0, "tid": 3, "ts": 2.5}
// TRACE-NEXT: {"args": {{.*}}}, "cat": "comm", "dur": 0.5, "name": "send_recv", "ph": "X", "pid": 0, "tid": 4, "ts": 6.0}
// TRACE-NEXT: {"args": {{.*}}}, "cat": "comm", "dur": 0.5, "name": "send_recv", "ph": "X", "pid": 0, "tid": 4, "ts": 8.0}
// TRACE-NEXT: {"args": {"blocked_us": 4.5}, "cat": "wait", "dur": 4.5, "name": "wait", "ph": "X", "pid": 0, "tid": 0, "ts": 2.0}
// TRACE-NEXT: {"args": {{.*}}"phase": "backward"}, "cat": "compute", "dur": 1.0, "name": "aten::mm.default", "ph": "X", "pid": 0, "tid": 0, "ts": 6.5}
// TRACE: {"args": {"name": "@stage1 (rank 1)"}, "name": "process_name", "ph": "M", "pid": 1}
// TRACE-NEXT: {"args": {{.*}}}, "cat": "comm", "dur": 0.5, "name": "send_recv", "ph": "X", "pid": 1, "tid": 4, "ts": 1.0}
// TRACE-NEXT: {"args": {"blocked_us": 1.5}, "cat": "wait", "dur": 1.5, "name": "wait", "ph": "X", "pid": 1, "tid": 0, "ts": 0}
// TRACE-NEXT: {"args": {{.*}}"phase": "forward"}, "cat": "compute", "dur": 1.0, "name": "aten::mm.default", "ph": "X", "pid": 1, "tid": 0, "ts": 1.5}
// TRACE-NEXT: {"args": {{.*}}}, "cat": "comm", "dur": 0.5, "name": "send_recv", "ph": "X", "pid": 1, "tid": 4, "ts": 2.5}

// scripts/render_timeline.py draws a row per rank and stream that has events;
// each rank's transfers are 2 us in flight.
// SVG: rank 0: in flight 0.002 ms
// SVG-NEXT: rank 1: in flight 0.002 ms
// ROWS: rank 0 · compute
// ROWS: rank 0 · p2p.send
// ROWS: rank 0 · p2p.recv
// ROWS: rank 1 · compute
// ROWS: rank 1 · p2p.send
// ROWS: rank 1 · p2p.recv

loom.mesh @pp shape [2] axes ["pp"]

func.func @stage0(%w0: tensor<8x8xf32> {loom.name = "layers.0.weight", loom.role = #loom.role<parameter>},
                  %x0: tensor<4x8xf32> {loom.name = "x0", loom.role = #loom.role<input>},
                  %x1: tensor<4x8xf32> {loom.name = "x1", loom.role = #loom.role<input>})
    -> (tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.weight"})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  %h0 = loom.aten "aten::mm.default"(%x0, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>, loom.microbatch = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s0 = loom.send_start %h0 on @pp axes ["pp"] peer 1 tag 0 : tensor<4x8xf32> -> !loom.future<none>
  %h1 = loom.aten "aten::mm.default"(%x1, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>, loom.microbatch = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s1 = loom.send_start %h1 on @pp axes ["pp"] peer 1 tag 1 : tensor<4x8xf32> -> !loom.future<none>
  %r0 = loom.recv_start on @pp axes ["pp"] peer 1 tag 2 : !loom.future<tensor<4x8xf32>>
  %r1 = loom.recv_start on @pp axes ["pp"] peer 1 tag 3 : !loom.future<tensor<4x8xf32>>
  %g0 = loom.wait %r0 : !loom.future<tensor<4x8xf32>> -> tensor<4x8xf32>
  %a0 = loom.aten "aten::mm.default"(%g0, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %b0 = loom.aten "aten::mul.Tensor"(%a0, %x0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g1 = loom.wait %r1 : !loom.future<tensor<4x8xf32>> -> tensor<4x8xf32>
  %a1 = loom.aten "aten::mm.default"(%g1, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %b1 = loom.aten "aten::mm.default"(%b0, %w0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  loom.wait %s0 : !loom.future<none>
  loom.wait %s1 : !loom.future<none>
  return %w0 : tensor<8x8xf32>
}

func.func @stage1(%w1: tensor<8x8xf32> {loom.name = "layers.1.weight", loom.role = #loom.role<parameter>})
    -> (tensor<4x8xf32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.weight"})
    attributes {loom.step, loom.program_ranks = array<i64: 1>} {
  %r0 = loom.recv_start on @pp axes ["pp"] peer 0 tag 0 : !loom.future<tensor<4x8xf32>>
  %h0 = loom.wait %r0 : !loom.future<tensor<4x8xf32>> -> tensor<4x8xf32>
  %y0 = loom.aten "aten::mm.default"(%h0, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>, loom.microbatch = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r1 = loom.recv_start on @pp axes ["pp"] peer 0 tag 1 : !loom.future<tensor<4x8xf32>>
  %h1 = loom.wait %r1 : !loom.future<tensor<4x8xf32>> -> tensor<4x8xf32>
  %y1 = loom.aten "aten::mm.default"(%h1, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>, loom.microbatch = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a0 = loom.aten "aten::mm.default"(%y0, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %d0 = loom.aten "aten::mul.Tensor"(%a0, %h0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s0 = loom.send_start %d0 on @pp axes ["pp"] peer 0 tag 2 : tensor<4x8xf32> -> !loom.future<none>
  %a1 = loom.aten "aten::mm.default"(%y1, %w1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %d1 = loom.aten "aten::mul.Tensor"(%a1, %h1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s1 = loom.send_start %d1 on @pp axes ["pp"] peer 0 tag 3 : tensor<4x8xf32> -> !loom.future<none>
  loom.wait %s0 : !loom.future<none>
  loom.wait %s1 : !loom.future<none>
  return %d1, %w1 : tensor<4x8xf32>, tensor<8x8xf32>
}
