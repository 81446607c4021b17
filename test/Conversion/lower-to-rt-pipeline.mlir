// RUN: loom-opt %S/../Target/Inputs/pipeline-step.mlir --loom-lower-to-rt | FileCheck %s
// RUN: loom-opt %S/../Target/Inputs/pipeline-step.mlir --loom-lower-to-rt --loomrt-finish-pipeline | FileCheck %s --check-prefix=SLOTS
// RUN: loom-opt %S/../Target/Inputs/pipeline-step-2d.mlir --loom-lower-to-rt | FileCheck %s --check-prefix=PPDP

// Each MPMD step of a pipelined module (loom.program_ranks) becomes its own
// loomrt.program on those ranks of the mesh. A send waits on compute for its
// input and issues on comm, as a collective; a recv issues on comm at once;
// compute waits for a recv's wait but not for a send's, which yields nothing.
// Inputs keep the batch element they name (loom.batch_index).

// CHECK-LABEL: loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] {
// CHECK-NEXT: loomrt.input "layers.0.weight" role <parameter> : tensor<8x8xf32>
// CHECK-NEXT: %x = loomrt.input "x" role <input> batch_index 0 : tensor<4x8xf32>
// CHECK-NEXT: %[[H:.*]] = loomrt.aten "aten::mm.default"
// CHECK-NEXT: %[[E0:.*]] = loomrt.record_event stream 0
// CHECK-NEXT: loomrt.wait_event %[[E0]] stream 1
// CHECK-NEXT: %[[S:.*]] = loomrt.collective_start <send> %[[H]] axes ["pp"] peer 1 tag 0 stream 1 {{.*}}: tensor<4x8xf32> -> !loomrt.future<none>
// CHECK-NEXT: %[[R:.*]] = loomrt.collective_start <recv> axes ["pp"] peer 1 tag 1 stream 1 {{.*}}: !loomrt.future<tensor<4x8xf32>>
// CHECK-NEXT: loomrt.wait %[[S]] stream 1 {{.*}}: !loomrt.future<none>
// CHECK-NEXT: %[[G:.*]] = loomrt.wait %[[R]] stream 1 {{.*}}: !loomrt.future<tensor<4x8xf32>> -> tensor<4x8xf32>
// CHECK-NEXT: %[[E1:.*]] = loomrt.record_event stream 1
// CHECK-NEXT: loomrt.wait_event %[[E1]] stream 0
// CHECK-NOT: loomrt.output {{.*}} role <loss>
// CHECK: loomrt.output {{.*}} role <grad> target "layers.0.weight"
// CHECK-LABEL: loomrt.program "stage1" rank 0 world_size 2 mesh @pp ranks [1] streams ["compute", "comm"] {
// CHECK: %t = loomrt.input "t" role <input> batch_index 1 : tensor<4x8xf32>
// CHECK-NEXT: %[[R1:.*]] = loomrt.collective_start <recv> axes ["pp"] peer 0 tag 0 stream 1
// CHECK: loomrt.collective_start <send> %{{.*}} axes ["pp"] peer 0 tag 1 stream 1
// CHECK: loomrt.output {{.*}} role <loss> : tensor<f32>

// After frees and slots: the send's input is freed on comm after the send's
// wait, which takes no slot.
// SLOTS-LABEL: loomrt.program "stage0"
// SLOTS: %[[S:.*]] = loomrt.collective_start <send> %s2 axes ["pp"] peer 1 tag 0 stream 1 slot 3
// SLOTS: loomrt.wait %[[S]] stream 1 {
// SLOTS-NEXT: loomrt.free %s2 stream 1 : tensor<4x8xf32>

// PPDP-LABEL: loomrt.program "stage0" rank 0 world_size 4 mesh @pp ranks [0, 1] streams ["compute", "comm"] {
// PPDP: loomrt.input "x" role <input> batch_index 0 split <@pp, axes = ["dp"], dim = 0> : tensor<2x8xf32>
// PPDP: loomrt.collective_start <send> {{.*}} axes ["pp"] peer 1 tag 0
// PPDP: loomrt.collective_start <all_reduce> {{.*}} axes ["dp"] reduce <avg>
// PPDP-LABEL: loomrt.program "stage1" rank 0 world_size 4 mesh @pp ranks [2, 3] streams ["compute", "comm"] {
// PPDP: loomrt.output {{.*}} role <loss> partial <@pp, axes = ["dp"], avg> : tensor<f32>
