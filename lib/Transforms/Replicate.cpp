//===- Replicate.cpp - DDP: average gradients over a mesh in buckets ------===//

#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace loom {
#define GEN_PASS_DEF_LOOMREPLICATE
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {
/// One gradient value of the step and the results that return it.
struct Gradient {
  Value value;
  SmallVector<unsigned> results;
  StringRef target;
  int64_t position;
};

struct LoomReplicatePass
    : public loom::impl::LoomReplicateBase<LoomReplicatePass> {
  using LoomReplicateBase::LoomReplicateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> steps = getStepFunctions(module);
    if (steps.empty())
      return markAllAnalysesPreserved();
    MeshOp mesh = getOrCreateMesh(module);
    if (!mesh)
      return signalPassFailure();
    for (func::FuncOp func : steps)
      if (failed(replicate(func, mesh)))
        return signalPassFailure();
  }

  /// The mesh the options describe: the module's own if it declares it
  /// (checked against the options), a new one otherwise.
  MeshOp getOrCreateMesh(ModuleOp module) {
    if (failed(checkOptions(module)))
      return nullptr;
    if (auto existing = module.lookupSymbol<MeshOp>(meshName))
      return succeeded(checkExistingMesh(existing)) ? existing : nullptr;
    if (module.lookupSymbol(meshName)) {
      module.emitError("--loom-replicate: symbol @")
          << meshName << " exists and is not a loom.mesh";
      return nullptr;
    }
    return createMesh(module);
  }

  /// The options that hold whatever the module says: a mesh name and
  /// bucket caps DDP accepts.
  LogicalResult checkOptions(ModuleOp module) {
    if (meshName.empty())
      return module.emitError("--loom-replicate: 'mesh' must name a symbol");
    if (bucketCapMb < 0)
      return module.emitError("--loom-replicate: bucket-cap-mb must not be "
                              "negative, got ")
             << bucketCapMb;
    if (firstBucketCapMb < 0)
      return module.emitError("--loom-replicate: first-bucket-cap-mb must not "
                              "be negative, got ")
             << firstBucketCapMb;
    return success();
  }

  /// mesh-shape and axes, when given, must describe the existing mesh.
  LogicalResult checkExistingMesh(MeshOp existing) {
    Builder b(&getContext());
    if (!meshShape.empty() &&
        ArrayRef<int64_t>(meshShape) != existing.getShape())
      return existing.emitOpError("--loom-replicate: mesh-shape [")
             << llvm::make_range(meshShape.begin(), meshShape.end())
             << "] differs from the existing mesh's shape";
    SmallVector<StringRef> axisNames(axes.begin(), axes.end());
    if (!axisNames.empty() &&
        b.getStrArrayAttr(axisNames) != existing.getAxes())
      return existing.emitOpError("--loom-replicate: axes differ from the "
                                  "existing mesh's axes");
    return success();
  }

  /// A new mesh of mesh-shape with the given axes (a 1-D mesh's default is
  /// "dp") at the start of the module.
  MeshOp createMesh(ModuleOp module) {
    SmallVector<std::string> axisNames(axes.begin(), axes.end());
    if (meshShape.empty()) {
      module.emitError("--loom-replicate: the module has no mesh @")
          << meshName << "; give its shape with mesh-shape (e.g. mesh-shape=4)";
      return nullptr;
    }
    if (axisNames.empty()) {
      if (meshShape.size() != 1) {
        module.emitError("--loom-replicate: a ")
            << meshShape.size()
            << "-d mesh-shape needs one name per axis (axes=...)";
        return nullptr;
      }
      axisNames.push_back("dp");
    }
    if (axisNames.size() != meshShape.size()) {
      module.emitError("--loom-replicate: mesh-shape has ")
          << meshShape.size() << " sizes but axes has " << axisNames.size()
          << " names";
      return nullptr;
    }
    for (auto [size, name] : llvm::zip(meshShape, axisNames))
      if (size <= 0) {
        module.emitError("--loom-replicate: mesh axis '")
            << name << "' has " << size
            << " ranks; every axis needs at least one";
        return nullptr;
      }
    OpBuilder builder(module.getBodyRegion());
    builder.setInsertionPointToStart(module.getBody());
    auto mesh = MeshOp::create(builder, module.getLoc(),
                               builder.getStringAttr(meshName),
                               builder.getDenseI64ArrayAttr(meshShape),
                               builder.getStrArrayAttr(SmallVector<StringRef>(
                                   axisNames.begin(), axisNames.end())));
    if (failed(mesh.verify())) {
      mesh.erase();
      return nullptr;
    }
    return mesh;
  }

  /// The axes the gradients are averaged over and the batch is split
  /// over: reduce-axes (each an axis of the mesh), or all of them.
  FailureOr<ArrayAttr> getReduceAxes(MeshOp mesh) {
    if (reduceAxes.empty())
      return mesh.getAxes();
    SmallVector<StringRef> names;
    for (const std::string &axis : reduceAxes) {
      if (!mesh.getAxisIndex(axis))
        return mesh.emitOpError("--loom-replicate: reduce-axes names '")
               << axis << "', which is not an axis of this mesh";
      if (llvm::is_contained(names, axis))
        return mesh.emitOpError("--loom-replicate: reduce-axes names '")
               << axis << "' twice";
      names.push_back(axis);
    }
    return Builder(&getContext()).getStrArrayAttr(names);
  }

  LogicalResult replicate(func::FuncOp func, MeshOp mesh) {
    MLIRContext *ctx = &getContext();
    if (Attribute existing = func->getAttr(LoomDialect::kOptimizerAttrName))
      return func.emitOpError("already has an optimizer attached (")
             << existing
             << "); run loom-replicate before loom-attach-optimizer so the "
                "optimizer consumes the reduced gradients";
    // A pipelined (MPMD) step's point-to-point transfers are its own;
    // any other collective means data parallelism was already applied.
    WalkResult collective = func.walk([](Operation *op) {
      return isa<AllGatherStartOp, ReduceScatterStartOp, AllSliceStartOp,
                 AllReduceStartOp, BroadcastStartOp>(op)
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    });
    if (collective.wasInterrupted())
      return func.emitOpError("already has collectives; loom-replicate "
                              "distributes a single-rank step");

    auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
    FailureOr<ArrayAttr> reduceOver = getReduceAxes(mesh);
    if (failed(reduceOver))
      return failure();
    ArrayAttr axesAttr = *reduceOver;
    int64_t dataRanks = 1;
    for (StringRef axis : axesAttr.getAsValueRange<StringAttr>())
      dataRanks *= mesh.getShape()[*mesh.getAxisIndex(axis)];
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      if (func.getArgAttr(i, LoomDialect::kSplitAttrName) ||
          func.getArgAttr(i, LoomDialect::kShardAttrName))
        return func.emitOpError("argument #")
               << i
               << " is already split or sharded; loom-replicate "
                  "distributes a single-rank step";
      auto role =
          func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
      if (!role || role.getValue() != Role::input)
        continue;
      if (cast<RankedTensorType>(func.getArgument(i).getType()).getRank() == 0)
        return func.emitOpError("batch input #")
               << i
               << " is 0-d; data parallelism splits dim 0 of every "
                  "batch input";
      func.setArgAttr(i, LoomDialect::kSplitAttrName,
                      SplitAttr::get(ctx, meshRef, axesAttr, /*dim=*/0));
    }
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
      if (func.getResultAttr(i, LoomDialect::kPartialAttrName))
        return func.emitOpError("result #")
               << i
               << " is already partial; loom-replicate distributes a "
                  "single-rank step";
      auto role =
          func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
      if (role && role.getValue() == Role::loss)
        func.setResultAttr(
            i, LoomDialect::kPartialAttrName,
            PartialAttr::get(ctx, meshRef, axesAttr, ReduceKind::avg));
    }
    // DDP on one rank issues no collectives.
    if (dataRanks == 1)
      return success();

    SmallVector<Gradient> grads = collectGradients(func);
    for (const Gradient &g : grads)
      if (!isa<FloatType>(
              cast<RankedTensorType>(g.value.getType()).getElementType()))
        return func.emitOpError("the gradient of '")
               << g.target << "' is not floating point (" << g.value.getType()
               << "); it cannot be averaged";

    anchors.clear();
    for (auto [index, bucket] : llvm::enumerate(makeBuckets(grads)))
      reduceBucket(func, mesh, axesAttr, index, bucket);
    return success();
  }

  /// The step's gradient results, one entry per distinct value, in the
  /// order backward produces them.
  SmallVector<Gradient> collectGradients(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    llvm::DenseMap<Operation *, int64_t> positions;
    for (auto [i, op] : llvm::enumerate(body))
      positions[&op] = i;
    SmallVector<Gradient> grads;
    llvm::DenseMap<Value, unsigned> indexOf;
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
      auto role =
          func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
      if (!role || role.getValue() != Role::grad)
        continue;
      Value v = ret.getOperand(i);
      auto [it, inserted] = indexOf.try_emplace(v, grads.size());
      if (!inserted) {
        grads[it->second].results.push_back(i);
        continue;
      }
      Operation *def = v.getDefiningOp();
      grads.push_back(
          {v,
           {i},
           func.getResultAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName)
               .getValue(),
           def ? positions.lookup(def) : -1});
    }
    llvm::stable_sort(grads, [](const Gradient &a, const Gradient &b) {
      return a.position < b.position;
    });
    return grads;
  }

  /// DDP's compute_bucket_assignment_by_size over gradients in production
  /// order (the Reducer's rebuilt buckets): one open bucket per element
  /// type; a bucket closes once it holds at least its limit, the first
  /// bucket of a type `first-bucket-cap-mb`, later ones `bucket-cap-mb`.
  /// Buckets still open at the end follow by their first gradient.
  SmallVector<SmallVector<Gradient>>
  makeBuckets(ArrayRef<Gradient> grads) const {
    // DDP's int(cap_mb * 1024 * 1024) bytes, compared with >=.
    const int64_t limits[2] = {int64_t(firstBucketCapMb * 1024.0 * 1024.0),
                               int64_t(bucketCapMb * 1024.0 * 1024.0)};
    struct Open {
      SmallVector<Gradient> grads;
      int64_t bytes = 0;
      unsigned limit = 0;
    };
    llvm::MapVector<Type, Open> open;
    SmallVector<SmallVector<Gradient>> buckets;
    for (const Gradient &g : grads) {
      auto type = cast<RankedTensorType>(g.value.getType());
      Open &o = open[type.getElementType()];
      o.grads.push_back(g);
      o.bytes +=
          type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
      if (o.bytes >= limits[o.limit]) {
        buckets.push_back(std::move(o.grads));
        o.grads.clear();
        o.bytes = 0;
        o.limit = 1;
      }
    }
    SmallVector<SmallVector<Gradient>> rest;
    for (auto &entry : open)
      if (!entry.second.grads.empty())
        rest.push_back(std::move(entry.second.grads));
    llvm::stable_sort(rest, [](const auto &a, const auto &b) {
      return a.front().position < b.front().position;
    });
    buckets.append(std::make_move_iterator(rest.begin()),
                   std::make_move_iterator(rest.end()));
    return buckets;
  }

  /// Stamps an inserted op with the bucket's module, phase and name.
  static void tag(Operation *op, StringRef module, Location loc) {
    Builder b(op->getContext());
    op->setAttr(LoomDialect::kModuleAttrName, b.getStringAttr(module));
    op->setAttr(LoomDialect::kPhaseAttrName,
                PhaseAttr::get(op->getContext(), Phase::backward));
    op->setLoc(loc);
  }

  static loom::AtenOp createReshape(OpBuilder &builder, Location loc,
                                    Value input, RankedTensorType type) {
    SmallVector<Attribute> shape;
    for (int64_t d : type.getShape())
      shape.push_back(builder.getI64IntegerAttr(d));
    // reshape, not view: a gradient may be a non-contiguous view (the
    // transpose of a matmul), which view refuses.
    return loom::AtenOp::create(
        builder, loc, TypeRange{type},
        builder.getStringAttr("aten::reshape.default"), ValueRange{input},
        builder.getArrayAttr({OperandRefAttr::get(builder.getContext(), 0),
                              builder.getArrayAttr(shape)}),
        builder.getDictionaryAttr({}), /*returns=*/ArrayAttr());
  }

  /// The bucket's gradients flattened and concatenated into one buffer at
  /// the builder's insertion point (the gradient itself for a bucket of
  /// one); `sizes` receives each gradient's number of elements.
  static Value packBucket(OpBuilder &builder, ArrayRef<Gradient> bucket,
                          Type element,
                          function_ref<Location(StringRef)> nameLoc,
                          SmallVectorImpl<int64_t> &sizes,
                          SmallVectorImpl<Operation *> &inserted) {
    if (bucket.size() == 1)
      return bucket.back().value;
    MLIRContext *ctx = builder.getContext();
    SmallVector<Value> flat;
    SmallVector<Attribute> refs;
    int64_t total = 0;
    for (auto [k, g] : llvm::enumerate(bucket)) {
      int64_t n = cast<RankedTensorType>(g.value.getType()).getNumElements();
      sizes.push_back(n);
      total += n;
      auto reshape = createReshape(builder, nameLoc(".flatten"), g.value,
                                   RankedTensorType::get({n}, element));
      inserted.push_back(reshape);
      flat.push_back(reshape.getResult(0));
      refs.push_back(OperandRefAttr::get(ctx, k));
    }
    auto cat = loom::AtenOp::create(
        builder, nameLoc(".cat"),
        TypeRange{RankedTensorType::get({total}, element)},
        builder.getStringAttr("aten::cat.default"), flat,
        builder.getArrayAttr(
            {builder.getArrayAttr(refs), builder.getI64IntegerAttr(0)}),
        builder.getDictionaryAttr({}), /*returns=*/ArrayAttr());
    inserted.push_back(cat);
    return cat.getResult(0);
  }

  /// The reduced gradients of the bucket, in their own shapes, cut from the
  /// reduced buffer `reduced` at the builder's insertion point.
  static SmallVector<Value>
  unpackBucket(OpBuilder &builder, ArrayRef<Gradient> bucket, Value reduced,
               Type element, ArrayRef<int64_t> sizes,
               function_ref<Location(StringRef)> nameLoc,
               SmallVectorImpl<Operation *> &inserted) {
    if (bucket.size() == 1)
      return {reduced};
    MLIRContext *ctx = builder.getContext();
    SmallVector<Type> pieceTypes;
    SmallVector<Attribute> sizeAttrs, indices;
    for (auto [k, n] : llvm::enumerate(sizes)) {
      pieceTypes.push_back(RankedTensorType::get({n}, element));
      sizeAttrs.push_back(builder.getI64IntegerAttr(n));
      indices.push_back(builder.getI64IntegerAttr(k));
    }
    auto split = loom::AtenOp::create(
        builder, nameLoc(".split"), pieceTypes,
        builder.getStringAttr("aten::split_with_sizes.default"),
        ValueRange{reduced},
        builder.getArrayAttr({OperandRefAttr::get(ctx, 0),
                              builder.getArrayAttr(sizeAttrs),
                              builder.getI64IntegerAttr(0)}),
        builder.getDictionaryAttr({}),
        builder.getArrayAttr({builder.getArrayAttr(indices)}));
    inserted.push_back(split);
    SmallVector<Value> values;
    for (auto [g, piece] : llvm::zip(bucket, split.getResults())) {
      auto reshape = createReshape(builder, nameLoc(".unflatten"), piece,
                                   cast<RankedTensorType>(g.value.getType()));
      inserted.push_back(reshape);
      values.push_back(reshape.getResult(0));
    }
    return values;
  }

  void reduceBucket(func::FuncOp func, MeshOp mesh, ArrayAttr axesAttr,
                    size_t index, ArrayRef<Gradient> bucket) {
    MLIRContext *ctx = &getContext();
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    SmallVector<StringRef> owners;
    for (const Gradient &g : bucket)
      owners.push_back(getOwnerModule(g.target));
    std::string module = getCommonModule(owners).str();
    std::string name = ("ddp.bucket" + Twine(index)).str();
    Value last = bucket.back().value;
    auto nameLoc = [&](StringRef suffix) -> Location {
      return NameLoc::get(StringAttr::get(ctx, name + suffix), last.getLoc());
    };
    Type element = cast<RankedTensorType>(last.getType()).getElementType();

    // Flatten right after the bucket's last gradient exists (after the
    // ops earlier buckets placed there, to keep bucket order).
    OpBuilder builder(ctx);
    Operation *def = last.getDefiningOp();
    if (Operation *anchor = anchors.lookup(def))
      builder.setInsertionPointAfter(anchor);
    else if (def)
      builder.setInsertionPointAfter(def);
    else
      builder.setInsertionPointToStart(&body);
    SmallVector<Operation *> inserted;
    SmallVector<int64_t> sizes;
    Value buffer =
        packBucket(builder, bucket, element, nameLoc, sizes, inserted);
    auto bufferType = cast<RankedTensorType>(buffer.getType());
    auto start = AllReduceStartOp::create(
        builder, nameLoc(""), FutureType::get(ctx, bufferType), buffer,
        FlatSymbolRefAttr::get(mesh.getSymNameAttr()), axesAttr,
        ReduceKindAttr::get(ctx, ReduceKind::avg));
    inserted.push_back(start);
    // A later bucket whose last gradient has the same producer goes after.
    anchors[def] = start;

    // Wait and unpack right before the first use: the return, the only user
    // of the reduced gradients.
    builder.setInsertionPoint(ret);
    auto wait = WaitOp::create(builder, nameLoc(".wait"), bufferType,
                               start.getFuture());
    inserted.push_back(wait);
    SmallVector<Value> reduced = unpackBucket(
        builder, bucket, wait.getResult(), element, sizes, nameLoc, inserted);
    for (Operation *op : inserted)
      tag(op, module, op->getLoc());
    for (auto [g, value] : llvm::zip(bucket, reduced))
      for (unsigned result : g.results)
        ret->setOperand(result, value);
  }

  /// Per producer of a bucket's last gradient (null: a block argument), the
  /// last op inserted after it.
  llvm::DenseMap<Operation *, Operation *> anchors;
};
} // namespace
