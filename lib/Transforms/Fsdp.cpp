//===- Fsdp.cpp - Shard a step's parameters as FSDP2 fully_shard does -----===//

#include "loom/Analysis/PeakMemory.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <functional>

namespace loom {
#define GEN_PASS_DEF_LOOMFSDP
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// One parameter argument and its sharding.
struct ParamInfo {
  unsigned argIndex;
  StringRef name;
  RankedTensorType fullType;
  RankedTensorType localType;
  /// Elements of the local shard (rows per rank times the row size).
  int64_t localNumel = 0;
  unsigned unit = 0;
  /// Result index of the parameter's gradient, if it has one.
  std::optional<unsigned> gradResult;
};

/// One fully_shard unit: a parameter group gathered and reduced together.
struct Unit {
  std::string prefix;
  bool isRoot = false;
  bool reshard = false;
  /// Indices into the parameter list, in argument order.
  SmallVector<unsigned> params;
};

int64_t product(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Whether module `path` lies under `prefix` ("" is the root of everything).
bool isUnder(StringRef path, StringRef prefix) {
  if (prefix.empty())
    return true;
  return path == prefix || (path.starts_with(prefix) &&
                            path.drop_front(prefix.size()).starts_with("."));
}

/// The module that owns a parameter: its name without the last component.
StringRef getOwnerModule(StringRef param) {
  size_t dot = param.rfind('.');
  return dot == StringRef::npos ? StringRef() : param.take_front(dot);
}

/// The default units: the `...layers.N` prefix of every parameter name.
void collectDefaultUnits(ArrayRef<StringRef> names,
                         SmallVectorImpl<std::string> &prefixes) {
  llvm::StringSet<> seen;
  for (StringRef name : names) {
    SmallVector<StringRef> parts;
    name.split(parts, '.');
    for (size_t i = 0; i + 2 < parts.size(); ++i) {
      int64_t index;
      if (parts[i] == "layers" && !parts[i + 1].getAsInteger(10, index)) {
        std::string prefix = llvm::join(ArrayRef(parts).take_front(i + 2), ".");
        if (seen.insert(prefix).second)
          prefixes.push_back(prefix);
        break;
      }
    }
  }
}

/// Random ops draw new numbers each call, so they are never recomputed.
bool isRecomputable(Operation *op) {
  auto aten = dyn_cast<AtenOp>(op);
  if (!aten || op->getNumOperands() == 0 || op->getNumRegions() != 0)
    return false;
  StringRef name = aten.getOpName();
  return !name.contains("rand") && !name.contains("dropout") &&
         !name.contains("bernoulli");
}

/// Whether an ATen operator computes in torch.result_type of its tensor
/// operands (elementwise arithmetic and comparisons): with a compute-dtype
/// and an original-dtype operand it runs, in eager PyTorch, in the promoted
/// dtype rather than failing or casting down.
bool promotesTypes(StringRef opName) {
  return llvm::StringSwitch<bool>(opName)
      .Cases({"aten::add", "aten::sub", "aten::mul", "aten::div",
              "aten::rsub", "aten::where", "aten::maximum", "aten::minimum"},
             true)
      .Cases({"aten::pow", "aten::atan2", "aten::fmod", "aten::remainder",
              "aten::addcmul", "aten::addcdiv", "aten::lerp"},
             true)
      .Cases({"aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt",
              "aten::ge", "aten::fmax", "aten::fmin", "aten::hypot"},
             true)
      .Default(false);
}

FailureOr<Type> parseDtype(MLIRContext *ctx, StringRef text) {
  if (text == "bf16" || text == "bfloat16")
    return Type(BFloat16Type::get(ctx));
  if (text == "f16" || text == "float16")
    return Type(Float16Type::get(ctx));
  if (text == "f32" || text == "float32")
    return Type(Float32Type::get(ctx));
  return failure();
}

struct LoomFsdpPass : public loom::impl::LoomFsdpBase<LoomFsdpPass> {
  using LoomFsdpBase::LoomFsdpBase;

  void runOnOperation() override;

private:
  LogicalResult shardStep(func::FuncOp func);

  // Op builders; every op gets the unit's module path and `phase`.
  Value aten(OpBuilder &b, Location loc, StringRef kernel, Type result,
             ValueRange inputs, ArrayRef<Attribute> args,
             DictionaryAttr kwargs = {});
  Value view(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape,
             StringRef kernel = "aten::view.default");
  Value castTo(OpBuilder &b, Location loc, Value v, Type elementType);
  SmallVector<Value> splitWithSizes(OpBuilder &b, Location loc, Value v,
                                    ArrayRef<int64_t> sizes, int64_t dim);
  void tag(Operation *op);

  /// Builds the all-gather of `unit` at the builder's insertion point and
  /// returns one full (unpadded) tensor per parameter of the unit: over the
  /// shard axes from the parameters' shards, or, given the unit's
  /// post-forward shard `postForward`, over the post-forward axes from it.
  /// `flat` receives the gathered buffer (the [G, N] matrix, flattened).
  SmallVector<Value> buildGather(OpBuilder &b, Location loc, const Unit &unit,
                                 Value postForward, Value &flat);
  /// This rank's post-forward shard of a unit's gathered buffer `flat`:
  /// rows [j*G/k, (j+1)*G/k) of the [G, N] matrix for rank j of its k-rank
  /// post-forward group (1/k of every parameter, as FSDP2 keeps it).
  Value buildPostForwardSlice(OpBuilder &b, Location loc, Value flat);
  /// Reduces the gradients `grads` of `params` and returns local shards.
  SmallVector<Value> buildReduce(OpBuilder &b, Location loc,
                                 ArrayRef<unsigned> params,
                                 ArrayRef<Value> grads);

  // State of one run.
  SmallVector<ParamInfo> params;
  FlatSymbolRefAttr meshRef;
  ArrayAttr shardAxes, replicateAxes, dpAxes, postForwardAxes;
  int64_t shardSize = 1, replicateSize = 1;
  /// reshard-after-forward=k with 1 < k < shardSize: the post-forward
  /// group size (0 otherwise).
  int64_t postForwardSize = 0;
  Type computeDtype, gradReduceDtype;
  StringAttr curModule;
  Phase curPhase = Phase::forward;
};

void LoomFsdpPass::tag(Operation *op) {
  op->setAttr(LoomDialect::kModuleAttrName, curModule);
  op->setAttr(LoomDialect::kPhaseAttrName,
              PhaseAttr::get(op->getContext(), curPhase));
}

Value LoomFsdpPass::aten(OpBuilder &b, Location loc, StringRef kernel,
                         Type result, ValueRange inputs,
                         ArrayRef<Attribute> args, DictionaryAttr kwargs) {
  auto op = AtenOp::create(
      b, loc, TypeRange{result}, kernel, inputs, b.getArrayAttr(args),
      kwargs ? kwargs : b.getDictionaryAttr({}), ArrayAttr());
  tag(op);
  return op->getResult(0);
}

Value LoomFsdpPass::view(OpBuilder &b, Location loc, Value v,
                         ArrayRef<int64_t> shape, StringRef kernel) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  return aten(
      b, loc, kernel, type.clone(shape), v,
      {OperandRefAttr::get(b.getContext(), 0), b.getI64ArrayAttr(shape)});
}

Value LoomFsdpPass::castTo(OpBuilder &b, Location loc, Value v,
                           Type elementType) {
  auto type = cast<RankedTensorType>(v.getType());
  if (!elementType || type.getElementType() == elementType)
    return v;
  return aten(
      b, loc, "aten::_to_copy.default", type.clone(elementType), v,
      {OperandRefAttr::get(b.getContext(), 0)},
      b.getDictionaryAttr(b.getNamedAttr("dtype", TypeAttr::get(elementType))));
}

SmallVector<Value> LoomFsdpPass::splitWithSizes(OpBuilder &b, Location loc,
                                                Value v,
                                                ArrayRef<int64_t> sizes,
                                                int64_t dim) {
  AtenOp op = buildSplitWithSizes(b, loc, v, sizes, dim);
  tag(op);
  return SmallVector<Value>(op->getResults());
}

SmallVector<Value> LoomFsdpPass::buildGather(OpBuilder &b, Location loc,
                                             const Unit &unit,
                                             Value postForward, Value &flat) {
  func::FuncOp func = cast<func::FuncOp>(b.getBlock()->getParentOp());
  MLIRContext *ctx = b.getContext();
  SmallVector<int64_t> sizes;
  int64_t total = 0;
  for (unsigned p : unit.params) {
    sizes.push_back(params[p].localNumel);
    total += params[p].localNumel;
  }
  Value gathered;
  auto allGather = [&](Value buffer, ArrayAttr axes) {
    auto type =
        cast<RankedTensorType>(buffer.getType()).clone({total * shardSize});
    auto start = AllGatherStartOp::create(b, loc, FutureType::get(ctx, type),
                                          buffer, meshRef, axes,
                                          b.getI64IntegerAttr(0));
    tag(start);
    auto wait = WaitOp::create(b, loc, type, start.getFuture());
    tag(wait);
    return wait.getResult();
  };
  if (postForward) {
    // The k ranks of the post-forward group hold consecutive row blocks of
    // the [G, N] matrix: gathering them rebuilds it.
    gathered = allGather(postForward, postForwardAxes);
  } else {
    SmallVector<Value> pieces;
    for (unsigned p : unit.params) {
      const ParamInfo &info = params[p];
      Value shard =
          castTo(b, loc, func.getArgument(info.argIndex), computeDtype);
      pieces.push_back(view(b, loc, shard, {info.localNumel}));
    }
    Value buffer = pieces.front();
    if (pieces.size() > 1) {
      SmallVector<Attribute> refs;
      for (unsigned i = 0; i < pieces.size(); ++i)
        refs.push_back(OperandRefAttr::get(ctx, i));
      buffer = aten(b, loc, "aten::cat.default",
                    cast<RankedTensorType>(buffer.getType()).clone({total}),
                    pieces, {b.getArrayAttr(refs), b.getI64IntegerAttr(0)});
    }
    gathered = shardSize > 1 ? allGather(buffer, shardAxes) : buffer;
  }
  flat = gathered;

  // Rank r's chunk holds its shard of every parameter; a [G, N] view puts
  // each parameter's shards in one column block.
  SmallVector<Value> pieces;
  if (unit.params.size() == 1) {
    pieces.push_back(gathered);
  } else {
    Value matrix = view(b, loc, gathered, {shardSize, total});
    pieces = splitWithSizes(b, loc, matrix, sizes, 1);
  }
  SmallVector<Value> full;
  for (auto [p, piece] : llvm::zip(unit.params, pieces)) {
    const ParamInfo &info = params[p];
    SmallVector<int64_t> padded(info.fullType.getShape());
    padded[0] = info.localType.getDimSize(0) * shardSize;
    // A column block of the [G, N] view is not contiguous: reshape copies.
    Value value = view(b, loc, piece, padded,
                       unit.params.size() == 1 ? "aten::view.default"
                                               : "aten::reshape.default");
    int64_t rows = info.fullType.getDimSize(0);
    if (padded[0] != rows) {
      SmallVector<int64_t> shape(padded);
      shape[0] = rows;
      value = aten(b, loc, "aten::slice.Tensor",
                   cast<RankedTensorType>(value.getType()).clone(shape), value,
                   {OperandRefAttr::get(ctx, 0), b.getI64IntegerAttr(0),
                    b.getI64IntegerAttr(0), b.getI64IntegerAttr(rows),
                    b.getI64IntegerAttr(1)});
    }
    full.push_back(value);
  }
  return full;
}

Value LoomFsdpPass::buildPostForwardSlice(OpBuilder &b, Location loc,
                                          Value flat) {
  MLIRContext *ctx = b.getContext();
  auto full = cast<RankedTensorType>(flat.getType());
  auto type = full.clone({full.getDimSize(0) / postForwardSize});
  auto start = AllSliceStartOp::create(b, loc, FutureType::get(ctx, type),
                                       flat, meshRef, postForwardAxes,
                                       b.getI64IntegerAttr(0));
  tag(start);
  auto wait = WaitOp::create(b, loc, type, start.getFuture());
  tag(wait);
  return wait.getResult();
}

SmallVector<Value> LoomFsdpPass::buildReduce(OpBuilder &b, Location loc,
                                             ArrayRef<unsigned> unitParams,
                                             ArrayRef<Value> grads) {
  MLIRContext *ctx = b.getContext();
  int64_t dpSize = shardSize * replicateSize;
  SmallVector<Value> blocks;
  SmallVector<int64_t> sizes;
  int64_t total = 0;
  for (auto [p, grad] : llvm::zip(unitParams, grads)) {
    const ParamInfo &info = params[p];
    Value g = castTo(b, loc, grad, gradReduceDtype);
    int64_t rows = info.fullType.getDimSize(0);
    int64_t paddedRows = info.localType.getDimSize(0) * shardSize;
    if (paddedRows != rows) {
      // constant_pad_nd lists (before, after) pairs from the last dimension.
      SmallVector<int64_t> pads(2 * info.fullType.getRank(), 0);
      pads.back() = paddedRows - rows;
      SmallVector<int64_t> shape(info.fullType.getShape());
      shape[0] = paddedRows;
      g = aten(b, loc, "aten::constant_pad_nd.default",
               cast<RankedTensorType>(g.getType()).clone(shape), g,
               {OperandRefAttr::get(ctx, 0), b.getI64ArrayAttr(pads),
                b.getF64FloatAttr(0.0)});
    }
    // Only a concatenation needs the [G, n] view of each gradient.
    blocks.push_back(unitParams.size() == 1
                         ? g
                         : view(b, loc, g, {shardSize, info.localNumel}));
    sizes.push_back(info.localNumel);
    total += info.localNumel;
  }
  Value buffer = blocks.front();
  if (blocks.size() > 1) {
    SmallVector<Attribute> refs;
    for (unsigned i = 0; i < blocks.size(); ++i)
      refs.push_back(OperandRefAttr::get(ctx, i));
    buffer =
        aten(b, loc, "aten::cat.default",
             cast<RankedTensorType>(buffer.getType()).clone({shardSize, total}),
             blocks, {b.getArrayAttr(refs), b.getI64IntegerAttr(1)});
  }
  buffer = view(b, loc, buffer, {shardSize * total});
  Type elementType = cast<RankedTensorType>(buffer.getType()).getElementType();

  // PyTorch's _get_gradient_divide_factors: avg when the factor is the
  // data-parallel size (fp32/bf16), otherwise sums with explicit divisions.
  double factor = gradientDivideFactor > 0 ? gradientDivideFactor
                                           : static_cast<double>(dpSize);
  ReduceKind reduce = ReduceKind::avg;
  double pre = 1, post = 1;
  if (elementType.isF16()) {
    reduce = ReduceKind::sum;
    pre = 1;
    while (std::fmod(factor, pre) == 0 && factor / pre > pre)
      pre *= 2;
    post = factor / pre;
  } else if (factor != static_cast<double>(dpSize)) {
    reduce = ReduceKind::sum;
    pre = factor;
  }
  auto divide = [&](Value v, double by) {
    if (by == 1)
      return v;
    return aten(b, loc, "aten::div.Tensor", v.getType(), v,
                {OperandRefAttr::get(ctx, 0), b.getF64FloatAttr(by)});
  };
  buffer = divide(buffer, pre);
  Value reduced = buffer;
  if (shardSize > 1) {
    auto type = cast<RankedTensorType>(buffer.getType()).clone({total});
    auto start = ReduceScatterStartOp::create(
        b, loc, FutureType::get(ctx, type), buffer, meshRef, shardAxes,
        b.getI64IntegerAttr(0), ReduceKindAttr::get(ctx, reduce));
    tag(start);
    auto wait = WaitOp::create(b, loc, type, start.getFuture());
    tag(wait);
    reduced = wait.getResult();
  }
  if (replicateSize > 1) {
    auto type = cast<RankedTensorType>(reduced.getType());
    auto start = AllReduceStartOp::create(b, loc, FutureType::get(ctx, type),
                                          reduced, meshRef, replicateAxes,
                                          ReduceKindAttr::get(ctx, reduce));
    tag(start);
    auto wait = WaitOp::create(b, loc, type, start.getFuture());
    tag(wait);
    reduced = wait.getResult();
  }
  reduced = divide(reduced, post);

  SmallVector<Value> pieces;
  if (unitParams.size() == 1)
    pieces.push_back(reduced);
  else
    pieces = splitWithSizes(b, loc, reduced, sizes, 0);
  SmallVector<Value> shards;
  for (auto [p, piece] : llvm::zip(unitParams, pieces)) {
    const ParamInfo &info = params[p];
    Value shard = view(b, loc, piece, info.localType.getShape());
    shards.push_back(castTo(b, loc, shard, info.fullType.getElementType()));
  }
  return shards;
}

void LoomFsdpPass::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<func::FuncOp> steps = getStepFunctions(module);
  if (steps.empty()) {
    module.emitError("--loom-fsdp: no step function (func.func with '")
        << LoomDialect::kStepAttrName << "') to shard";
    return signalPassFailure();
  }
  for (func::FuncOp func : steps)
    if (failed(shardStep(func)))
      return signalPassFailure();
  if (failed(verify(module))) {
    module.emitError("--loom-fsdp produced an invalid module");
    return signalPassFailure();
  }
}

LogicalResult LoomFsdpPass::shardStep(func::FuncOp func) {
  MLIRContext *ctx = &getContext();
  OpBuilder b(ctx);
  auto fail = [&]() { return func.emitOpError("--loom-fsdp: "); };

  // Mesh.
  SmallVector<int64_t> shape(meshShape.begin(), meshShape.end());
  if (shape.empty())
    return fail() << "needs 'mesh-shape': {N} for FSDP or {R, S} for HSDP";
  if (shape.size() > 2)
    return fail() << "mesh-shape has " << shape.size()
                  << " dimensions; FSDP takes a 1-D mesh and HSDP a 2-D "
                     "(replicate, shard) mesh";
  for (int64_t s : shape)
    if (s <= 0)
      return fail() << "mesh-shape has a group of size " << s
                    << "; every axis needs at least one rank";
  bool hsdp = shape.size() == 2;
  shardSize = shape.back();
  replicateSize = hsdp ? shape.front() : 1;
  StringRef meshName = hsdp ? "hsdp" : "dp";
  SmallVector<StringRef> axisNames =
      hsdp ? SmallVector<StringRef>{"replicate", "shard"}
           : SmallVector<StringRef>{"shard"};
  meshRef = FlatSymbolRefAttr::get(ctx, meshName);
  shardAxes = b.getStrArrayAttr({"shard"});
  replicateAxes = b.getStrArrayAttr({"replicate"});
  dpAxes = b.getStrArrayAttr(axisNames);

  // Dtypes.
  computeDtype = {};
  gradReduceDtype = {};
  if (!paramDtype.empty()) {
    FailureOr<Type> t = parseDtype(ctx, paramDtype);
    if (failed(t))
      return fail() << "param-dtype '" << paramDtype
                    << "' is not one of bf16, f16, f32";
    computeDtype = *t;
  }
  if (!reduceDtype.empty()) {
    FailureOr<Type> t = parseDtype(ctx, reduceDtype);
    if (failed(t))
      return fail() << "reduce-dtype '" << reduceDtype
                    << "' is not one of bf16, f16, f32";
    gradReduceDtype = *t;
  }
  if (gradientDivideFactor < 0)
    return fail() << "gradient-divide-factor "
                  << loom::detail::formatF64Parameter(gradientDivideFactor)
                  << " is negative";

  // Reshard after forward, as _get_post_forward_mesh_info resolves it.
  enum class Raf { Auto, True, False, Group } raf;
  StringRef rafText = reshardAfterForward;
  int64_t k;
  if (rafText == "auto" || rafText == "none")
    raf = Raf::Auto;
  else if (rafText == "true")
    raf = Raf::True;
  else if (rafText == "false")
    raf = Raf::False;
  else if (!rafText.getAsInteger(10, k)) {
    if (k < 1 || k > shardSize || shardSize % k != 0)
      return fail() << "reshard-after-forward=" << k
                    << " must divide the shard size " << shardSize
                    << " (1 <= k <= " << shardSize << ")";
    if (k == 1)
      raf = Raf::False;
    else if (k == shardSize)
      raf = Raf::True;
    else
      raf = Raf::Group;
  } else {
    return fail() << "reshard-after-forward '" << rafText
                  << "' is not auto, true, false or an integer";
  }

  // Resharding to groups of k after forward: FSDP2's post-forward mesh is
  // mesh.view(-1, k), k consecutive ranks. The shard axis is factored into
  // (shard_outer, shard_inner) of sizes (S/k, k): the shard group is both
  // axes (the same S ranks in the same order), the post-forward group is
  // shard_inner.
  postForwardSize = 0;
  postForwardAxes = {};
  if (raf == Raf::Group) {
    postForwardSize = k;
    shape.back() = shardSize / k;
    shape.push_back(k);
    axisNames.pop_back();
    axisNames.append({"shard_outer", "shard_inner"});
    shardAxes = b.getStrArrayAttr({"shard_outer", "shard_inner"});
    postForwardAxes = b.getStrArrayAttr({"shard_inner"});
    dpAxes = b.getStrArrayAttr(axisNames);
  }

  // Parameters.
  params.clear();
  llvm::StringMap<unsigned> paramByName;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto role = func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role || role.getValue() != Role::parameter)
      continue;
    if (func.getArgAttr(i, LoomDialect::kShardAttrName))
      return fail() << "argument #" << i << " is already sharded";
    auto name =
        func.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName);
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    if (type.getRank() == 0)
      return func.emitOpError("--loom-fsdp: parameter '")
             << name.getValue()
             << "' is a scalar; FSDP shards dim 0 and cannot shard it";
    ParamInfo info;
    info.argIndex = i;
    info.name = name.getValue();
    info.fullType = type;
    SmallVector<int64_t> local(type.getShape());
    local[0] = (local[0] + shardSize - 1) / shardSize;
    info.localType = type.clone(local);
    info.localNumel = product(local);
    paramByName[info.name] = params.size();
    params.push_back(info);
  }
  if (params.empty())
    return fail() << "the step has no parameters to shard";
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto role =
        func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role || role.getValue() != Role::grad)
      continue;
    auto target =
        func.getResultAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName);
    auto it = paramByName.find(target.getValue());
    if (it != paramByName.end())
      params[it->second].gradResult = i;
  }

  // Units: the listed prefixes, then the root.
  SmallVector<std::string> prefixes(units.begin(), units.end());
  if (prefixes.empty()) {
    SmallVector<StringRef> names;
    for (const ParamInfo &p : params)
      names.push_back(p.name);
    collectDefaultUnits(names, prefixes);
  }
  SmallVector<Unit> unitList;
  for (const std::string &prefix : prefixes) {
    if (prefix.empty())
      return fail() << "a unit prefix is empty; the root is always a unit";
    // A unit names parameters by their owner module, or uses them under its
    // path (`head` of a weight tied to `tok.weight`).
    bool matches = llvm::any_of(params, [&](const ParamInfo &p) {
      if (isUnder(getOwnerModule(p.name), prefix))
        return true;
      return llvm::any_of(func.getArgument(p.argIndex).getUsers(),
                          [&](Operation *user) {
                            return isUnder(getModulePath(user), prefix);
                          });
    });
    if (!matches)
      return fail() << "unit '" << prefix
                    << "' matches no parameter (none is owned or used by a "
                       "module under it)";
    if (llvm::any_of(unitList,
                     [&](const Unit &u) { return u.prefix == prefix; }))
      return fail() << "unit '" << prefix << "' is listed twice";
    Unit unit;
    unit.prefix = prefix;
    unitList.push_back(unit);
  }
  unsigned rootUnit = unitList.size();
  Unit root;
  root.isRoot = true;
  unitList.push_back(root);
  auto unitOfPath = [&](StringRef path) {
    unsigned best = rootUnit;
    size_t bestLength = 0;
    for (unsigned u = 0; u < rootUnit; ++u)
      if (isUnder(path, unitList[u].prefix) &&
          unitList[u].prefix.size() >= bestLength) {
        best = u;
        bestLength = unitList[u].prefix.size();
      }
    return best;
  };

  // Microbatches: loom-accumulate-gradients tags each copy of the step with
  // loom.microbatch; FSDP2 unshards and reshards per forward and backward,
  // so every microbatch is a segment gathered on its own. Untagged ops of
  // a tagged step (the accumulation) belong to no microbatch.
  Block &body = func.getBody().front();
  bool tagged = false;
  int64_t numMicrobatches = 1;
  for (Operation &op : body)
    if (auto mb =
            op.getAttrOfType<IntegerAttr>(LoomDialect::kMicrobatchAttrName)) {
      tagged = true;
      numMicrobatches = std::max(numMicrobatches, mb.getInt() + 1);
    }
  auto microbatchOf = [&](Operation *op) -> std::optional<int64_t> {
    if (!tagged)
      return 0;
    if (auto mb =
            op->getAttrOfType<IntegerAttr>(LoomDialect::kMicrobatchAttrName))
      return mb.getInt();
    return std::nullopt;
  };

  // Direct uses of each parameter, collected before anything changes.
  SmallVector<SmallVector<OpOperand *>> uses(params.size());
  for (auto [p, info] : llvm::enumerate(params)) {
    BlockArgument arg = func.getArgument(info.argIndex);
    for (OpOperand &use : arg.getUses())
      uses[p].push_back(&use);
    // Owner: by name, unless forward ops of several units use it directly
    // (a tied weight), then the first of them in program order.
    info.unit = unitOfPath(getOwnerModule(info.name));
    SmallVector<Operation *> users;
    for (OpOperand *use : uses[p])
      users.push_back(use->getOwner());
    llvm::sort(users, [](Operation *a, Operation *c) {
      return a->isBeforeInBlock(c);
    });
    llvm::SmallSetVector<unsigned, 2> forwardUnits;
    for (Operation *user : users)
      if (getPhase(user) == Phase::forward)
        forwardUnits.insert(unitOfPath(getModulePath(user)));
    if (forwardUnits.size() > 1)
      info.unit = forwardUnits.front();
    unitList[info.unit].params.push_back(p);
  }
  for (Unit &unit : unitList) {
    unit.reshard = raf == Raf::True || raf == Raf::Group ||
                   (raf == Raf::Auto && !unit.isRoot);
    if (unit.params.empty())
      continue;
    Type dtype = params[unit.params.front()].fullType.getElementType();
    for (unsigned p : unit.params)
      if (params[p].fullType.getElementType() != dtype)
        return fail() << "unit '" << (unit.isRoot ? "<root>" : unit.prefix)
                      << "' mixes parameter dtypes " << dtype << " and "
                      << params[p].fullType.getElementType() << " ('"
                      << params[p].name << "'); FSDP needs one dtype per unit";
  }

  // The mesh.
  SymbolTable symbols(getOperation());
  if (auto existing = symbols.lookup<MeshOp>(meshName)) {
    if (existing.getShape() != ArrayRef<int64_t>(shape) ||
        existing.getAxes() != dpAxes)
      return existing.emitOpError("--loom-fsdp: mesh @")
             << meshName << " exists with another shape or axes";
  } else if (symbols.lookup(meshName)) {
    return fail() << "symbol @" << meshName << " exists and is not a mesh";
  } else {
    b.setInsertionPointToStart(getOperation().getBody());
    MeshOp::create(b, func.getLoc(), meshName, shape, dpAxes);
  }

  // Shard the arguments.
  for (ParamInfo &info : params) {
    BlockArgument arg = func.getArgument(info.argIndex);
    arg.setType(info.localType);
    func.setArgAttr(
        info.argIndex, LoomDialect::kShardAttrName,
        ShardAttr::get(ctx, meshRef, shardAxes, 0, info.fullType.getShape()));
  }

  // Each microbatch in order, as FSDP2's hooks run: a unit is all-gathered
  // before its first forward use unless it is still unsharded, resharded
  // after forward when it reshards after forward, gathered again before its
  // backward if so, and resharded after backward unless
  // reshard-after-backward=false keeps it unsharded for the next microbatch
  // (the last microbatch always reshards). `live[u]` holds the unit's
  // unsharded parameters while it is unsharded, `liveFlat[u]` the gathered
  // buffer they come from.
  SmallVector<bool> isRafParam(params.size(), false);
  for (auto [p, info] : llvm::enumerate(params))
    isRafParam[p] = unitList[info.unit].reshard;
  SmallVector<SmallVector<Value>> live(unitList.size());
  SmallVector<Value> liveFlat(unitList.size());
  DenseSet<Value> gatheredValues;
  auto unitLabel = [](const Unit &unit) {
    return unit.isRoot ? std::string("<root>") : unit.prefix;
  };
  for (int64_t mb = 0; mb < numMicrobatches; ++mb) {
    auto inMicrobatch = [&](Operation *op) { return microbatchOf(op) == mb; };
    auto useMicrobatch = [&](OpOperand *use) {
      return microbatchOf(use->getOwner()).value_or(0) == mb;
    };

    // Forward all-gathers, one per unit, before its first forward use.
    SmallVector<Value> forwardFull(params.size());
    SmallVector<Value> postForward(unitList.size());
    for (auto [u, unit] : llvm::enumerate(unitList)) {
      Operation *first = nullptr;
      for (unsigned p : unit.params) {
        Operation *firstForward = nullptr, *firstAny = nullptr;
        for (OpOperand *use : uses[p]) {
          if (!useMicrobatch(use))
            continue;
          Operation *user = use->getOwner();
          if (!firstAny || user->isBeforeInBlock(firstAny))
            firstAny = user;
          if (getPhase(user) == Phase::forward &&
              (!firstForward || user->isBeforeInBlock(firstForward)))
            firstForward = user;
        }
        Operation *candidate = firstForward ? firstForward : firstAny;
        if (candidate && (!first || candidate->isBeforeInBlock(first)))
          first = candidate;
      }
      if (!first)
        continue;
      curModule = b.getStringAttr(unit.prefix);
      curPhase = Phase::forward;
      b.setInsertionPoint(first);
      if (live[u].empty()) {
        Location loc = NameLoc::get(
            b.getStringAttr("fsdp.all_gather:" + unitLabel(unit)),
            first->getLoc());
        live[u] = buildGather(b, loc, unit, Value(), liveFlat[u]);
        gatheredValues.insert(live[u].begin(), live[u].end());
      }
      // Resharding to k ranks keeps this rank's 1/k of the gathered buffer
      // (taken at once, so the buffer can be freed after the forward).
      if (unit.reshard && postForwardSize)
        postForward[u] = buildPostForwardSlice(
            b,
            NameLoc::get(b.getStringAttr("fsdp.post_forward_shard:" +
                                         unitLabel(unit)),
                         first->getLoc()),
            liveFlat[u]);
      for (auto [p, value] : llvm::zip(unit.params, live[u])) {
        forwardFull[p] = value;
        for (OpOperand *use : uses[p])
          if (useMicrobatch(use))
            use->set(value);
      }
      // Post-forward reshard.
      if (unit.reshard) {
        live[u].clear();
        liveFlat[u] = Value();
      }
    }

    // Backward of units that resharded after forward: forward values that
    // depend only on gathered parameters are recomputed from a second
    // all-gather placed before the unit's first backward use.
    DenseMap<Value, unsigned> paramOfFull;
    for (auto [p, value] : llvm::enumerate(forwardFull))
      if (value)
        paramOfFull[value] = p;
    // Forward values computed only from gathered parameters, and whether
    // they depend on a unit that resharded.
    DenseMap<Value, bool> derived;
    for (auto [value, p] : paramOfFull)
      derived[value] = isRafParam[p];
    for (Operation &op : body) {
      if (getPhase(&op) != Phase::forward || !inMicrobatch(&op) ||
          !isRecomputable(&op))
        continue;
      bool all = true, anyRaf = false;
      for (Value v : op.getOperands()) {
        auto it = derived.find(v);
        if (it == derived.end()) {
          all = false;
          break;
        }
        anyRaf |= it->second;
      }
      if (!all)
        continue;
      for (Value r : op.getResults())
        derived[r] = anyRaf;
    }
    SmallVector<Operation *> backwardOps;
    SmallVector<Operation *> firstBackwardOp(unitList.size(), nullptr);
    for (Operation &op : body) {
      if (getPhase(&op) != Phase::backward || !inMicrobatch(&op))
        continue;
      backwardOps.push_back(&op);
      Operation *&first = firstBackwardOp[unitOfPath(getModulePath(&op))];
      if (!first)
        first = &op;
    }
    SmallVector<Value> backwardFull(params.size());
    SmallVector<Value> backwardFlat(unitList.size());
    SmallVector<bool> unitGathered(unitList.size(), false);
    IRMapping recomputed;
    auto ensureBackwardGather = [&](unsigned u, Operation *before) {
      if (unitGathered[u])
        return;
      unitGathered[u] = true;
      const Unit &unit = unitList[u];
      curModule = b.getStringAttr(unit.prefix);
      curPhase = Phase::backward;
      // FSDP2 unshards in the unit's pre-backward hook, before any of its
      // backward ops runs.
      Operation *at = before;
      if (firstBackwardOp[u] && firstBackwardOp[u]->isBeforeInBlock(at))
        at = firstBackwardOp[u];
      b.setInsertionPoint(at);
      Location loc =
          NameLoc::get(b.getStringAttr("fsdp.all_gather:" + unitLabel(unit)),
                       at->getLoc());
      SmallVector<Value> values =
          buildGather(b, loc, unit, postForward[u], backwardFlat[u]);
      gatheredValues.insert(values.begin(), values.end());
      for (auto [q, value] : llvm::zip(unit.params, values))
        backwardFull[q] = value;
    };
    std::function<Value(Value, Operation *)> recompute =
        [&](Value v, Operation *before) -> Value {
      if (Value done = recomputed.lookupOrNull(v))
        return done;
      auto full = paramOfFull.find(v);
      if (full != paramOfFull.end()) {
        unsigned p = full->second;
        if (!isRafParam[p])
          return v;
        ensureBackwardGather(params[p].unit, before);
        recomputed.map(v, backwardFull[p]);
        return backwardFull[p];
      }
      Operation *def = v.getDefiningOp();
      for (Value operand : def->getOperands()) {
        auto it = derived.find(operand);
        if (it != derived.end() && it->second)
          recompute(operand, before);
      }
      b.setInsertionPoint(before);
      Operation *clone = b.clone(*def, recomputed);
      clone->setAttr(LoomDialect::kPhaseAttrName,
                     PhaseAttr::get(ctx, Phase::backward));
      return recomputed.lookup(v);
    };
    for (Operation *op : backwardOps)
      for (OpOperand &operand : op->getOpOperands()) {
        auto it = derived.find(operand.get());
        if (it != derived.end() && it->second)
          operand.set(recompute(operand.get(), op));
      }
    // A unit whose outputs get gradients is unsharded by its pre-backward
    // hook even when no backward op reads its parameters (an input layer),
    // as FSDP2 does unless set_unshard_in_backward(False).
    for (auto [u, unit] : llvm::enumerate(unitList))
      if (unit.reshard && !unit.params.empty() && firstBackwardOp[u] &&
          llvm::any_of(unit.params, [&](unsigned p) { return forwardFull[p]; }))
        ensureBackwardGather(u, firstBackwardOp[u]);

    // Post-backward reshard, unless the unit stays unsharded for the next
    // microbatch (FSDP2's set_reshard_after_backward(False) on all but the
    // last microbatch).
    bool lastMicrobatch = mb + 1 == numMicrobatches;
    for (auto [u, unit] : llvm::enumerate(unitList)) {
      if (lastMicrobatch || reshardAfterBackward) {
        live[u].clear();
        liveFlat[u] = Value();
        continue;
      }
      if (unitGathered[u]) {
        for (unsigned p : unit.params)
          live[u].push_back(backwardFull[p]);
        liveFlat[u] = backwardFlat[u];
      }
    }
  }

  // Mixed precision, as FSDP2's MixedPrecisionPolicy: the parameters are
  // gathered in the compute dtype and the root's floating forward inputs are
  // cast to it (cast_forward_inputs); buffers and constants keep their dtype.
  // Every op then computes in the dtype eager PyTorch would give it:
  // elementwise ops follow type promotion (`bf16 activation + f32 buffer`
  // is f32), other ops run in the compute dtype.
  Type original = params.front().fullType.getElementType();
  if (computeDtype && computeDtype != original) {
    OpBuilder ib(ctx);
    ib.setInsertionPointToStart(&body);
    curModule = b.getStringAttr("");
    curPhase = Phase::forward;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      auto role =
          func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
      BlockArgument arg = func.getArgument(i);
      if (!role || role.getValue() != Role::input || arg.use_empty() ||
          cast<RankedTensorType>(arg.getType()).getElementType() != original)
        continue;
      Value lowered = castTo(ib, arg.getLoc(), arg, computeDtype);
      arg.replaceAllUsesExcept(lowered, lowered.getDefiningOp());
    }
    auto dtypeOf = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getElementType();
    };
    DenseMap<Value, Value> castOnce;
    // Runs `atenOp` in the compute dtype: its original-dtype operands are
    // cast (once per value), its results and dtype arguments retyped.
    auto lowerToCompute = [&](AtenOp atenOp) {
      Operation &op = *atenOp;
      OpBuilder ob(&op);
      curModule = b.getStringAttr(getModulePath(&op));
      curPhase = getPhase(&op).value_or(Phase::forward);
      for (OpOperand &operand : op.getOpOperands()) {
        Value v = operand.get();
        if (dtypeOf(v) != original)
          continue;
        // Values defined before the loop dominate every later use, so one
        // cast serves all of them.
        Value &lowered = castOnce[v];
        if (!lowered)
          lowered = castTo(ob, op.getLoc(), v, computeDtype);
        operand.set(lowered);
      }
      for (Value result : op.getResults()) {
        auto type = cast<RankedTensorType>(result.getType());
        if (type.getElementType() == original)
          result.setType(type.clone(computeDtype));
      }
      // ScalarType arguments that named the original dtype follow it.
      auto retype = [&](Attribute a) -> Attribute {
        if (auto t = dyn_cast<TypeAttr>(a))
          if (t.getValue() == original)
            return TypeAttr::get(computeDtype);
        return a;
      };
      SmallVector<Attribute> args;
      for (Attribute a : atenOp.getArgs())
        args.push_back(retype(a));
      atenOp.setArgsAttr(b.getArrayAttr(args));
      SmallVector<NamedAttribute> kwargs;
      for (NamedAttribute a : atenOp.getKwargs())
        kwargs.push_back(b.getNamedAttr(a.getName(), retype(a.getValue())));
      atenOp.setKwargsAttr(b.getDictionaryAttr(kwargs));
    };
    for (Operation &op : llvm::make_early_inc_range(body)) {
      auto atenOp = dyn_cast<AtenOp>(&op);
      if (!atenOp || atenOp->getNumResults() == 0 ||
          gatheredValues.contains(atenOp->getResult(0)))
        continue;
      // A cast the model wrote (`.float()`) keeps its dtype.
      if (atenOp.getOpName() == "aten::_to_copy")
        continue;
      bool lowered = llvm::any_of(op.getOperands(), [&](Value v) {
        return dtypeOf(v) == computeDtype;
      });
      if (!lowered)
        continue;
      if (promotesTypes(atenOp.getOpName())) {
        // torch.result_type over the floating operands: dimensioned tensors
        // take precedence over 0-dim ones; among either, the original
        // (wider) dtype wins over the compute dtype. ATen promotes mixed
        // operands itself, so an op that stays in the original dtype needs
        // no cast.
        bool dimensioned = llvm::any_of(op.getOperands(), [&](Value v) {
          auto t = cast<RankedTensorType>(v.getType());
          return t.getRank() > 0 && isa<FloatType>(t.getElementType());
        });
        bool staysOriginal = llvm::any_of(op.getOperands(), [&](Value v) {
          auto t = cast<RankedTensorType>(v.getType());
          return (!dimensioned || t.getRank() > 0) &&
                 t.getElementType() == original;
        });
        if (staysOriginal)
          continue;
      }
      lowerToCompute(atenOp);
    }
    // In eager, autograd casts a gradient flowing into a compute-dtype
    // tensor to that dtype, so each parameter's gradient is made in the
    // compute dtype; the captured f32 graph has no such cast where the
    // gradient comes from an f32 op (e.g. a bias gradient summed from the
    // f32 gradient of `bf16 logits + f32 buffer`).
    Operation *terminator = body.getTerminator();
    for (ParamInfo &info : params) {
      if (!info.gradResult)
        continue;
      Value grad = terminator->getOperand(*info.gradResult);
      if (dtypeOf(grad) != original)
        continue;
      // The op making the gradient and the views of it in between (e.g.
      // `view(sum(g, [0]))` for a bias), each used only by the next.
      SmallVector<AtenOp> chain;
      Operation *user = terminator;
      for (Value v = grad;;) {
        auto def = v.getDefiningOp<AtenOp>();
        if (!def || def->getNumResults() != 1 || !v.hasOneUse() ||
            *v.getUsers().begin() != user)
          break;
        chain.push_back(def);
        if (!isViewOp(def.getOpName()) || def->getNumOperands() == 0)
          break;
        user = def;
        v = def->getOperand(0);
      }
      if (chain.empty() || isViewOp(chain.back().getOpName()) ||
          chain.back().getOpName() == "aten::_to_copy")
        continue;
      for (AtenOp op : llvm::reverse(chain))
        lowerToCompute(op);
    }
  }

  // Reduce-scatter each unit's gradients after the last of them.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [u, unit] : llvm::enumerate(unitList)) {
    SmallVector<unsigned> withGrad;
    SmallVector<Value> grads;
    Operation *last = nullptr;
    for (unsigned p : unit.params) {
      if (!params[p].gradResult)
        continue;
      Value grad = ret.getOperand(*params[p].gradResult);
      withGrad.push_back(p);
      grads.push_back(grad);
      Operation *def = grad.getDefiningOp();
      if (def && (!last || last->isBeforeInBlock(def)))
        last = def;
    }
    if (withGrad.empty())
      continue;
    curModule = b.getStringAttr(unit.prefix);
    curPhase = Phase::backward;
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&body);
    Location loc = NameLoc::get(
        b.getStringAttr("fsdp.reduce_scatter:" +
                        (unit.isRoot ? std::string("<root>") : unit.prefix)),
        last ? last->getLoc() : func.getLoc());
    SmallVector<Value> shards = buildReduce(b, loc, withGrad, grads);
    for (auto [p, shard] : llvm::zip(withGrad, shards))
      ret.setOperand(*params[p].gradResult, shard);
  }

  // The loss is reported in its traced dtype.
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto role =
        func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role)
      continue;
    Type declared = func.getResultTypes()[i];
    Value value = ret.getOperand(i);
    if (value.getType() != declared) {
      auto type = cast<RankedTensorType>(declared);
      curModule = b.getStringAttr("");
      curPhase = Phase::forward;
      b.setInsertionPoint(ret);
      ret.setOperand(i,
                     castTo(b, value.getLoc(), value, type.getElementType()));
    }
    if (role.getValue() == Role::loss)
      func.setResultAttr(
          i, LoomDialect::kPartialAttrName,
          PartialAttr::get(ctx, meshRef, dpAxes, ReduceKind::avg));
  }
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto role = func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (role && role.getValue() == Role::input &&
        cast<RankedTensorType>(func.getArgument(i).getType()).getRank() > 0)
      func.setArgAttr(i, LoomDialect::kSplitAttrName,
                      SplitAttr::get(ctx, meshRef, dpAxes, 0));
  }
  func.setType(
      FunctionType::get(ctx, body.getArgumentTypes(), ret.getOperandTypes()));
  return success();
}

} // namespace
