// RUN: loom-opt %s --loom-schedule="device=%S/../Analysis/Inputs/round-device.json report=true" 2>&1 | FileCheck %s

// A pipeline rank's transfers keep their place among its communication.
// This rank computes an activation and sends it to the next stage, then
// posts the receives of two gradients that stage sends back once it has the
// activation, and waits for them. The receives read nothing, so they are
// ready from the start: the scheduler used to start them first (their
// transfers then overlap the matmul in its model), which with two
// collectives in flight left the send no slot, and it blocked on the
// receive instead, before the send: this rank waited for a gradient the
// peer computes only from the activation this rank had not sent, and both
// timed out (a pipelined GPipe step compiled with --schedule). Each rank is
// scheduled alone, so sends, receives and their waits keep program order;
// compute still moves around them.

// CHECK-LABEL: === loom-schedule @transfers on round ===
// CHECK-LABEL: func.func @transfers
// CHECK:      %[[A:.*]] = loom.aten "aten::mm.default"(%arg0, %arg0)
// CHECK-NEXT: %[[S:.*]] = loom.send_start %[[A]] on @pp axes ["pp"] peer 1 tag 0
// CHECK-NEXT: %[[R1:.*]] = loom.recv_start on @pp axes ["pp"] peer 1 tag 1
// CHECK-NEXT: %[[R2:.*]] = loom.recv_start on @pp axes ["pp"] peer 1 tag 2
// CHECK-NEXT: loom.wait %[[S]]
// CHECK-NEXT: %[[G1:.*]] = loom.wait %[[R1]]
// CHECK:      loom.wait %[[R2]]

loom.mesh @pp shape [2] axes ["pp"]
func.func @transfers(%x: tensor<128x128xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<128x128xf32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  %a = loom.aten "aten::mm.default"(%x, %x) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %s = loom.send_start %a on @pp axes ["pp"] peer 1 tag 0 : tensor<128x128xf32> -> !loom.future<none>
  %r1 = loom.recv_start on @pp axes ["pp"] peer 1 tag 1 : !loom.future<tensor<128x128xf32>>
  %r2 = loom.recv_start on @pp axes ["pp"] peer 1 tag 2 : !loom.future<tensor<128x128xf32>>
  loom.wait %s : !loom.future<none>
  %g1 = loom.wait %r1 : !loom.future<tensor<128x128xf32>> -> tensor<128x128xf32>
  %b = loom.aten "aten::mm.default"(%g1, %x) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  %g2 = loom.wait %r2 : !loom.future<tensor<128x128xf32>> -> tensor<128x128xf32>
  %c = loom.aten "aten::add.Tensor"(%b, %g2) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  return %c : tensor<128x128xf32>
}
