//===- SyncBatchNorm.cpp - nn.SyncBatchNorm's statistics over the ranks ---===//
//
// Capture marks each training-mode forward of an nn.SyncBatchNorm, which
// traces on one process as plain batch norm. On a data-parallel step this
// pass gives it and its backward what SyncBatchNorm's autograd function
// computes with its all_gather and all_reduce: statistics of every rank's
// rows in forward, and the two per-channel sums the input gradient needs
// summed over the ranks in backward.
//
//===----------------------------------------------------------------------===//

#include "Fsdp/Fsdp.h"

#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"

namespace loom {
#define GEN_PASS_DEF_LOOMSYNCBATCHNORM
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {
/// The ranks a step's batch is split over, which the statistics span.
struct RankGroup {
  FlatSymbolRefAttr mesh;
  ArrayAttr axes;
  int64_t size = 1;
};

/// The statistics of all ranks' rows a rewritten forward leaves for its
/// backward, and the rows they cover.
struct GlobalStats {
  Value mean, invstd;
  int64_t count;
};

/// Builds ATen calls and collectives at one point, each tagged like the op
/// it replaces (module, phase, microbatch, calls) and named after it.
class Emitter {
public:
  Emitter(Operation *like, StringRef name)
      : b(like), like(like), name(name.str()) {}

  /// `kernel` on `tensors` (referenced in order as its first arguments)
  /// followed by the non-tensor arguments `rest`.
  Operation *call(StringRef kernel, TypeRange types, ValueRange tensors,
                  ArrayRef<Attribute> rest = {},
                  ArrayRef<NamedAttribute> kwargs = {}) {
    SmallVector<Attribute> args;
    for (unsigned i = 0, e = tensors.size(); i < e; ++i)
      args.push_back(OperandRefAttr::get(b.getContext(), i));
    args.append(rest.begin(), rest.end());
    return tag(AtenOp::create(b, loc(kernel), types, b.getStringAttr(kernel),
                              tensors, b.getArrayAttr(args),
                              b.getDictionaryAttr(kwargs), ArrayAttr()));
  }
  Value call1(StringRef kernel, Type type, ValueRange tensors,
              ArrayRef<Attribute> rest = {}) {
    return call(kernel, type, tensors, rest)->getResult(0);
  }
  /// The elementwise binary ops, broadcasting; `rhs` a tensor or a scalar.
  Value binary(StringRef kernel, Value lhs, Value rhs) {
    return call1(kernel, lhs.getType(), {lhs, rhs});
  }
  Value binary(StringRef kernel, Value lhs, double rhs) {
    return call1(kernel, lhs.getType(), lhs, b.getF64FloatAttr(rhs));
  }
  /// `aten::cat.default` of same-typed vectors along dim 0.
  Value cat(ValueRange vectors) {
    auto type = cast<RankedTensorType>(vectors.front().getType());
    SmallVector<Attribute> refs;
    for (unsigned i = 0, e = vectors.size(); i < e; ++i)
      refs.push_back(OperandRefAttr::get(b.getContext(), i));
    auto op = AtenOp::create(
        b, loc("aten::cat.default"),
        TypeRange{type.clone({type.getDimSize(0) * int64_t(vectors.size())})},
        b.getStringAttr("aten::cat.default"), vectors,
        b.getArrayAttr({b.getArrayAttr(refs), b.getI64IntegerAttr(0)}),
        b.getDictionaryAttr({}), ArrayAttr());
    return tag(op)->getResult(0);
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    auto type = cast<RankedTensorType>(v.getType()).clone(shape);
    return call1("aten::reshape.default", type, v, b.getI64ArrayAttr(shape));
  }
  /// `op` started and waited for at once: the statistics are needed next.
  Value collective(Operation *start, Type type) {
    tag(start);
    return tag(WaitOp::create(b, loc("wait"), type, start->getResult(0)))
        ->getResult(0);
  }
  Location loc(StringRef what) {
    return NameLoc::get(b.getStringAttr(name + ":" + what), like->getLoc());
  }
  Operation *tag(Operation *op) {
    for (StringRef attr :
         {LoomDialect::kModuleAttrName, LoomDialect::kPhaseAttrName,
          LoomDialect::kMicrobatchAttrName, LoomDialect::kCallsAttrName})
      if (Attribute value = like->getAttr(attr))
        op->setAttr(attr, value);
    return op;
  }
  OpBuilder b;

private:
  Operation *like;
  std::string name;
};

double getFloatArg(AtenOp op, unsigned position, double otherwise) {
  ArrayAttr args = op.getArgs();
  if (position < args.size())
    if (auto value = dyn_cast<FloatAttr>(args[position]))
      return value.getValueAsDouble();
  return otherwise;
}

/// The result that schema return `position` of `op` became, or null when
/// it is `None`.
Value getReturn(AtenOp op, unsigned position) {
  std::optional<ArrayAttr> returns = op.getReturns();
  if (!returns)
    return position < op.getNumResults() ? op.getResult(position) : Value();
  if (position >= returns->size())
    return {};
  if (auto index = dyn_cast<IntegerAttr>((*returns)[position]))
    return op.getResult(index.getInt());
  return {};
}

struct LoomSyncBatchNormPass
    : public loom::impl::LoomSyncBatchNormBase<LoomSyncBatchNormPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (func::FuncOp func : getStepFunctions(module))
      if (failed(synchronize(func)))
        return signalPassFailure();
  }

  LogicalResult synchronize(func::FuncOp func) {
    SmallVector<AtenOp> marked;
    func.walk([&](AtenOp op) {
      if (op->hasAttr(LoomDialect::kSyncBatchNormAttrName))
        marked.push_back(op);
    });
    if (marked.empty())
      return success();
    FailureOr<RankGroup> group = getRankGroup(func);
    if (failed(group))
      return failure();
    // One rank: SyncBatchNorm on a group of one is batch norm.
    if (group->size == 1)
      return success();
    // Every op is checked before any is rewritten.
    for (AtenOp op : marked)
      if (failed(checkSupported(op)))
        return failure();
    for (AtenOp op : marked)
      rewrite(op, *group);
    return success();
  }

  /// The mesh axes the batch inputs are split over (all of them the same).
  FailureOr<RankGroup> getRankGroup(func::FuncOp func) {
    RankGroup group;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      auto split =
          func.getArgAttrOfType<SplitAttr>(i, LoomDialect::kSplitAttrName);
      if (!split)
        continue;
      if (group.mesh &&
          (group.mesh != split.getMesh() || group.axes != split.getAxes()))
        return func.emitOpError("--loom-sync-batch-norm: the batch inputs "
                                "are split over different mesh axes");
      group.mesh = split.getMesh();
      group.axes = split.getAxes();
    }
    if (!group.mesh)
      return group;
    if (fsdp::isPipelinedStep(func))
      return func.emitOpError("--loom-sync-batch-norm: nn.SyncBatchNorm in "
                              "a pipelined step is not supported");
    auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(func, group.mesh);
    if (!mesh)
      return func.emitOpError("--loom-sync-batch-norm: no loom.mesh ")
             << group.mesh;
    group.size = mesh.getGroupSize(group.axes);
    return group;
  }

  /// What the rewrite cannot do, named at the op (the model's source line).
  static LogicalResult checkSupported(AtenOp op) {
    StringRef module = getModulePath(op);
    if (isa<RecomputeOp>(op->getParentOp()))
      return op.emitOpError("--loom-sync-batch-norm: the nn.SyncBatchNorm "
                            "of module '")
             << module
             << "' is recomputed (loom.recompute); synchronized statistics "
                "in a recompute region are not supported";
    auto type = cast<RankedTensorType>(op.getOperand(0).getType());
    if (!type.getElementType().isF32() && !type.getElementType().isF64())
      return op.emitOpError("--loom-sync-batch-norm: the nn.SyncBatchNorm "
                            "of module '")
             << module << "' runs in " << type.getElementType()
             << "; synchronized statistics are supported in f32 and f64 "
                "(not under FSDP's mixed precision)";
    if (type.getRank() < 2)
      return op.emitOpError("--loom-sync-batch-norm: expected an input of "
                            "at least 2 dims (batch, channels, ...), got ")
             << type;
    return success();
  }

  void rewrite(AtenOp op, const RankGroup &group) {
    BatchNormForm form = *getBatchNormForm(op.getKernel());
    auto training = dyn_cast<BoolAttr>(op.getArgs()[form.training]);
    if (!training || !training.getValue())
      return; // eval mode: the running statistics, no sync
    SmallVector<AtenOp> backwards;
    for (Operation *user : op->getResult(1).getUsers())
      if (auto bw = dyn_cast<AtenOp>(user);
          bw && bw.getKernel() == "aten::native_batch_norm_backward.default")
        backwards.push_back(bw);
    GlobalStats stats = rewriteForward(op, form, group);
    for (AtenOp bw : backwards)
      rewriteBackward(bw, stats, group);
  }

  /// Every dim but the channels (dim 1), which the statistics reduce.
  static SmallVector<int64_t> reducedDims(RankedTensorType type) {
    SmallVector<int64_t> dims = {0};
    for (int64_t d = 2; d < type.getRank(); ++d)
      dims.push_back(d);
    return dims;
  }

  /// A per-channel vector's shape broadcast against the input: (1, C, 1...).
  static SmallVector<int64_t> channelShape(RankedTensorType type) {
    SmallVector<int64_t> shape(type.getRank(), 1);
    shape[1] = type.getDimSize(1);
    return shape;
  }

  GlobalStats rewriteForward(AtenOp op, const BatchNormForm &form,
                             const RankGroup &group) {
    Emitter e(op, "sync_batch_norm");
    OpBuilder &b = e.b;
    Value x = op.getOperand(0);
    auto type = cast<RankedTensorType>(x.getType());
    int64_t channels = type.getDimSize(1);
    int64_t count = type.getNumElements() / channels * group.size;
    auto vector = type.clone({channels});
    auto perRank = type.clone({group.size, channels});

    // This rank's mean and biased variance, all ranks' side by side.
    Operation *local =
        e.call("aten::var_mean.correction", {vector, vector}, x,
               b.getI64ArrayAttr(reducedDims(type)),
               {b.getNamedAttr("correction", b.getI64IntegerAttr(0)),
                b.getNamedAttr("keepdim", b.getBoolAttr(false))});
    Value packed = e.cat({local->getResult(1), local->getResult(0)});
    auto gatheredType = type.clone({group.size * 2 * channels});
    Value gathered =
        e.collective(AllGatherStartOp::create(
                         b, e.loc("all_gather"),
                         FutureType::get(b.getContext(), gatheredType), packed,
                         group.mesh, group.axes, b.getI64IntegerAttr(0)),
                     gatheredType);
    Value table = e.reshape(gathered, {group.size, 2, channels});
    auto column = [&](int64_t k) {
      return e.call1("aten::select.int", perRank, table,
                     {b.getI64IntegerAttr(1), b.getI64IntegerAttr(k)});
    };
    auto meanOverRanks = [&](Value v) {
      return e.call1("aten::mean.dim", vector, v, b.getI64ArrayAttr({0}));
    };
    // Equal counts: the mean of the means, and the mean of the variances
    // plus the variance of the means (Chan et al.'s merge).
    // (Each op on a line of its own: the order the ops are built in is the
    // order they run in.)
    Value means = column(0);
    Value mean = meanOverRanks(means);
    Value deviation = e.binary("aten::sub.Tensor", means, mean);
    Value squared = e.binary("aten::mul.Tensor", deviation, deviation);
    Value spread = meanOverRanks(squared);
    Value within = meanOverRanks(column(1));
    Value var = e.binary("aten::add.Tensor", within, spread);
    double eps = getFloatArg(op, form.eps, 1e-5);
    double momentum = getFloatArg(op, form.momentum, 0.1);
    Value shifted = e.binary("aten::add.Tensor", var, eps);
    Value invstd = e.call1("aten::rsqrt.default", vector, shifted);

    // The output with those statistics: batch norm's own kernel.
    auto empty = type.clone(ArrayRef<int64_t>{0});
    SmallVector<Value> operands = {x};
    SmallVector<Attribute> args = {OperandRefAttr::get(b.getContext(), 0)};
    for (unsigned position : {1u, 2u}) {
      Value v = op.getArgOperand(position);
      if (v)
        operands.push_back(v);
      args.push_back(v ? Attribute(OperandRefAttr::get(b.getContext(),
                                                       operands.size() - 1))
                       : Attribute(b.getUnitAttr()));
    }
    for (Value v : {mean, var}) {
      operands.push_back(v);
      args.push_back(OperandRefAttr::get(b.getContext(), operands.size() - 1));
    }
    args.push_back(b.getF64FloatAttr(momentum));
    args.push_back(b.getF64FloatAttr(eps));
    auto normalize = AtenOp::create(
        b, e.loc("normalize"), TypeRange{type, empty, empty},
        b.getStringAttr("aten::_native_batch_norm_legit_no_training.default"),
        operands, b.getArrayAttr(args), b.getDictionaryAttr({}), ArrayAttr());
    e.tag(normalize);

    SmallVector<Value> replacements = {normalize.getResult(0), mean, invstd};
    if (form.runningMean) {
      // running = momentum * batch + (1 - momentum) * running, with the
      // unbiased variance of all ranks' rows.
      auto update = [&](Value running, Value batch) {
        Value toward = e.binary("aten::mul.Tensor", batch, momentum);
        Value kept = e.binary("aten::mul.Tensor", running, 1.0 - momentum);
        return e.binary("aten::add.Tensor", toward, kept);
      };
      replacements.push_back(update(op.getArgOperand(*form.runningMean), mean));
      Value unbiased =
          e.binary("aten::mul.Tensor", var, double(count) / double(count - 1));
      replacements.push_back(
          update(op.getArgOperand(*form.runningVar), unbiased));
    }
    for (auto [result, value] : llvm::zip(op.getResults(), replacements))
      result.replaceAllUsesWith(value);
    op.erase();
    return {mean, invstd, count};
  }

  /// native_batch_norm_backward(dy, x, weight, running_mean, running_var,
  /// save_mean, save_invstd, train, eps, mask) with the sums over all ranks.
  void rewriteBackward(AtenOp bw, const GlobalStats &stats,
                       const RankGroup &group) {
    Emitter e(bw, "sync_batch_norm_backward");
    OpBuilder &b = e.b;
    Value dy = bw.getArgOperand(0), x = bw.getArgOperand(1);
    Value weight = bw.getArgOperand(2);
    auto type = cast<RankedTensorType>(x.getType());
    int64_t channels = type.getDimSize(1);
    auto vector = type.clone({channels});
    SmallVector<int64_t> dims = reducedDims(type), shape = channelShape(type);
    auto channelSum = [&](Value v) {
      return e.call1("aten::sum.dim_IntList", vector, v,
                     b.getI64ArrayAttr(dims));
    };
    Value sumDy = channelSum(dy);
    Value meanByChannel = e.reshape(stats.mean, shape);
    Value centered = e.binary("aten::sub.Tensor", x, meanByChannel);
    Value dyCentered = e.binary("aten::mul.Tensor", dy, centered);
    Value sumDyXmu = channelSum(dyCentered);

    Value gradInput = getReturn(bw, 0), gradWeight = getReturn(bw, 1),
          gradBias = getReturn(bw, 2);
    if (gradInput && !gradInput.use_empty()) {
      Value packed = e.cat({sumDy, sumDyXmu});
      Value summed = e.collective(
          AllReduceStartOp::create(
              b, e.loc("all_reduce"),
              FutureType::get(b.getContext(), packed.getType()), packed,
              group.mesh, group.axes,
              ReduceKindAttr::get(b.getContext(), ReduceKind::sum)),
          packed.getType());
      AtenOp halves = buildSplitWithSizes(b, e.loc("split"), summed,
                                          {channels, channels}, 0);
      e.tag(halves);
      Value meanDy = e.binary("aten::div.Tensor", halves.getResult(0),
                              double(stats.count));
      Value meanDyXmu = e.binary("aten::div.Tensor", halves.getResult(1),
                                 double(stats.count));
      Value variance = e.binary("aten::mul.Tensor", stats.invstd, stats.invstd);
      Value projection = e.binary("aten::mul.Tensor", variance, meanDyXmu);
      Value projected =
          e.binary("aten::mul.Tensor", centered, e.reshape(projection, shape));
      Value shiftedDy =
          e.binary("aten::sub.Tensor", dy, e.reshape(meanDy, shape));
      Value inner = e.binary("aten::sub.Tensor", shiftedDy, projected);
      Value scale = weight ? e.binary("aten::mul.Tensor", stats.invstd, weight)
                           : stats.invstd;
      Value gx = e.binary("aten::mul.Tensor", inner, e.reshape(scale, shape));
      gradInput.replaceAllUsesWith(gx);
    }
    // This rank's own sums: data parallelism averages these gradients.
    if (gradWeight)
      gradWeight.replaceAllUsesWith(
          e.binary("aten::mul.Tensor", sumDyXmu, stats.invstd));
    if (gradBias)
      gradBias.replaceAllUsesWith(sumDy);
    bw.erase();
  }
};
} // namespace
