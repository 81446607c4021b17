//===- LoomRTBase.td - loomrt dialect, enums, attributes, types -*- tablegen -*-===//

#ifndef LOOM_DIALECT_LOOMRT_IR_LOOMRTBASE_TD
#define LOOM_DIALECT_LOOMRT_IR_LOOMRTBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def LoomRT_Dialect : Dialect {
  let name = "loomrt";
  let cppNamespace = "::loom::rt";
  let summary = "Per-rank programs the Loom runtime executes";
  let description = [{
    The `loomrt` dialect is the level at which everything the runtime needs
    is explicit, one op per artifact instruction (`docs/artifact.md`):

    - one `loomrt.program` per rank, with the names of its streams, the
      number of value slots and the optimizer;
    - the step's binding tables: `loomrt.input` (parameters, buffers,
      constants and batch inputs, bound to slots before the first
      instruction), `loomrt.state` (optimizer state) and `loomrt.output`
      (loss, gradients, buffer mutations, read after the last instruction);
    - the instructions: `loomrt.aten` (an ATen operator with typed
      arguments), `loomrt.free` (drop values after their last use),
      `loomrt.optimizer` (update a parameter in place), and
      `loomrt.record_event` / `loomrt.wait_event` between streams,
      `loomrt.collective_start` / `loomrt.wait` (collectives over mesh
      axes, issued asynchronously on their own stream).

    Values stay SSA, so def-use chains and dominance check the dataflow;
    once `loomrt-assign-slots` ran, every value carries the slot the
    runtime keeps it in, and the program verifier checks that no slot is
    overwritten while its value may still be read.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let dependentDialects = ["::loom::LoomDialect"];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def LoomRT_LayoutStrided : I32EnumAttrCase<"strided", 0>;
def LoomRT_LayoutSparseCoo : I32EnumAttrCase<"sparse_coo", 1>;
def LoomRT_LayoutSparseCsr : I32EnumAttrCase<"sparse_csr", 2>;
def LoomRT_LayoutSparseCsc : I32EnumAttrCase<"sparse_csc", 3>;
def LoomRT_LayoutSparseBsr : I32EnumAttrCase<"sparse_bsr", 4>;
def LoomRT_LayoutSparseBsc : I32EnumAttrCase<"sparse_bsc", 5>;
def LoomRT_LayoutMkldnn : I32EnumAttrCase<"mkldnn", 6>;
def LoomRT_Layout : I32EnumAttr<"Layout", "a torch.layout argument",
    [LoomRT_LayoutStrided, LoomRT_LayoutSparseCoo, LoomRT_LayoutSparseCsr,
     LoomRT_LayoutSparseCsc, LoomRT_LayoutSparseBsr, LoomRT_LayoutSparseBsc,
     LoomRT_LayoutMkldnn]> {
  let cppNamespace = "::loom::rt";
  let genSpecializedAttr = 0;
}
def LoomRT_LayoutAttr : EnumAttr<LoomRT_Dialect, LoomRT_Layout, "layout"> {
  let summary = "A torch.layout argument of an ATen call";
  let assemblyFormat = "`<` $value `>`";
}

def LoomRT_MemoryFormatContiguous : I32EnumAttrCase<"contiguous_format", 0>;
def LoomRT_MemoryFormatChannelsLast : I32EnumAttrCase<"channels_last", 1>;
def LoomRT_MemoryFormatChannelsLast3d : I32EnumAttrCase<"channels_last_3d", 2>;
def LoomRT_MemoryFormatPreserve : I32EnumAttrCase<"preserve_format", 3>;
def LoomRT_MemoryFormat : I32EnumAttr<"MemoryFormat",
    "a torch.memory_format argument",
    [LoomRT_MemoryFormatContiguous, LoomRT_MemoryFormatChannelsLast,
     LoomRT_MemoryFormatChannelsLast3d, LoomRT_MemoryFormatPreserve]> {
  let cppNamespace = "::loom::rt";
  let genSpecializedAttr = 0;
}
def LoomRT_MemoryFormatAttr
    : EnumAttr<LoomRT_Dialect, LoomRT_MemoryFormat, "memory_format"> {
  let summary = "A torch.memory_format argument of an ATen call";
  let assemblyFormat = "`<` $value `>`";
}

def LoomRT_InitZeros : I32EnumAttrCase<"zeros", 0>;
// Filled with the program optimizer's initial_accumulator_value (Adagrad).
def LoomRT_InitAccumulator
    : I32EnumAttrCase<"initial_accumulator_value", 1>;
def LoomRT_StateInit : I32EnumAttr<"StateInit",
    "how the runtime creates optimizer state before the first step",
    [LoomRT_InitZeros, LoomRT_InitAccumulator]> {
  let cppNamespace = "::loom::rt";
  let genSpecializedAttr = 0;
}
def LoomRT_StateInitAttr
    : EnumAttr<LoomRT_Dialect, LoomRT_StateInit, "init"> {
  let summary = "How optimizer state is created";
  let assemblyFormat = "`<` $value `>`";
}

def LoomRT_CollectiveAllGather : I32EnumAttrCase<"all_gather", 0>;
def LoomRT_CollectiveReduceScatter : I32EnumAttrCase<"reduce_scatter", 1>;
def LoomRT_CollectiveAllReduce : I32EnumAttrCase<"all_reduce", 2>;
def LoomRT_CollectiveBroadcast : I32EnumAttrCase<"broadcast", 3>;
def LoomRT_CollectiveAllSlice : I32EnumAttrCase<"all_slice", 4>;
// Point-to-point transfers between pipeline stages (format version 3).
def LoomRT_CollectiveSend : I32EnumAttrCase<"send", 5>;
def LoomRT_CollectiveRecv : I32EnumAttrCase<"recv", 6>;
def LoomRT_CollectiveKind : I32EnumAttr<"CollectiveKind",
    "the collective a loomrt.collective_start starts",
    [LoomRT_CollectiveAllGather, LoomRT_CollectiveReduceScatter,
     LoomRT_CollectiveAllReduce, LoomRT_CollectiveBroadcast,
     LoomRT_CollectiveAllSlice, LoomRT_CollectiveSend,
     LoomRT_CollectiveRecv]> {
  let cppNamespace = "::loom::rt";
  let genSpecializedAttr = 0;
}
def LoomRT_CollectiveKindAttr
    : EnumAttr<LoomRT_Dialect, LoomRT_CollectiveKind, "collective"> {
  let summary = "Which collective a start op issues";
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class LoomRT_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<LoomRT_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def LoomRT_DeviceAttr : LoomRT_Attr<"Device", "device"> {
  let summary = "A torch.device argument of an ATen call";
  let description = [{
    The device a factory or copy op names in the captured graph. The
    runtime substitutes the device it runs on; the attribute keeps the
    argument's type, which a plain string would lose.

    ```mlir
    kwargs = {device = #loomrt.device<"cpu">, dtype = f32}
    ```
  }];
  let parameters = (ins StringRefParameter<"device name">:$name);
  let assemblyFormat = "`<` $name `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

class LoomRT_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<LoomRT_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def LoomRT_EventType : LoomRT_Type<"Event", "event"> {
  let summary = "A point in one stream that other streams can wait for";
  let description = [{
    Made by `loomrt.record_event` on one stream and waited for by
    `loomrt.wait_event` on another, like a CUDA event.

    ```mlir
    %e = loomrt.record_event stream 1
    loomrt.wait_event %e stream 0
    ```
  }];
}

def LoomRT_FutureType : LoomRT_Type<"Future", "future"> {
  let summary = "The pending result of a collective the runtime has issued";
  let description = [{
    Made by `loomrt.collective_start` and consumed by exactly one
    `loomrt.wait`, which yields the tensor. A future occupies a slot from
    its start to its wait, like a value. The completion of a send carries
    no tensor: `!loomrt.future<none>`, whose wait has no result.

    ```mlir
    %f = loomrt.collective_start <all_reduce> %g axes ["dp"] reduce <avg>
        stream 1 : tensor<40xf32> -> !loomrt.future<tensor<40xf32>>
    ```
  }];
  let parameters = (ins "::mlir::Type":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The tensor the wait yields, or null for the completion of a send.
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::dyn_cast<::mlir::RankedTensorType>(getValueType());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Base op
//===----------------------------------------------------------------------===//

class LoomRT_Op<string mnemonic, list<Trait> traits = []>
    : Op<LoomRT_Dialect, mnemonic, traits>;

#endif // LOOM_DIALECT_LOOMRT_IR_LOOMRTBASE_TD
