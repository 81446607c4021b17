//===- Gather.cpp - loom-fsdp's all-gathers before forward use ------------===//

#include "Fsdp.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace loom;
using namespace loom::fsdp;

/// This rank's shards of `unit`'s parameters, in the compute dtype,
/// flattened and concatenated: the buffer the all-gather sends.
static Value buildShardBuffer(ShardingState &s, OpBuilder &b, Location loc,
                              const Unit &unit, int64_t total) {
  const OpTagger &t = s.tagger;
  SmallVector<Value> pieces;
  for (unsigned p : unit.params) {
    const ParamInfo &info = s.params[p];
    Value shard = t.castTo(b, loc, s.func.getArgument(info.argIndex),
                           s.config.computeDtype);
    pieces.push_back(t.view(b, loc, shard, {info.localNumel}));
  }
  Value buffer = pieces.front();
  if (pieces.size() == 1)
    return buffer;
  SmallVector<Attribute> refs;
  for (unsigned i = 0; i < pieces.size(); ++i)
    refs.push_back(OperandRefAttr::get(b.getContext(), i));
  return t.aten(b, loc, "aten::cat.default",
                cast<RankedTensorType>(buffer.getType()).clone({total}), pieces,
                {b.getArrayAttr(refs), b.getI64IntegerAttr(0)});
}

static Value buildAllGather(ShardingState &s, OpBuilder &b, Location loc,
                            Value buffer, ArrayAttr axes, int64_t total) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<RankedTensorType>(buffer.getType())
                  .clone({total * s.mesh().shardSize});
  auto start =
      AllGatherStartOp::create(b, loc, FutureType::get(ctx, type), buffer,
                               s.mesh().ref, axes, b.getI64IntegerAttr(0));
  return s.tagger.finishCollective(b, loc, start, type);
}

/// The strides of `sizes`/`strides` reshaped to `shape` when ATen's
/// reshape can return a view (its computeStride: each run of dims that are
/// contiguous with each other must map onto whole dims of `shape`);
/// std::nullopt when reshape copies.
static std::optional<SmallVector<int64_t>>
getReshapeViewStrides(ArrayRef<int64_t> sizes, ArrayRef<int64_t> strides,
                      ArrayRef<int64_t> shape) {
  SmallVector<int64_t> result(shape.size(), 1);
  if (sizes.empty() || llvm::is_contained(sizes, 0))
    return std::nullopt; // not met by a gathered parameter; copy
  int64_t viewDim = int64_t(shape.size()) - 1;
  int64_t chunkStride = strides.back(), tensorNumel = 1, viewNumel = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    tensorNumel *= sizes[d];
    if (d > 0 &&
        (sizes[d - 1] == 1 || strides[d - 1] == tensorNumel * chunkStride))
      continue;
    while (viewDim >= 0 &&
           (viewNumel < tensorNumel || shape[size_t(viewDim)] == 1)) {
      result[size_t(viewDim)] = viewNumel * chunkStride;
      viewNumel *= shape[size_t(viewDim)];
      --viewDim;
    }
    if (viewNumel != tensorNumel)
      return std::nullopt;
    if (d > 0) {
      chunkStride = strides[d - 1];
      tensorNumel = viewNumel = 1;
    }
  }
  if (viewDim != -1)
    return std::nullopt;
  return result;
}

/// `piece` (laid out as `sizes`/`strides` at run time) as a tensor of
/// `shape` with storage of its own, as FSDP2's copy-out leaves every
/// unsharded parameter: `aten::reshape`, which copies a block of the
/// gathered buffer, unless the block reshapes to a strided view of the
/// buffer (one row per rank: a [G, n] column block reshaped to [G, ...]);
/// then a contiguous clone first. Kernels take other paths on strided
/// operands (batch norm's weight, for one), so a view would round
/// otherwise than PyTorch's run, and would keep the whole buffer alive.
static Value copyOut(ShardingState &s, OpBuilder &b, Location loc, Value piece,
                     ArrayRef<int64_t> sizes, ArrayRef<int64_t> strides,
                     ArrayRef<int64_t> shape) {
  const OpTagger &t = s.tagger;
  std::optional<SmallVector<int64_t>> view =
      getReshapeViewStrides(sizes, strides, shape);
  if (!view || *view == getContiguousStrides(shape))
    return t.view(b, loc, piece, shape, "aten::reshape.default");
  AtenOp copy = buildContiguousClone(b, loc, piece);
  t.tag(copy);
  return t.view(b, loc, copy->getResult(0), shape);
}

/// A parameter sharded on dim d > 0 (FSDP2's Shard(d)) from its `[G, n]`
/// block of the gathered buffer (rows `rowStride` apart): rank r's row is
/// its local shard, so the `[G, local...]` view with G moved next to dim d
/// reshapes to the full tensor (FSDP2 concatenates the chunks along d the
/// same way).
static Value unshardOnDim(ShardingState &s, OpBuilder &b, Location loc,
                          const ParamInfo &info, Value piece,
                          int64_t rowStride) {
  const OpTagger &t = s.tagger;
  int64_t d = info.shardDim;
  SmallVector<int64_t> blocked{s.mesh().shardSize};
  llvm::append_range(blocked, info.localType.getShape());
  Value value = t.view(b, loc, piece, blocked, "aten::reshape.default");
  // The [G, local...] view's strides, then moved as movedim moves them.
  SmallVector<int64_t> strides{rowStride};
  llvm::append_range(strides, getContiguousStrides(info.localType.getShape()));
  SmallVector<int64_t> moved(info.localType.getShape());
  moved.insert(moved.begin() + d, s.mesh().shardSize);
  SmallVector<int64_t> movedStrides(ArrayRef<int64_t>(strides).drop_front());
  movedStrides.insert(movedStrides.begin() + d, rowStride);
  value = t.aten(b, loc, "aten::movedim.int",
                 cast<RankedTensorType>(value.getType()).clone(moved), value,
                 {OperandRefAttr::get(b.getContext(), 0),
                  b.getI64IntegerAttr(0), b.getI64IntegerAttr(d)});
  return copyOut(s, b, loc, value, moved, movedStrides,
                 info.fullType.getShape());
}

/// Rank r's chunk of the gathered buffer holds its shard of every
/// parameter; a [G, N] view puts each parameter's shards in one column
/// block, which is cut back to the parameter's (unpadded) shape.
static SmallVector<Value>
unpackGathered(ShardingState &s, OpBuilder &b, Location loc, const Unit &unit,
               Value gathered, ArrayRef<int64_t> sizes, int64_t total) {
  const OpTagger &t = s.tagger;
  int64_t shardSize = s.mesh().shardSize;
  SmallVector<Value> pieces;
  if (unit.params.size() == 1) {
    pieces.push_back(gathered);
  } else {
    Value matrix = t.view(b, loc, gathered, {shardSize, total});
    pieces = t.splitWithSizes(b, loc, matrix, sizes, 1);
  }
  // Each piece is a [G, n] block whose rows are `total` apart (one
  // parameter: the whole buffer, n == total).
  SmallVector<Value> full;
  for (auto [p, piece] : llvm::zip(unit.params, pieces)) {
    const ParamInfo &info = s.params[p];
    if (info.shardDim > 0) {
      full.push_back(unshardOnDim(s, b, loc, info, piece, total));
      continue;
    }
    SmallVector<int64_t> padded(info.fullType.getShape());
    padded[0] = info.localType.getDimSize(0) * shardSize;
    // The whole gathered buffer is the one parameter's: a view. A column
    // block of the [G, N] view is not contiguous: copied out.
    Value value = unit.params.size() == 1
                      ? t.view(b, loc, piece, padded)
                      : copyOut(s, b, loc, piece, {shardSize, info.localNumel},
                                {total, 1}, padded);
    int64_t rows = info.fullType.getDimSize(0);
    if (padded[0] != rows) {
      SmallVector<int64_t> shape(padded);
      shape[0] = rows;
      value =
          t.aten(b, loc, "aten::slice.Tensor",
                 cast<RankedTensorType>(value.getType()).clone(shape), value,
                 {OperandRefAttr::get(b.getContext(), 0),
                  b.getI64IntegerAttr(0), b.getI64IntegerAttr(0),
                  b.getI64IntegerAttr(rows), b.getI64IntegerAttr(1)});
    }
    full.push_back(value);
  }
  return full;
}

SmallVector<Value> fsdp::buildGather(ShardingState &s, OpBuilder &b,
                                     Location loc, const Unit &unit,
                                     Value postForward, Value &flat) {
  SmallVector<int64_t> sizes;
  int64_t total = 0;
  for (unsigned p : unit.params) {
    sizes.push_back(s.params[p].localNumel);
    total += s.params[p].localNumel;
  }
  if (postForward) {
    // The k ranks of the post-forward group hold consecutive row blocks of
    // the [G, N] matrix: gathering them rebuilds it.
    flat =
        buildAllGather(s, b, loc, postForward, s.mesh().postForwardAxes, total);
  } else {
    Value buffer = buildShardBuffer(s, b, loc, unit, total);
    flat = s.mesh().shardSize > 1
               ? buildAllGather(s, b, loc, buffer, s.mesh().shardAxes, total)
               : buffer;
  }
  return unpackGathered(s, b, loc, unit, flat, sizes, total);
}

/// This rank's post-forward shard of a unit's gathered buffer `flat`: rows
/// [j*G/k, (j+1)*G/k) of the [G, N] matrix for rank j of its k-rank
/// post-forward group (1/k of every parameter, as FSDP2 keeps it).
static Value buildPostForwardSlice(ShardingState &s, OpBuilder &b, Location loc,
                                   Value flat) {
  const MeshLayout &mesh = s.mesh();
  auto full = cast<RankedTensorType>(flat.getType());
  auto type = full.clone({full.getDimSize(0) / mesh.postForwardSize});
  auto start = AllSliceStartOp::create(
      b, loc, FutureType::get(b.getContext(), type), flat, mesh.ref,
      mesh.postForwardAxes, b.getI64IntegerAttr(0));
  return s.tagger.finishCollective(b, loc, start, type);
}

/// The first op of microbatch `mb` that uses a parameter of `unit`:
/// FSDP2's pre-forward hook unshards before it. A parameter used in
/// forward counts by its first forward use, one used only in backward by
/// its first use.
static Operation *findFirstUse(ShardingState &s, const Unit &unit, int64_t mb) {
  Operation *first = nullptr;
  for (unsigned p : unit.params) {
    Operation *firstForward = nullptr, *firstAny = nullptr;
    for (OpOperand *use : s.uses[p]) {
      Operation *user = use->getOwner();
      if (s.microbatches.of(user).value_or(0) != mb)
        continue;
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
  return first;
}

/// Gathers `unit` again before each forward call of its module in
/// microbatch `mb` after the one at `first` (FSDP2 resharded it after that
/// call), from its post-forward shard under reshard-after-forward=k; those
/// calls' uses read the new gather.
static void gatherLaterCalls(ShardingState &s, OpBuilder &b, unsigned u,
                             Operation *first, int64_t mb,
                             ForwardGathers &forward) {
  const Unit &unit = s.units[u];
  int64_t firstCall = callOf(unit, first);
  // Each later call's parameter uses, in the order the calls first use one.
  llvm::MapVector<int64_t, SmallVector<std::pair<OpOperand *, unsigned>>> calls;
  SmallVector<std::pair<OpOperand *, unsigned>> uses;
  for (auto [i, p] : llvm::enumerate(unit.params))
    for (OpOperand *use : s.uses[p])
      if (getPhase(use->getOwner()) == Phase::forward &&
          s.microbatches.of(use->getOwner()).value_or(0) == mb &&
          callOf(unit, use->getOwner()) != firstCall)
        uses.push_back({use, unsigned(i)});
  llvm::stable_sort(uses, [](auto &a, auto &c) {
    return a.first->getOwner()->isBeforeInBlock(c.first->getOwner());
  });
  for (auto &use : uses)
    calls[callOf(unit, use.first->getOwner())].push_back(use);
  for (auto &[call, callUses] : calls) {
    Operation *at = callUses.front().first->getOwner();
    b.setInsertionPoint(at);
    Location loc = NameLoc::get(
        b.getStringAttr("fsdp.all_gather:" + unit.label()), at->getLoc());
    Value flat;
    s.tagger.calls = getUnitCalls(unit, at);
    SmallVector<Value> values =
        buildGather(s, b, loc, unit, forward.postForward[u], flat);
    s.tagger.calls = nullptr;
    s.gatheredValues.insert(values.begin(), values.end());
    for (auto [i, p] : llvm::enumerate(unit.params))
      forward.laterCalls.push_back({values[i], p});
    for (auto [use, i] : callUses)
      use->set(values[i]);
  }
}

ForwardGathers fsdp::gatherForForward(ShardingState &s, int64_t mb,
                                      Unsharded &unsharded) {
  OpBuilder b(s.func.getContext());
  ForwardGathers forward;
  forward.full.resize(s.params.size());
  forward.postForward.resize(s.units.size());
  for (auto [u, unit] : llvm::enumerate(s.units)) {
    Operation *first = findFirstUse(s, unit, mb);
    if (!first)
      continue;
    s.tagger.module = b.getStringAttr(unit.prefix);
    s.tagger.phase = Phase::forward;
    b.setInsertionPoint(first);
    SmallVector<Value> &live = unsharded.params[u];
    if (live.empty()) {
      Location loc = NameLoc::get(
          b.getStringAttr("fsdp.all_gather:" + unit.label()), first->getLoc());
      live = buildGather(s, b, loc, unit, Value(), unsharded.flat[u]);
      s.gatheredValues.insert(live.begin(), live.end());
    }
    // Resharding to k ranks keeps this rank's 1/k of the gathered buffer
    // (taken at once, so the buffer can be freed after the forward).
    if (unit.reshard && s.mesh().postForwardSize)
      forward.postForward[u] = buildPostForwardSlice(
          s, b,
          NameLoc::get(
              b.getStringAttr("fsdp.post_forward_shard:" + unit.label()),
              first->getLoc()),
          unsharded.flat[u]);
    for (auto [p, value] : llvm::zip(unit.params, live)) {
      forward.full[p] = value;
      for (OpOperand *use : s.uses[p])
        if (s.microbatches.of(use->getOwner()).value_or(0) == mb)
          use->set(value);
    }
    // Post-forward reshard, after each call of the unit's module.
    if (unit.reshard)
      gatherLaterCalls(s, b, u, first, mb, forward);
    if (unit.reshard) {
      live.clear();
      unsharded.flat[u] = Value();
    }
  }
  return forward;
}
