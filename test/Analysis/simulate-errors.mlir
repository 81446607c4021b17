// RUN: not loom-opt %s --loom-simulate="device=nosuch device-dir=%S/Inputs" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not loom-opt %s --loom-simulate="device=%S/Inputs/bad-range.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not loom-opt %s --loom-simulate="device=%S/Inputs/bad-syntax.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not loom-opt %s --loom-simulate="device=%S/Inputs/bad-missing.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not loom-opt %s --loom-simulate="device=%S/Inputs/no-such-file.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: not loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json devices-per-node=8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PERNODE
// RUN: not loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json nodes=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NODES
// RUN: not loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json algorithm=butterfly" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALGO
// RUN: not loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json comm-streams=4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STREAMS
// RUN: not loom-opt %s --loom-simulate="device=%S/Inputs/round-device.json timeline=%t.nodir/trace.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TIMELINE
// RUN: loom-opt %s --verify-diagnostics --loom-simulate="device=%S/Inputs/round-device.json devices-per-node=2" -o /dev/null

// UNKNOWN: error: loom-simulate: unknown device 'nosuch' (known in {{.*}}Inputs: {{.*}}round-device{{.*}}; or give the path of a spec file)
// RANGE: error: loom-simulate: {{.*}}bad-range.json:9:18: at 'efficiency.compute': 1.5 is out of range: expected (0, 1]
// SYNTAX: error: loom-simulate: {{.*}}bad-syntax.json:4:31: invalid JSON: Expected , or } after object property
// MISSING: error: loom-simulate: {{.*}}bad-missing.json:7:3: at 'inter_node': missing field 'latency'
// NOFILE: error: loom-simulate: cannot read device spec '{{.*}}no-such-file.json': No such file or directory
// PERNODE: error: loom-simulate: devices-per-node=8 but a node of 'round' has 4 devices
// NODES: error: loom-simulate: nodes and devices-per-node must be positive, got nodes=0 devices-per-node=4
// ALGO: error: loom-simulate: algorithm must be ring, tree or auto, got 'butterfly'
// STREAMS: error: comm-streams must be 1, 2 or 3, got 4
// TIMELINE: error: loom-simulate: cannot write timeline '{{.*}}trace.json': No such file or directory

// With 2 devices per node on one node the 4-rank mesh does not fit.
loom.mesh @dp shape [4] axes ["shard"]
func.func @step(%w: tensor<1024xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<4096xf32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  // expected-error@+1 {{'loom.all_gather_start' op cannot be placed: the mesh has 4 ranks but 1 node(s) of 2 device(s) hold only 2 (mesh @dp)}}
  %f = loom.all_gather_start %w on @dp axes ["shard"] dim 0 : tensor<1024xf32> -> !loom.future<tensor<4096xf32>>
  %g = loom.wait %f : !loom.future<tensor<4096xf32>> -> tensor<4096xf32>
  return %g : tensor<4096xf32>
}
