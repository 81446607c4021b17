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
    module path it came from (`loom.module`) and its phase (`loom.phase`).

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
    /// Discardable attribute names used on ops, step arguments and results.
    static constexpr ::llvm::StringLiteral kModuleAttrName = "loom.module";
    static constexpr ::llvm::StringLiteral kPhaseAttrName = "loom.phase";
    static constexpr ::llvm::StringLiteral kNameAttrName = "loom.name";
    static constexpr ::llvm::StringLiteral kRoleAttrName = "loom.role";
    static constexpr ::llvm::StringLiteral kTargetAttrName = "loom.target";
    static constexpr ::llvm::StringLiteral kStepAttrName = "loom.step";
    static constexpr ::llvm::StringLiteral kWeightsAttrName = "loom.weights";
    static constexpr ::llvm::StringLiteral kSourceAttrName = "loom.source";
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

def Loom_RoleParameter : I32EnumAttrCase<"parameter", 0>;
def Loom_RoleBuffer : I32EnumAttrCase<"buffer", 1>;
def Loom_RoleConstant : I32EnumAttrCase<"constant", 2>;
def Loom_RoleInput : I32EnumAttrCase<"input", 3>;
def Loom_RoleLoss : I32EnumAttrCase<"loss", 4>;
def Loom_RoleGrad : I32EnumAttrCase<"grad", 5>;
def Loom_RoleBufferMutation : I32EnumAttrCase<"buffer_mutation", 6>;
def Loom_RoleOutput : I32EnumAttrCase<"output", 7>;
def Loom_RoleInputMutation : I32EnumAttrCase<"input_mutation", 8>;
def Loom_Role : I32EnumAttr<"Role",
    "role of a step argument or result in the exported graph signature",
    [Loom_RoleParameter, Loom_RoleBuffer, Loom_RoleConstant, Loom_RoleInput,
     Loom_RoleLoss, Loom_RoleGrad, Loom_RoleBufferMutation, Loom_RoleOutput,
     Loom_RoleInputMutation]> {
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
