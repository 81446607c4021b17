//===- LoomOps.cpp - Verifiers and helpers of loom operations -------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "loom/Dialect/Loom/IR/OpClassification.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace loom;

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

LogicalResult MeshOp::verify() {
  ArrayRef<int64_t> shape = getShape();
  if (shape.empty())
    return emitOpError("mesh must have at least one axis");
  if (shape.size() != getAxes().size())
    return emitOpError("mesh has ")
           << shape.size() << " dimensions but " << getAxes().size()
           << " axis names";
  llvm::StringSet<> seen;
  for (auto [size, nameAttr] : llvm::zip(shape, getAxes())) {
    StringRef name = cast<StringAttr>(nameAttr).getValue();
    if (size <= 0)
      return emitOpError("axis '") << name << "' has size " << size
                                   << ", expected a positive size";
    if (name.empty())
      return emitOpError("axis names must not be empty");
    if (!seen.insert(name).second)
      return emitOpError("axis name '") << name << "' is used twice";
  }
  return success();
}

int64_t MeshOp::getNumRanks() {
  int64_t n = 1;
  for (int64_t s : getShape())
    n *= s;
  return n;
}

int64_t MeshOp::getGroupSize(ArrayAttr axes) {
  int64_t n = 1;
  for (Attribute a : axes)
    if (std::optional<unsigned> i =
            getAxisIndex(cast<StringAttr>(a).getValue()))
      n *= getShape()[*i];
  return n;
}

SmallVector<int64_t> MeshOp::getGroup(ArrayAttr axes, int64_t rank) {
  ArrayRef<int64_t> shape = getShape();
  SmallVector<int64_t> coord(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    coord[i] = rank % shape[i];
    rank /= shape[i];
  }
  SmallVector<unsigned> free;
  for (Attribute a : axes)
    if (std::optional<unsigned> i =
            getAxisIndex(cast<StringAttr>(a).getValue()))
      free.push_back(*i);
  llvm::sort(free);
  int64_t count = 1;
  for (unsigned i : free)
    count *= shape[i];
  SmallVector<int64_t> group;
  for (int64_t k = 0; k < count; ++k) {
    SmallVector<int64_t> c = coord;
    int64_t rest = k;
    for (size_t j = free.size(); j-- > 0;) {
      c[free[j]] = rest % shape[free[j]];
      rest /= shape[free[j]];
    }
    int64_t id = 0;
    for (size_t i = 0; i < shape.size(); ++i)
      id = id * shape[i] + c[i];
    group.push_back(id);
  }
  return group;
}

std::optional<unsigned> MeshOp::getAxisIndex(StringRef name) {
  for (auto [i, axis] : llvm::enumerate(getAxes()))
    if (cast<StringAttr>(axis).getValue() == name)
      return i;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// AtenOp
//===----------------------------------------------------------------------===//

StringRef AtenOp::getOpName() { return getKernel().split('.').first; }
StringRef AtenOp::getOverload() { return getKernel().split('.').second; }

Value AtenOp::getArgOperand(unsigned position) {
  ArrayAttr args = getArgs();
  if (position >= args.size())
    return {};
  if (auto ref = dyn_cast<OperandRefAttr>(args[position]))
    return getOperand(ref.getIndex());
  return {};
}

/// Records every `#loom.arg<N>` inside `attr` into `uses`; fails on an index
/// out of range.
static LogicalResult collectOperandRefs(AtenOp op, Attribute attr,
                                        SmallVectorImpl<unsigned> &uses) {
  if (auto ref = dyn_cast<OperandRefAttr>(attr)) {
    if (ref.getIndex() >= op->getNumOperands())
      return op.emitOpError("argument refers to operand #")
             << ref.getIndex() << " but the op has " << op->getNumOperands()
             << " operands";
    uses[ref.getIndex()]++;
    return success();
  }
  if (auto array = dyn_cast<ArrayAttr>(attr)) {
    for (Attribute element : array)
      if (failed(collectOperandRefs(op, element, uses)))
        return failure();
    return success();
  }
  if (auto dict = dyn_cast<DictionaryAttr>(attr)) {
    for (NamedAttribute element : dict)
      if (failed(collectOperandRefs(op, element.getValue(), uses)))
        return failure();
    return success();
  }
  if (isa<IntegerAttr, FloatAttr, BoolAttr, StringAttr, UnitAttr, TypeAttr>(
          attr))
    return success();
  return op.emitOpError("argument ")
         << attr << " is not a valid ATen argument value";
}

LogicalResult loom::verifyAtenReturns(Operation *op, ArrayAttr returns) {
  unsigned numResults = op->getNumResults();
  SmallVector<unsigned> seen(numResults, 0);
  auto mark = [&](Attribute a) -> LogicalResult {
    auto index = dyn_cast<IntegerAttr>(a);
    if (!index || index.getInt() < 0 ||
        index.getInt() >= static_cast<int64_t>(numResults))
      return op->emitOpError("'returns' entry ")
             << a << " is not the index of one of the " << numResults
             << " results";
    seen[index.getInt()]++;
    return success();
  };
  for (Attribute entry : returns) {
    if (isa<UnitAttr>(entry))
      continue;
    if (auto list = dyn_cast<ArrayAttr>(entry)) {
      for (Attribute a : list)
        if (failed(mark(a)))
          return failure();
      continue;
    }
    if (failed(mark(entry)))
      return failure();
  }
  for (auto [i, n] : llvm::enumerate(seen))
    if (n != 1)
      return op->emitOpError("result #")
             << i << " appears " << n << " times in 'returns'";
  return success();
}

LogicalResult AtenOp::verify() {
  StringRef kernel = getKernel();
  auto [ns, rest] = kernel.split("::");
  if (ns.empty() || rest.empty() || rest.starts_with(".") ||
      rest.ends_with("."))
    return emitOpError("kernel '")
           << kernel << "' is not a schema name like 'aten::mm.default'";

  SmallVector<unsigned> uses(getNumOperands(), 0);
  if (failed(collectOperandRefs(*this, getArgs(), uses)) ||
      failed(collectOperandRefs(*this, getKwargs(), uses)))
    return failure();
  for (auto [i, n] : llvm::enumerate(uses))
    if (n != 1)
      return emitOpError("operand #")
             << i << " is referenced " << n
             << " times by the argument list, expected exactly once";

  if (std::optional<ArrayAttr> returns = getReturns()) {
    // Shape rules describe the schema's returns one-to-one.
    return verifyAtenReturns(*this, *returns);
  }

  std::optional<FailureOr<SmallVector<TensorInfo>>> inferred =
      inferAtenResults(*this);
  if (!inferred)
    return success();
  if (failed(*inferred))
    return failure();
  const SmallVector<TensorInfo> &expected = **inferred;
  if (expected.size() != getNumResults())
    return emitOpError("'")
           << kernel << "' produces " << expected.size()
           << " results, but the op declares " << getNumResults();
  for (auto [i, info, type] : llvm::enumerate(expected, getResultTypes())) {
    auto tensor = cast<RankedTensorType>(type);
    if (tensor.getShape() != ArrayRef<int64_t>(info.shape)) {
      std::string want;
      llvm::raw_string_ostream os(want);
      os << "[";
      llvm::interleaveComma(info.shape, os);
      os << "]";
      return emitOpError("result #")
             << i << " has shape " << tensor << " but '" << kernel
             << "' gives shape " << want << " for these operands";
    }
    if (info.elementType && info.elementType != tensor.getElementType())
      return emitOpError("result #")
             << i << " has element type " << tensor.getElementType()
             << " but '" << kernel << "' gives " << info.elementType;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Checks the parts of a collective that need no symbol lookup: the future
/// is waited exactly once, and its value type agrees with the input's rank
/// and element type.
static LogicalResult verifyFutureUse(Operation *op, Value future) {
  if (!future.hasOneUse() || !isa<WaitOp>(*future.getUsers().begin()))
    return op->emitOpError("future must be consumed by exactly one loom.wait");
  return success();
}

static FailureOr<RankedTensorType> getFutureTensor(Operation *op,
                                                   Value future) {
  auto type = dyn_cast<RankedTensorType>(
      cast<FutureType>(future.getType()).getValueType());
  if (!type)
    return op->emitOpError("result must be a future of a ranked tensor, got ")
           << future.getType();
  return type;
}

/// Resolves the mesh and checks the named axes; returns the group size.
static FailureOr<int64_t> verifyMeshAxes(Operation *op, FlatSymbolRefAttr mesh,
                                         ArrayAttr axes,
                                         SymbolTableCollection &symbolTable) {
  auto meshOp =
      symbolTable.lookupNearestSymbolFrom<MeshOp>(op, mesh.getAttr());
  if (!meshOp)
    return op->emitOpError("'") << mesh.getValue()
                                << "' does not name a loom.mesh";
  if (axes.empty())
    return op->emitOpError("collective must name at least one mesh axis");
  llvm::StringSet<> seen;
  int64_t groupSize = 1;
  for (Attribute axisAttr : axes) {
    StringRef axis = cast<StringAttr>(axisAttr).getValue();
    std::optional<unsigned> index = meshOp.getAxisIndex(axis);
    if (!index) {
      auto diag = op->emitOpError("mesh @")
                  << mesh.getValue() << " has no axis '" << axis
                  << "' (axes: ";
      llvm::interleaveComma(meshOp.getAxes(), diag, [&](Attribute a) {
        diag << "'" << cast<StringAttr>(a).getValue() << "'";
      });
      return diag << ")";
    }
    if (!seen.insert(axis).second)
      return op->emitOpError("mesh axis '") << axis << "' is named twice";
    groupSize *= meshOp.getShape()[*index];
  }
  return groupSize;
}

static LogicalResult verifyDim(Operation *op, int64_t dim, int64_t rank) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError("dim ") << dim << " is out of range for a rank-"
                                   << rank << " tensor";
  return success();
}

template <typename OpTy>
static MeshOp lookupMesh(OpTy op, SymbolTableCollection &symbolTable) {
  return symbolTable.lookupNearestSymbolFrom<MeshOp>(op,
                                                     op.getMeshAttr().getAttr());
}

#define LOOM_COLLECTIVE_MESH_GETTER(OP)                                        \
  MeshOp OP::getMeshOp(SymbolTableCollection &symbolTable) {                   \
    return lookupMesh(*this, symbolTable);                                     \
  }
LOOM_COLLECTIVE_MESH_GETTER(AllGatherStartOp)
LOOM_COLLECTIVE_MESH_GETTER(ReduceScatterStartOp)
LOOM_COLLECTIVE_MESH_GETTER(AllSliceStartOp)
LOOM_COLLECTIVE_MESH_GETTER(AllReduceStartOp)
LOOM_COLLECTIVE_MESH_GETTER(BroadcastStartOp)
LOOM_COLLECTIVE_MESH_GETTER(SendStartOp)
LOOM_COLLECTIVE_MESH_GETTER(RecvStartOp)
#undef LOOM_COLLECTIVE_MESH_GETTER

/// Input and result agree in rank and element type, and in every dimension
/// except `exceptDim` (-1: all dimensions).
static LogicalResult verifySameTensorExcept(Operation *op,
                                            RankedTensorType input,
                                            RankedTensorType result,
                                            int64_t exceptDim) {
  if (input.getElementType() != result.getElementType())
    return op->emitOpError("result element type ")
           << result.getElementType() << " differs from input element type "
           << input.getElementType();
  if (input.getRank() != result.getRank())
    return op->emitOpError("result rank ")
           << result.getRank() << " differs from input rank "
           << input.getRank();
  for (int64_t d = 0; d < input.getRank(); ++d)
    if (d != exceptDim && input.getDimSize(d) != result.getDimSize(d))
      return op->emitOpError("result dimension ")
             << d << " is " << result.getDimSize(d) << " but input's is "
             << input.getDimSize(d);
  return success();
}

/// Local checks shared by the collectives that gather or scatter along a
/// dimension: the result keeps the input's element type, rank and every
/// other dimension.
template <typename OpTy>
static LogicalResult verifyAlongDim(OpTy op) {
  FailureOr<RankedTensorType> result = getFutureTensor(op, op.getFuture());
  int64_t dim = op.getDim();
  RankedTensorType input = op.getInput().getType();
  if (failed(result) || failed(verifyFutureUse(op, op.getFuture())) ||
      failed(verifyDim(op, dim, input.getRank())))
    return failure();
  return verifySameTensorExcept(op, input, *result, dim);
}

/// The sizes of the gathered/scattered dimension in the input and result.
template <typename OpTy>
static std::pair<int64_t, int64_t> dimSizes(OpTy op) {
  int64_t dim = op.getDim();
  return {op.getInput().getType().getDimSize(dim),
          cast<RankedTensorType>(op.getFuture().getType().getValueType())
              .getDimSize(dim)};
}

/// The group and shape checks of a collective that splits dim `getDim()`
/// of its input over the group (reduce-scatter, all-slice): the dim divides
/// evenly and the result has one part. `noun`/`gerund` name the split in the
/// messages ("scatter"/"scattering"); `hint` ends the divisibility error.
template <typename OpTy>
static LogicalResult verifySplitAlongDim(OpTy op,
                                         SymbolTableCollection &symbolTable,
                                         StringRef noun, StringRef gerund,
                                         StringRef hint) {
  FailureOr<int64_t> group =
      verifyMeshAxes(op, op.getMeshAttr(), op.getAxes(), symbolTable);
  if (failed(group))
    return failure();
  auto [in, out] = dimSizes(op);
  if (in % *group != 0)
    return op.emitOpError(noun)
           << " dim " << op.getDim() << " of size " << in
           << " is not divisible by the group size " << *group << hint;
  if (in / *group != out)
    return op.emitOpError(gerund)
           << " dim " << op.getDim() << " of size " << in << " over " << *group
           << " ranks gives " << in / *group << ", but the result has "
           << out;
  return success();
}

LogicalResult AllGatherStartOp::verify() { return verifyAlongDim(*this); }

LogicalResult
AllGatherStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<int64_t> group =
      verifyMeshAxes(*this, getMeshAttr(), getAxes(), symbolTable);
  if (failed(group))
    return failure();
  auto [in, out] = dimSizes(*this);
  if (in * *group != out)
    return emitOpError("gathering dim ")
           << getDim() << " of size " << in << " over a group of " << *group
           << " ranks gives " << in * *group << ", but the result has "
           << out;
  return success();
}

LogicalResult ReduceScatterStartOp::verify() { return verifyAlongDim(*this); }

LogicalResult
ReduceScatterStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifySplitAlongDim(*this, symbolTable, "scatter", "scattering",
                             " (pad the input first)");
}

LogicalResult AllSliceStartOp::verify() { return verifyAlongDim(*this); }

LogicalResult
AllSliceStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifySplitAlongDim(*this, symbolTable, "slice", "slicing", "");
}

LogicalResult AllReduceStartOp::verify() {
  FailureOr<RankedTensorType> result = getFutureTensor(*this, getFuture());
  if (failed(result) || failed(verifyFutureUse(*this, getFuture())))
    return failure();
  return verifySameTensorExcept(*this, getInput().getType(), *result, -1);
}

LogicalResult
AllReduceStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyMeshAxes(*this, getMeshAttr(), getAxes(), symbolTable);
}

LogicalResult BroadcastStartOp::verify() {
  FailureOr<RankedTensorType> result = getFutureTensor(*this, getFuture());
  if (failed(result) || failed(verifyFutureUse(*this, getFuture())))
    return failure();
  if (static_cast<int64_t>(getRoot()) < 0)
    return emitOpError("root must be non-negative, got ") << static_cast<int64_t>(getRoot());
  return verifySameTensorExcept(*this, getInput().getType(), *result, -1);
}

static LogicalResult verifyPeer(Operation *op, StringRef what, int64_t peer,
                                int64_t groupSize) {
  if (peer >= groupSize)
    return op->emitOpError(what) << " " << peer
                                 << " is out of range for a group of "
                                 << groupSize << " ranks";
  return success();
}

LogicalResult
BroadcastStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<int64_t> group =
      verifyMeshAxes(*this, getMeshAttr(), getAxes(), symbolTable);
  if (failed(group))
    return failure();
  return verifyPeer(*this, "root", static_cast<int64_t>(getRoot()), *group);
}

/// I64Attr getters are unsigned; peer and tag are meant as signed values.
static LogicalResult verifyPeerAndTag(Operation *op, uint64_t peer,
                                      uint64_t tag) {
  if (static_cast<int64_t>(peer) < 0)
    return op->emitOpError("peer must be non-negative, got ")
           << static_cast<int64_t>(peer);
  // The runtime's transports take 31-bit tags (docs/artifact.md).
  if (static_cast<int64_t>(tag) < 0 || tag > 0x7fffffff)
    return op->emitOpError("tag must be in [0, 2^31), got ")
           << static_cast<int64_t>(tag);
  return success();
}

LogicalResult SendStartOp::verify() {
  if (failed(verifyFutureUse(*this, getFuture())))
    return failure();
  if (!isa<NoneType>(getFuture().getType().getValueType()))
    return emitOpError("a send completes as !loom.future<none>, got ")
           << getFuture().getType();
  return verifyPeerAndTag(*this, getPeer(), getTag());
}

LogicalResult
SendStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<int64_t> group =
      verifyMeshAxes(*this, getMeshAttr(), getAxes(), symbolTable);
  if (failed(group))
    return failure();
  return verifyPeer(*this, "peer", static_cast<int64_t>(getPeer()), *group);
}

LogicalResult RecvStartOp::verify() {
  if (failed(getFutureTensor(*this, getFuture())) ||
      failed(verifyFutureUse(*this, getFuture())))
    return failure();
  return verifyPeerAndTag(*this, getPeer(), getTag());
}

LogicalResult
RecvStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<int64_t> group =
      verifyMeshAxes(*this, getMeshAttr(), getAxes(), symbolTable);
  if (failed(group))
    return failure();
  return verifyPeer(*this, "peer", static_cast<int64_t>(getPeer()), *group);
}

//===----------------------------------------------------------------------===//
// WaitOp
//===----------------------------------------------------------------------===//

LogicalResult WaitOp::verify() {
  Type valueType = getFuture().getType().getValueType();
  if (isa<NoneType>(valueType)) {
    if (getResult())
      return emitOpError("waiting on !loom.future<none> yields no value");
    return success();
  }
  if (!getResult())
    return emitOpError("waiting on ") << getFuture().getType()
                                      << " must yield its value";
  if (getResult().getType() != valueType)
    return emitOpError("result type ")
           << getResult().getType() << " does not match the future's value "
           << valueType;
  return success();
}

//===----------------------------------------------------------------------===//
// OptimizerUpdateOp
//===----------------------------------------------------------------------===//

LogicalResult loom::verifyOptimizerStateCount(Operation *op,
                                              const OptimizerConfig &config,
                                              size_t numState) {
  if (numState == config.stateNames.size())
    return success();
  InFlightDiagnostic diag = op->emitOpError("#loom.")
                            << config.name << " keeps "
                            << config.stateNames.size()
                            << " state tensors per parameter";
  if (!config.stateNames.empty()) {
    diag << " (";
    llvm::interleaveComma(config.stateNames, diag);
    diag << ")";
  }
  return diag << ", got " << numState;
}

// Every operand and result has the parameter's type, so the custom form
// prints it once:
//   loom.optimizer_update #loom.adam<> param %w grad %g state [%m, %v]
//       : tensor<8x4xf32>
ParseResult OptimizerUpdateOp::parse(OpAsmParser &parser,
                                     OperationState &result) {
  Attribute optimizer;
  OpAsmParser::UnresolvedOperand param, grad;
  SmallVector<OpAsmParser::UnresolvedOperand> state;
  Type type;
  if (parser.parseAttribute(optimizer) || parser.parseKeyword("param") ||
      parser.parseOperand(param) || parser.parseKeyword("grad") ||
      parser.parseOperand(grad))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("state")) &&
      parser.parseOperandList(state, OpAsmParser::Delimiter::Square))
    return failure();
  if (parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(type))
    return failure();
  result.addAttribute(getOptimizerAttrName(result.name), optimizer);
  if (parser.resolveOperand(param, type, result.operands) ||
      parser.resolveOperand(grad, type, result.operands) ||
      parser.resolveOperands(state, type, result.operands))
    return failure();
  result.addTypes(SmallVector<Type>(1 + state.size(), type));
  return success();
}

void OptimizerUpdateOp::print(OpAsmPrinter &p) {
  p << " " << getOptimizer() << " param " << getParam() << " grad "
    << getGrad();
  if (!getState().empty()) {
    p << " state [";
    p.printOperands(getState());
    p << "]";
  }
  p.printOptionalAttrDict((*this)->getAttrs(), {getOptimizerAttrName()});
  p << " : " << getParam().getType();
}

LogicalResult OptimizerUpdateOp::verify() {
  std::optional<OptimizerConfig> config = getOptimizerConfig(getOptimizer());
  assert(config && "the ODS constraint admits optimizer attributes only");
  Type type = getParam().getType();
  if (!isa<FloatType>(cast<RankedTensorType>(type).getElementType()))
    return emitOpError("parameter type ")
           << type << " is not a floating-point tensor";
  if (getGrad().getType() != type)
    return emitOpError("gradient type ")
           << getGrad().getType() << " differs from parameter type " << type;
  if (failed(verifyOptimizerStateCount(*this, *config, getState().size())))
    return failure();
  if (getNewState().size() != getState().size())
    return emitOpError("has ") << getState().size() << " state operands but "
                               << getNewState().size() << " state results";
  for (auto [i, s] : llvm::enumerate(getState()))
    if (s.getType() != type)
      return emitOpError("state #")
             << i << " (" << config->stateNames[i] << ") has type "
             << s.getType() << ", expected the parameter type " << type;
  for (Value r : getResults())
    if (r.getType() != type)
      return emitOpError("result type ")
             << r.getType() << " differs from parameter type " << type;
  return success();
}

//===----------------------------------------------------------------------===//
// RecomputeOp
//===----------------------------------------------------------------------===//

void RecomputeOp::build(OpBuilder &builder, OperationState &state,
                        StringRef module, TypeRange results,
                        ValueRange inputs) {
  state.addAttribute(getModuleAttrName(state.name),
                     builder.getStringAttr(module));
  state.addOperands(inputs);
  state.addTypes(results);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value input : inputs)
    block->addArgument(input.getType(), input.getLoc());
}

YieldOp RecomputeOp::getYield() {
  return dyn_cast<YieldOp>(getBodyBlock().getTerminator());
}

// loom.recompute "module" (%a, %b) : (A, B) -> (R) { ^bb0(...): ... } attrs
ParseResult RecomputeOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr module;
  SmallVector<OpAsmParser::UnresolvedOperand> inputs;
  FunctionType type;
  if (parser.parseAttribute(module, getModuleAttrName(result.name),
                            result.attributes) ||
      parser.parseOperandList(inputs, OpAsmParser::Delimiter::Paren) ||
      parser.parseColonType(type))
    return failure();
  if (parser.resolveOperands(inputs, type.getInputs(), parser.getNameLoc(),
                             result.operands))
    return failure();
  result.addTypes(type.getResults());
  Region *body = result.addRegion();
  if (parser.parseRegion(*body, /*arguments=*/{}) ||
      parser.parseOptionalAttrDict(result.attributes))
    return failure();
  return success();
}

void RecomputeOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printAttributeWithoutType(getModuleAttr());
  p << " (" << getInputs() << ") : ";
  p.printFunctionalType(getInputs().getTypes(), getResultTypes());
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/true,
                /*printBlockTerminators=*/true);
  p.printOptionalAttrDict((*this)->getAttrs(), {getModuleAttrName()});
}

LogicalResult RecomputeOp::verify() {
  Block &block = getBodyBlock();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("body has ")
           << block.getNumArguments() << " arguments for "
           << getInputs().size() << " inputs";
  for (auto [i, arg, input] : llvm::enumerate(block.getArguments(), getInputs()))
    if (arg.getType() != input.getType())
      return emitOpError("body argument #")
             << i << " has type " << arg.getType() << ", but input #" << i
             << " is " << input.getType();
  return success();
}

LogicalResult RecomputeOp::verifyRegions() {
  auto yield = getYield();
  if (!yield)
    return emitOpError("body must end with 'loom.yield'");
  if (yield.getValues().getTypes() != getResultTypes())
    return yield.emitOpError("yields ")
           << yield.getValues().size() << " values of types "
           << yield.getValues().getTypes() << ", but the recompute has results "
           << getResultTypes();
  for (Operation &op : getBodyBlock().without_terminator()) {
    auto aten = dyn_cast<AtenOp>(op);
    if (!aten)
      return op.emitOpError("cannot be recomputed: a recompute body holds only "
                            "'loom.aten' ops");
    if (isRandomAtenOp(aten.getKernel()))
      return op.emitOpError("is random and cannot be recomputed: its output "
                            "must be saved so that backward sees the same "
                            "values as forward");
    if (isInPlaceAtenOp(aten))
      return op.emitOpError("mutates its input and cannot be recomputed");
  }
  return success();
}

#define GET_OP_CLASSES
#include "loom/Dialect/Loom/IR/LoomOps.cpp.inc"
