//===- ReduceGradients.cpp - loom-fsdp's gradient reduce-scatter ----------===//
//
// Each unit's gradients are padded on dim 0, laid out per rank in one
// buffer and reduce-scattered over the shard axes after the last of them
// (under HSDP an all-reduce over "replicate" follows), as FSDP2's
// post-backward hook does; each rank keeps its shard of every gradient.
//
//===----------------------------------------------------------------------===//

#include "Fsdp.h"

#include <cmath>

using namespace mlir;
using namespace loom;
using namespace loom::fsdp;

namespace {
/// How a reduction divides: PyTorch's _get_gradient_divide_factors.
struct DivideFactors {
  ReduceKind reduce = ReduceKind::avg;
  /// Divisions before and after the collectives.
  double pre = 1, post = 1;
};
} // namespace

/// Averages when the factor is the data-parallel size (fp32/bf16),
/// otherwise sums with explicit divisions; fp16 splits the factor into a
/// pre- and post-division to stay in range.
static DivideFactors getDivideFactors(const Config &config, Type elementType) {
  const MeshLayout &mesh = config.mesh;
  double dpSize = static_cast<double>(mesh.shardSize * mesh.replicateSize);
  double factor =
      config.gradientDivideFactor > 0 ? config.gradientDivideFactor : dpSize;
  DivideFactors f;
  if (elementType.isF16()) {
    f.reduce = ReduceKind::sum;
    f.pre = 1;
    while (std::fmod(factor, f.pre) == 0 && factor / f.pre > f.pre)
      f.pre *= 2;
    f.post = factor / f.pre;
  } else if (factor != dpSize) {
    f.reduce = ReduceKind::sum;
    f.pre = factor;
  }
  return f;
}

/// The gradients of `unitParams` in the reduce dtype, each padded on dim 0
/// to a multiple of the shard size and laid out as [G, n] blocks side by
/// side, flattened: rank r's chunk holds its shard of every gradient.
static Value packGradients(ShardingState &s, OpBuilder &b, Location loc,
                           ArrayRef<unsigned> unitParams, ArrayRef<Value> grads,
                           SmallVectorImpl<int64_t> &sizes, int64_t &total) {
  MLIRContext *ctx = b.getContext();
  const OpTagger &t = s.tagger;
  int64_t shardSize = s.mesh().shardSize;
  SmallVector<Value> blocks;
  for (auto [p, grad] : llvm::zip(unitParams, grads)) {
    const ParamInfo &info = s.params[p];
    Value g = t.castTo(b, loc, grad, s.config.gradReduceDtype);
    if (info.shardDim > 0) {
      // Sharded on dim d (evenly): rank r's chunk is its slice of dim d,
      // moved to the front and flattened, as the gather unpacks it.
      int64_t d = info.shardDim;
      SmallVector<int64_t> split(info.fullType.getShape());
      split[d] = info.localType.getDimSize(d);
      split.insert(split.begin() + d, shardSize);
      g = t.view(b, loc, g, split, "aten::reshape.default");
      SmallVector<int64_t> moved{shardSize};
      llvm::append_range(moved, info.localType.getShape());
      g = t.aten(b, loc, "aten::movedim.int",
                 cast<RankedTensorType>(g.getType()).clone(moved), g,
                 {OperandRefAttr::get(ctx, 0), b.getI64IntegerAttr(d),
                  b.getI64IntegerAttr(0)});
      blocks.push_back(t.view(b, loc, g, {shardSize, info.localNumel},
                              "aten::reshape.default"));
      sizes.push_back(info.localNumel);
      total += info.localNumel;
      continue;
    }
    int64_t rows = info.fullType.getDimSize(0);
    int64_t paddedRows = info.localType.getDimSize(0) * shardSize;
    if (paddedRows != rows) {
      // constant_pad_nd lists (before, after) pairs from the last dimension.
      SmallVector<int64_t> pads(2 * info.fullType.getRank(), 0);
      pads.back() = paddedRows - rows;
      SmallVector<int64_t> shape(info.fullType.getShape());
      shape[0] = paddedRows;
      g = t.aten(b, loc, "aten::constant_pad_nd.default",
                 cast<RankedTensorType>(g.getType()).clone(shape), g,
                 {OperandRefAttr::get(ctx, 0), b.getI64ArrayAttr(pads),
                  b.getF64FloatAttr(0.0)});
    }
    // Only a concatenation needs the [G, n] view of each gradient. A
    // gradient is not always contiguous (an einsum's comes out permuted):
    // reshape copies those.
    blocks.push_back(unitParams.size() == 1
                         ? g
                         : t.view(b, loc, g, {shardSize, info.localNumel},
                                  "aten::reshape.default"));
    sizes.push_back(info.localNumel);
    total += info.localNumel;
  }
  Value buffer = blocks.front();
  if (blocks.size() > 1) {
    SmallVector<Attribute> refs;
    for (unsigned i = 0; i < blocks.size(); ++i)
      refs.push_back(OperandRefAttr::get(ctx, i));
    buffer = t.aten(
        b, loc, "aten::cat.default",
        cast<RankedTensorType>(buffer.getType()).clone({shardSize, total}),
        blocks, {b.getArrayAttr(refs), b.getI64IntegerAttr(1)});
  }
  // A lone block need not be contiguous: a permuted gradient, or the [G, n]
  // block of one sharded on dim d > 0, which is a strided view when each
  // rank's slice of d is one element. Reshape copies those.
  return t.view(b, loc, buffer, {shardSize * total}, "aten::reshape.default");
}

/// Which collectives one reduction runs and how it divides.
struct ReduceSteps {
  bool scatter = true, allReduce = true;
};

/// Reduce-scatters `buffer` over the shard axes, then all-reduces over the
/// replicate axis, dividing as `f` says; `steps` leaves out either half
/// (a reduce-scatter whose all-reduce waits for the last microbatch, or
/// that all-reduce of the summed reduce-scatter outputs).
static Value reduceBuffer(ShardingState &s, OpBuilder &b, Location loc,
                          Value buffer, int64_t total, const DivideFactors &f,
                          ReduceSteps steps = {}) {
  MLIRContext *ctx = b.getContext();
  const OpTagger &t = s.tagger;
  const MeshLayout &mesh = s.mesh();
  auto divide = [&](Value v, double by) {
    if (by == 1)
      return v;
    return t.aten(b, loc, "aten::div.Tensor", v.getType(), v,
                  {OperandRefAttr::get(ctx, 0), b.getF64FloatAttr(by)});
  };
  Value reduced = buffer;
  auto reduceKind = ReduceKindAttr::get(ctx, f.reduce);
  if (steps.scatter) {
    reduced = divide(reduced, f.pre);
    if (mesh.shardSize > 1) {
      auto type = cast<RankedTensorType>(reduced.getType()).clone({total});
      auto start = ReduceScatterStartOp::create(
          b, loc, FutureType::get(ctx, type), reduced, mesh.ref, mesh.shardAxes,
          b.getI64IntegerAttr(0), reduceKind);
      reduced = t.finishCollective(b, loc, start, type);
    }
  }
  if (!steps.allReduce)
    return reduced;
  if (mesh.replicateSize > 1) {
    auto type = cast<RankedTensorType>(reduced.getType());
    auto start =
        AllReduceStartOp::create(b, loc, FutureType::get(ctx, type), reduced,
                                 mesh.ref, mesh.replicateAxes, reduceKind);
    reduced = t.finishCollective(b, loc, start, type);
  }
  return divide(reduced, f.post);
}

/// Splits the reduced buffer of `unitParams` into local shards in the
/// parameters' dtype.
static SmallVector<Value> unpackShards(ShardingState &s, OpBuilder &b,
                                       Location loc,
                                       ArrayRef<unsigned> unitParams,
                                       Value reduced, ArrayRef<int64_t> sizes) {
  const OpTagger &t = s.tagger;
  SmallVector<Value> pieces;
  if (unitParams.size() == 1)
    pieces.push_back(reduced);
  else
    pieces = t.splitWithSizes(b, loc, reduced, sizes, 0);
  SmallVector<Value> shards;
  for (auto [p, piece] : llvm::zip(unitParams, pieces)) {
    const ParamInfo &info = s.params[p];
    Value shard = t.view(b, loc, piece, info.localType.getShape());
    shards.push_back(t.castTo(b, loc, shard, info.fullType.getElementType()));
  }
  return shards;
}

/// The op after which all of `values` are defined (null: all are
/// arguments).
static Operation *lastDefinition(ValueRange values) {
  Operation *last = nullptr;
  for (Value v : values) {
    Operation *def = v.getDefiningOp();
    if (def && (!last || last->isBeforeInBlock(def)))
      last = def;
  }
  return last;
}

static void setInsertionAfter(ShardingState &s, OpBuilder &b, Operation *last) {
  if (last)
    b.setInsertionPointAfter(last);
  else
    b.setInsertionPointToStart(&s.body());
}

LogicalResult fsdp::splitAccumulated(const Microbatches &microbatches,
                                     Value grad, SmallVectorImpl<Value> &terms,
                                     SmallVectorImpl<Operation *> &chain) {
  int64_t count = microbatches.count;
  auto untagged = [&](Value v, StringRef kernel) -> AtenOp {
    auto aten = v.getDefiningOp<AtenOp>();
    if (!aten || aten.getKernel() != kernel ||
        aten->hasAttr(LoomDialect::kMicrobatchAttrName))
      return nullptr;
    return aten;
  };
  AtenOp mean = untagged(grad, "aten::div.Tensor");
  if (!mean)
    return failure();
  chain.push_back(mean);
  Value sum = mean->getOperand(0);
  terms.assign(count, Value());
  for (int64_t k = count - 1; k > 0; --k) {
    AtenOp add = untagged(sum, "aten::add.Tensor");
    if (!add || add->getNumOperands() != 2)
      return failure();
    chain.push_back(add);
    terms[k] = add->getOperand(1);
    sum = add->getOperand(0);
  }
  terms[0] = sum;
  return success();
}

namespace {
/// Reduces one unit's gradients.
class UnitReduction {
public:
  UnitReduction(ShardingState &s, const Unit &unit)
      : s(s), unit(unit), b(s.func.getContext()) {}

  LogicalResult run();

private:
  /// Reduces `grads` after the last of them; returns the local shards, or
  /// without `steps.allReduce` the reduce-scatter output (one flat value).
  SmallVector<Value> reduceAfter(ArrayRef<Value> grads, Location loc,
                                 ReduceSteps steps);
  Value add(Value a, Value c, Location loc);

  ShardingState &s;
  const Unit &unit;
  OpBuilder b;
  SmallVector<unsigned> withGrad;
  SmallVector<int64_t> sizes;
  int64_t total = 0;
};
} // namespace

SmallVector<Value> UnitReduction::reduceAfter(ArrayRef<Value> grads,
                                              Location loc, ReduceSteps steps) {
  Operation *last = lastDefinition(grads);
  setInsertionAfter(s, b, last);
  Location at =
      NameLoc::get(b.getStringAttr("fsdp.reduce_scatter:" + unit.label()),
                   last ? last->getLoc() : loc);
  sizes.clear();
  total = 0;
  Value buffer = packGradients(s, b, at, withGrad, grads, sizes, total);
  Type elementType = cast<RankedTensorType>(buffer.getType()).getElementType();
  Value reduced = reduceBuffer(s, b, at, buffer, total,
                               getDivideFactors(s.config, elementType), steps);
  if (!steps.allReduce)
    return {reduced};
  return unpackShards(s, b, at, withGrad, reduced, sizes);
}

Value UnitReduction::add(Value a, Value c, Location loc) {
  MLIRContext *ctx = b.getContext();
  return s.tagger.aten(
      b, loc, "aten::add.Tensor", a.getType(), {a, c},
      {OperandRefAttr::get(ctx, 0), OperandRefAttr::get(ctx, 1)});
}

LogicalResult UnitReduction::run() {
  auto ret = cast<func::ReturnOp>(s.body().getTerminator());
  SmallVector<Value> grads;
  for (unsigned p : unit.params) {
    if (!s.params[p].gradResult)
      continue;
    withGrad.push_back(p);
    grads.push_back(ret.getOperand(*s.params[p].gradResult));
  }
  if (withGrad.empty())
    return success();
  s.tagger.module = b.getStringAttr(unit.prefix);
  s.tagger.phase = Phase::backward;
  auto setResults = [&](ArrayRef<Value> shards) {
    for (auto [p, shard] : llvm::zip(withGrad, shards))
      ret.setOperand(*s.params[p].gradResult, shard);
  };
  if (!unit.syncEveryMicrobatch || s.microbatches.count < 2) {
    setResults(reduceAfter(grads, s.func.getLoc(), {}));
    return success();
  }

  // Each microbatch's gradients are reduced on their own: their terms in
  // the accumulation become the collectives' inputs, the accumulation
  // moves to the local shards.
  int64_t count = s.microbatches.count;
  SmallVector<SmallVector<Value>> terms(count);
  SmallVector<Operation *> chain;
  for (auto [p, grad] : llvm::zip(withGrad, grads)) {
    SmallVector<Value> split;
    if (failed(splitAccumulated(s.microbatches, grad, split, chain)))
      return emitFsdpError(s.func)
             << "unit '" << unit.label()
             << "' has gradient-sync=every, but the gradient of '"
             << s.params[p].name
             << "' is not the mean over microbatches that "
                "loom-accumulate-gradients builds";
    for (int64_t k = 0; k < count; ++k)
      terms[k].push_back(split[k]);
  }
  ReduceSteps steps;
  steps.allReduce = unit.allReduceEveryMicrobatch;
  SmallVector<Value> sums;
  Location loc = s.func.getLoc();
  for (int64_t k = 0; k < count; ++k) {
    SmallVector<Value> reduced = reduceAfter(terms[k], loc, steps);
    loc = reduced.front().getLoc();
    if (sums.empty()) {
      sums = reduced;
      continue;
    }
    for (auto [sum, value] : llvm::zip(sums, reduced))
      sum = add(sum, value, loc);
  }
  // The reduce-scatter outputs, summed, are all-reduced once (FSDP2's
  // set_requires_all_reduce(is_last) keeps the partial outputs and adds
  // them into the last reduction).
  if (!steps.allReduce) {
    ReduceSteps finish;
    finish.scatter = false;
    Type elementType =
        cast<RankedTensorType>(sums.front().getType()).getElementType();
    Value reduced =
        reduceBuffer(s, b, loc, sums.front(), total,
                     getDivideFactors(s.config, elementType), finish);
    sums = unpackShards(s, b, loc, withGrad, reduced, sizes);
  }
  MLIRContext *ctx = b.getContext();
  for (Value &sum : sums)
    sum = s.tagger.aten(b, loc, "aten::div.Tensor", sum.getType(), sum,
                        {OperandRefAttr::get(ctx, 0),
                         b.getF64FloatAttr(static_cast<double>(count))});
  setResults(sums);
  // The full-size accumulation is dead now.
  for (Operation *op : chain)
    if (op->use_empty())
      op->erase();
  return success();
}

/// `grad`, the mean loom-accumulate-gradients built over unsynced
/// microbatches, rebuilt to accumulate in `reduceDtype`: the first
/// microbatch's gradient cast to it, each later one added into it as
/// `acc += g` does (in the promoted dtype, stored in acc's); every use of
/// `grad` reads the rebuilt mean. Nothing when `grad` is not such a mean.
static void accumulateIn(ShardingState &s, Value grad, Type reduceDtype) {
  SmallVector<Value> terms;
  SmallVector<Operation *> chain;
  if (failed(splitAccumulated(s.microbatches, grad, terms, chain)))
    return;
  Operation *mean = chain.front();
  OpBuilder b(mean);
  Location loc = mean->getLoc();
  MLIRContext *ctx = b.getContext();
  const OpTagger &t = s.tagger;
  auto type = cast<RankedTensorType>(grad.getType());
  Type summed =
      reduceDtype == type.getElementType() ? reduceDtype : b.getF32Type();
  Value acc = t.castTo(b, loc, terms.front(), reduceDtype);
  for (Value term : ArrayRef(terms).drop_front()) {
    Value sum =
        t.aten(b, loc, "aten::add.Tensor", type.clone(summed), {acc, term},
               {OperandRefAttr::get(ctx, 0), OperandRefAttr::get(ctx, 1)});
    acc = t.castTo(b, loc, sum, reduceDtype);
  }
  Value rebuilt =
      t.aten(b, loc, "aten::div.Tensor", type.clone(reduceDtype), acc,
             {OperandRefAttr::get(ctx, 0),
              b.getF64FloatAttr(static_cast<double>(terms.size()))});
  grad.replaceAllUsesWith(rebuilt);
  for (Operation *op : chain)
    if (op->use_empty())
      op->erase();
}

void fsdp::accumulateInReduceDtype(ShardingState &s) {
  Type reduceDtype = s.config.gradReduceDtype;
  if (!reduceDtype || s.microbatches.count < 2)
    return;
  Operation *terminator = s.body().getTerminator();
  for (const Unit &unit : s.units) {
    // A unit synced every microbatch reduces each microbatch's gradients.
    if (unit.syncEveryMicrobatch)
      continue;
    s.tagger.module = StringAttr::get(terminator->getContext(), unit.prefix);
    s.tagger.phase = Phase::backward;
    for (unsigned p : unit.params) {
      std::optional<unsigned> result = s.params[p].gradResult;
      if (!result)
        continue;
      Value grad = terminator->getOperand(*result);
      if (cast<RankedTensorType>(grad.getType()).getElementType() !=
          reduceDtype)
        accumulateIn(s, grad, reduceDtype);
    }
  }
}

LogicalResult fsdp::reduceGradients(ShardingState &s) {
  for (const Unit &unit : s.units)
    if (failed(UnitReduction(s, unit).run()))
      return failure();
  return success();
}
