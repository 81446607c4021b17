//===- Passes.td - loomrt pass definitions -----------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_LOOMRT_TRANSFORMS_PASSES_TD
#define LOOM_DIALECT_LOOMRT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomRTInsertFrees : Pass<"loomrt-insert-frees", "::loom::rt::ProgramOp"> {
  let summary = "Free every value right after its last use";
  let description = [{
    Inserts, after each instruction, one `loomrt.free` of the values whose
    last use it is (in the order they were defined), on that instruction's
    stream, so the runtime drops its references as early as the program
    order allows. Not freed: parameters, buffers, constants and optimizer
    state (the runtime keeps them across steps), values read by a
    `loomrt.output` (they live to the end), results nothing reads (they
    get no slot), and values a `loomrt.free` already frees, so running the
    pass twice changes nothing. Batch inputs are freed: that only drops
    the program's reference to the caller's tensor.

    Freeing a view drops only that reference: the runtime's storage lives
    while any view of it does, which is what the memory prediction of
    `--loom-stats` models.

    ```mlir
    %0 = loomrt.aten "aten::mm.default"(%x, %w) stream 0 ...
    %1 = loomrt.aten "aten::relu.default"(%0) stream 0 ...
    loomrt.free %0 stream 0 : tensor<2x8xf32>
    ```

    Run it after `loom-lower-to-rt` and before `loomrt-assign-slots`, which
    reuses the slots of freed values.
  }];
}

def LoomRTAssignSlots : Pass<"loomrt-assign-slots", "::loom::rt::ProgramOp"> {
  let summary = "Give every value a slot, reusing the slots of freed values";
  let description = [{
    Numbers the runtime's value slots: bindings get slots 0, 1, ... in
    order; each `loomrt.aten` result that something reads gets the lowest
    slot a preceding `loomrt.free` released, or a new one; results nothing
    reads get `-1` (the runtime drops them at once). Sets the program's
    `slots` to the number used. The assignment depends only on the program
    order, so every rank and every run numbers slots the same way; running
    the pass again reassigns from scratch with the same result.

    ```mlir
    %s3 = loomrt.aten "aten::relu.default"(%s2) stream 0 slots [3] ...
    loomrt.free %s2 stream 0 : tensor<2x8xf32>
    %s2_0 = loomrt.aten "aten::neg.default"(%s3) stream 0 slots [2] ...
    ```

    The program verifier then checks that no slot is written while its
    value may still be read.
  }];
  let options = [
    Option<"reuse", "reuse", "bool", /*default=*/"true",
           "Reuse the slots of freed values (false: one slot per value, "
           "for debugging)">,
  ];
}

#endif // LOOM_DIALECT_LOOMRT_TRANSFORMS_PASSES_TD
