//===- Replicate.cpp - DDP and FSDP2's replicate: average gradients -------===//
//
// grouping=buckets all-reduces the gradients in DDP's size-capped buckets;
// grouping=units in one all-reduce per unit, the parameter groups of
// FSDP2-based replicate, formed by loom-fsdp's own unit code (Fsdp/Units.cpp).
//
//===----------------------------------------------------------------------===//

#include "Fsdp/Fsdp.h"

#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVectorExtras.h"
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

  /// The options that hold whatever the module says: a mesh name, bucket
  /// caps DDP accepts, and for grouping=units a 1-D mesh and no caps.
  LogicalResult checkOptions(ModuleOp module) {
    if (meshName.empty())
      return module.emitError("--loom-replicate: 'mesh' must name a symbol");
    if (grouping == ReplicateGrouping::Units) {
      if (meshShape.size() > 1)
        return module.emitError("--loom-replicate: grouping=units is FSDP2's "
                                "replicate, which takes a 1-D mesh (PyTorch "
                                "raises ValueError for any other), but "
                                "mesh-shape has ")
               << meshShape.size()
               << " dimensions; replicas of shards are HSDP (loom-fsdp "
                  "with mesh-shape=R,S)";
      LoomReplicateOptions defaults;
      if (bucketCapMb != defaults.bucketCapMb ||
          firstBucketCapMb != defaults.firstBucketCapMb)
        return module.emitError("--loom-replicate: bucket-cap-mb and "
                                "first-bucket-cap-mb size DDP's buckets; "
                                "grouping=units reduces one unit at a time");
      if (commHook != CommHook::Allreduce)
        return module.emitError("--loom-replicate: comm-hook is a DDP "
                                "communication hook; FSDP2's replicate "
                                "(grouping=units) has none");
      if (broadcastBuffers)
        return module.emitError("--loom-replicate: broadcast-buffers is "
                                "DDP's broadcast_buffers; FSDP2's replicate "
                                "(grouping=units) keeps each rank's buffers");
    } else if (!units.empty() || !unitSettings.empty()) {
      return module.emitError("--loom-replicate: units and unit-settings "
                              "need grouping=units (DDP's buckets are sized, "
                              "not formed from modules)");
    }
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

    // grouping=units: the units first, so that a bad option fails before
    // anything changes, on one rank too.
    fsdp::Config unitConfig;
    std::unique_ptr<fsdp::ShardingState> unitState;
    if (grouping == ReplicateGrouping::Units) {
      if (failed(checkUnitsMesh(func, mesh)))
        return failure();
      FailureOr<std::unique_ptr<fsdp::ShardingState>> formed =
          formUnits(func, unitConfig);
      if (failed(formed))
        return failure();
      unitState = std::move(*formed);
    }

    auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
    FailureOr<ArrayAttr> reduceOver = getReduceAxes(mesh);
    if (failed(reduceOver))
      return failure();
    ArrayAttr axesAttr = *reduceOver;
    int64_t dataRanks = mesh.getGroupSize(axesAttr);
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
      std::optional<int64_t> dim = getBatchDim(func, i);
      if (!dim)
        continue; // every rank takes it whole
      if (cast<RankedTensorType>(func.getArgument(i).getType()).getRank() == 0)
        return func.emitOpError("batch input #")
               << i
               << " is 0-d; data parallelism splits the batch dim of "
                  "every batch input not marked '"
               << LoomDialect::kUnbatchedAttrName << "'";
      func.setArgAttr(i, LoomDialect::kSplitAttrName,
                      SplitAttr::get(ctx, meshRef, axesAttr, *dim));
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
    // DDP and replicate on one rank issue no collectives.
    if (dataRanks == 1)
      return success();

    SmallVector<Gradient> grads = collectGradients(func);
    for (const Gradient &g : grads)
      if (!isa<FloatType>(
              cast<RankedTensorType>(g.value.getType()).getElementType()))
        return func.emitOpError("the gradient of '")
               << g.target << "' is not floating point (" << g.value.getType()
               << "); it cannot be averaged";

    if (broadcastBuffers &&
        failed(broadcastFromFirstRank(func, mesh, axesAttr)))
      return failure();
    anchors.clear();
    if (unitState)
      return reduceByUnits(func, mesh, axesAttr, grads, *unitState);
    for (auto [index, bucket] : llvm::enumerate(makeBuckets(grads)))
      reduceBucket(func, mesh, axesAttr, index, bucket);
    return success();
  }

  /// grouping=units on a mesh that is not 1-D, or on one row of a pipeline
  /// mesh, is not FSDP2's replicate.
  LogicalResult checkUnitsMesh(func::FuncOp func, MeshOp mesh) {
    if (mesh.getShape().size() != 1)
      return func.emitOpError("--loom-replicate: grouping=units is FSDP2's "
                              "replicate, which takes a 1-D mesh (PyTorch "
                              "raises ValueError for any other), but mesh @")
             << mesh.getSymName() << " has " << mesh.getShape().size()
             << " axes " << mesh.getAxes()
             << "; replicas of shards are HSDP (loom-fsdp with "
                "mesh-shape=R,S)";
    if (fsdp::isPipelinedStep(func))
      return func.emitOpError("--loom-replicate: grouping=units on a "
                              "pipelined step is not supported; its "
                              "gradients are reduced after REDUCE_GRAD");
    return success();
  }

  /// The units of loom-fsdp for `func` (the `units` prefixes or the repeated
  /// blocks, then the root) with the gradient-sync of `unit-settings`; the
  /// other keys describe sharding, which replicate does not do.
  FailureOr<std::unique_ptr<fsdp::ShardingState>>
  formUnits(func::FuncOp func, fsdp::Config &config) {
    config.pass = "loom-replicate";
    config.unitPrefixes.assign(units.begin(), units.end());
    for (const std::string &text : unitSettings) {
      FailureOr<fsdp::UnitSetting> setting =
          fsdp::parseUnitSetting(func, text, config.pass);
      if (failed(setting))
        return failure();
      if (setting->key != fsdp::UnitSetting::Key::GradientSync)
        return func.emitOpError("--loom-replicate: unit-settings entry '")
               << text
               << "' sets what replicate does not have: its parameters are "
                  "never sharded, so only gradient-sync applies";
      config.unitSettings.push_back(std::move(*setting));
    }
    auto state = std::make_unique<fsdp::ShardingState>(func, config);
    if (failed(fsdp::collectParams(*state)) || failed(fsdp::formUnits(*state)))
      return failure();
    return state;
  }

  /// One all-reduce per unit, as FSDP2's replicate reduces each parameter
  /// group in its post-backward hook; a unit with gradient-sync=every
  /// all-reduces every microbatch's gradients and averages the results.
  LogicalResult reduceByUnits(func::FuncOp func, MeshOp mesh,
                              ArrayAttr axesAttr, ArrayRef<Gradient> grads,
                              fsdp::ShardingState &s) {
    llvm::DenseMap<unsigned, unsigned> unitOfResult;
    for (const fsdp::ParamInfo &param : s.params)
      if (param.gradResult)
        unitOfResult[*param.gradResult] = param.unit;
    SmallVector<SmallVector<Gradient>> perUnit(s.units.size());
    for (const Gradient &g : grads) {
      auto it = unitOfResult.find(g.results.front());
      // A gradient result of no parameter argument: reduce it with the root.
      perUnit[it == unitOfResult.end() ? s.rootUnit() : it->second].push_back(
          g);
    }
    fsdp::Microbatches microbatches = fsdp::Microbatches::find(s.body());
    for (auto [unit, unitGrads] : llvm::zip(s.units, perUnit)) {
      if (unitGrads.empty())
        continue;
      std::string name = "replicate.unit:" + unit.label();
      if (!unit.syncEveryMicrobatch || microbatches.count < 2) {
        setResults(func, unitGrads,
                   allReduce(func, mesh, axesAttr, name, unit.prefix,
                             values(unitGrads)));
        continue;
      }
      if (failed(reduceEveryMicrobatch(func, mesh, axesAttr, name, unit,
                                       unitGrads, microbatches)))
        return failure();
    }
    return success();
  }

  /// gradient-sync=every: each microbatch's gradients, the terms of
  /// loom-accumulate-gradients' mean, are all-reduced after the last of
  /// them; the reduced terms are summed and divided by the microbatch count
  /// (the order of PyTorch's accumulation into .grad), and the full-size
  /// local accumulation is dropped.
  LogicalResult reduceEveryMicrobatch(func::FuncOp func, MeshOp mesh,
                                      ArrayAttr axesAttr, StringRef name,
                                      const fsdp::Unit &unit,
                                      ArrayRef<Gradient> unitGrads,
                                      const fsdp::Microbatches &microbatches) {
    int64_t count = microbatches.count;
    SmallVector<SmallVector<Value>> terms(count);
    SmallVector<Operation *> chain;
    for (const Gradient &g : unitGrads) {
      SmallVector<Value> split;
      if (failed(fsdp::splitAccumulated(microbatches, g.value, split, chain)))
        return func.emitOpError("--loom-replicate: unit '")
               << unit.label() << "' has gradient-sync=every, but the "
               << "gradient of '" << g.target
               << "' is not the mean over microbatches that "
                  "loom-accumulate-gradients builds";
      for (int64_t k = 0; k < count; ++k)
        terms[k].push_back(split[k]);
    }
    MLIRContext *ctx = &getContext();
    SmallVector<Value> sums;
    for (int64_t k = 0; k < count; ++k) {
      SmallVector<Value> reduced =
          allReduce(func, mesh, axesAttr, (name + ".mb" + Twine(k)).str(),
                    unit.prefix, terms[k]);
      if (sums.empty()) {
        sums = reduced;
        continue;
      }
      OpBuilder builder(reduced.front().getContext());
      builder.setInsertionPoint(func.getBody().front().getTerminator());
      for (auto [sum, value] : llvm::zip(sums, reduced)) {
        auto add = loom::AtenOp::create(
            builder, value.getLoc(), TypeRange{value.getType()},
            builder.getStringAttr("aten::add.Tensor"), ValueRange{sum, value},
            builder.getArrayAttr(
                {OperandRefAttr::get(ctx, 0), OperandRefAttr::get(ctx, 1)}),
            builder.getDictionaryAttr({}), /*returns=*/ArrayAttr());
        tag(add, unit.prefix, add.getLoc());
        sum = add.getResult(0);
      }
    }
    OpBuilder builder(ctx);
    builder.setInsertionPoint(func.getBody().front().getTerminator());
    for (Value &sum : sums) {
      auto mean = loom::AtenOp::create(
          builder, sum.getLoc(), TypeRange{sum.getType()},
          builder.getStringAttr("aten::div.Tensor"), ValueRange{sum},
          builder.getArrayAttr({OperandRefAttr::get(ctx, 0),
                                builder.getF64FloatAttr(double(count))}),
          builder.getDictionaryAttr({}), /*returns=*/ArrayAttr());
      tag(mean, unit.prefix, mean.getLoc());
      sum = mean.getResult(0);
    }
    setResults(func, unitGrads, sums);
    for (Operation *op : chain)
      if (op->use_empty())
        op->erase();
    return success();
  }

  static SmallVector<Value> values(ArrayRef<Gradient> grads) {
    return llvm::map_to_vector(grads,
                               [](const Gradient &g) { return g.value; });
  }

  /// Returns `reduced[i]` for every result of `grads[i]`.
  static void setResults(func::FuncOp func, ArrayRef<Gradient> grads,
                         ArrayRef<Value> reduced) {
    Operation *ret = func.getBody().front().getTerminator();
    for (auto [g, value] : llvm::zip(grads, reduced))
      for (unsigned result : g.results)
        ret->setOperand(result, value);
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
    SmallVector<SmallVector<unsigned>> indices =
        assignBySize(values(grads), int64_t(firstBucketCapMb * 1024.0 * 1024.0),
                     int64_t(bucketCapMb * 1024.0 * 1024.0));
    SmallVector<SmallVector<Gradient>> buckets;
    for (ArrayRef<unsigned> bucket : indices) {
      SmallVector<Gradient> &members = buckets.emplace_back();
      for (unsigned i : bucket)
        members.push_back(grads[i]);
    }
    return buckets;
  }

  /// compute_bucket_assignment_by_size over `values` in order, as indices:
  /// per element type, a bucket closes once it holds `firstLimit` bytes
  /// (the type's first) or `limit` (later ones); closed buckets in the
  /// order they closed, then the open ones by their first value.
  static SmallVector<SmallVector<unsigned>>
  assignBySize(ArrayRef<Value> values, int64_t firstLimit, int64_t limit) {
    struct Open {
      SmallVector<unsigned> members;
      int64_t bytes = 0;
      bool first = true;
    };
    llvm::MapVector<Type, Open> open;
    SmallVector<SmallVector<unsigned>> buckets;
    for (auto [index, value] : llvm::enumerate(values)) {
      auto type = cast<RankedTensorType>(value.getType());
      Open &o = open[type.getElementType()];
      o.members.push_back(index);
      o.bytes +=
          type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
      if (o.bytes >= (o.first ? firstLimit : limit)) {
        buckets.push_back(std::move(o.members));
        o.members.clear();
        o.bytes = 0;
        o.first = false;
      }
    }
    SmallVector<SmallVector<unsigned>> rest;
    for (auto &entry : open)
      if (!entry.second.members.empty())
        rest.push_back(std::move(entry.second.members));
    llvm::stable_sort(rest, [](const auto &a, const auto &b) {
      return a.front() < b.front();
    });
    buckets.append(std::make_move_iterator(rest.begin()),
                   std::make_move_iterator(rest.end()));
    return buckets;
  }

  /// Stamps an inserted op with the bucket's module, phase and name.
  static void tag(Operation *op, StringRef module, Location loc,
                  Phase phase = Phase::backward) {
    Builder b(op->getContext());
    op->setAttr(LoomDialect::kModuleAttrName, b.getStringAttr(module));
    op->setAttr(LoomDialect::kPhaseAttrName,
                PhaseAttr::get(op->getContext(), phase));
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
  static Value packBucket(OpBuilder &builder, ArrayRef<Value> bucket,
                          Type element,
                          function_ref<Location(StringRef)> nameLoc,
                          SmallVectorImpl<int64_t> &sizes,
                          SmallVectorImpl<Operation *> &inserted) {
    if (bucket.size() == 1)
      return bucket.back();
    MLIRContext *ctx = builder.getContext();
    SmallVector<Value> flat;
    SmallVector<Attribute> refs;
    int64_t total = 0;
    for (auto [k, g] : llvm::enumerate(bucket)) {
      int64_t n = cast<RankedTensorType>(g.getType()).getNumElements();
      sizes.push_back(n);
      total += n;
      auto reshape = createReshape(builder, nameLoc(".flatten"), g,
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
  unpackBucket(OpBuilder &builder, ArrayRef<Value> bucket, Value reduced,
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
                                   cast<RankedTensorType>(g.getType()));
      inserted.push_back(reshape);
      values.push_back(reshape.getResult(0));
    }
    return values;
  }

  void reduceBucket(func::FuncOp func, MeshOp mesh, ArrayAttr axesAttr,
                    size_t index, ArrayRef<Gradient> bucket) {
    SmallVector<StringRef> owners;
    for (const Gradient &g : bucket)
      owners.push_back(getOwnerModule(g.target));
    std::string module = getCommonModule(owners).str();
    std::string name = ("ddp.bucket" + Twine(index)).str();
    setResults(func, bucket,
               allReduce(func, mesh, axesAttr, name, module, values(bucket)));
  }

  /// DDP's broadcast_buffers=True: before forward, every buffer takes the
  /// value of the group's first rank. DDP's _broadcast_coalesced flattens
  /// the buffers into buckets (compute_bucket_assignment_by_size with its
  /// 250 MiB broadcast_bucket_size: per element type, a bucket closing once
  /// it holds the limit; ordered by their first buffer) and broadcasts each.
  LogicalResult broadcastFromFirstRank(func::FuncOp func, MeshOp mesh,
                                       ArrayAttr axesAttr) {
    if (fsdp::isPipelinedStep(func))
      return func.emitOpError("--loom-replicate: broadcast-buffers on a "
                              "pipelined step is not supported");
    SmallVector<Value> buffers;
    for (BlockArgument arg : func.getArguments()) {
      auto role = func.getArgAttrOfType<RoleAttr>(arg.getArgNumber(),
                                                  LoomDialect::kRoleAttrName);
      if (role && role.getValue() == Role::buffer)
        buffers.push_back(arg);
    }
    // DDP's broadcast_bucket_size, the same for every bucket; without
    // tensor indices the assignment orders all buckets by their first.
    const int64_t limit = 250 * 1024 * 1024;
    SmallVector<SmallVector<unsigned>> buckets =
        assignBySize(buffers, limit, limit);
    llvm::stable_sort(buckets, [](const auto &a, const auto &b) {
      return a.front() < b.front();
    });

    MLIRContext *ctx = &getContext();
    Block &body = func.getBody().front();
    OpBuilder builder(ctx);
    builder.setInsertionPointToStart(&body);
    for (auto [index, bucket] : llvm::enumerate(buckets)) {
      SmallVector<Value> values =
          llvm::map_to_vector(bucket, [&](unsigned i) { return buffers[i]; });
      SmallVector<StringRef> owners;
      for (Value v : values)
        owners.push_back(
            getOwnerModule(func.getArgAttrOfType<StringAttr>(
                                   cast<BlockArgument>(v).getArgNumber(),
                                   LoomDialect::kNameAttrName)
                               .getValue()));
      std::string module = getCommonModule(owners).str();
      std::string name = ("ddp.buffers" + Twine(index)).str();
      auto nameLoc = [&](StringRef suffix) -> Location {
        return NameLoc::get(StringAttr::get(ctx, name + suffix), func.getLoc());
      };
      Coalesced c = startCoalesced(
          builder, values, nameLoc, [&](Value buffer, Type future) {
            return BroadcastStartOp::create(
                builder, nameLoc(""), future, buffer,
                FlatSymbolRefAttr::get(mesh.getSymNameAttr()), axesAttr,
                builder.getI64IntegerAttr(0));
          });
      SmallVector<Value> received = finishCoalesced(builder, c, nameLoc);
      llvm::SmallPtrSet<Operation *, 8> ours(c.inserted.begin(),
                                             c.inserted.end());
      for (auto [buffer, value] : llvm::zip(values, received))
        buffer.replaceUsesWithIf(value, [&](OpOperand &use) {
          return !ours.contains(use.getOwner());
        });
      for (Operation *op : c.inserted)
        tag(op, module, op->getLoc(), Phase::forward);
    }
    return success();
  }

  /// A collective over a group of values, flattened and concatenated into
  /// one buffer (the value itself for a group of one).
  struct Coalesced {
    SmallVector<Value> group;
    Type element;
    SmallVector<int64_t> sizes;
    Operation *start;
    SmallVector<Operation *> inserted;
  };

  /// Packs `group` and starts the collective `create` makes of the buffer
  /// (given the future's type) at the builder's insertion point.
  static Coalesced
  startCoalesced(OpBuilder &builder, ArrayRef<Value> group,
                 function_ref<Location(StringRef)> nameLoc,
                 function_ref<Operation *(Value, Type)> create) {
    Coalesced c;
    c.group.assign(group.begin(), group.end());
    c.element =
        cast<RankedTensorType>(group.front().getType()).getElementType();
    Value buffer =
        packBucket(builder, group, c.element, nameLoc, c.sizes, c.inserted);
    c.start = create(buffer,
                     FutureType::get(builder.getContext(),
                                     cast<RankedTensorType>(buffer.getType())));
    c.inserted.push_back(c.start);
    return c;
  }

  /// Waits for `c` at the builder's insertion point and cuts the group's
  /// values, in their own shapes, from the result (cast back to their
  /// dtype when it crossed in another).
  static SmallVector<Value>
  finishCoalesced(OpBuilder &builder, Coalesced &c,
                  function_ref<Location(StringRef)> nameLoc) {
    Value future = c.start->getResult(0);
    auto wait = WaitOp::create(
        builder, nameLoc(".wait"),
        cast<FutureType>(future.getType()).getValueType(), future);
    c.inserted.push_back(wait);
    Value result = wait.getResult();
    if (cast<RankedTensorType>(result.getType()).getElementType() !=
        c.element) {
      Operation *back =
          createCast(builder, nameLoc(".decompress"), result, c.element);
      c.inserted.push_back(back);
      result = back->getResult(0);
    }
    return unpackBucket(builder, c.group, result, c.element, c.sizes, nameLoc,
                        c.inserted);
  }

  /// `aten::_to_copy(v, dtype=element)`.
  static Operation *createCast(OpBuilder &builder, Location loc, Value v,
                               Type element) {
    auto type = cast<RankedTensorType>(v.getType()).clone(element);
    return loom::AtenOp::create(
        builder, loc, TypeRange{type},
        builder.getStringAttr("aten::_to_copy.default"), ValueRange{v},
        builder.getArrayAttr({OperandRefAttr::get(builder.getContext(), 0)}),
        builder.getDictionaryAttr(
            builder.getNamedAttr("dtype", TypeAttr::get(element))),
        /*returns=*/ArrayAttr());
  }

  /// The 16-bit type a compress hook sends gradients in, or null for DDP's
  /// own all-reduce.
  Type getCompressedType() {
    switch (commHook) {
    case CommHook::Allreduce:
      return {};
    case CommHook::Fp16Compress:
      return Float16Type::get(&getContext());
    case CommHook::Bf16Compress:
      return BFloat16Type::get(&getContext());
    }
    llvm_unreachable("unknown comm hook");
  }

  /// Averages `group` (values in the order backward produces them) over the
  /// ranks with one all-reduce of their concatenation, started right after
  /// the last of them exists, waited and split back right before the
  /// return (the only user of the reduced values); the inserted ops are in
  /// `module`, phase backward, and their locations are named `name`.
  SmallVector<Value> allReduce(func::FuncOp func, MeshOp mesh,
                               ArrayAttr axesAttr, StringRef name,
                               StringRef module, ArrayRef<Value> group) {
    MLIRContext *ctx = &getContext();
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // The group's last value in program order (arguments come first).
    Value last = group.front();
    for (Value v : group) {
      Operation *def = v.getDefiningOp();
      Operation *lastDef = last.getDefiningOp();
      if (def && (!lastDef || lastDef->isBeforeInBlock(def)))
        last = v;
    }
    auto nameLoc = [&](StringRef suffix) -> Location {
      return NameLoc::get(StringAttr::get(ctx, name + suffix), last.getLoc());
    };
    Type element = cast<RankedTensorType>(last.getType()).getElementType();

    // Flatten right after the group's last value exists (after the ops
    // earlier groups placed there, to keep their order).
    OpBuilder builder(ctx);
    Operation *def = last.getDefiningOp();
    if (Operation *anchor = anchors.lookup(def))
      builder.setInsertionPointAfter(anchor);
    else if (def)
      builder.setInsertionPointAfter(def);
    else
      builder.setInsertionPointToStart(&body);
    // A compress hook: buffer.to(dtype).div_(world_size), summed. Without
    // one, DDP's reducer multiplies each gradient by 1 / world_size as it
    // copies it into the bucket and sums the buckets (with 3 ranks not the
    // rounding of a sum divided by 3); FSDP2's replicate averages.
    Type compressed =
        grouping == ReplicateGrouping::Buckets ? getCompressedType() : Type();
    int64_t groupSize = mesh.getGroupSize(axesAttr);
    SmallVector<Operation *> compression;
    SmallVector<Value> packed(group.begin(), group.end());
    bool scales = grouping == ReplicateGrouping::Buckets && !compressed;
    if (scales)
      for (Value &v : packed) {
        auto scaled = loom::AtenOp::create(
            builder, nameLoc(".scale"), TypeRange{v.getType()},
            builder.getStringAttr("aten::mul.Tensor"), ValueRange{v},
            builder.getArrayAttr(
                {OperandRefAttr::get(ctx, 0),
                 builder.getF64FloatAttr(1.0 / double(groupSize))}),
            builder.getDictionaryAttr({}), ArrayAttr());
        compression.push_back(scaled);
        v = scaled.getResult(0);
      }
    Coalesced c = startCoalesced(
        builder, packed, nameLoc, [&](Value buffer, Type future) {
          ReduceKind kind = scales ? ReduceKind::sum : ReduceKind::avg;
          if (compressed) {
            Operation *cast =
                createCast(builder, nameLoc(".compress"), buffer, compressed);
            auto divided = loom::AtenOp::create(
                builder, nameLoc(".compress"), cast->getResultTypes(),
                builder.getStringAttr("aten::div.Tensor"), cast->getResults(),
                builder.getArrayAttr({OperandRefAttr::get(ctx, 0),
                                      builder.getF64FloatAttr(groupSize)}),
                builder.getDictionaryAttr({}), ArrayAttr());
            compression = {cast, divided};
            buffer = divided.getResult(0);
            future = FutureType::get(ctx, cast->getResultTypes().front());
            kind = ReduceKind::sum;
          }
          return AllReduceStartOp::create(
              builder, nameLoc(""), future, buffer,
              FlatSymbolRefAttr::get(mesh.getSymNameAttr()), axesAttr,
              ReduceKindAttr::get(ctx, kind));
        });
    c.inserted.append(compression.begin(), compression.end());
    // A later group whose last value has the same producer goes after.
    anchors[def] = c.start;

    builder.setInsertionPoint(ret);
    SmallVector<Value> reduced = finishCoalesced(builder, c, nameLoc);
    for (Operation *op : c.inserted)
      tag(op, module, op->getLoc());
    return reduced;
  }

  /// Per producer of a bucket's last gradient (null: a block argument), the
  /// last op inserted after it.
  llvm::DenseMap<Operation *, Operation *> anchors;
};
} // namespace
