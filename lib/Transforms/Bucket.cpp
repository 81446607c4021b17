//===- Bucket.cpp - Coalesce consecutive FSDP collectives into buckets ----===//

#include "PrefetchUtils.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace loom {
#define GEN_PASS_DEF_LOOMBUCKET
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// One collective of a bucket.
struct Member {
  Operation *start;
  Operation *wait;
  RankedTensorType input, output;
  int64_t bytes;
};

int64_t numel(RankedTensorType type) {
  int64_t n = 1;
  for (int64_t d : type.getShape())
    n *= d;
  return n;
}

/// The longest module path every member's lies under.
std::string commonModule(ArrayRef<Member> members) {
  SmallVector<StringRef> paths;
  for (const Member &m : members)
    paths.push_back(getModulePath(m.start));
  return getCommonModule(paths).str();
}

/// "loom.bucket:layers.0,layers.1" around the members' locations, so a
/// diagnostic on the merged collective names what it merged.
Location bucketLoc(OpBuilder &b, ArrayRef<Member> members) {
  std::string names;
  SmallVector<Location> locs;
  for (const Member &m : members) {
    StringRef unit = getModulePath(m.start);
    names +=
        (names.empty() ? "" : ",") + (unit.empty() ? "<root>" : unit.str());
    locs.push_back(m.start->getLoc());
  }
  return NameLoc::get(b.getStringAttr("loom.bucket:" + names),
                      b.getFusedLoc(locs));
}

struct LoomBucketPass : public loom::impl::LoomBucketBase<LoomBucketPass> {
  using LoomBucketBase::LoomBucketBase;

  void runOnOperation() override;

private:
  void bucketStep(func::FuncOp func, bool gathers);
  void mergeGathers(ArrayRef<Member> members);
  void mergeReduceScatters(ArrayRef<Member> members);

  Value aten(OpBuilder &b, Location loc, StringRef kernel, Type result,
             ValueRange inputs, ArrayRef<Attribute> args);
  Value view(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape);
  SmallVector<Value> split(OpBuilder &b, Location loc, Value v,
                           ArrayRef<int64_t> sizes, int64_t dim);

  /// Attributes every op a merge creates carries.
  SmallVector<NamedAttribute> tags;
};

Value LoomBucketPass::aten(OpBuilder &b, Location loc, StringRef kernel,
                           Type result, ValueRange inputs,
                           ArrayRef<Attribute> args) {
  auto op = AtenOp::create(b, loc, TypeRange{result}, kernel, inputs,
                           b.getArrayAttr(args), b.getDictionaryAttr({}),
                           ArrayAttr());
  for (NamedAttribute tag : tags)
    op->setAttr(tag.getName(), tag.getValue());
  return op->getResult(0);
}

Value LoomBucketPass::view(OpBuilder &b, Location loc, Value v,
                           ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  // A column block of a [G, N] split is not contiguous: reshape copies.
  return aten(
      b, loc, "aten::reshape.default", type.clone(shape), v,
      {OperandRefAttr::get(b.getContext(), 0), b.getI64ArrayAttr(shape)});
}

SmallVector<Value> LoomBucketPass::split(OpBuilder &b, Location loc, Value v,
                                         ArrayRef<int64_t> sizes, int64_t dim) {
  AtenOp op = buildSplitWithSizes(b, loc, v, sizes, dim);
  for (NamedAttribute tag : tags)
    op->setAttr(tag.getName(), tag.getValue());
  return SmallVector<Value>(op->getResults());
}

void LoomBucketPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (bucketBytes < 0) {
    module.emitError("--loom-bucket: bucket-bytes ")
        << static_cast<int64_t>(bucketBytes) << " is negative";
    return signalPassFailure();
  }
  if (bucketBytes == 0)
    return;
  for (func::FuncOp func : getStepFunctions(module)) {
    bucketStep(func, /*gathers=*/true);
    bucketStep(func, /*gathers=*/false);
  }
  if (failed(verify(module))) {
    module.emitError("--loom-bucket produced an invalid module");
    return signalPassFailure();
  }
}

/// Whether `m` may join a bucket that starts with `first`.
bool compatible(const Member &first, const Member &m) {
  if (first.input.getElementType() != m.input.getElementType() ||
      getPhase(first.start) != getPhase(m.start))
    return false;
  if (auto a = dyn_cast<AllGatherStartOp>(first.start)) {
    auto c = cast<AllGatherStartOp>(m.start);
    return a.getMesh() == c.getMesh() && a.getAxes() == c.getAxes() &&
           a.getDim() == 0 && c.getDim() == 0;
  }
  auto a = cast<ReduceScatterStartOp>(first.start);
  auto c = cast<ReduceScatterStartOp>(m.start);
  return a.getMesh() == c.getMesh() && a.getAxes() == c.getAxes() &&
         a.getDim() == 0 && c.getDim() == 0 &&
         a.getReduction() == c.getReduction();
}

void LoomBucketPass::bucketStep(func::FuncOp func, bool gathers) {
  Block &body = func.getBody().front();
  SmallVector<Member> all;
  for (Operation &op : body) {
    if (gathers ? !isa<AllGatherStartOp>(op) : !isa<ReduceScatterStartOp>(op))
      continue;
    WaitOp wait = getWaitOf(&op);
    auto input = cast<RankedTensorType>(op.getOperand(0).getType());
    auto output =
        wait ? dyn_cast_or_null<RankedTensorType>(
                   wait.getResult() ? wait.getResult().getType() : Type())
             : RankedTensorType();
    if (!wait || !output || !input.getElementType().isIntOrFloat()) {
      all.push_back({&op, nullptr, input, nullptr, 0});
      continue;
    }
    RankedTensorType full = gathers ? output : input;
    int64_t bytes =
        numel(full) * ((full.getElementType().getIntOrFloatBitWidth() + 7) / 8);
    all.push_back({&op, wait, input, output, bytes});
  }

  SmallVector<Member> bucket;
  int64_t bucketTotal = 0;
  auto flush = [&] {
    if (bucket.size() > 1) {
      if (gathers)
        mergeGathers(bucket);
      else
        mergeReduceScatters(bucket);
    }
    bucket.clear();
    bucketTotal = 0;
  };
  for (const Member &m : all) {
    bool fits = m.wait && !bucket.empty() && compatible(bucket.front(), m) &&
                bucketTotal + m.bytes <= bucketBytes;
    // An all-gather joins by moving its input up to the bucket's start; a
    // reduce-scatter by moving the uses of earlier results down.
    if (fits && gathers)
      fits = succeeded(collectInputSlice(
          m.start, ProgramPoint::before(bucket.front().start)));
    if (fits && !gathers)
      for (const Member &earlier : bucket)
        fits &= succeeded(collectUserSlice(earlier.wait->getResult(0), m.wait));
    if (!fits)
      flush();
    if (!m.wait || m.bytes > bucketBytes)
      continue;
    bucket.push_back(m);
    bucketTotal += m.bytes;
  }
  flush();
}

void LoomBucketPass::mergeGathers(ArrayRef<Member> members) {
  Operation *first = members.front().start;
  MLIRContext *ctx = first->getContext();
  // Later inputs are computed from the sharded parameters: move them up.
  for (const Member &m : members.drop_front()) {
    FailureOr<SmallVector<Operation *>> slice =
        collectInputSlice(m.start, ProgramPoint::before(first));
    for (Operation *op : *slice)
      op->moveBefore(first);
  }
  Operation *firstWait = members.front().wait;
  for (const Member &m : members)
    if (m.wait->isBeforeInBlock(firstWait))
      firstWait = m.wait;

  OpBuilder b(first);
  std::string module = commonModule(members);
  tags = {b.getNamedAttr(LoomDialect::kModuleAttrName, b.getStringAttr(module)),
          b.getNamedAttr(LoomDialect::kPhaseAttrName,
                         first->getAttr(LoomDialect::kPhaseAttrName))};
  Location loc = bucketLoc(b, members);
  int64_t group = members.front().output.getDimSize(0) /
                  members.front().input.getDimSize(0);
  SmallVector<Value> flat;
  SmallVector<int64_t> sizes;
  SmallVector<Attribute> refs;
  int64_t total = 0;
  for (auto [i, m] : llvm::enumerate(members)) {
    int64_t n = numel(m.input);
    flat.push_back(view(b, loc, m.start->getOperand(0), {n}));
    sizes.push_back(n);
    refs.push_back(OperandRefAttr::get(ctx, i));
    total += n;
  }
  Type element = members.front().input.getElementType();
  Value buffer =
      aten(b, loc, "aten::cat.default", RankedTensorType::get({total}, element),
           flat, {b.getArrayAttr(refs), b.getI64IntegerAttr(0)});
  auto gatheredType = RankedTensorType::get({group * total}, element);
  auto old = cast<AllGatherStartOp>(first);
  auto start = AllGatherStartOp::create(
      b, loc, FutureType::get(ctx, gatheredType), buffer, old.getMeshAttr(),
      old.getAxesAttr(), b.getI64IntegerAttr(0));
  for (NamedAttribute tag : tags)
    start->setAttr(tag.getName(), tag.getValue());

  b.setInsertionPoint(firstWait);
  auto wait = WaitOp::create(b, loc, gatheredType, start.getFuture());
  for (NamedAttribute tag : tags)
    wait->setAttr(tag.getName(), tag.getValue());
  // Rank r's chunk is [r's shard of member 0, r's shard of member 1, ...].
  Value matrix = view(b, loc, wait.getResult(), {group, total});
  SmallVector<Value> pieces = split(b, loc, matrix, sizes, 1);
  for (auto [m, piece] : llvm::zip(members, pieces)) {
    Value result = view(b, loc, piece, m.output.getShape());
    m.wait->getResult(0).replaceAllUsesWith(result);
  }
  for (const Member &m : members) {
    m.wait->erase();
    m.start->erase();
  }
}

void LoomBucketPass::mergeReduceScatters(ArrayRef<Member> members) {
  const Member &last = members.back();
  MLIRContext *ctx = last.start->getContext();
  OpBuilder b(last.wait);
  std::string module = commonModule(members);
  tags = {b.getNamedAttr(LoomDialect::kModuleAttrName, b.getStringAttr(module)),
          b.getNamedAttr(LoomDialect::kPhaseAttrName,
                         last.start->getAttr(LoomDialect::kPhaseAttrName))};
  Location loc = bucketLoc(b, members);
  int64_t group = members.front().input.getDimSize(0) /
                  members.front().output.getDimSize(0);
  // Each input is G chunks of n; side by side, chunk r of the bucket holds
  // chunk r of every member.
  SmallVector<Value> blocks;
  SmallVector<int64_t> sizes;
  SmallVector<Attribute> refs;
  int64_t total = 0;
  for (auto [i, m] : llvm::enumerate(members)) {
    int64_t n = numel(m.output);
    blocks.push_back(view(b, loc, m.start->getOperand(0), {group, n}));
    sizes.push_back(n);
    refs.push_back(OperandRefAttr::get(ctx, i));
    total += n;
  }
  Type element = members.front().input.getElementType();
  Value matrix = aten(b, loc, "aten::cat.default",
                      RankedTensorType::get({group, total}, element), blocks,
                      {b.getArrayAttr(refs), b.getI64IntegerAttr(1)});
  Value buffer = view(b, loc, matrix, {group * total});
  auto reducedType = RankedTensorType::get({total}, element);
  auto old = cast<ReduceScatterStartOp>(last.start);
  auto start = ReduceScatterStartOp::create(
      b, loc, FutureType::get(ctx, reducedType), buffer, old.getMeshAttr(),
      old.getAxesAttr(), b.getI64IntegerAttr(0), old.getReductionAttr());
  for (NamedAttribute tag : tags)
    start->setAttr(tag.getName(), tag.getValue());
  auto wait = WaitOp::create(b, loc, reducedType, start.getFuture());
  for (NamedAttribute tag : tags)
    wait->setAttr(tag.getName(), tag.getValue());
  SmallVector<Value> pieces = split(b, loc, wait.getResult(), sizes, 0);
  SmallVector<Value> results;
  for (auto [m, piece] : llvm::zip(members, pieces))
    results.push_back(view(b, loc, piece, m.output.getShape()));
  Operation *after = results.back().getDefiningOp()
                         ? results.back().getDefiningOp()
                         : wait.getOperation();
  // Uses of earlier results that ran before the merged wait move after it.
  for (const Member &m : members.drop_back()) {
    FailureOr<SmallVector<Operation *>> users =
        collectUserSlice(m.wait->getResult(0), last.wait);
    for (Operation *op : *users) {
      op->moveAfter(after);
      after = op;
    }
  }
  for (auto [m, result] : llvm::zip(members, results))
    m.wait->getResult(0).replaceAllUsesWith(result);
  for (const Member &m : members) {
    m.wait->erase();
    m.start->erase();
  }
}

} // namespace
