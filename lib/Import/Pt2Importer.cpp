//===- Pt2Importer.cpp - Import a PyTorch .pt2 archive into loom IR -------===//
//
// A `.pt2` archive written by `torch.export.save` holds, under one top-level
// folder, `models/model.json` (the ExportedProgram in PyTorch's versioned
// graph schema), `data/weights/model_weights_config.json` with the raw
// weight files it names, and `data/constants/...` likewise. This file turns
// that into one `func.func` with `loom.aten` ops, checking every reference,
// shape and weight on the way, and reporting the node at fault.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/Pt2Importer.h"

#include "Pt2Archive.h"
#include "RunConfig.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Support/Safetensors.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace loom;
namespace json = llvm::json;

/// The graph schema major version Loom reads (torch 2.5 to 2.9 write 8.x).
static constexpr int64_t kSchemaMajor = 8;

namespace {

/// ATen ScalarType as numbered in torch/_export/serde/schema.py.
struct DtypeInfo {
  int64_t code;
  const char *safetensors;
};

Type dtypeToType(MLIRContext *ctx, int64_t code) {
  Builder b(ctx);
  switch (code) {
  case 1: // BYTE (uint8)
    return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case 2: // CHAR (int8)
    return b.getIntegerType(8);
  case 3:
    return b.getIntegerType(16);
  case 4:
    return b.getIntegerType(32);
  case 5:
    return b.getIntegerType(64);
  case 6:
    return b.getF16Type();
  case 7:
    return b.getF32Type();
  case 8:
    return b.getF64Type();
  case 10:
    return ComplexType::get(b.getF32Type());
  case 11:
    return ComplexType::get(b.getF64Type());
  case 12:
    return b.getI1Type();
  case 13:
    return b.getBF16Type();
  case 28:
    return IntegerType::get(ctx, 16, IntegerType::Unsigned);
  case 29:
    return b.getType<Float8E4M3FNType>();
  case 30:
    return b.getType<Float8E5M2Type>();
  default:
    return {};
  }
}

const char *safetensorsDtype(Type t) {
  if (t.isF32())
    return "F32";
  if (t.isF64())
    return "F64";
  if (t.isF16())
    return "F16";
  if (t.isBF16())
    return "BF16";
  if (t.isInteger(1))
    return "BOOL";
  if (t.isUnsignedInteger(8))
    return "U8";
  if (t.isUnsignedInteger(16))
    return "U16";
  if (t.isSignlessInteger(8))
    return "I8";
  if (t.isSignlessInteger(16))
    return "I16";
  if (t.isSignlessInteger(32))
    return "I32";
  if (t.isSignlessInteger(64))
    return "I64";
  if (isa<Float8E4M3FNType>(t))
    return "F8_E4M3";
  if (isa<Float8E5M2Type>(t))
    return "F8_E5M2";
  // safetensors defines complex64 (C64) but no complex128.
  if (auto complex = dyn_cast<ComplexType>(t))
    return complex.getElementType().isF32() ? "C64" : nullptr;
  return nullptr;
}

/// Tensor metadata as the schema writes it (`TensorMeta`).
struct TensorMeta {
  RankedTensorType type;
  SmallVector<int64_t> strides;
  int64_t storageOffset = 0;
};

class Importer {
public:
  Importer(MLIRContext *ctx, StringRef archiveName, const ImportOptions &opts)
      : ctx(ctx), builder(ctx), archiveName(archiveName.str()), opts(opts) {
    archiveLoc = FileLineColLoc::get(ctx, archiveName, 0, 0);
  }

  OwningOpRef<ModuleOp> run(Pt2Archive &archive);

private:
  // Diagnostics ------------------------------------------------------------
  InFlightDiagnostic error(const Twine &message) {
    return emitError(archiveLoc, message);
  }
  InFlightDiagnostic nodeError(Location loc, StringRef node,
                               const Twine &message) {
    (void)node; // the location names the node
    return emitError(loc, message);
  }

  // Archive layout ---------------------------------------------------------
  LogicalResult findLayout(Pt2Archive &archive);
  LogicalResult parseJsonEntry(Pt2Archive &archive, StringRef entry,
                               json::Value &out);

  // Schema pieces ------------------------------------------------------------
  /// Parses schema tensor metadata; the message says what is wrong with
  /// `what`, and callers locate it (at the node or the archive).
  llvm::Expected<TensorMeta> parseTensorMeta(const json::Value &value,
                                             const Twine &what);
  /// The metadata of graph value `name`, or an error message.
  llvm::Expected<TensorMeta> getTensorMeta(StringRef name);
  LogicalResult readTensorValues(const json::Object &graph);
  Location nodeLocation(StringRef name, const json::Object *metadata);
  FailureOr<Value> lookupTensor(const json::Object &tensorArg, Location loc,
                                StringRef node, StringRef argName);

  // Nodes ------------------------------------------------------------------
  /// Turns one node input's schema `Argument` into an attribute.
  class ArgumentConverter;
  /// The tensor results of a node and how its schema returns map onto them.
  struct NodeResults {
    SmallVector<Type> types;
    SmallVector<std::string> names;
    SmallVector<Attribute> returns;
    /// Whether every return is one tensor (then `returns` is left out).
    bool simple = true;
  };
  LogicalResult importNode(const json::Object &node, unsigned index);
  FailureOr<std::string> parseKernel(StringRef target, Location loc,
                                     StringRef node);
  LogicalResult convertInputs(const json::Array &inputsJson, Location loc,
                              StringRef node, SmallVectorImpl<Value> &operands,
                              SmallVectorImpl<Attribute> &args,
                              SmallVectorImpl<NamedAttribute> &kwargs);
  LogicalResult convertOutputs(const json::Array &outputsJson, Location loc,
                               StringRef node, NodeResults &results);
  FailureOr<int64_t> addResult(const json::Object &tensorArg, Location loc,
                               StringRef node, NodeResults &results);
  LogicalResult setModuleAndPhase(Operation *op, const json::Object *metadata,
                                  Location loc, StringRef node);
  LogicalResult setCalls(Operation *op, const json::Object &custom,
                         Location loc, StringRef name);
  LogicalResult setCheckpointRegion(Operation *op, const json::Object &custom,
                                    Location loc, StringRef node);
  LogicalResult setCastPair(Operation *op, const json::Object &custom,
                            Location loc, StringRef node);
  LogicalResult setPolicyCast(Operation *op, const json::Object &custom,
                              Location loc, StringRef node);
  LogicalResult setSyncBatchNorm(Operation *op, const json::Object &custom,
                                 Location loc, StringRef node);
  /// `value`, the custom metadata `key` of a node, as a non-negative integer
  /// (`what` it is names it in the error).
  FailureOr<int64_t> getNonNegativeId(const json::Value &value, StringRef key,
                                      StringRef what, Location loc,
                                      StringRef node);
  void tagPhasesByDataflow();

  // Signature, weights and the step function -------------------------------
  LogicalResult importSignature(const json::Object &graphModule,
                                const json::Object &graph);
  LogicalResult importInputSpec(const json::Value &spec, size_t i,
                                const json::Array &graphInputs);
  LogicalResult importOutputSpec(const json::Value &spec, size_t i);
  LogicalResult importWeights(Pt2Archive &archive);
  LogicalResult importRunConfig(Pt2Archive &archive);
  LogicalResult applyBatchDims(StringRef runConfig);
  /// models/model.json's graph_module and its graph, once the schema
  /// version is checked.
  LogicalResult findGraph(const json::Object *&graphModule,
                          const json::Object *&graph,
                          const json::Array *&nodes);
  LogicalResult createStepFunction();
  LogicalResult importNodes(const json::Array &nodes);
  LogicalResult finishStepFunction();

  MLIRContext *ctx;
  OpBuilder builder;
  std::string archiveName;
  const ImportOptions &opts;
  Location archiveLoc = UnknownLoc::get(ctx);

  std::string prefix; // the archive's top-level folder, with '/'
  json::Value model = nullptr;
  // Raw `tensor_values` entries, parsed when a node or the signature uses
  // them, so that a problem is reported where the tensor is produced.
  llvm::StringMap<const json::Value *> tensorValues;
  llvm::StringMap<Value> values;
  // Graph inputs in order and what the signature says about each.
  struct InputInfo {
    std::string name; // graph value name
    Role role = Role::input;
    std::string fqn; // parameter/buffer/constant name
  };
  std::vector<InputInfo> inputs;
  struct OutputInfo {
    std::string name;
    Role role = Role::output;
    std::string target;
  };
  std::vector<OutputInfo> outputs;

  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
  bool hasPhaseMeta = false;
  safetensors::Writer weights;
};

} // namespace

//===----------------------------------------------------------------------===//
// Archive layout
//===----------------------------------------------------------------------===//

LogicalResult Importer::findLayout(Pt2Archive &archive) {
  static constexpr StringLiteral kModel = "models/model.json";
  for (const std::string &name : archive.entries()) {
    StringRef n(name);
    if (!n.ends_with(kModel))
      continue;
    StringRef p = n.drop_back(kModel.size());
    if (!p.empty() && (!p.ends_with("/") || p.drop_back().contains('/')))
      continue;
    prefix = p.str();
    break;
  }
  if (!llvm::any_of(archive.entries(), [&](const std::string &n) {
        return n == prefix + kModel.str();
      }))
    return error("not a PyTorch export archive: no 'models/model.json' entry "
                 "(is this a torch.export.save file?)");
  std::string formatEntry = prefix + "archive_format";
  if (archive.contains(formatEntry)) {
    llvm::Expected<std::string> format = archive.read(formatEntry);
    if (!format)
      return error(llvm::toString(format.takeError()));
    if (StringRef(*format).trim() != "pt2")
      return error("archive format is '" + StringRef(*format).trim() +
                   "', expected 'pt2'");
  }
  return success();
}

/// Puts what capture was asked (kRunConfigEntry) on the module, if the
/// archive records it.
LogicalResult Importer::importRunConfig(Pt2Archive &archive) {
  std::string entry = prefix + kRunConfigEntry.str();
  if (!archive.contains(entry))
    return success();
  llvm::Expected<std::string> text = archive.read(entry);
  if (!text)
    return error(llvm::toString(text.takeError()));
  llvm::Expected<RunConfigAttr> config = parseRunConfig(*text, ctx);
  if (!config)
    return error(llvm::toString(config.takeError()));
  module->getOperation()->setAttr(LoomDialect::kRunConfigAttrName, *config);
  return applyBatchDims(*text);
}

/// Gives the step's batch inputs, in order, the batch dims capture
/// recorded (`loom.batch_dim` where not 0, `loom.unbatched` where none).
LogicalResult Importer::applyBatchDims(StringRef runConfig) {
  SmallVector<unsigned> inputs;
  SmallVector<int64_t> ranks;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto role = func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role || role.getValue() != Role::input)
      continue;
    inputs.push_back(i);
    ranks.push_back(
        cast<RankedTensorType>(func.getArgument(i).getType()).getRank());
  }
  llvm::Expected<SmallVector<std::optional<int64_t>>> dims =
      parseBatchDims(runConfig, ranks);
  if (!dims)
    return error(llvm::toString(dims.takeError()));
  for (auto [i, dim] : llvm::zip(inputs, *dims)) {
    if (!dim)
      func.setArgAttr(i, LoomDialect::kUnbatchedAttrName, UnitAttr::get(ctx));
    else if (*dim != 0)
      func.setArgAttr(i, LoomDialect::kBatchDimAttrName,
                      IntegerAttr::get(IntegerType::get(ctx, 64), *dim));
  }
  return success();
}

LogicalResult Importer::parseJsonEntry(Pt2Archive &archive, StringRef entry,
                                       json::Value &out) {
  llvm::Expected<std::string> text = archive.read(entry);
  if (!text)
    return error(llvm::toString(text.takeError()));
  llvm::Expected<json::Value> parsed = json::parse(*text);
  if (!parsed)
    return error("archive entry '" + entry +
                 "' is not valid JSON: " + llvm::toString(parsed.takeError()));
  out = std::move(*parsed);
  return success();
}

//===----------------------------------------------------------------------===//
// Tensor metadata
//===----------------------------------------------------------------------===//

/// Reads a `SymInt` that must be concrete (`{"as_int": n}`).
static std::optional<int64_t> concreteInt(const json::Value &v) {
  const json::Object *o = v.getAsObject();
  if (!o)
    return std::nullopt;
  return o->getInteger("as_int");
}

llvm::Expected<TensorMeta> Importer::parseTensorMeta(const json::Value &value,
                                                     const Twine &what) {
  auto fail = [](const Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  const json::Object *o = value.getAsObject();
  if (!o)
    return fail("tensor metadata of " + what + " is not an object");
  std::optional<int64_t> dtype = o->getInteger("dtype");
  const json::Array *sizes = o->getArray("sizes");
  if (!dtype || !sizes)
    return fail("tensor metadata of " + what + " lacks 'dtype' or 'sizes'");
  Type elementType = dtypeToType(ctx, *dtype);
  if (!elementType)
    return fail(llvm::formatv("{0} has dtype code {1}, which Loom does not "
                              "support",
                              what.str(), *dtype));
  TensorMeta meta;
  SmallVector<int64_t> shape;
  for (const json::Value &s : *sizes) {
    std::optional<int64_t> d = concreteInt(s);
    if (!d)
      return fail(what + " has a symbolic size; export with static shapes "
                         "(Loom compiles one shape per step)");
    if (*d < 0)
      return fail(llvm::formatv("{0} has negative size {1}", what.str(), *d));
    shape.push_back(*d);
  }
  meta.type = RankedTensorType::get(shape, elementType);
  if (const json::Array *strides = o->getArray("strides"))
    for (const json::Value &s : *strides)
      if (std::optional<int64_t> d = concreteInt(s))
        meta.strides.push_back(*d);
  if (const json::Value *off = o->get("storage_offset"))
    meta.storageOffset = concreteInt(*off).value_or(0);
  if (std::optional<int64_t> layout = o->getInteger("layout");
      layout && *layout != 7)
    return fail(what + " is not a strided (dense) tensor");
  return meta;
}

LogicalResult Importer::readTensorValues(const json::Object &graph) {
  const json::Object *tv = graph.getObject("tensor_values");
  if (!tv)
    return error("graph has no 'tensor_values'");
  for (const auto &[name, meta] : *tv)
    tensorValues[name] = &meta;
  return success();
}

llvm::Expected<TensorMeta> Importer::getTensorMeta(StringRef name) {
  auto it = tensorValues.find(name);
  if (it == tensorValues.end())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'" + name +
                                       "' has no tensor metadata in "
                                       "'tensor_values'");
  return parseTensorMeta(*it->second, "tensor '" + name + "'");
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

/// The innermost frame of a stack trace that is the user's code rather than
/// torch's own, as (file, line).
static std::optional<std::pair<std::string, unsigned>>
userFrame(StringRef trace) {
  std::optional<std::pair<std::string, unsigned>> best, innermost;
  SmallVector<StringRef> lines;
  trace.split(lines, '\n');
  for (StringRef line : lines) {
    line = line.trim();
    if (!line.starts_with("File \""))
      continue;
    StringRef rest = line.drop_front(6);
    size_t quote = rest.find('"');
    if (quote == StringRef::npos)
      continue;
    StringRef file = rest.take_front(quote);
    size_t at = rest.find(", line ");
    if (at == StringRef::npos)
      continue;
    unsigned lineNo = 0;
    StringRef num = rest.drop_front(at + 7).take_while(llvm::isDigit);
    if (num.getAsInteger(10, lineNo))
      continue;
    innermost = {file.str(), lineNo};
    bool library = file.contains("/torch/") || file.starts_with("<");
    if (!library)
      best = innermost;
  }
  return best ? best : innermost;
}

Location Importer::nodeLocation(StringRef name, const json::Object *metadata) {
  Location child = archiveLoc;
  if (metadata)
    if (std::optional<StringRef> trace = metadata->getString("stack_trace"))
      if (auto frame = userFrame(*trace))
        child = FileLineColLoc::get(ctx, frame->first, frame->second, 0);
  return NameLoc::get(StringAttr::get(ctx, name), child);
}

FailureOr<Value> Importer::lookupTensor(const json::Object &tensorArg,
                                        Location loc, StringRef node,
                                        StringRef argName) {
  std::optional<StringRef> name = tensorArg.getString("name");
  if (!name)
    return nodeError(loc, node,
                     "argument '" + argName + "' has a tensor without a name");
  auto it = values.find(*name);
  if (it == values.end())
    return nodeError(loc, node,
                     "argument '" + argName + "' refers to '" + *name +
                         "', which is not defined before this node");
  return it->second;
}

/// Converts one schema `Argument` union of a node's input into the attribute
/// stored in `args`/`kwargs`, appending tensor operands.
class Importer::ArgumentConverter {
public:
  ArgumentConverter(Importer &importer, Location loc, StringRef node,
                    StringRef argName, SmallVectorImpl<Value> &operands)
      : im(importer), builder(importer.builder), loc(loc), node(node),
        argName(argName), operands(operands) {}

  FailureOr<Attribute> convert(const json::Object &arg);

private:
  using Convert =
      FailureOr<Attribute> (ArgumentConverter::*)(const json::Value &);

  InFlightDiagnostic error(const Twine &message) {
    return im.nodeError(loc, node, "argument '" + argName + "' " + message);
  }
  FailureOr<Attribute> bad() {
    return error("of kind '" + kind + "' has a malformed value");
  }
  FailureOr<Attribute> convertKind(const json::Value &value);
  FailureOr<Attribute>
  list(const json::Value &value,
       function_ref<FailureOr<Attribute>(const json::Value &)> convertOne);
  FailureOr<Attribute> listOf(const json::Value &value, Convert convertOne) {
    return list(value,
                [&](const json::Value &v) { return (this->*convertOne)(v); });
  }
  /// A list of SymInt/SymFloat/SymBool, each concrete.
  FailureOr<Attribute> concreteListOf(const json::Value &value,
                                      Convert convertOne) {
    return list(value, [&](const json::Value &v) {
      return concreteSym(v, convertOne);
    });
  }
  FailureOr<Attribute> concreteSym(const json::Value &v, Convert convert);
  FailureOr<Attribute> tensorRef(const json::Value &v);
  FailureOr<Attribute> optionalTensor(const json::Value &v);
  FailureOr<Attribute> toInt(const json::Value &v);
  FailureOr<Attribute> toFloat(const json::Value &v);
  FailureOr<Attribute> toBool(const json::Value &v);
  FailureOr<Attribute> toString(const json::Value &v);
  FailureOr<Attribute> toScalarType(const json::Value &v);
  FailureOr<Attribute> toMemoryFormat(const json::Value &v);
  FailureOr<Attribute> toLayout(const json::Value &v);
  FailureOr<Attribute> toDevice(const json::Value &v);

  Importer &im;
  OpBuilder &builder;
  Location loc;
  StringRef node, argName;
  /// The kind of the argument being converted (`as_int`, ...).
  StringRef kind;
  SmallVectorImpl<Value> &operands;
};

FailureOr<Attribute>
Importer::ArgumentConverter::convert(const json::Object &arg) {
  if (arg.size() != 1)
    return error("must have exactly one kind, found " + Twine(arg.size()));
  kind = arg.begin()->first;
  return convertKind(arg.begin()->second);
}

FailureOr<Attribute>
Importer::ArgumentConverter::convertKind(const json::Value &value) {
  if (kind == "as_none")
    return Attribute(builder.getUnitAttr());
  if (kind == "as_tensor")
    return tensorRef(value);
  if (kind == "as_tensors")
    return listOf(value, &ArgumentConverter::tensorRef);
  if (kind == "as_optional_tensor")
    return optionalTensor(value);
  if (kind == "as_optional_tensors")
    return listOf(value, &ArgumentConverter::optionalTensor);
  if (kind == "as_int")
    return toInt(value);
  if (kind == "as_ints")
    return listOf(value, &ArgumentConverter::toInt);
  if (kind == "as_float")
    return toFloat(value);
  if (kind == "as_floats")
    return listOf(value, &ArgumentConverter::toFloat);
  if (kind == "as_bool")
    return toBool(value);
  if (kind == "as_bools")
    return listOf(value, &ArgumentConverter::toBool);
  if (kind == "as_string")
    return toString(value);
  if (kind == "as_strings")
    return listOf(value, &ArgumentConverter::toString);
  if (kind == "as_sym_int")
    return concreteSym(value, &ArgumentConverter::toInt);
  if (kind == "as_sym_ints")
    return concreteListOf(value, &ArgumentConverter::toInt);
  if (kind == "as_sym_float")
    return concreteSym(value, &ArgumentConverter::toFloat);
  if (kind == "as_sym_floats")
    return concreteListOf(value, &ArgumentConverter::toFloat);
  if (kind == "as_sym_bool")
    return concreteSym(value, &ArgumentConverter::toBool);
  if (kind == "as_sym_bools")
    return concreteListOf(value, &ArgumentConverter::toBool);
  if (kind == "as_scalar_type")
    return toScalarType(value);
  if (kind == "as_memory_format")
    return toMemoryFormat(value);
  if (kind == "as_layout")
    return toLayout(value);
  if (kind == "as_device")
    return toDevice(value);
  if (kind == "as_graph" || kind == "as_custom_obj" || kind == "as_operator" ||
      kind == "as_complex" || kind == "as_string_to_argument")
    return error("of kind '" + kind + "' is not supported by Loom");
  return error("has unknown kind '" + kind + "'");
}

FailureOr<Attribute> Importer::ArgumentConverter::list(
    const json::Value &value,
    function_ref<FailureOr<Attribute>(const json::Value &)> convertOne) {
  const json::Array *a = value.getAsArray();
  if (!a)
    return bad();
  SmallVector<Attribute> out;
  for (const json::Value &e : *a) {
    FailureOr<Attribute> c = convertOne(e);
    if (failed(c))
      return failure();
    out.push_back(*c);
  }
  return Attribute(builder.getArrayAttr(out));
}

/// A SymInt/SymFloat/SymBool argument is fine when it is concrete.
FailureOr<Attribute>
Importer::ArgumentConverter::concreteSym(const json::Value &v,
                                         Convert convert) {
  const json::Object *o = v.getAsObject();
  if (!o)
    return bad();
  for (StringRef key : {"as_int", "as_float", "as_bool"})
    if (const json::Value *c = o->get(key))
      return (this->*convert)(*c);
  return error("is symbolic; export with static shapes");
}

FailureOr<Attribute>
Importer::ArgumentConverter::tensorRef(const json::Value &v) {
  const json::Object *t = v.getAsObject();
  if (!t)
    return bad();
  FailureOr<Value> val = im.lookupTensor(*t, loc, node, argName);
  if (failed(val))
    return failure();
  operands.push_back(*val);
  return Attribute(
      OperandRefAttr::get(builder.getContext(), operands.size() - 1));
}

FailureOr<Attribute>
Importer::ArgumentConverter::optionalTensor(const json::Value &v) {
  const json::Object *o = v.getAsObject();
  if (!o)
    return bad();
  if (o->get("as_none"))
    return Attribute(builder.getUnitAttr());
  if (const json::Value *t = o->get("as_tensor"))
    return tensorRef(*t);
  return bad();
}

FailureOr<Attribute> Importer::ArgumentConverter::toInt(const json::Value &v) {
  std::optional<int64_t> i = v.getAsInteger();
  if (!i)
    return bad();
  return Attribute(builder.getI64IntegerAttr(*i));
}

FailureOr<Attribute>
Importer::ArgumentConverter::toFloat(const json::Value &v) {
  if (std::optional<double> d = v.getAsNumber())
    return Attribute(builder.getF64FloatAttr(*d));
  // The serializer writes non-finite floats as strings.
  if (std::optional<StringRef> s = v.getAsString()) {
    double d;
    if (*s == "Infinity")
      d = std::numeric_limits<double>::infinity();
    else if (*s == "-Infinity")
      d = -std::numeric_limits<double>::infinity();
    else if (*s == "NaN")
      d = std::numeric_limits<double>::quiet_NaN();
    else
      return bad();
    return Attribute(builder.getF64FloatAttr(d));
  }
  return bad();
}

FailureOr<Attribute> Importer::ArgumentConverter::toBool(const json::Value &v) {
  std::optional<bool> b = v.getAsBoolean();
  if (!b)
    return bad();
  return Attribute(builder.getBoolAttr(*b));
}

FailureOr<Attribute>
Importer::ArgumentConverter::toString(const json::Value &v) {
  std::optional<StringRef> s = v.getAsString();
  if (!s)
    return bad();
  return Attribute(builder.getStringAttr(*s));
}

FailureOr<Attribute>
Importer::ArgumentConverter::toScalarType(const json::Value &v) {
  std::optional<int64_t> code = v.getAsInteger();
  Type t = code ? dtypeToType(builder.getContext(), *code) : Type();
  if (!t)
    return error("has an unsupported dtype");
  return Attribute(TypeAttr::get(t));
}

FailureOr<Attribute>
Importer::ArgumentConverter::toMemoryFormat(const json::Value &v) {
  static const char *names[] = {"unknown", "contiguous_format", "channels_last",
                                "channels_last_3d", "preserve_format"};
  std::optional<int64_t> code = v.getAsInteger();
  if (!code || *code < 0 || *code > 4)
    return bad();
  return Attribute(
      builder.getStringAttr((Twine("torch.") + names[*code]).str()));
}

FailureOr<Attribute>
Importer::ArgumentConverter::toLayout(const json::Value &v) {
  std::optional<int64_t> code = v.getAsInteger();
  if (!code || *code != 7)
    return error("asks for a non-strided layout");
  return Attribute(builder.getStringAttr("torch.strided"));
}

FailureOr<Attribute>
Importer::ArgumentConverter::toDevice(const json::Value &v) {
  const json::Object *d = v.getAsObject();
  std::optional<StringRef> type = d ? d->getString("type") : std::nullopt;
  if (!type)
    return bad();
  std::string dev = type->str();
  if (std::optional<int64_t> index = d->getInteger("index"))
    dev += ":" + std::to_string(*index);
  return Attribute(builder.getStringAttr(dev));
}

/// A node is named by its output, as in the FX graph. The schema does not
/// keep the FX name of a multi-output node (its outputs are the FX
/// `getitem`s), so that one is named `<op>:<first output>`.
static std::string getNodeName(const json::Object &node, unsigned index) {
  std::optional<StringRef> target = node.getString("target");
  std::string name = llvm::formatv("#{0}", index);
  const json::Array *outs = node.getArray("outputs");
  if (outs && !outs->empty())
    if (const json::Object *o = outs->front().getAsObject())
      if (const json::Object *t = o->getObject("as_tensor"))
        if (std::optional<StringRef> n = t->getString("name"))
          name = n->str();
  if (outs && outs->size() > 1 && target) {
    SmallVector<StringRef, 4> targetParts;
    StringRef(*target).split(targetParts, '.');
    if (targetParts.size() >= 2)
      name = (targetParts[targetParts.size() - 2] + ":" + name).str();
  }
  return name;
}

/// The ATen kernel name `<ns>::<op>.<overload>` of a node's target
/// `torch.ops.<ns>.<op>.<overload>`.
FailureOr<std::string> Importer::parseKernel(StringRef target, Location loc,
                                             StringRef name) {
  StringRef t = target;
  if (!t.consume_front("torch.ops.")) {
    if (t.starts_with("_operator.") || t.starts_with("builtins.") ||
        t.starts_with("math."))
      return nodeError(loc, name,
                       "target '" + target +
                           "' computes on symbolic sizes; export with static "
                           "shapes");
    return nodeError(loc, name,
                     "has unsupported node kind: target '" + target +
                         "' is not an operator (torch.ops.*)");
  }
  SmallVector<StringRef, 3> parts;
  t.split(parts, '.');
  if (parts.size() != 3 ||
      llvm::any_of(parts, [](StringRef p) { return p.empty(); }))
    return nodeError(loc, name,
                     "target '" + target +
                         "' is not of the form torch.ops.<ns>.<op>.<overload>");
  if (parts[0] == "higher_order")
    return nodeError(loc, name,
                     "higher-order operator '" + parts[1] +
                         "' is not supported by Loom");
  return (parts[0] + "::" + parts[1] + "." + parts[2]).str();
}

LogicalResult Importer::convertInputs(const json::Array &inputsJson,
                                      Location loc, StringRef name,
                                      SmallVectorImpl<Value> &operands,
                                      SmallVectorImpl<Attribute> &args,
                                      SmallVectorImpl<NamedAttribute> &kwargs) {
  for (const json::Value &in : inputsJson) {
    const json::Object *named = in.getAsObject();
    std::optional<StringRef> argName =
        named ? named->getString("name") : std::nullopt;
    const json::Object *arg = named ? named->getObject("arg") : nullptr;
    if (!argName || !arg)
      return nodeError(loc, name,
                       "has a malformed input (needs 'name' and "
                       "'arg')");
    FailureOr<Attribute> attr =
        ArgumentConverter(*this, loc, name, *argName, operands).convert(*arg);
    if (failed(attr))
      return failure();
    // kind 2 is ArgumentKind.KEYWORD; older archives omit the kind.
    std::optional<int64_t> kind = named->getInteger("kind");
    if (kind && *kind == 2) {
      kwargs.push_back(builder.getNamedAttr(*argName, *attr));
    } else {
      if (!kwargs.empty())
        return nodeError(loc, name,
                         "positional argument '" + *argName +
                             "' follows keyword arguments");
      args.push_back(*attr);
    }
  }
  return success();
}

/// Adds the output tensor `tensorArg` as a result and returns its index.
FailureOr<int64_t> Importer::addResult(const json::Object &tensorArg,
                                       Location loc, StringRef name,
                                       NodeResults &results) {
  std::optional<StringRef> n = tensorArg.getString("name");
  if (!n)
    return nodeError(loc, name, "has an output tensor without a name");
  if (values.count(*n) || llvm::is_contained(results.names, n->str()))
    return nodeError(loc, name, "redefines value '" + *n + "'");
  llvm::Expected<TensorMeta> meta = getTensorMeta(*n);
  if (!meta)
    return nodeError(loc, name, "output " + llvm::toString(meta.takeError()));
  results.types.push_back(meta->type);
  results.names.push_back(n->str());
  return static_cast<int64_t>(results.types.size() - 1);
}

/// Tensors become results; `None` and lists are recorded in `returns` so
/// the runtime can map the operator's returns.
LogicalResult Importer::convertOutputs(const json::Array &outputsJson,
                                       Location loc, StringRef name,
                                       NodeResults &results) {
  for (const json::Value &out : outputsJson) {
    const json::Object *o = out.getAsObject();
    if (!o || o->size() != 1)
      return nodeError(loc, name, "has a malformed output");
    StringRef kind = o->begin()->first;
    const json::Value &v = o->begin()->second;
    if (kind == "as_tensor" && v.getAsObject()) {
      FailureOr<int64_t> r = addResult(*v.getAsObject(), loc, name, results);
      if (failed(r))
        return failure();
      results.returns.push_back(builder.getI64IntegerAttr(*r));
    } else if (kind == "as_none") {
      results.simple = false;
      results.returns.push_back(builder.getUnitAttr());
    } else if (kind == "as_tensors" && v.getAsArray()) {
      results.simple = false;
      SmallVector<Attribute> indices;
      for (const json::Value &e : *v.getAsArray()) {
        const json::Object *eo = e.getAsObject();
        if (!eo)
          return nodeError(loc, name, "has a malformed output list");
        FailureOr<int64_t> r = addResult(*eo, loc, name, results);
        if (failed(r))
          return failure();
        indices.push_back(builder.getI64IntegerAttr(*r));
      }
      results.returns.push_back(builder.getArrayAttr(indices));
    } else if (kind == "as_sym_int" || kind == "as_sym_float" ||
               kind == "as_sym_bool" || kind == "as_int") {
      return nodeError(loc, name,
                       "returns a non-tensor value (" + kind +
                           "); export with static shapes");
    } else {
      return nodeError(loc, name,
                       "has an output of unknown kind '" + kind + "'");
    }
  }
  return success();
}

/// Module path and phase: Loom's capture records both in `custom`; plain
/// exports carry `nn_module_stack` (the phase is then derived later).
LogicalResult Importer::setModuleAndPhase(Operation *op,
                                          const json::Object *metadata,
                                          Location loc, StringRef name) {
  std::string modulePath;
  bool haveModule = false;
  if (metadata) {
    if (std::optional<StringRef> custom = metadata->getString("custom")) {
      llvm::Expected<json::Value> parsed = json::parse(*custom);
      if (!parsed) {
        llvm::consumeError(parsed.takeError());
        return nodeError(loc, name, "has 'custom' metadata that is not JSON");
      }
      if (const json::Object *c = parsed->getAsObject()) {
        if (std::optional<StringRef> phase = c->getString("loom.phase")) {
          std::optional<Phase> p = symbolizePhase(*phase);
          if (!p)
            return nodeError(loc, name, "has unknown phase '" + *phase + "'");
          op->setAttr(LoomDialect::kPhaseAttrName, PhaseAttr::get(ctx, *p));
          hasPhaseMeta = true;
        }
        if (std::optional<StringRef> m = c->getString("loom.module")) {
          modulePath = m->str();
          haveModule = true;
        }
        if (failed(setCheckpointRegion(op, *c, loc, name)) ||
            failed(setCalls(op, *c, loc, name)) ||
            failed(setCastPair(op, *c, loc, name)) ||
            failed(setPolicyCast(op, *c, loc, name)) ||
            failed(setSyncBatchNorm(op, *c, loc, name)))
          return failure();
      }
    }
    if (!haveModule)
      if (std::optional<StringRef> stack =
              metadata->getString("nn_module_stack")) {
        // "key,path,type;key,path,type": the innermost module is last.
        StringRef last = stack->rsplit(';').second.empty()
                             ? *stack
                             : stack->rsplit(';').second;
        size_t first = last.find(','), lastComma = last.rfind(',');
        if (first != StringRef::npos && lastComma > first)
          modulePath = last.slice(first + 1, lastComma).str();
      }
  }
  op->setAttr(LoomDialect::kModuleAttrName, builder.getStringAttr(modulePath));
  return success();
}

/// The calls of modules run more than once per forward that an op ran in:
/// capture records them (`loom.calls`, module path to a positive call
/// index); the dialect's verifier checks that each path encloses the op's.
LogicalResult Importer::setCalls(Operation *op, const json::Object &custom,
                                 Location loc, StringRef name) {
  const json::Value *calls = custom.get(LoomDialect::kCallsAttrName);
  if (!calls)
    return success();
  const json::Object *byPath = calls->getAsObject();
  if (!byPath || byPath->empty())
    return nodeError(loc, name, "has '")
           << LoomDialect::kCallsAttrName
           << "' = " << llvm::formatv("{0}", *calls).str()
           << ", expected a non-empty object from module path to call index";
  SmallVector<NamedAttribute> entries;
  for (const auto &[path, index] : *byPath) {
    std::optional<int64_t> call = index.getAsInteger();
    if (StringRef(path).empty() || !call || *call < 1)
      return nodeError(loc, name, "has '")
             << LoomDialect::kCallsAttrName << "' entry '" << path.str()
             << "' = " << llvm::formatv("{0}", index).str()
             << ", expected a module path and a positive call index";
    entries.push_back(
        builder.getNamedAttr(path.str(), builder.getI64IntegerAttr(*call)));
  }
  op->setAttr(LoomDialect::kCallsAttrName, builder.getDictionaryAttr(entries));
  return success();
}

/// The `torch.utils.checkpoint` region a forward op ran in and what the
/// region's policy said of it: capture records both (`loom.ac_region`, a
/// non-negative integer, and `loom.ac_policy`, a CheckpointPolicy name),
/// always together, so one without the other is a damaged archive.
LogicalResult Importer::setCheckpointRegion(Operation *op,
                                            const json::Object &custom,
                                            Location loc, StringRef name) {
  const json::Value *region = custom.get(LoomDialect::kAcRegionAttrName);
  const json::Value *policy = custom.get(LoomDialect::kAcPolicyAttrName);
  if (!region && !policy)
    return success();
  if (!region || !policy)
    return nodeError(loc, name, "has '")
           << (region ? LoomDialect::kAcRegionAttrName
                      : LoomDialect::kAcPolicyAttrName)
           << "' without '"
           << (region ? LoomDialect::kAcPolicyAttrName
                      : LoomDialect::kAcRegionAttrName)
           << "': a checkpoint region needs both";
  FailureOr<int64_t> id = getNonNegativeId(
      *region, LoomDialect::kAcRegionAttrName, "region id", loc, name);
  if (failed(id))
    return failure();
  std::optional<StringRef> policyName = policy->getAsString();
  std::optional<AcPolicy> acPolicy =
      policyName ? symbolizeAcPolicy(*policyName) : std::nullopt;
  if (!acPolicy)
    return nodeError(loc, name, "has '")
           << LoomDialect::kAcPolicyAttrName
           << "' = " << llvm::formatv("{0}", *policy).str()
           << ", expected one of \"must_save\", \"prefer_save\", "
              "\"must_recompute\", \"prefer_recompute\"";
  if (auto phase = op->getAttrOfType<PhaseAttr>(LoomDialect::kPhaseAttrName);
      phase && phase.getValue() != Phase::forward)
    return nodeError(loc, name, "is in checkpoint region ")
           << *id << " but its phase is '" << stringifyPhase(phase.getValue())
           << "': only forward ops are checkpointed";
  op->setAttr(LoomDialect::kAcRegionAttrName, builder.getI64IntegerAttr(*id));
  op->setAttr(LoomDialect::kAcPolicyAttrName,
              AcPolicyAttr::get(ctx, *acPolicy));
  return success();
}

FailureOr<int64_t> Importer::getNonNegativeId(const json::Value &value,
                                              StringRef key, StringRef what,
                                              Location loc, StringRef node) {
  std::optional<int64_t> id = value.getAsInteger();
  if (!id || *id < 0)
    return nodeError(loc, node, "has '")
           << key << "' = " << llvm::formatv("{0}", value).str()
           << ", expected a non-negative integer " << what;
  return *id;
}

/// A forward `_to_copy` and the backward `_to_copy` autograd made for it
/// share an id (`loom.cast`, a non-negative integer), which capture records
/// on casts only.
LogicalResult Importer::setCastPair(Operation *op, const json::Object &custom,
                                    Location loc, StringRef name) {
  const json::Value *cast = custom.get(LoomDialect::kCastAttrName);
  if (!cast)
    return success();
  FailureOr<int64_t> id =
      getNonNegativeId(*cast, LoomDialect::kCastAttrName, "cast id", loc, name);
  if (failed(id))
    return failure();
  auto aten = dyn_cast<AtenOp>(op);
  if (!aten || aten.getOpName() != "aten::_to_copy")
    return nodeError(loc, name, "has '")
           << LoomDialect::kCastAttrName << "' but is not an aten::_to_copy";
  op->setAttr(LoomDialect::kCastAttrName, builder.getI64IntegerAttr(*id));
  return success();
}

/// A cast eager makes only under the mixed-precision policy capture traced
/// with (`loom.policy_cast`: true for one to the compute dtype, false for
/// one to the dtype it names), a no-op as traced.
LogicalResult Importer::setPolicyCast(Operation *op, const json::Object &custom,
                                      Location loc, StringRef name) {
  const json::Value *policy = custom.get(LoomDialect::kPolicyCastAttrName);
  if (!policy)
    return success();
  std::optional<bool> toCompute = policy->getAsBoolean();
  if (!toCompute)
    return nodeError(loc, name, "has '")
           << LoomDialect::kPolicyCastAttrName
           << "' = " << llvm::formatv("{0}", *policy).str()
           << ", expected true or false";
  auto aten = dyn_cast<AtenOp>(op);
  if (!aten || aten.getOpName() != "aten::_to_copy" ||
      op->getNumOperands() != 1 || op->getNumResults() != 1 ||
      op->getOperand(0).getType() != op->getResult(0).getType())
    return nodeError(loc, name, "has '")
           << LoomDialect::kPolicyCastAttrName
           << "' but is not an aten::_to_copy of a tensor to its own dtype";
  op->setAttr(LoomDialect::kPolicyCastAttrName,
              builder.getBoolAttr(*toCompute));
  return success();
}

/// The training-mode forward of an `nn.SyncBatchNorm`, which capture marks
/// (`loom.sync_batch_norm`: true) because it traces as plain batch norm.
LogicalResult Importer::setSyncBatchNorm(Operation *op,
                                         const json::Object &custom,
                                         Location loc, StringRef name) {
  const json::Value *sync = custom.get(LoomDialect::kSyncBatchNormAttrName);
  if (!sync)
    return success();
  if (sync->getAsBoolean() != std::optional<bool>(true))
    return nodeError(loc, name, "has '")
           << LoomDialect::kSyncBatchNormAttrName
           << "' = " << llvm::formatv("{0}", *sync).str() << ", expected true";
  if (!getBatchNormForm(getAtenKernel(op)))
    return nodeError(loc, name, "has '")
           << LoomDialect::kSyncBatchNormAttrName
           << "' but is not a batch norm forward "
              "(_native_batch_norm_legit_functional or its no_stats form)";
  if (auto phase = op->getAttrOfType<PhaseAttr>(LoomDialect::kPhaseAttrName);
      phase && phase.getValue() != Phase::forward)
    return nodeError(loc, name, "has '")
           << LoomDialect::kSyncBatchNormAttrName << "' but its phase is '"
           << stringifyPhase(phase.getValue()) << "', not forward";
  op->setAttr(LoomDialect::kSyncBatchNormAttrName, builder.getUnitAttr());
  return success();
}

LogicalResult Importer::importNode(const json::Object &node, unsigned index) {
  std::optional<StringRef> target = node.getString("target");
  const json::Object *metadata = node.getObject("metadata");
  std::string name = getNodeName(node, index);
  Location loc = nodeLocation(name, metadata);
  if (!target)
    return nodeError(loc, name, "has no 'target'");
  FailureOr<std::string> kernel = parseKernel(*target, loc, name);
  if (failed(kernel))
    return failure();

  SmallVector<Value> operands;
  SmallVector<Attribute> args;
  SmallVector<NamedAttribute> kwargs;
  const json::Array *inputsJson = node.getArray("inputs");
  if (!inputsJson)
    return nodeError(loc, name, "has no 'inputs'");
  if (failed(convertInputs(*inputsJson, loc, name, operands, args, kwargs)))
    return failure();

  const json::Array *outputsJson = node.getArray("outputs");
  if (!outputsJson)
    return nodeError(loc, name, "has no 'outputs'");
  NodeResults results;
  if (failed(convertOutputs(*outputsJson, loc, name, results)))
    return failure();

  auto op = AtenOp::create(
      builder, loc, results.types, builder.getStringAttr(*kernel), operands,
      builder.getArrayAttr(args), builder.getDictionaryAttr(kwargs),
      results.simple ? ArrayAttr() : builder.getArrayAttr(results.returns));
  for (auto [n, v] : llvm::zip(results.names, op->getResults()))
    values[n] = v;
  return setModuleAndPhase(op, metadata, loc, name);
}

/// Without recorded phases, the forward is what the loss (and the buffer
/// updates and user outputs) depends on; everything else is backward.
void Importer::tagPhasesByDataflow() {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  llvm::DenseSet<Operation *> forward;
  SmallVector<Operation *> work;
  for (auto [i, out] : llvm::enumerate(outputs))
    if (out.role != Role::grad)
      if (Operation *def = ret.getOperand(i).getDefiningOp())
        work.push_back(def);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
  }
  func.walk([&](AtenOp op) {
    op->setAttr(LoomDialect::kPhaseAttrName,
                PhaseAttr::get(ctx, forward.count(op) ? Phase::forward
                                                      : Phase::backward));
  });
}

//===----------------------------------------------------------------------===//
// Signature
//===----------------------------------------------------------------------===//

LogicalResult Importer::importSignature(const json::Object &graphModule,
                                        const json::Object &graph) {
  const json::Object *sig = graphModule.getObject("signature");
  const json::Array *inSpecs = sig ? sig->getArray("input_specs") : nullptr;
  const json::Array *outSpecs = sig ? sig->getArray("output_specs") : nullptr;
  const json::Array *graphInputs = graph.getArray("inputs");
  const json::Array *graphOutputs = graph.getArray("outputs");
  if (!inSpecs || !outSpecs || !graphInputs || !graphOutputs)
    return error("graph signature lacks input/output specs or the graph "
                 "lacks inputs/outputs");
  if (inSpecs->size() != graphInputs->size())
    return error(llvm::formatv("signature has {0} input specs but the graph "
                               "has {1} inputs",
                               inSpecs->size(), graphInputs->size()));
  if (outSpecs->size() != graphOutputs->size())
    return error(llvm::formatv("signature has {0} output specs but the graph "
                               "has {1} outputs",
                               outSpecs->size(), graphOutputs->size()));
  for (auto [i, spec] : llvm::enumerate(*inSpecs))
    if (failed(importInputSpec(spec, i, *graphInputs)))
      return failure();
  for (auto [i, spec] : llvm::enumerate(*outSpecs))
    if (failed(importOutputSpec(spec, i)))
      return failure();
  return success();
}

LogicalResult Importer::importInputSpec(const json::Value &spec, size_t i,
                                        const json::Array &graphInputs) {
  const json::Object *s = spec.getAsObject();
  if (!s || s->size() != 1)
    return error(llvm::formatv("input spec #{0} is malformed", i));
  StringRef kind = s->begin()->first;
  const json::Object *body = s->begin()->second.getAsObject();
  if (!body)
    return error(llvm::formatv("input spec #{0} is malformed", i));
  InputInfo info;
  const json::Object *arg = body->getObject("arg");
  if (kind == "parameter") {
    info.role = Role::parameter;
    info.fqn = body->getString("parameter_name").value_or("").str();
  } else if (kind == "buffer") {
    info.role = Role::buffer;
    info.fqn = body->getString("buffer_name").value_or("").str();
  } else if (kind == "tensor_constant") {
    info.role = Role::constant;
    info.fqn = body->getString("tensor_constant_name").value_or("").str();
  } else if (kind == "user_input") {
    info.role = Role::input;
    // user_input's arg is an Argument union; only tensors are supported.
    if (arg)
      arg = arg->getObject("as_tensor");
    if (!arg)
      return error(llvm::formatv(
          "input #{0} is a non-tensor user input; Loom steps take tensors "
          "only (export constants into the graph)",
          i));
  } else {
    return error(llvm::formatv("input #{0} has kind '{1}', which Loom does "
                               "not support",
                               i, kind));
  }
  std::optional<StringRef> name = arg ? arg->getString("name") : std::nullopt;
  if (!name)
    return error(llvm::formatv("input spec #{0} has no argument name", i));
  if (info.role != Role::input && info.fqn.empty())
    return error(
        llvm::formatv("input spec #{0} ({1}) has no target name", i, kind));
  info.name = name->str();
  // The graph's own input list must agree with the signature.
  const json::Object *gi = graphInputs[i].getAsObject();
  const json::Object *gt = gi ? gi->getObject("as_tensor") : nullptr;
  std::optional<StringRef> gname = gt ? gt->getString("name") : std::nullopt;
  if (!gname || *gname != *name)
    return error(llvm::formatv("graph input #{0} does not match the "
                               "signature's '{1}'",
                               i, *name));
  inputs.push_back(std::move(info));
  return success();
}

LogicalResult Importer::importOutputSpec(const json::Value &spec, size_t i) {
  const json::Object *s = spec.getAsObject();
  if (!s || s->size() != 1 || !s->begin()->second.getAsObject())
    return error(llvm::formatv("output spec #{0} is malformed", i));
  StringRef kind = s->begin()->first;
  const json::Object &body = *s->begin()->second.getAsObject();
  OutputInfo info;
  const json::Object *arg = body.getObject("arg");
  if (kind == "loss_output") {
    info.role = Role::loss;
  } else if (kind == "gradient_to_parameter") {
    info.role = Role::grad;
    info.target = body.getString("parameter_name").value_or("").str();
  } else if (kind == "buffer_mutation") {
    info.role = Role::buffer_mutation;
    info.target = body.getString("buffer_name").value_or("").str();
  } else if (kind == "user_input_mutation") {
    info.role = Role::input_mutation;
    info.target = body.getString("user_input_name").value_or("").str();
  } else if (kind == "user_output") {
    info.role = Role::output;
    if (arg)
      arg = arg->getObject("as_tensor");
    if (!arg)
      return error(llvm::formatv("output #{0} is a non-tensor user output", i));
  } else {
    return error(llvm::formatv("output #{0} has kind '{1}', which Loom "
                               "does not support",
                               i, kind));
  }
  std::optional<StringRef> name = arg ? arg->getString("name") : std::nullopt;
  if (!name)
    return error(llvm::formatv("output spec #{0} has no argument name", i));
  info.name = name->str();
  outputs.push_back(std::move(info));
  return success();
}

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

LogicalResult Importer::importWeights(Pt2Archive &archive) {
  // FQN -> (archive entry, metadata), from both weight and constant configs.
  struct Stored {
    std::string entry;
    TensorMeta meta;
  };
  llvm::StringMap<Stored> stored;
  for (auto [config, folder] :
       {std::pair<StringRef, StringRef>{
            "data/weights/model_weights_config.json", "data/weights/"},
        {"data/constants/model_constants_config.json", "data/constants/"}}) {
    std::string entry = prefix + config.str();
    if (!archive.contains(entry))
      continue;
    json::Value parsed = nullptr;
    if (failed(parseJsonEntry(archive, entry, parsed)))
      return failure();
    const json::Object *root = parsed.getAsObject();
    const json::Object *cfg = root ? root->getObject("config") : nullptr;
    if (!cfg)
      return error("'" + entry + "' has no 'config' object");
    for (const auto &[fqn, v] : *cfg) {
      const json::Object *o = v.getAsObject();
      std::optional<StringRef> path =
          o ? o->getString("path_name") : std::nullopt;
      const json::Value *meta = o ? o->get("tensor_meta") : nullptr;
      if (!path || !meta)
        return error("weight '" + StringRef(fqn) + "' in '" + entry +
                     "' lacks 'path_name' or 'tensor_meta'");
      if (o->getBoolean("use_pickle").value_or(false))
        return error("weight '" + StringRef(fqn) +
                     "' is stored pickled; Loom reads raw weights only "
                     "(save with a current torch.export.save)");
      llvm::Expected<TensorMeta> m =
          parseTensorMeta(*meta, "weight '" + StringRef(fqn) + "'");
      if (!m)
        return error(llvm::toString(m.takeError()));
      stored[fqn] = {prefix + folder.str() + path->str(), *m};
    }
  }

  for (auto [i, in] : llvm::enumerate(inputs)) {
    if (in.role == Role::input)
      continue;
    auto it = stored.find(in.fqn);
    if (it == stored.end()) {
      if (!opts.requireWeights)
        continue;
      return error("missing weights for " + StringRef(stringifyRole(in.role)) +
                   " '" + in.fqn +
                   "': the archive's weight configs do not list it "
                   "(import with --no-weights to take it as a plain "
                   "argument)");
    }
    const Stored &s = it->second;
    RankedTensorType argType =
        cast<RankedTensorType>(func.getArgument(i).getType());
    if (s.meta.type != argType)
      return error("weights for '" + in.fqn + "' have type " +
                   llvm::formatv("{0}", s.meta.type).str() +
                   " but the graph uses it as " +
                   llvm::formatv("{0}", argType).str());
    // A weightless step (listed weights without data, as `loom.capture
    // --meta` writes) is checked for types only.
    if (!opts.requireWeights)
      continue;
    llvm::Expected<std::string> raw = archive.read(s.entry);
    if (!raw)
      return error("missing weights for '" + in.fqn +
                   "': " + llvm::toString(raw.takeError()));
    if (raw->empty() && argType.getNumElements() > 0)
      return error("the archive holds no data for the weights of '" + in.fqn +
                   "' (entry '" + s.entry +
                   "' is empty, as `loom.capture --meta` writes); import "
                   "with --no-weights to take them as plain arguments");
    if (!opts.weightsOut.empty()) {
      // Gather the (possibly strided) stored tensor into contiguous bytes.
      Type et = argType.getElementType();
      int64_t eb = getElementBytes(et);
      ArrayRef<int64_t> shape = argType.getShape();
      int64_t rank = shape.size();
      SmallVector<int64_t> strides =
          static_cast<int64_t>(s.meta.strides.size()) == rank
              ? s.meta.strides
              : getContiguousStrides(shape);
      int64_t numel = argType.getNumElements();
      std::string out(numel * eb, '\0');
      SmallVector<int64_t> idx(rank, 0);
      for (int64_t n = 0; n < numel; ++n) {
        int64_t off = s.meta.storageOffset;
        for (int64_t d = 0; d < rank; ++d)
          off += idx[d] * strides[d];
        if (off < 0 || (off + 1) * eb > static_cast<int64_t>(raw->size()))
          return error(llvm::formatv(
              "weights for '{0}' are truncated: entry '{1}' has {2} bytes, "
              "too few for {3}",
              in.fqn, s.entry, raw->size(), argType));
        std::memcpy(&out[n * eb], raw->data() + off * eb, eb);
        for (int64_t d = rank - 1; d >= 0; --d) {
          if (++idx[d] < shape[d])
            break;
          idx[d] = 0;
        }
      }
      const char *dtype = safetensorsDtype(et);
      if (!dtype)
        return error(llvm::formatv("weights for '{0}' have element type {1}, "
                                   "which safetensors cannot hold",
                                   in.fqn, et));
      if (llvm::Error err = weights.add(in.fqn, dtype, shape, std::move(out)))
        return error(llvm::toString(std::move(err)));
    } else if (static_cast<int64_t>(raw->size()) <
               (s.meta.storageOffset + argType.getNumElements()) *
                   getElementBytes(argType.getElementType())) {
      return error(llvm::formatv("weights for '{0}' are truncated: entry "
                                 "'{1}' has {2} bytes",
                                 in.fqn, s.entry, raw->size()));
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

LogicalResult Importer::findGraph(const json::Object *&graphModule,
                                  const json::Object *&graph,
                                  const json::Array *&nodes) {
  const json::Object *root = model.getAsObject();
  if (!root)
    return error("models/model.json is not a JSON object");
  const json::Object *version = root->getObject("schema_version");
  std::optional<int64_t> major =
      version ? version->getInteger("major") : std::nullopt;
  std::optional<int64_t> minor =
      version ? version->getInteger("minor") : std::nullopt;
  if (!major || !minor)
    return error("models/model.json has no schema_version");
  if (*major != kSchemaMajor)
    return error(llvm::formatv("unsupported graph schema version {0}.{1}: "
                               "Loom reads version {2}.x (torch 2.5 - 2.9)",
                               *major, *minor, kSchemaMajor));
  graphModule = root->getObject("graph_module");
  graph = graphModule ? graphModule->getObject("graph") : nullptr;
  nodes = graph ? graph->getArray("nodes") : nullptr;
  if (!nodes)
    return error("models/model.json has no graph_module.graph.nodes");
  return success();
}

/// The module and its step function, with one argument per graph input
/// (tagged with its role and name) and no results yet: their types are
/// those of the values returned, known once the nodes that produce them are
/// imported (and checked there).
LogicalResult Importer::createStepFunction() {
  module = ModuleOp::create(archiveLoc);
  module->getOperation()->setAttr(LoomDialect::kSourceAttrName,
                                  builder.getStringAttr(archiveName));
  builder.setInsertionPointToEnd(module->getBody());

  SmallVector<Type> argTypes;
  for (const InputInfo &in : inputs) {
    llvm::Expected<TensorMeta> meta = getTensorMeta(in.name);
    if (!meta)
      return error("step input " + llvm::toString(meta.takeError()));
    argTypes.push_back(meta->type);
  }
  func = func::FuncOp::create(builder, archiveLoc, opts.funcName,
                              builder.getFunctionType(argTypes, {}));
  func->setAttr(LoomDialect::kStepAttrName, builder.getUnitAttr());
  Block *entry = func.addEntryBlock();
  for (auto [i, in] : llvm::enumerate(inputs)) {
    if (values.count(in.name))
      return error("input '" + in.name + "' appears twice");
    values[in.name] = entry->getArgument(i);
    entry->getArgument(i).setLoc(
        NameLoc::get(StringAttr::get(ctx, in.name), archiveLoc));
    func.setArgAttr(i, LoomDialect::kRoleAttrName, RoleAttr::get(ctx, in.role));
    func.setArgAttr(
        i, LoomDialect::kNameAttrName,
        builder.getStringAttr(in.role == Role::input ? in.name : in.fqn));
  }
  builder.setInsertionPointToEnd(entry);
  return success();
}

LogicalResult Importer::importNodes(const json::Array &nodes) {
  for (auto [i, node] : llvm::enumerate(nodes)) {
    const json::Object *n = node.getAsObject();
    if (!n)
      return error(llvm::formatv("graph node #{0} is not an object", i));
    if (failed(importNode(*n, i)))
      return failure();
  }
  return success();
}

/// Returns the graph outputs and types the results by them, with their
/// roles; derives the phases when the capture recorded none.
LogicalResult Importer::finishStepFunction() {
  SmallVector<Value> results;
  for (const OutputInfo &out : outputs) {
    auto it = values.find(out.name);
    if (it == values.end())
      return error("output '" + out.name +
                   "' refers to a value no node defines");
    results.push_back(it->second);
  }
  func::ReturnOp::create(builder, archiveLoc, results);
  func.setFunctionType(builder.getFunctionType(func.getArgumentTypes(),
                                               ValueRange(results).getTypes()));
  for (auto [i, out] : llvm::enumerate(outputs)) {
    func.setResultAttr(i, LoomDialect::kRoleAttrName,
                       RoleAttr::get(ctx, out.role));
    if (!out.target.empty())
      func.setResultAttr(i, LoomDialect::kTargetAttrName,
                         builder.getStringAttr(out.target));
  }
  if (!hasPhaseMeta)
    tagPhasesByDataflow();
  return success();
}

OwningOpRef<ModuleOp> Importer::run(Pt2Archive &archive) {
  const json::Object *graphModule, *graph;
  const json::Array *nodes;
  if (failed(findLayout(archive)) ||
      failed(parseJsonEntry(archive, prefix + "models/model.json", model)) ||
      failed(findGraph(graphModule, graph, nodes)) ||
      failed(readTensorValues(*graph)) ||
      failed(importSignature(*graphModule, *graph)) ||
      failed(createStepFunction()) || failed(importRunConfig(archive)) ||
      failed(importNodes(*nodes)) || failed(finishStepFunction()) ||
      failed(importWeights(archive)) || failed(mlir::verify(*module)))
    return nullptr;
  if (!opts.weightsOut.empty()) {
    if (llvm::Error err = weights.writeFile(opts.weightsOut))
      return error(llvm::toString(std::move(err))), nullptr;
    module->getOperation()->setAttr(
        LoomDialect::kWeightsAttrName,
        builder.getStringAttr(opts.weightsRef.empty() ? opts.weightsOut
                                                      : opts.weightsRef));
  }
  return std::move(module);
}

OwningOpRef<ModuleOp> loom::importArchive(Pt2Archive &archive, StringRef name,
                                          MLIRContext *context,
                                          const ImportOptions &options) {
  context->getOrLoadDialect<LoomDialect>();
  context->getOrLoadDialect<func::FuncDialect>();
  Importer importer(context, name, options);
  return importer.run(archive);
}

/// Opens an archive, reporting a failure as an error located at `name`.
static OwningOpRef<ModuleOp>
openAndImport(llvm::Expected<std::unique_ptr<Pt2Archive>> archive,
              StringRef name, MLIRContext *context,
              const ImportOptions &options) {
  if (!archive) {
    emitError(FileLineColLoc::get(context, name, 0, 0),
              llvm::toString(archive.takeError()));
    return nullptr;
  }
  return importArchive(**archive, name, context, options);
}

OwningOpRef<ModuleOp> loom::importPt2(StringRef path, MLIRContext *context,
                                      const ImportOptions &options) {
  return openAndImport(Pt2Archive::openFile(path), path, context, options);
}

OwningOpRef<ModuleOp> loom::importPt2Buffer(StringRef bytes,
                                            StringRef bufferName,
                                            MLIRContext *context,
                                            const ImportOptions &options) {
  return openAndImport(Pt2Archive::openBuffer(bytes), bufferName, context,
                       options);
}

std::string loom::formatLocation(Location loc) {
  std::string node, file;
  unsigned line = 0;
  loc->walk([&](Location l) {
    if (auto name = dyn_cast<NameLoc>(l); name && node.empty())
      node = name.getName().str();
    if (auto flc = dyn_cast<FileLineColLoc>(l); flc && file.empty()) {
      file = flc.getFilename().str();
      line = flc.getLine();
    }
    return WalkResult::advance();
  });
  std::string out = file.empty() ? "<unknown>" : file;
  if (line)
    out += ":" + std::to_string(line);
  if (!node.empty())
    out += ": node '" + node + "'";
  return out;
}
