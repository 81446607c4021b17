//===- Passes.td - Loom conversion passes ------------------*- tablegen -*-===//

#ifndef LOOM_CONVERSION_PASSES_TD
#define LOOM_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomLowerToRT : Pass<"loom-lower-to-rt", "::mlir::ModuleOp"> {
  let summary = "Lower each loom step function to a loomrt program";
  let description = [{
    Turns every step function (`func.func` with `loom.step`) into a
    `loomrt.program`. A single-rank step is a program for rank 0 of a world
    of 1 with one stream, `"compute"`, on which every instruction runs
    (stream 0):

    - arguments become bindings, in order: `loomrt.input` for parameters,
      buffers, constants and batch inputs (`batch_index` counts the
      `input` arguments; an unnamed input is called `input<k>`),
      `loomrt.state` for optimizer state (created as zeros);
    - `loom.aten` becomes `loomrt.aten` with the same kernel and typed
      arguments: a string under the keyword `device` becomes
      `#loomrt.device`, `"torch.<layout>"` a `#loomrt.layout` and
      `"torch.<memory format>"` a `#loomrt.memory_format` (how the importer
      spells those argument kinds); `loom.module`/`loom.phase` stay;
    - `loom.optimizer_update` becomes `loomrt.optimizer`, which updates the
      parameter and its state in place, and the program records the
      optimizer;
    - results become `loomrt.output` (loss, grad, buffer_mutation);
      `param_update` and `state_update` results need none, the update being
      in place;
    - in a distributed step (one that names a `loom.mesh`) the program runs
      on every rank of the mesh and has a second stream, `"comm"`: each
      collective start becomes a `loomrt.collective_start` there, after an
      event compute records once it has made the input, and each wait a
      `loomrt.wait` on comm that compute then waits for
      (docs/distributed.md);
    - `loom.send_start`/`loom.recv_start` become `<send>`/`<recv>` starts
      with their `peer` and `tag`: a send waits on compute for its input as
      a collective does, a recv issues at once, and compute does not wait
      for a send's wait, which yields nothing;
    - a pipelined module's steps, each with `loom.program_ranks`, become one
      MPMD program each, with `ranks`; their rank lists must be disjoint and
      cover the mesh, and only one of them (the last stage's) needs a loss.
      An input may name its element of the step's batch with
      `loom.batch_index` (docs/pipeline.md).

    Before:

    ```mlir
    func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                    %x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
        -> (tensor<f32> {loom.role = #loom.role<loss>},
            tensor<4xf32> {loom.role = #loom.role<param_update>, loom.target = "w"})
        attributes {loom.optimizer = #loom.sgd<>, loom.step} {
      %p = loom.aten "aten::mul.Tensor"(%w, %x) {args = [#loom.arg<0>, #loom.arg<1>]} : ...
      %l = loom.aten "aten::sum.default"(%p) {args = [#loom.arg<0>]} : ...
      %w1 = loom.optimizer_update #loom.sgd<> param %w grad %x : tensor<4xf32>
      return %l, %w1 : tensor<f32>, tensor<4xf32>
    }
    ```

    After:

    ```mlir
    loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.sgd<> {
      %w = loomrt.input "w" role <parameter> : tensor<4xf32>
      %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
      %0 = loomrt.aten "aten::mul.Tensor"(%w, %x) stream 0 {args = [#loom.arg<0>, #loom.arg<1>]} : ...
      %1 = loomrt.aten "aten::sum.default"(%0) stream 0 {args = [#loom.arg<0>]} : ...
      loomrt.optimizer %w grad %x stream 0 : tensor<4xf32>
      loomrt.output %1 role <loss> : tensor<f32>
      loomrt.return
    }
    ```

    The step must have a loss (the runtime's `step()` returns it; an MPMD
    step may have none), no other user outputs or input mutations, only
    `loom.aten`, `loom.optimizer_update`, collective, send/recv and wait
    ops, element types the artifact has, one mesh, one optimizer
    configuration, and updates that nothing reads the parameter or its
    state after (they run in place).
    Each violation is reported where it is. Frees and slots are added by
    `loomrt-insert-frees` and `loomrt-assign-slots`.
  }];
  let options = [
    Option<"device", "device", "::loom::TargetDevice",
           /*default=*/"::loom::TargetDevice::Cpu",
           "The device the artifact runs on: cpu, or cuda (recorded as the "
           "module's `loom.device`, which the artifact writes as `device`; "
           "cpu leaves the module as it is)",
           "LOOM_TARGET_DEVICE_VALUES">,
  ];
  let dependentDialects = ["::loom::rt::LoomRTDialect"];
}

#endif // LOOM_CONVERSION_PASSES_TD
