// RUN: loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json timeline=%t.json" -o /dev/null 2>/dev/null
// RUN: %python -c "import json, sys; [print(json.dumps(e, sort_keys=True)) for e in json.load(open(sys.argv[1]), parse_float=lambda s: round(float(s), 6))['traceEvents']]" %t.json | FileCheck %s

// The Chrome trace of a step whose all-gather starts after the mm (the
// `late` case of simulate.mlir): one track per stream, the mm on compute
// from 0 to 5.194304 us, the gather on comm.all_gather from there for
// 4.2288 us, and the wait blocking compute for the same 4.2288 us.

// CHECK: {"args": {"name": "compute"}, "name": "thread_name", "ph": "M", "pid": 0, "tid": 0}
// CHECK: {"args": {"name": "comm.all_gather"}, "name": "thread_name", "ph": "M", "pid": 0, "tid": 1}
// CHECK: {"args": {"name": "comm.reduce_scatter"}, "name": "thread_name", "ph": "M", "pid": 0, "tid": 2}
// CHECK: {"args": {"name": "@late"}, "name": "process_name", "ph": "M", "pid": 0}
// CHECK-NEXT: {"args": {"bytes": 196608, "flops": 4194304, "module": "blk", "phase": "forward"}, "cat": "compute", "dur": 5.194304, "name": "aten::mm.default", "ph": "X", "pid": 0, "tid": 0, "ts": 0}
// CHECK-NEXT: {"args": {"bytes": 16384}, "cat": "comm", "dur": 4.2288, "name": "all_gather", "ph": "X", "pid": 0, "tid": 1, "ts": 5.194304}
// CHECK-NEXT: {"args": {"blocked_us": 4.2288}, "cat": "wait", "dur": 4.2288, "name": "wait", "ph": "X", "pid": 0, "tid": 0, "ts": 5.194304}
// CHECK-NOT: "ph": "X"

loom.mesh @dp shape [4] axes ["shard"]
func.func @late(%w: tensor<1024xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %a: tensor<128x128xf32> {loom.name = "a", loom.role = #loom.role<input>})
    -> (tensor<128x128xf32> {loom.role = #loom.role<loss>}, tensor<4096xf32> {loom.role = #loom.role<output>})
    attributes {loom.step} {
  %m = loom.aten "aten::mm.default"(%a, %a) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %f = loom.all_gather_start %w on @dp axes ["shard"] dim 0 : tensor<1024xf32> -> !loom.future<tensor<4096xf32>>
  %g = loom.wait %f : !loom.future<tensor<4096xf32>> -> tensor<4096xf32>
  return %m, %g : tensor<128x128xf32>, tensor<4096xf32>
}
