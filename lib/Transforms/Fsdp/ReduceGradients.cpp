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
    // Only a concatenation needs the [G, n] view of each gradient.
    blocks.push_back(unitParams.size() == 1
                         ? g
                         : t.view(b, loc, g, {shardSize, info.localNumel}));
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
  return t.view(b, loc, buffer, {shardSize * total});
}

/// Reduce-scatters `buffer` over the shard axes, then all-reduces over the
/// replicate axis, dividing as `f` says.
static Value reduceBuffer(ShardingState &s, OpBuilder &b, Location loc,
                          Value buffer, int64_t total, const DivideFactors &f) {
  MLIRContext *ctx = b.getContext();
  const OpTagger &t = s.tagger;
  const MeshLayout &mesh = s.mesh();
  auto divide = [&](Value v, double by) {
    if (by == 1)
      return v;
    return t.aten(b, loc, "aten::div.Tensor", v.getType(), v,
                  {OperandRefAttr::get(ctx, 0), b.getF64FloatAttr(by)});
  };
  Value reduced = divide(buffer, f.pre);
  auto reduceKind = ReduceKindAttr::get(ctx, f.reduce);
  if (mesh.shardSize > 1) {
    auto type = cast<RankedTensorType>(reduced.getType()).clone({total});
    auto start = ReduceScatterStartOp::create(
        b, loc, FutureType::get(ctx, type), reduced, mesh.ref, mesh.shardAxes,
        b.getI64IntegerAttr(0), reduceKind);
    reduced = t.finishCollective(b, loc, start, type);
  }
  if (mesh.replicateSize > 1) {
    auto type = cast<RankedTensorType>(reduced.getType());
    auto start =
        AllReduceStartOp::create(b, loc, FutureType::get(ctx, type), reduced,
                                 mesh.ref, mesh.replicateAxes, reduceKind);
    reduced = t.finishCollective(b, loc, start, type);
  }
  return divide(reduced, f.post);
}

/// Reduces the gradients `grads` of `unitParams` and returns local shards
/// in the parameters' dtype.
static SmallVector<Value> buildReduce(ShardingState &s, OpBuilder &b,
                                      Location loc,
                                      ArrayRef<unsigned> unitParams,
                                      ArrayRef<Value> grads) {
  const OpTagger &t = s.tagger;
  SmallVector<int64_t> sizes;
  int64_t total = 0;
  Value buffer = packGradients(s, b, loc, unitParams, grads, sizes, total);
  Type elementType = cast<RankedTensorType>(buffer.getType()).getElementType();
  Value reduced = reduceBuffer(s, b, loc, buffer, total,
                               getDivideFactors(s.config, elementType));

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

void fsdp::reduceGradients(ShardingState &s) {
  OpBuilder b(s.func.getContext());
  auto ret = cast<func::ReturnOp>(s.body().getTerminator());
  for (const Unit &unit : s.units) {
    SmallVector<unsigned> withGrad;
    SmallVector<Value> grads;
    Operation *last = nullptr;
    for (unsigned p : unit.params) {
      if (!s.params[p].gradResult)
        continue;
      Value grad = ret.getOperand(*s.params[p].gradResult);
      withGrad.push_back(p);
      grads.push_back(grad);
      Operation *def = grad.getDefiningOp();
      if (def && (!last || last->isBeforeInBlock(def)))
        last = def;
    }
    if (withGrad.empty())
      continue;
    s.tagger.module = b.getStringAttr(unit.prefix);
    s.tagger.phase = Phase::backward;
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&s.body());
    Location loc =
        NameLoc::get(b.getStringAttr("fsdp.reduce_scatter:" + unit.label()),
                     last ? last->getLoc() : s.func.getLoc());
    SmallVector<Value> shards = buildReduce(s, b, loc, withGrad, grads);
    for (auto [p, shard] : llvm::zip(withGrad, shards))
      ret.setOperand(*s.params[p].gradResult, shard);
  }
}
