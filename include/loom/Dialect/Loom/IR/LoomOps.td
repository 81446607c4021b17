//===- LoomOps.td - Loom dialect operations ----------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMOPS_TD
#define LOOM_DIALECT_LOOM_IR_LOOMOPS_TD

include "loom/Dialect/Loom/IR/LoomBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def Loom_MeshOp : Loom_Op<"mesh", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A device mesh with named axes";
  let description = [{
    Declares a logical mesh of ranks, like PyTorch's `DeviceMesh` with
    `mesh_dim_names`. Collectives name the mesh by symbol and the axes they
    run over by name. Ranks are laid out row-major: the last axis varies
    fastest, as in `init_device_mesh`.

    Upstream `shard.grid` has the same shape but unnamed axes; Loom passes
    and users address axes by name (`"replicate"`, `"shard"`, `"pp"`), so the
    mesh keeps them.

    ```mlir
    loom.mesh @hsdp shape [2, 4] axes ["replicate", "shard"]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       DenseI64ArrayAttr:$shape,
                       StrArrayAttr:$axes);
  let assemblyFormat = "$sym_name `shape` $shape `axes` $axes attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Total number of ranks in the mesh.
    int64_t getNumRanks();
    /// Index of the axis called `name`, or std::nullopt.
    std::optional<unsigned> getAxisIndex(::llvm::StringRef name);
    /// The ranks of a group over `axes`: the product of their sizes (axes
    /// the mesh lacks are ignored, as getGroup ignores them).
    int64_t getGroupSize(::mlir::ArrayAttr axes);
    /// The global ranks of `rank`'s group over `axes`, indexed as a
    /// collective's `peer` (and the runtime's Mesh::group) index them: the
    /// named axes' coordinates row-major in the mesh's axis order, the
    /// other coordinates `rank`'s own. Axes the mesh lacks are ignored.
    ::llvm::SmallVector<int64_t> getGroup(::mlir::ArrayAttr axes,
                                          int64_t rank);
  }];
}

//===----------------------------------------------------------------------===//
// Generic ATen op
//===----------------------------------------------------------------------===//

def Loom_AtenOp : Loom_Op<"aten"> {
  let summary = "Any ATen operator, named by its schema";
  let description = [{
    One ATen (or prims) operator call, e.g. `aten::addmm.default`. Tensor
    arguments are the op's operands; the argument list is kept in `args`
    (positional) and `kwargs` (keyword-only), where `#loom.arg<N>` refers to
    operand N and every other entry is the non-tensor value: integers,
    floats, booleans, strings, lists of those, `unit` for `None`, and a type
    for a `ScalarType`. Every operand is referenced exactly once.

    When the schema's returns do not map one-to-one onto the op's results
    (an optional return that is `None`, or a `Tensor[]` return), `returns`
    has one entry per schema return: the index of the result it becomes,
    `unit` for `None`, or a list of result indices for a list return.

    The runtime calls the operator through the ATen dispatcher by name, so
    any exported graph imports. For the operators Loom knows a shape rule of
    (matmuls, elementwise with broadcasting, views, reductions, ...) the
    verifier checks the result types against the rule.

    ```mlir
    %0 = loom.aten "aten::addmm.default"(%b, %x, %wt)
           {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>]}
           : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins StrAttr:$kernel,
                       Variadic<AnyRankedTensor>:$inputs,
                       DefaultValuedAttr<ArrayAttr, "{}">:$args,
                       DefaultValuedAttr<DictionaryAttr, "{}">:$kwargs,
                       OptionalAttr<ArrayAttr>:$returns);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $kernel `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The operator name without overload, e.g. "aten::addmm".
    ::llvm::StringRef getOpName();
    /// The overload, e.g. "default" (empty when the name has none).
    ::llvm::StringRef getOverload();
    /// The operand positional argument `position` refers to, or null when
    /// that argument is not a tensor operand (`None`, a scalar) or absent.
    ::mlir::Value getArgOperand(unsigned position);
  }];
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

class Loom_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  code extraCollectiveDecls = [{
    /// The mesh this collective runs on (null if the symbol is unresolved).
    ::loom::MeshOp getMeshOp(::mlir::SymbolTableCollection &symbolTable);
  }];
  let extraClassDeclaration = extraCollectiveDecls;
  dag commonArgs = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
}

def Loom_AllGatherStartOp : Loom_CollectiveOp<"all_gather_start"> {
  let summary = "Start gathering shards along a tensor dimension";
  let description = [{
    Concatenates each rank's `input` along `dim` over the ranks of the named
    mesh axes, in rank order. The result's `dim` is the input's times the
    group size (the product of the axes' sizes).

    ```mlir
    %f = loom.all_gather_start %x on @dp axes ["shard"] dim 0
        : tensor<2x8xf32> -> !loom.future<tensor<8x8xf32>>
    ```
  }];
  let arguments = !con((ins AnyRankedTensor:$input), commonArgs,
                       (ins I64Attr:$dim));
  let results = (outs Loom_AnyFuture:$future);
  let assemblyFormat = [{
    $input `on` $mesh `axes` $axes `dim` $dim attr-dict `:` type($input) `->` qualified(type($future))
  }];
  let hasVerifier = 1;
}

def Loom_ReduceScatterStartOp : Loom_CollectiveOp<"reduce_scatter_start"> {
  let summary = "Start reducing a tensor and scattering it along a dimension";
  let description = [{
    Reduces `input` over the ranks of the named mesh axes with `reduction`
    and leaves rank i with the i-th of the group-size equal slices along
    `dim`. The input's `dim` must be divisible by the group size.

    ```mlir
    %f = loom.reduce_scatter_start %g on @dp axes ["shard"] dim 0 reduce <avg>
        : tensor<8x8xf32> -> !loom.future<tensor<2x8xf32>>
    ```
  }];
  let arguments = !con((ins AnyRankedTensor:$input), commonArgs,
                       (ins I64Attr:$dim, Loom_ReduceKindAttr:$reduction));
  let results = (outs Loom_AnyFuture:$future);
  let assemblyFormat = [{
    $input `on` $mesh `axes` $axes `dim` $dim `reduce` $reduction attr-dict `:` type($input) `->` qualified(type($future))
  }];
  let hasVerifier = 1;
}

def Loom_AllSliceStartOp : Loom_CollectiveOp<"all_slice_start"> {
  let summary = "Start taking this rank's slice of a tensor along a dimension";
  let description = [{
    The inverse of `all_gather_start` on a tensor every rank of the group
    holds: splits `input` along `dim` into group-size equal slices and
    leaves rank i of the group (row-major over the named axes) with slice
    i, as upstream `shard.all_slice`. No data moves between ranks; it is a
    collective because the slice depends on the rank's place in the group.
    The input's `dim` must be divisible by the group size. FSDP uses it to
    keep a rank's part of a gathered unit after forward
    (`reshard-after-forward=k`).

    ```mlir
    %f = loom.all_slice_start %g on @dp axes ["shard_minor"] dim 0
        : tensor<8x8xf32> -> !loom.future<tensor<4x8xf32>>
    ```
  }];
  let arguments = !con((ins AnyRankedTensor:$input), commonArgs,
                       (ins I64Attr:$dim));
  let results = (outs Loom_AnyFuture:$future);
  let assemblyFormat = [{
    $input `on` $mesh `axes` $axes `dim` $dim attr-dict `:` type($input) `->` qualified(type($future))
  }];
  let hasVerifier = 1;
}

def Loom_AllReduceStartOp : Loom_CollectiveOp<"all_reduce_start"> {
  let summary = "Start reducing a tensor over mesh axes";
  let description = [{
    Every rank of the group receives the reduction of all ranks' `input`.

    ```mlir
    %f = loom.all_reduce_start %g on @hsdp axes ["replicate"] reduce <avg>
        : tensor<2x8xf32> -> !loom.future<tensor<2x8xf32>>
    ```
  }];
  let arguments = !con((ins AnyRankedTensor:$input), commonArgs,
                       (ins Loom_ReduceKindAttr:$reduction));
  let results = (outs Loom_AnyFuture:$future);
  let assemblyFormat = [{
    $input `on` $mesh `axes` $axes `reduce` $reduction attr-dict `:` type($input) `->` qualified(type($future))
  }];
  let hasVerifier = 1;
}

def Loom_BroadcastStartOp : Loom_CollectiveOp<"broadcast_start"> {
  let summary = "Start broadcasting a tensor from one rank of a group";
  let description = [{
    Every rank of the group receives `input` of the rank at index `root`
    within the group (row-major over the named axes).

    ```mlir
    %f = loom.broadcast_start %w on @dp axes ["shard"] root 0
        : tensor<4x8xf32> -> !loom.future<tensor<4x8xf32>>
    ```
  }];
  let arguments = !con((ins AnyRankedTensor:$input), commonArgs,
                       (ins I64Attr:$root));
  let results = (outs Loom_AnyFuture:$future);
  let assemblyFormat = [{
    $input `on` $mesh `axes` $axes `root` $root attr-dict `:` type($input) `->` qualified(type($future))
  }];
  let hasVerifier = 1;
}

def Loom_SendStartOp : Loom_CollectiveOp<"send_start"> {
  let summary = "Start sending a tensor to a peer along mesh axes";
  let description = [{
    Sends `input` to the rank at index `peer` within this rank's group of
    the named axes (e.g. the next pipeline stage). The `loom.recv_start` on
    the peer that receives it carries the same `tag`; tags are unique per
    (sender, receiver) pair within one step, so transfers between the same
    two ranks match in any order. Completes as `!loom.future<none>`; the
    input must stay alive until the wait.

    ```mlir
    %f = loom.send_start %act on @pp axes ["pp"] peer 1 tag 0
        : tensor<4x8xf32> -> !loom.future<none>
    ```
  }];
  let arguments = !con((ins AnyRankedTensor:$input), commonArgs,
                       (ins I64Attr:$peer, I64Attr:$tag));
  let results = (outs Loom_AnyFuture:$future);
  let assemblyFormat = [{
    $input `on` $mesh `axes` $axes `peer` $peer `tag` $tag attr-dict `:` type($input) `->` qualified(type($future))
  }];
  let hasVerifier = 1;
}

def Loom_RecvStartOp : Loom_CollectiveOp<"recv_start"> {
  let summary = "Start receiving a tensor from a peer along mesh axes";
  let description = [{
    Receives a tensor of the future's value type from the rank at index
    `peer` within this rank's group of the named axes: the
    `loom.send_start` there with the same `tag`.

    ```mlir
    %f = loom.recv_start on @pp axes ["pp"] peer 0 tag 0
        : !loom.future<tensor<4x8xf32>>
    ```
  }];
  let arguments = !con(commonArgs, (ins I64Attr:$peer, I64Attr:$tag));
  let results = (outs Loom_AnyFuture:$future);
  let assemblyFormat = [{
    `on` $mesh `axes` $axes `peer` $peer `tag` $tag attr-dict `:` qualified(type($future))
  }];
  let hasVerifier = 1;
}

def Loom_WaitOp : Loom_Op<"wait"> {
  let summary = "Wait for an asynchronous collective and take its value";
  let description = [{
    Marks where the value of a started collective is needed. Each future is
    waited exactly once. A `!loom.future<none>` wait has no result.

    ```mlir
    %y = loom.wait %f : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
    ```
  }];
  let arguments = (ins Loom_AnyFuture:$future);
  let results = (outs Optional<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    $future attr-dict `:` qualified(type($future)) (`->` type($result)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Recompute
//===----------------------------------------------------------------------===//

def Loom_RecomputeOp : Loom_Op<"recompute", [
    IsolatedFromAbove, SingleBlock, RecursiveMemoryEffects]> {
  let summary = "Forward ops re-executed in backward instead of saved";
  let description = [{
    Activation checkpointing as structure. The body is a copy of forward ops
    of one module, run again where backward first needs their values; the
    op's results replace, in backward, the forward values they recompute, so
    the forward values need not live from forward to backward. The operands
    are what the body reads from outside (the saved inputs of the region:
    module inputs, parameters, the outputs of saved ops), bound to the
    body's arguments in order; `loom.yield` gives the results.

    The body holds only ATen ops that compute the same values each time they
    run: no collectives, no optimizer updates, no nested recompute, and no
    random ops (a random op's output is saved, so dropout masks are
    identical). `module` is the module whose forward the body repeats.

    ```mlir
    %h = loom.recompute "layers.0" (%x, %w) : (tensor<4x8xf32>, tensor<8x8xf32>)
        -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
      %0 = loom.aten "aten::mm.default"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>]}
          : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %1 = loom.aten "aten::relu.default"(%0) {args = [#loom.arg<0>]}
          : (tensor<4x8xf32>) -> tensor<4x8xf32>
      loom.yield %1 : tensor<4x8xf32>
    } {loom.module = "layers.0", loom.phase = #loom.phase<backward>}
    ```
  }];
  let arguments = (ins StrAttr:$module, Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    // An op with an empty body block whose arguments match `inputs`; the
    // caller fills it and ends it with a loom.yield.
    OpBuilder<(ins "::llvm::StringRef":$module, "::mlir::TypeRange":$results,
                   "::mlir::ValueRange":$inputs)>
  ];
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    /// The terminator of the body.
    YieldOp getYield();
  }];
}

def Loom_YieldOp : Loom_Op<"yield", [Pure, Terminator, ReturnLike,
                                     HasParent<"RecomputeOp">]> {
  let summary = "The values a recompute region gives back";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def Loom_OptimizerUpdateOp : Loom_Op<"optimizer_update", [Pure]> {
  let summary = "One optimizer step of one parameter";
  let description = [{
    Applies one step of the optimizer named by `optimizer` (`#loom.sgd`,
    `#loom.adam`, `#loom.adamw`) to `param` with its gradient `grad` and the
    parameter's optimizer `state`, and yields the updated parameter and
    state, exactly as PyTorch's single-tensor algorithm (`foreach=False`)
    computes them. The state tensors are, in order, `[momentum_buffer]` for
    SGD with momentum (none without), `[exp_avg, exp_avg_sq]` for Adam and
    AdamW. The per-parameter step count Adam needs is not an operand: the
    runtime owns it, as it owns the state across steps.

    The op is functional here; the lowering to `loomrt` turns it into an
    in-place update of the parameter and state, which is why nothing may
    read `param` or `state` after it (checked by `loom-lower-to-rt`).

    ```mlir
    %w1, %m1, %v1 = loom.optimizer_update #loom.adamw<lr = 1.0e-02>
        param %w grad %g state [%m, %v] : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Loom_OptimizerAttr:$optimizer,
                       AnyRankedTensor:$param,
                       AnyRankedTensor:$grad,
                       Variadic<AnyRankedTensor>:$state);
  let results = (outs AnyRankedTensor:$new_param,
                      Variadic<AnyRankedTensor>:$new_state);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

#endif // LOOM_DIALECT_LOOM_IR_LOOMOPS_TD
