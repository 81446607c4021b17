//===- LoomRTOps.td - loomrt dialect operations ------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_LOOMRT_IR_LOOMRTOPS_TD
#define LOOM_DIALECT_LOOMRT_IR_LOOMRTOPS_TD

include "loom/Dialect/LoomRT/IR/LoomRTBase.td"
include "loom/Dialect/Loom/IR/LoomBase.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/RegionKindInterface.td"

//===----------------------------------------------------------------------===//
// Program
//===----------------------------------------------------------------------===//

def LoomRT_ProgramOp : LoomRT_Op<"program", [
    IsolatedFromAbove, SingleBlock, HasParent<"::mlir::ModuleOp">]> {
  let summary = "The instructions one rank executes for one training step";
  let description = [{
    One rank's program of a compiled step. Its single block holds, in this
    order: the bindings (`loomrt.input`, `loomrt.state`), the instructions
    (`loomrt.aten`, `loomrt.free`, `loomrt.optimizer`,
    `loomrt.record_event`, `loomrt.wait_event`, `loomrt.collective_start`,
    `loomrt.wait`), the outputs
    (`loomrt.output`) and `loomrt.return`.

    `streams` names the program's streams; every instruction says which one
    it runs on by index. `optimizer` is the algorithm every
    `loomrt.optimizer` applies (absent when the step returns gradients).
    A program with a `mesh` (a `loom.mesh` of `world_size` ranks) is the
    SPMD program of a distributed step: every rank of the mesh runs it,
    `rank` is 0, and its collectives name the mesh's axes. With `ranks` as
    well it is one MPMD program of a pipelined step (docs/pipeline.md): only
    the listed ranks of the mesh run it, with their own bindings, and the
    programs of one module list disjoint ranks that cover the mesh.

    `num_slots` is set by `loomrt-assign-slots`: from then on every binding
    and every result that is read carries a slot below it, and the verifier
    checks that a slot is written only after its previous value was freed,
    that nothing is read after it is freed, and that runtime-owned values
    (parameters, buffers, constants, optimizer state) are never freed.

    ```mlir
    loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 3 {
      %x = loomrt.input "x" role <input> batch_index 0 slot 0 : tensor<4xf32>
      %s1 = loomrt.aten "aten::sum.default"(%x) stream 0 slots [1]
          {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
      loomrt.free %x stream 0 : tensor<4xf32>
      loomrt.output %s1 role <loss> : tensor<f32>
      loomrt.return
    }
    ```
  }];
  let arguments = (ins StrAttr:$step_name,
                       I64Attr:$rank,
                       I64Attr:$world_size,
                       StrArrayAttr:$streams,
                       OptionalAttr<I64Attr>:$num_slots,
                       OptionalAttr<Loom_OptimizerAttr>:$optimizer,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<DenseI64ArrayAttr>:$ranks);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $step_name `rank` $rank `world_size` $world_size (`mesh` $mesh^)?
    (`ranks` $ranks^)? `streams` $streams (`slots` $num_slots^)? (`optimizer` $optimizer^)?
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The binding of the input or state called `name`, or null.
    ::mlir::Operation *lookupBinding(::llvm::StringRef name);
  }];
}

def LoomRT_ReturnOp : LoomRT_Op<"return", [
    Terminator, HasParent<"ProgramOp">]> {
  let summary = "The end of a program";
  let description = [{
    Ends a program; the runtime then reads the outputs.

    ```mlir
    loomrt.return
    ```
  }];
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Bindings
//===----------------------------------------------------------------------===//

def LoomRT_InputOp : LoomRT_Op<"input", [
    HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "A parameter, buffer, constant or batch input of the step";
  let description = [{
    Binds one argument of the step to `slot` before the first instruction.
    Parameters, buffers and constants are owned by the runtime across steps
    and loaded from the artifact's weights by `name`; an `input` is element
    `batch_index` of the step's batch. The runtime checks the tensor's
    dtype and shape against the result type.

    In a distributed step an `input` may be `split`: its type is this
    rank's slice of the global batch, which the runtime cuts; a parameter
    may be `shard`ed: its type is this rank's chunk of the full tensor
    the weights hold (see `docs/distributed.md`).

    ```mlir
    %w = loomrt.input "fc1.weight" role <parameter> slot 0 : tensor<8x4xf32>
    %x = loomrt.input "x" role <input> batch_index 0 slot 1 : tensor<2x4xf32>
    %y = loomrt.input "y" role <input> batch_index 1
        split <@dp, axes = ["dp"], dim = 0> : tensor<2xi64>
    ```
  }];
  let arguments = (ins StrAttr:$binding_name,
                       Loom_RoleAttr:$role,
                       OptionalAttr<I64Attr>:$batch_index,
                       OptionalAttr<I64Attr>:$slot,
                       OptionalAttr<Loom_SplitAttr>:$split,
                       OptionalAttr<Loom_ShardAttr>:$shard);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $binding_name `role` $role (`batch_index` $batch_index^)?
    (`slot` $slot^)? (`split` $split^)? (`shard` $shard^)? attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether the runtime keeps this value across steps (so it is never
    /// freed): parameters, buffers and constants.
    bool isRuntimeOwned();
  }];
}

def LoomRT_StateOp : LoomRT_Op<"state", [
    HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "Optimizer state of one parameter";
  let description = [{
    Binds one optimizer state tensor of parameter `param` to `slot` before
    the first instruction. The runtime creates it before the first step
    (`init`) and keeps it across steps; it is never freed.

    State of a sharded parameter is sharded the same way (`shard`).

    ```mlir
    %m = loomrt.state "fc1.weight.exp_avg" param "fc1.weight" init <zeros>
        slot 4 : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins StrAttr:$binding_name,
                       StrAttr:$param,
                       LoomRT_StateInitAttr:$init,
                       OptionalAttr<I64Attr>:$slot,
                       OptionalAttr<Loom_ShardAttr>:$shard);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $binding_name `param` $param `init` $init (`slot` $slot^)?
    (`shard` $shard^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def LoomRT_OutputOp : LoomRT_Op<"output", [HasParent<"ProgramOp">]> {
  let summary = "A value the runtime reads after the last instruction";
  let description = [{
    `loss` is the step's loss (a 0-d tensor `step()` returns);
    `buffer_mutation` replaces the stored buffer `target` with the value,
    as PyTorch's in-place buffer updates do; `grad` hands the gradient of
    parameter `target` to the caller (steps without an optimizer).

    In a distributed step the loss may be `partial`: each rank holds its
    own slice's loss and the runtime reports their reduction.

    ```mlir
    loomrt.output %loss role <loss> : tensor<f32>
    loomrt.output %mean role <buffer_mutation> target "bn.running_mean" : tensor<8xf32>
    loomrt.output %l role <loss> partial <@dp, axes = ["dp"], avg> : tensor<f32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value,
                       Loom_RoleAttr:$role,
                       OptionalAttr<StrAttr>:$target,
                       OptionalAttr<Loom_PartialAttr>:$partial);
  let assemblyFormat = [{
    $value `role` $role (`target` $target^)? (`partial` $partial^)? attr-dict
    `:` type($value)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

class LoomRT_InstructionOp<string mnemonic, list<Trait> traits = []>
    : LoomRT_Op<mnemonic, !listconcat(traits, [HasParent<"ProgramOp">])>;

def LoomRT_AtenOp : LoomRT_InstructionOp<"aten", [
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "Call an ATen operator through the dispatcher";
  let description = [{
    Calls `kernel` (`namespace::name.overload`) with positional `args` and
    keyword-only `kwargs`, whose entries are typed as the artifact's ARGs:
    `#loom.arg<N>` (tensor operand N), lists of those (`Tensor[]`, with
    `unit` for absent elements of a `Tensor?[]`), `unit` (None), `i64`
    integers, `f64` floats, booleans, strings, homogeneous lists of those,
    a type (a dtype), `#loomrt.device`, `#loomrt.layout` and
    `#loomrt.memory_format`. `returns` maps schema returns to results as on
    `loom.aten`. `stream` is the index of the stream it runs on; `slots`
    (after slot assignment) has one slot per result, `-1` for a result
    nothing reads (the runtime drops it at once).

    ```mlir
    %s5 = loomrt.aten "aten::addmm.default"(%b, %x, %wt) stream 0 slots [5]
        {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>]}
        : (tensor<8xf32>, tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins StrAttr:$kernel,
                       Variadic<AnyRankedTensor>:$inputs,
                       DefaultValuedAttr<ArrayAttr, "{}">:$args,
                       DefaultValuedAttr<DictionaryAttr, "{}">:$kwargs,
                       OptionalAttr<ArrayAttr>:$returns,
                       I64Attr:$stream,
                       OptionalAttr<DenseI64ArrayAttr>:$slots);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $kernel `(` $inputs `)` `stream` $stream (`slots` $slots^)? attr-dict `:`
    functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The operator name without overload, e.g. "aten::addmm".
    ::llvm::StringRef getOpName();
    /// The overload, e.g. "default".
    ::llvm::StringRef getOverload();
  }];
}

def LoomRT_FreeOp : LoomRT_InstructionOp<"free"> {
  let summary = "Drop the runtime's references to values after their last use";
  let description = [{
    Releases the slots of `values`: their last use has passed, so a later
    instruction may write the slots again. Freeing a view drops only that
    reference; the storage lives while another reference does. Nothing may
    use a freed value afterwards, and values the runtime keeps across steps
    (parameters, buffers, constants, optimizer state) are never freed.

    ```mlir
    loomrt.free %s3, %s5 stream 0 : tensor<2x8xf32>, tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$values, I64Attr:$stream);
  let assemblyFormat = [{
    $values `stream` $stream attr-dict `:` type($values)
  }];
  let hasVerifier = 1;
}

def LoomRT_OptimizerOp : LoomRT_InstructionOp<"optimizer"> {
  let summary = "Update a parameter and its optimizer state in place";
  let description = [{
    Applies one step of the program's `optimizer` to the parameter bound by
    `param` (a `loomrt.input` of role `parameter`) with gradient `grad`,
    updating the parameter and `state` (its `loomrt.state` bindings, in
    the algorithm's order) in place with PyTorch's single-tensor algorithm.
    The runtime keeps the per-parameter step count. Because the update is
    in place, nothing may use `param` or `state` after it.

    A parameter in a group of its own (`param-groups` of
    loom-attach-optimizer) carries its group's `optimizer`: the program's
    algorithm and hyperparameters with its own `lr` and `weight_decay`.

    ```mlir
    loomrt.optimizer %w grad %g state [%m, %v] stream 0 : tensor<8x4xf32>
    loomrt.optimizer %b grad %gb state [%mb, %vb] stream 0
        {optimizer = #loom.adamw<lr = 1.0e-02, weight_decay = 0.0>} : tensor<8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$param,
                       AnyRankedTensor:$grad,
                       Variadic<AnyRankedTensor>:$state,
                       I64Attr:$stream,
                       OptionalAttr<Loom_OptimizerAttr>:$optimizer);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def LoomRT_RecordEventOp : LoomRT_InstructionOp<"record_event"> {
  let summary = "Mark the current point of a stream";
  let description = [{
    Records an event on `stream` once everything issued to it before has
    been issued; `loomrt.wait_event` on another stream orders later work
    after it (a cross-stream dependency, e.g. a collective's result used by
    compute).

    ```mlir
    %e = loomrt.record_event stream 1
    ```
  }];
  let arguments = (ins I64Attr:$stream);
  let results = (outs LoomRT_EventType:$event);
  let assemblyFormat = "`stream` $stream attr-dict";
  let hasVerifier = 1;
}

def LoomRT_WaitEventOp : LoomRT_InstructionOp<"wait_event"> {
  let summary = "Make a stream wait for an event of another stream";
  let description = [{
    Work issued to `stream` after this op starts only after the work
    recorded by `event` on another stream has completed.

    ```mlir
    loomrt.wait_event %e stream 0
    ```
  }];
  let arguments = (ins LoomRT_EventType:$event, I64Attr:$stream);
  let assemblyFormat = "$event `stream` $stream attr-dict";
  let hasVerifier = 1;
}

def LoomRT_CollectiveStartOp : LoomRT_InstructionOp<"collective_start"> {
  let summary = "Issue a collective over mesh axes without waiting for it";
  let description = [{
    Issues the collective `kind` over the ranks that share this rank's
    coordinates on every mesh axis not in `axes` (docs/distributed.md) and
    returns a future at once; `loomrt.wait` makes the result available.
    `all_gather`, `reduce_scatter` and `all_slice` take the tensor `dim`
    they gather, scatter or slice; `reduce_scatter` and `all_reduce` the `reduce` operation;
    `broadcast` the `root` index within the group. The input must not be
    freed or overwritten before the wait. `slot` (after slot assignment)
    holds the future until its wait.

    `send` and `recv` are point-to-point: `peer` is the index of the other
    rank within this rank's group over `axes`, and a send and the recv that
    matches it carry the same `tag`. A send's future is
    `!loomrt.future<none>` (its wait yields nothing); a recv has no input
    and its future's tensor type is what it receives.

    ```mlir
    %f = loomrt.collective_start <all_reduce> %g axes ["dp"] reduce <avg>
        stream 1 slot 7 : tensor<40xf32> -> !loomrt.future<tensor<40xf32>>
    %s = loomrt.collective_start <send> %a axes ["pp"] peer 1 tag 0
        stream 1 : tensor<4x8xf32> -> !loomrt.future<none>
    %r = loomrt.collective_start <recv> axes ["pp"] peer 0 tag 0
        stream 1 : !loomrt.future<tensor<4x8xf32>>
    ```
  }];
  let arguments = (ins LoomRT_CollectiveKindAttr:$kind,
                       Optional<AnyRankedTensor>:$input,
                       StrArrayAttr:$axes,
                       OptionalAttr<I64Attr>:$dim,
                       OptionalAttr<Loom_ReduceKindAttr>:$reduction,
                       OptionalAttr<I64Attr>:$root,
                       OptionalAttr<I64Attr>:$peer,
                       OptionalAttr<I64Attr>:$tag,
                       I64Attr:$stream,
                       OptionalAttr<I64Attr>:$slot);
  let results = (outs LoomRT_FutureType:$future);
  let assemblyFormat = [{
    $kind ($input^)? `axes` $axes (`dim` $dim^)? (`reduce` $reduction^)?
    (`root` $root^)? (`peer` $peer^)? (`tag` $tag^)? `stream` $stream
    (`slot` $slot^)? attr-dict `:`
    custom<CommTypes>(type($input), type($future))
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The one loomrt.wait of the future (null if it has none yet).
    WaitOp getWait();
  }];
}

def LoomRT_WaitOp : LoomRT_InstructionOp<"wait", [
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "Wait for a collective and take its result";
  let description = [{
    Blocks `stream` until the collective that made `future` has completed
    and puts its result in `slot`; the future's slot is free afterwards, and
    so is the collective's input (a later `loomrt.free` releases it). The
    wait of a send (`!loomrt.future<none>`) has no result and no slot.

    ```mlir
    %s8 = loomrt.wait %f stream 1 slot 8
        : !loomrt.future<tensor<40xf32>> -> tensor<40xf32>
    loomrt.wait %s stream 1 : !loomrt.future<none>
    ```
  }];
  let arguments = (ins LoomRT_FutureType:$future,
                       I64Attr:$stream,
                       OptionalAttr<I64Attr>:$slot);
  let results = (outs Optional<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    $future `stream` $stream (`slot` $slot^)? attr-dict `:`
    qualified(type($future)) (`->` type($result)^)?
  }];
  let hasVerifier = 1;
}

#endif // LOOM_DIALECT_LOOMRT_IR_LOOMRTOPS_TD
