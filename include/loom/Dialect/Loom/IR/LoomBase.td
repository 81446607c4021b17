//===- LoomBase.td - Loom dialect, enums, attributes and types -*- tablegen -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMBASE_TD
#define LOOM_DIALECT_LOOM_IR_LOOMBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Loom_Dialect : Dialect {
  let name = "loom";
  let cppNamespace = "::loom";
  let summary = "Training steps of PyTorch models and their distribution";
  let description = [{
    The `loom` dialect holds one training step (forward, loss, backward) of a
    PyTorch model as imported from a `.pt2` archive, and the collectives that
    Loom's passes insert to distribute it over a device mesh.

    Every ATen operator is represented by the generic `loom.aten` op, which
    carries the operator's schema name and its non-tensor arguments. The step
    itself is a `func.func` whose arguments and results carry the graph
    signature (`loom.name`, `loom.role`, `loom.target`); every op carries the
    module path it came from (`loom.module`) and its phase (`loom.phase`);
    an op of a module called more than once per forward also the call it
    ran in (`loom.calls`);
    after `loom-accumulate-gradients` also its microbatch
    (`loom.microbatch`).

    A pipelined step is several step functions, each with
    `loom.program_ranks = array<i64: ...>`: the ranks of the module's mesh
    that run it (one MPMD program per pipeline rank). Their rank lists are
    disjoint and together cover the mesh; only the one holding the last
    stage returns the loss. Stages exchange activations and gradients with
    `loom.send_start`/`loom.recv_start`.

    Device meshes are `loom.mesh` symbols with named axes. Collectives are
    asynchronous: a `*_start` op returns a `!loom.future` at the point where
    communication may begin, and `loom.wait` marks where its value is needed.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let extraClassDeclaration = [{
    /// The names of the attributes nearly every analysis reads on every op
    /// (loom.phase, loom.module, loom.microbatch), made once: a Loom op's
    /// lookup by them compares pointers instead of strings.
    ::mlir::StringAttr phaseAttrName, moduleAttrName, microbatchAttrName;

    /// Discardable attribute names used on ops, step arguments and results.
    static constexpr ::llvm::StringLiteral kModuleAttrName = "loom.module";
    static constexpr ::llvm::StringLiteral kPhaseAttrName = "loom.phase";
    static constexpr ::llvm::StringLiteral kNameAttrName = "loom.name";
    static constexpr ::llvm::StringLiteral kRoleAttrName = "loom.role";
    static constexpr ::llvm::StringLiteral kTargetAttrName = "loom.target";
    static constexpr ::llvm::StringLiteral kStepAttrName = "loom.step";
    static constexpr ::llvm::StringLiteral kShardAttrName = "loom.shard";
    static constexpr ::llvm::StringLiteral kSplitAttrName = "loom.split";
    static constexpr ::llvm::StringLiteral kPartialAttrName = "loom.partial";
    static constexpr ::llvm::StringLiteral kWeightsAttrName = "loom.weights";
    static constexpr ::llvm::StringLiteral kSourceAttrName = "loom.source";
    /// The optimizer a step's updates use (`#loom.sgd/adam/adamw`), on the
    /// step function once `loom-attach-optimizer` ran.
    static constexpr ::llvm::StringLiteral kOptimizerAttrName =
        "loom.optimizer";
    /// The learning-rate schedule of a step's optimizer (a dictionary,
    /// `loom-attach-optimizer`), on the step function and its loomrt.program.
    static constexpr ::llvm::StringLiteral kLrScheduleAttrName =
        "loom.lr_schedule";
    /// How the runtime applies a step's optimizer ("fused"; absent: the
    /// single-tensor loop), on the step function and its loomrt.program.
    static constexpr ::llvm::StringLiteral kOptimizerImplAttrName =
        "loom.optimizer_impl";
    /// The microbatch (0-based) an op of a gradient-accumulation step
    /// belongs to, set by `loom-accumulate-gradients` on each copy.
    static constexpr ::llvm::StringLiteral kMicrobatchAttrName =
        "loom.microbatch";
    /// On an op run inside a module called more than once per forward: the
    /// 0-based call of each such enclosing module it ran in (a dictionary
    /// from module path to i64, entries for call 0 left out). A backward op
    /// carries the calls of the forward op it differentiates, so `loom-fsdp`
    /// can gather per call as FSDP2's hooks do.
    static constexpr ::llvm::StringLiteral kCallsAttrName = "loom.calls";
    /// The device the compiled step runs on ("cpu" or "cuda"; absent: cpu),
    /// on the module, set by `loom-lower-to-rt{device=...}`.
    static constexpr ::llvm::StringLiteral kDeviceAttrName = "loom.device";
    /// The measured kernel workspace profile (`loom-kernel-workspace`), on
    /// the module: a dictionary from kernel signature to i64 bytes.
    static constexpr ::llvm::StringLiteral kKernelWorkspaceAttrName =
        "loom.kernel_workspace";
    /// The ATen intra-op threads that profile was measured with, on the
    /// module (the artifact records it; loom-run warns when it runs with
    /// other threads).
    static constexpr ::llvm::StringLiteral kKernelWorkspaceThreadsAttrName =
        "loom.kernel_workspace_threads";
    /// The per-rank peak memory the compiled step was planned to stay
    /// within, on the module: the tightest of `loom-sac-ilp`'s budget and
    /// `loom-schedule`'s memory limit, both of which fail rather than exceed
    /// it (the artifact records it; loom-run warns when a rank's measured
    /// peak is above it).
    static constexpr ::llvm::StringLiteral kMemoryBudgetAttrName =
        "loom.memory_budget";
    /// What capture was asked (`#loom.run_config`), on the module.
    static constexpr ::llvm::StringLiteral kRunConfigAttrName =
        "loom.run_config";
    /// On a forward op: the `torch.utils.checkpoint` region it ran in at
    /// capture (PyTorch's `ac_graph_id`), and what that region's policy said
    /// of it (`loom.ac_policy`).
    static constexpr ::llvm::StringLiteral kAcRegionAttrName =
        "loom.ac_region";
    static constexpr ::llvm::StringLiteral kAcPolicyAttrName =
        "loom.ac_policy";
    /// On an `aten::_to_copy`: an id a forward cast shares with the backward
    /// cast autograd made for it (ToCopyBackward), which casts the gradient
    /// back to the dtype of the forward cast's input. `loom-fsdp`'s mixed
    /// precision keeps that backward cast only while the input keeps the
    /// dtype it was traced in.
    static constexpr ::llvm::StringLiteral kCastAttrName = "loom.cast";
    /// On an `aten::_to_copy` converting a value to the dtype it was traced
    /// in: a cast eager makes only under a mixed-precision policy, which
    /// capture found by tracing the step with the policy's parameter dtype
    /// (`.type_as(x)` of a bf16 x, `.float()` of one). True: the cast is to
    /// the policy's compute dtype; false: to the dtype it names.
    /// `loom-fsdp{param-dtype=...}` makes it real where the value's dtype
    /// differs; without mixed precision it is the value itself.
    static constexpr ::llvm::StringLiteral kPolicyCastAttrName =
        "loom.policy_cast";
    /// On the training-mode forward of an `nn.SyncBatchNorm`
    /// (`aten::_native_batch_norm_legit_functional` or its `no_stats`
    /// form): its statistics are those of every data-parallel rank's rows
    /// (`loom-sync-batch-norm`).
    static constexpr ::llvm::StringLiteral kSyncBatchNormAttrName =
        "loom.sync_batch_norm";
    /// On the module: the module paths where each pipeline stage after the
    /// first starts. `loom-pipeline-split` records the cut it made here, and
    /// cuts there when its `boundaries` option is empty; `loom-sac-ilp`
    /// sets it before the split runs, so the cut it planned under stays.
    static constexpr ::llvm::StringLiteral kPipelineBoundariesAttrName =
        "loom.pipeline_boundaries";
    /// On a stage function of `loom-pipeline-split`: its stage (0-based).
    static constexpr ::llvm::StringLiteral kPipelineStageAttrName =
        "loom.pipeline_stage";
    /// On an argument or result of a stage function: the name of the value
    /// it reads or makes, which connects the stage functions.
    static constexpr ::llvm::StringLiteral kPipelineValueAttrName =
        "loom.pipeline_value";
    /// On a backward stage function cut for zero-bubble schedules: "input"
    /// (the input-gradient part, I) or "weight" (the weight-gradient part,
    /// W).
    static constexpr ::llvm::StringLiteral kPipelinePartAttrName =
        "loom.pipeline_part";
    /// On a grad result of a pipeline rank's step: the pipeline rank whose
    /// REDUCE_GRAD made this gradient of a parameter several ranks hold;
    /// this rank holds a copy (gradient clipping counts it once).
    static constexpr ::llvm::StringLiteral kPipelineGradFromAttrName =
        "loom.pipeline_grad_from";
    /// On a pipeline rank's step: the schedule's actions it runs, in
    /// PyTorch's notation ("0F0", "1RECV_B3", "0REDUCE_GRAD").
    static constexpr ::llvm::StringLiteral kPipelineActionsAttrName =
        "loom.pipeline_actions";
    /// On a step function: the global ranks (of the module's mesh) that run
    /// it, which makes it one MPMD program of a pipelined step
    /// (docs/pipeline.md).
    static constexpr ::llvm::StringLiteral kProgramRanksAttrName =
        "loom.program_ranks";
    /// On an input argument of an MPMD step: its index in the step's batch
    /// (the captured step's inputs in order), since each program binds only
    /// the inputs its stages read. Without it, inputs number from 0 in
    /// argument order.
    static constexpr ::llvm::StringLiteral kBatchIndexAttrName =
        "loom.batch_index";
    /// On an input argument: the dim that indexes the samples (capture's
    /// `--batch-dims`: 1 for a sequence-first `(S, B, ...)` tensor).
    /// Without it, dim 0. Data parallelism splits this dim across ranks,
    /// gradient accumulation and pipelining into microbatches.
    static constexpr ::llvm::StringLiteral kBatchDimAttrName =
        "loom.batch_dim";
    /// On an input argument: the tensor has no batch dim (capture's
    /// `--batch-dims ...,none`, and a 0-d batch tensor: a shared attention
    /// mask, a per-step scalar). Every rank and every microbatch takes it
    /// whole; data parallelism, accumulation and pipelining split nothing
    /// of it.
    static constexpr ::llvm::StringLiteral kUnbatchedAttrName =
        "loom.unbatched";
  }];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Loom_PhaseForward : I32EnumAttrCase<"forward", 0>;
def Loom_PhaseBackward : I32EnumAttrCase<"backward", 1>;
def Loom_PhaseOptimizer : I32EnumAttrCase<"optimizer", 2>;
def Loom_Phase : I32EnumAttr<"Phase", "phase of the training step an op belongs to",
    [Loom_PhaseForward, Loom_PhaseBackward, Loom_PhaseOptimizer]> {
  let cppNamespace = "::loom";
  let genSpecializedAttr = 0;
}
def Loom_PhaseAttr : EnumAttr<Loom_Dialect, Loom_Phase, "phase"> {
  let assemblyFormat = "`<` $value `>`";
}

// What a checkpoint policy decides of one forward op: PyTorch's
// `torch.utils.checkpoint.CheckpointPolicy`.
def Loom_AcMustSave : I32EnumAttrCase<"must_save", 0>;
def Loom_AcPreferSave : I32EnumAttrCase<"prefer_save", 1>;
def Loom_AcMustRecompute : I32EnumAttrCase<"must_recompute", 2>;
def Loom_AcPreferRecompute : I32EnumAttrCase<"prefer_recompute", 3>;
def Loom_AcPolicy : I32EnumAttr<"AcPolicy",
    "what activation checkpointing does with a forward op's outputs",
    [Loom_AcMustSave, Loom_AcPreferSave, Loom_AcMustRecompute,
     Loom_AcPreferRecompute]> {
  let cppNamespace = "::loom";
  let genSpecializedAttr = 0;
}
def Loom_AcPolicyAttr : EnumAttr<Loom_Dialect, Loom_AcPolicy, "ac_policy"> {
  let assemblyFormat = "`<` $value `>`";
}

def Loom_RoleParameter : I32EnumAttrCase<"parameter", 0>;
def Loom_RoleBuffer : I32EnumAttrCase<"buffer", 1>;
def Loom_RoleConstant : I32EnumAttrCase<"constant", 2>;
def Loom_RoleInput : I32EnumAttrCase<"input", 3>;
def Loom_RoleLoss : I32EnumAttrCase<"loss", 4>;
def Loom_RoleGrad : I32EnumAttrCase<"grad", 5>;
def Loom_RoleBufferMutation : I32EnumAttrCase<"buffer_mutation", 6>;
def Loom_RoleOutput : I32EnumAttrCase<"output", 7>;
def Loom_RoleInputMutation : I32EnumAttrCase<"input_mutation", 8>;
// Added by loom-attach-optimizer: optimizer state arguments (owned by the
// runtime across steps, like buffers) and the results that replace the
// gradients once the step updates its parameters itself.
def Loom_RoleOptimizerState : I32EnumAttrCase<"optimizer_state", 9>;
def Loom_RoleParamUpdate : I32EnumAttrCase<"param_update", 10>;
def Loom_RoleStateUpdate : I32EnumAttrCase<"state_update", 11>;
def Loom_Role : I32EnumAttr<"Role",
    "role of a step argument or result in the exported graph signature",
    [Loom_RoleParameter, Loom_RoleBuffer, Loom_RoleConstant, Loom_RoleInput,
     Loom_RoleLoss, Loom_RoleGrad, Loom_RoleBufferMutation, Loom_RoleOutput,
     Loom_RoleInputMutation, Loom_RoleOptimizerState, Loom_RoleParamUpdate,
     Loom_RoleStateUpdate]> {
  let cppNamespace = "::loom";
  let genSpecializedAttr = 0;
}
def Loom_RoleAttr : EnumAttr<Loom_Dialect, Loom_Role, "role"> {
  let assemblyFormat = "`<` $value `>`";
}

def Loom_ReduceSum : I32EnumAttrCase<"sum", 0>;
def Loom_ReduceAvg : I32EnumAttrCase<"avg", 1>;
def Loom_ReduceMax : I32EnumAttrCase<"max", 2>;
def Loom_ReduceMin : I32EnumAttrCase<"min", 3>;
def Loom_ReduceProduct : I32EnumAttrCase<"product", 4>;
def Loom_ReduceKind : I32EnumAttr<"ReduceKind", "reduction of a collective",
    [Loom_ReduceSum, Loom_ReduceAvg, Loom_ReduceMax, Loom_ReduceMin,
     Loom_ReduceProduct]> {
  let cppNamespace = "::loom";
  let genSpecializedAttr = 0;
}
def Loom_ReduceKindAttr : EnumAttr<Loom_Dialect, Loom_ReduceKind, "reduce"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class Loom_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Loom_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Loom_ShardAttr : Loom_Attr<"Shard", "shard"> {
  let summary = "How a step argument is sharded over mesh axes";
  let description = [{
    On a parameter (or its optimizer state) of a distributed step: the full
    tensor has shape `global`; it is zero-padded on `dim` to a multiple of
    the group size G (the product of the sizes of `axes` on `mesh`) and the
    rank with index i in that group holds chunk i, of size
    `ceil(global[dim] / G)` on `dim`, which is the argument's type.

    ```mlir
    %w: tensor<3x4xf32> {loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [10, 4]>}
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$axes,
                        "int64_t":$dim,
                        ArrayRefParameter<"int64_t">:$global);
  let assemblyFormat = [{
    `<` $mesh `,` `axes` `=` $axes `,` `dim` `=` $dim `,` `global` `=` `[` $global `]` `>`
  }];
}

def Loom_SplitAttr : Loom_Attr<"Split", "split"> {
  let summary = "How a batch argument is split over data-parallel ranks";
  let description = [{
    On a batch input of a distributed step: the argument's type is this
    rank's slice of the global batch along `dim`; the rank with index i in
    the group of `axes` takes the i-th of G equal slices.

    ```mlir
    %x: tensor<2x16xi64> {loom.split = #loom.split<@dp, axes = ["shard"], dim = 0>}
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$axes,
                        "int64_t":$dim);
  let assemblyFormat = "`<` $mesh `,` `axes` `=` $axes `,` `dim` `=` $dim `>`";
}

def Loom_PartialAttr : Loom_Attr<"Partial", "partial"> {
  let summary = "A step result that is partial over ranks";
  let description = [{
    On the loss of a data-parallel step: each rank computes the loss of its
    own slice; the value reported for the step is the `reduction` of the
    ranks' values over `axes` (for a mean loss over equal slices, `avg`
    gives the single-device loss).

    ```mlir
    -> (tensor<f32> {loom.role = #loom.role<loss>, loom.partial = #loom.partial<@dp, axes = ["shard"], avg>})
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$axes,
                        "::loom::ReduceKind":$reduction);
  let assemblyFormat = "`<` $mesh `,` `axes` `=` $axes `,` $reduction `>`";
}

def Loom_OperandRefAttr : Loom_Attr<"OperandRef", "arg"> {
  let summary = "A reference to a tensor operand inside an ATen argument list";
  let description = [{
    Inside the `args` and `kwargs` of `loom.aten`, `#loom.arg<N>` stands for
    the op's N-th tensor operand. It may appear where the schema expects a
    `Tensor`, inside a `Tensor[]` list, or inside a `Tensor?[]` list (where
    `unit` stands for `None`).

    ```mlir
    %0 = loom.aten "aten::cat"(%a, %b) {args = [[#loom.arg<0>, #loom.arg<1>], 1 : i64]}
        : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
    ```
  }];
  let parameters = (ins "unsigned":$index);
  let assemblyFormat = "`<` $index `>`";
}

//===----------------------------------------------------------------------===//
// Optimizer hyperparameters
//===----------------------------------------------------------------------===//

// A hyperparameter with PyTorch's default. Floats print with the fewest
// digits that parse back to the same double, always with a '.', which MLIR
// float literals need; the struct format omits values equal to the default.
class Loom_F64Parameter<string default, string desc>
    : DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(" # default # ")",
                             desc> {
  let parser = [{ ::loom::detail::parseF64Parameter($_parser) }];
  let printer = [{
    ::loom::detail::printF64Parameter($_printer, $_self.convertToDouble())
  }];
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
}
class Loom_BoolParameter<string default, string desc>
    : DefaultValuedParameter<"bool", default, desc> {
  let parser = [{ ::loom::detail::parseBoolParameter($_parser) }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
}

def Loom_SGDAttr : Loom_Attr<"SGD", "sgd"> {
  let summary = "torch.optim.SGD and its hyperparameters";
  let description = [{
    Stochastic gradient descent with PyTorch's semantics and defaults
    (`torch.optim.SGD(lr=1e-3, momentum=0, dampening=0, weight_decay=0,
    nesterov=False, maximize=False)`). With a non-zero `momentum` each
    parameter keeps one state tensor, `momentum_buffer`; without, none.
    Omitted fields take the default, so `#loom.sgd<>` is PyTorch's default
    SGD.

    ```mlir
    #loom.sgd<lr = 0.01, momentum = 0.9, nesterov = true>
    ```
  }];
  let parameters = (ins
    Loom_F64Parameter<"1.0e-3", "learning rate">:$lr,
    Loom_F64Parameter<"0.0", "momentum factor">:$momentum,
    Loom_F64Parameter<"0.0", "dampening of the momentum">:$dampening,
    Loom_F64Parameter<"0.0", "L2 penalty added to the gradient">:$weight_decay,
    Loom_BoolParameter<"false", "use Nesterov momentum">:$nesterov,
    Loom_BoolParameter<"false", "maximize the objective">:$maximize);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

class Loom_AdamFamilyAttr<string name, string attrMnemonic,
                          string weightDecayDefault>
    : Loom_Attr<name, attrMnemonic> {
  let parameters = (ins
    Loom_F64Parameter<"1.0e-3", "learning rate">:$lr,
    Loom_F64Parameter<"0.9", "decay of the first moment (betas[0])">:$beta1,
    Loom_F64Parameter<"0.999", "decay of the second moment (betas[1])">:$beta2,
    Loom_F64Parameter<"1.0e-8", "term added to the denominator">:$eps,
    Loom_F64Parameter<weightDecayDefault, "weight decay">:$weight_decay,
    Loom_BoolParameter<"false", "maximize the objective">:$maximize,
    Loom_BoolParameter<"false", "the AMSGrad variant">:$amsgrad);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Loom_AdamAttr
    : Loom_AdamFamilyAttr<"Adam", "adam", "0.0"> {
  let summary = "torch.optim.Adam and its hyperparameters";
  let description = [{
    Adam with PyTorch's semantics and defaults (`torch.optim.Adam(lr=1e-3,
    betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
    maximize=False)`); weight decay is added to the gradient (L2). Each
    parameter keeps two state tensors, `exp_avg` and `exp_avg_sq`, and with
    `amsgrad` a third, `max_exp_avg_sq` (the running maximum of `exp_avg_sq`
    that then normalises the update); the step count is kept by the runtime.

    ```mlir
    #loom.adam<lr = 0.01, beta2 = 0.99>
    ```
  }];
}

def Loom_AdamWAttr
    : Loom_AdamFamilyAttr<"AdamW", "adamw", "1.0e-2"> {
  let summary = "torch.optim.AdamW and its hyperparameters";
  let description = [{
    AdamW with PyTorch's semantics and defaults (`torch.optim.AdamW(lr=1e-3,
    betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
    maximize=False)`): Adam with decoupled weight decay (the parameter is
    scaled by `1 - lr * weight_decay` before the update). State as
    `#loom.adam`.

    ```mlir
    #loom.adamw<lr = 3.0e-4, weight_decay = 0.1>
    ```
  }];
}

def Loom_RMSpropAttr : Loom_Attr<"RMSprop", "rmsprop"> {
  let summary = "torch.optim.RMSprop and its hyperparameters";
  let description = [{
    RMSprop with PyTorch's semantics and defaults (`torch.optim.RMSprop(
    lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False, maximize=False)`). Each parameter keeps `square_avg`,
    then `momentum_buffer` with a non-zero `momentum`, then `grad_avg` when
    `centered`.

    ```mlir
    #loom.rmsprop<lr = 1.0e-3, momentum = 0.9, centered = true>
    ```
  }];
  let parameters = (ins
    Loom_F64Parameter<"1.0e-2", "learning rate">:$lr,
    Loom_F64Parameter<"0.99", "smoothing constant of square_avg">:$alpha,
    Loom_F64Parameter<"1.0e-8", "term added to the denominator">:$eps,
    Loom_F64Parameter<"0.0", "L2 penalty added to the gradient">:$weight_decay,
    Loom_F64Parameter<"0.0", "momentum factor">:$momentum,
    Loom_BoolParameter<"false", "normalise by the estimated variance">:$centered,
    Loom_BoolParameter<"false", "maximize the objective">:$maximize);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Loom_AdagradAttr : Loom_Attr<"Adagrad", "adagrad"> {
  let summary = "torch.optim.Adagrad and its hyperparameters";
  let description = [{
    Adagrad with PyTorch's semantics and defaults (`torch.optim.Adagrad(
    lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
    eps=1e-10, maximize=False)`), dense gradients. Each parameter keeps one
    state tensor, `sum`, which starts filled with
    `initial_accumulator_value` (the runtime creates it so).

    ```mlir
    #loom.adagrad<lr = 0.1, initial_accumulator_value = 0.1>
    ```
  }];
  let parameters = (ins
    Loom_F64Parameter<"1.0e-2", "learning rate">:$lr,
    Loom_F64Parameter<"0.0", "learning-rate decay per step">:$lr_decay,
    Loom_F64Parameter<"0.0", "L2 penalty added to the gradient">:$weight_decay,
    Loom_F64Parameter<"0.0", "starting value of sum">:$initial_accumulator_value,
    Loom_F64Parameter<"1.0e-10", "term added to the denominator">:$eps,
    Loom_BoolParameter<"false", "maximize the objective">:$maximize);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Loom_AdadeltaAttr : Loom_Attr<"Adadelta", "adadelta"> {
  let summary = "torch.optim.Adadelta and its hyperparameters";
  let description = [{
    Adadelta with PyTorch's semantics and defaults (`torch.optim.Adadelta(
    lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False)`); weight
    decay is added to the gradient. Each parameter keeps `square_avg` and
    `acc_delta`.

    ```mlir
    #loom.adadelta<lr = 0.5, rho = 0.95>
    ```
  }];
  let parameters = (ins
    Loom_F64Parameter<"1.0", "coefficient that scales delta">:$lr,
    Loom_F64Parameter<"0.9", "decay of the running averages">:$rho,
    Loom_F64Parameter<"1.0e-6", "term added inside both square roots">:$eps,
    Loom_F64Parameter<"0.0", "L2 penalty added to the gradient">:$weight_decay,
    Loom_BoolParameter<"false", "maximize the objective">:$maximize);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Loom_AdamaxAttr : Loom_Attr<"Adamax", "adamax"> {
  let summary = "torch.optim.Adamax and its hyperparameters";
  let description = [{
    Adamax (Adam with the infinity norm) with PyTorch's semantics and
    defaults (`torch.optim.Adamax(lr=2e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=0, maximize=False)`); weight decay is added to the
    gradient. Each parameter keeps `exp_avg` and `exp_inf`.

    ```mlir
    #loom.adamax<lr = 1.0e-3, beta2 = 0.99>
    ```
  }];
  let parameters = (ins
    Loom_F64Parameter<"2.0e-3", "learning rate">:$lr,
    Loom_F64Parameter<"0.9", "decay of the first moment (betas[0])">:$beta1,
    Loom_F64Parameter<"0.999", "decay of the infinity norm (betas[1])">:$beta2,
    Loom_F64Parameter<"1.0e-8", "term added to the norm">:$eps,
    Loom_F64Parameter<"0.0", "L2 penalty added to the gradient">:$weight_decay,
    Loom_BoolParameter<"false", "maximize the objective">:$maximize);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Loom_RAdamAttr : Loom_Attr<"RAdam", "radam"> {
  let summary = "torch.optim.RAdam and its hyperparameters";
  let description = [{
    Rectified Adam with PyTorch's semantics and defaults
    (`torch.optim.RAdam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=0, decoupled_weight_decay=False, maximize=False)`): weight
    decay is added to the gradient, or with `decoupled_weight_decay` scales
    the parameter as AdamW's does. Each parameter keeps `exp_avg` and
    `exp_avg_sq`.

    ```mlir
    #loom.radam<lr = 1.0e-2, weight_decay = 0.1, decoupled_weight_decay = true>
    ```
  }];
  let parameters = (ins
    Loom_F64Parameter<"1.0e-3", "learning rate">:$lr,
    Loom_F64Parameter<"0.9", "decay of the first moment (betas[0])">:$beta1,
    Loom_F64Parameter<"0.999", "decay of the second moment (betas[1])">:$beta2,
    Loom_F64Parameter<"1.0e-8", "term added to the denominator">:$eps,
    Loom_F64Parameter<"0.0", "weight decay">:$weight_decay,
    Loom_BoolParameter<"false", "AdamW's decoupled weight decay">:$decoupled_weight_decay,
    Loom_BoolParameter<"false", "maximize the objective">:$maximize);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Loom_NAdamAttr : Loom_Attr<"NAdam", "nadam"> {
  let summary = "torch.optim.NAdam and its hyperparameters";
  let description = [{
    Adam with Nesterov momentum, with PyTorch's semantics and defaults
    (`torch.optim.NAdam(lr=2e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=0, momentum_decay=4e-3, decoupled_weight_decay=False,
    maximize=False)`): weight decay is added to the gradient, or with
    `decoupled_weight_decay` scales the parameter as AdamW's does. Each
    parameter keeps `exp_avg` and `exp_avg_sq`; its `mu_product`, a scalar
    like the step count, is kept beside that count by the runtime.

    ```mlir
    #loom.nadam<lr = 1.0e-3, momentum_decay = 1.0e-2>
    ```
  }];
  let parameters = (ins
    Loom_F64Parameter<"2.0e-3", "learning rate">:$lr,
    Loom_F64Parameter<"0.9", "decay of the first moment (betas[0])">:$beta1,
    Loom_F64Parameter<"0.999", "decay of the second moment (betas[1])">:$beta2,
    Loom_F64Parameter<"1.0e-8", "term added to the denominator">:$eps,
    Loom_F64Parameter<"0.0", "weight decay">:$weight_decay,
    Loom_F64Parameter<"4.0e-3", "momentum decay (psi)">:$momentum_decay,
    Loom_BoolParameter<"false", "AdamW's decoupled weight decay">:$decoupled_weight_decay,
    Loom_BoolParameter<"false", "maximize the objective">:$maximize);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Loom_RpropAttr : Loom_Attr<"Rprop", "rprop"> {
  let summary = "torch.optim.Rprop and its hyperparameters";
  let description = [{
    Resilient backpropagation with PyTorch's semantics and defaults
    (`torch.optim.Rprop(lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50),
    maximize=False)`); it has no weight decay. Each parameter keeps `prev`
    and `step_size`; `step_size` starts at the learning rate of the
    parameter's first step (the runtime fills it then, as torch.optim
    creates it).

    ```mlir
    #loom.rprop<lr = 1.0e-3, etaminus = 0.4, step_size_max = 1.0>
    ```
  }];
  let parameters = (ins
    Loom_F64Parameter<"1.0e-2", "learning rate (the first step size)">:$lr,
    Loom_F64Parameter<"0.5", "step-size factor where the gradient changes sign (etas[0])">:$etaminus,
    Loom_F64Parameter<"1.2", "step-size factor where it keeps its sign (etas[1])">:$etaplus,
    Loom_F64Parameter<"1.0e-6", "smallest step size (step_sizes[0])">:$step_size_min,
    Loom_F64Parameter<"50.0", "largest step size (step_sizes[1])">:$step_size_max,
    Loom_BoolParameter<"false", "maximize the objective">:$maximize);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Loom_ASGDAttr : Loom_Attr<"ASGD", "asgd"> {
  let summary = "torch.optim.ASGD and its hyperparameters";
  let description = [{
    Averaged stochastic gradient descent with PyTorch's semantics and
    defaults (`torch.optim.ASGD(lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6,
    weight_decay=0, maximize=False)`): each step scales the parameter by
    `1 - lambd * eta` and subtracts `eta` times the gradient, where `eta`,
    the first step's learning rate, becomes `lr / (1 + lambd * lr *
    step) ** alpha` after each step; the average `ax` copies the parameter
    until step `t0 + 1`, then averages it in with weight
    `1 / (step - t0)`. Each parameter keeps `ax`; its `eta` and `mu`,
    scalars like the step count, are kept beside that count by the runtime.

    ```mlir
    #loom.asgd<lr = 5.0e-2, t0 = 10.0>
    ```
  }];
  let parameters = (ins
    Loom_F64Parameter<"1.0e-2", "learning rate (the first eta)">:$lr,
    Loom_F64Parameter<"1.0e-4", "decay term">:$lambd,
    Loom_F64Parameter<"0.75", "power of the eta update">:$alpha,
    Loom_F64Parameter<"1.0e6", "step at which averaging starts">:$t0,
    Loom_F64Parameter<"0.0", "weight decay">:$weight_decay,
    Loom_BoolParameter<"false", "maximize the objective">:$maximize);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Loom_OptimizerAttr : Attr<CPred<"::loom::isOptimizerAttr($_self)">,
    "optimizer hyperparameters (#loom.sgd, #loom.adam, #loom.adamw, "
    "#loom.rmsprop, #loom.adagrad, #loom.adadelta, #loom.adamax, "
    "#loom.radam, #loom.nadam, #loom.rprop or #loom.asgd)"> {
  let storageType = "::mlir::Attribute";
  let returnType = "::mlir::Attribute";
  let convertFromStorage = "$_self";
}

def Loom_RunConfigAttr : Loom_Attr<"RunConfig", "run_config"> {
  let summary = "What capture was asked: ranks, microbatches, seed, optimizer";
  let description = [{
    The run configuration `loom.capture` recorded with the step and
    `loom-import` put on the module as `loom.run_config`: the ranks the step
    was captured for (`--split`), the gradient-accumulation microbatches, the
    seed and the optimizer the eager reference trained with, every
    hyperparameter resolved, with its parameter groups (one rule per group
    of the torch.optim optimizer, naming its parameters), learning-rate
    schedule, fused implementation and gradient clipping
    (`clip_grad_norm_` before each update) when it had them. `loom-compile` takes the world size, the
    microbatches and the optimizer from it unless told otherwise, and
    refuses an option that contradicts it.

    ```mlir
    module attributes {loom.run_config = #loom.run_config<world_size = 4,
        microbatches = 1, seed = 0, optimizer = #loom.adamw<lr = 1.0e-03>>} {
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"int64_t", "1",
        "ranks the step was captured for (capture --split)">:$world_size,
    DefaultValuedParameter<"int64_t", "1",
        "gradient-accumulation microbatches per step">:$microbatches,
    DefaultValuedParameter<"int64_t", "0", "torch.manual_seed of the capture">:$seed,
    OptionalParameter<"::mlir::Attribute",
        "the optimizer of the eager reference (#loom.sgd/adam/adamw)">:$optimizer,
    OptionalParameter<"::mlir::StringAttr",
        "its parameter groups, as loom-attach-optimizer's param-groups">:$param_groups,
    OptionalParameter<"::mlir::DictionaryAttr",
        "its learning-rate schedule, as loom.lr_schedule">:$lr_schedule,
    OptionalParameter<"::mlir::StringAttr",
        "how torch.optim computed its update (\"fused\": fused=True; "
        "absent: the single-tensor loop)">:$optimizer_impl,
    OptionalParameter<"::mlir::DictionaryAttr",
        "its gradient clipping before each update (clip_grad_norm_: "
        "max_norm, norm_type \"2\" or \"inf\")">:$clip_grad_norm);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

class Loom_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Loom_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Loom_FutureType : Loom_Type<"Future", "future"> {
  let summary = "The pending result of an asynchronous collective";
  let description = [{
    Produced by a collective's `*_start` op and consumed by exactly one
    `loom.wait`, which yields the value (or nothing for `!loom.future<none>`,
    the completion of a send).

    ```mlir
    %f = loom.all_gather_start %x on @dp axes ["shard"] dim 0
        : tensor<2x8xf32> -> !loom.future<tensor<8x8xf32>>
    ```
  }];
  let parameters = (ins "::mlir::Type":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
}

def Loom_AnyFuture : Type<CPred<"::llvm::isa<::loom::FutureType>($_self)">,
    "!loom.future", "::loom::FutureType">;

//===----------------------------------------------------------------------===//
// Base op
//===----------------------------------------------------------------------===//

class Loom_Op<string mnemonic, list<Trait> traits = []>
    : Op<Loom_Dialect, mnemonic, traits>;

#endif // LOOM_DIALECT_LOOM_IR_LOOMBASE_TD
