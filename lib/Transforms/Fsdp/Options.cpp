//===- Options.cpp - loom-fsdp's options checked and resolved, its mesh ---===//

#include "Fsdp.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace loom;
using namespace loom::fsdp;

static FailureOr<Type> parseDtype(MLIRContext *ctx, StringRef text) {
  if (text == "bf16" || text == "bfloat16")
    return Type(BFloat16Type::get(ctx));
  if (text == "f16" || text == "float16")
    return Type(Float16Type::get(ctx));
  if (text == "f32" || text == "float32")
    return Type(Float32Type::get(ctx));
  return failure();
}

/// A 1-D mesh `{S}` shards over "shard"; a 2-D mesh `{R, S}` is HSDP's
/// (replicate, shard).
static FailureOr<MeshLayout> resolveMesh(func::FuncOp func,
                                         ArrayRef<int64_t> meshShape) {
  Builder b(func.getContext());
  SmallVector<int64_t> shape(meshShape);
  if (shape.empty())
    return emitFsdpError(func)
           << "needs 'mesh-shape': {N} for FSDP or {R, S} for HSDP";
  if (shape.size() > 2)
    return emitFsdpError(func)
           << "mesh-shape has " << shape.size()
           << " dimensions; FSDP takes a 1-D mesh and HSDP a 2-D "
              "(replicate, shard) mesh";
  for (int64_t s : shape)
    if (s <= 0)
      return emitFsdpError(func) << "mesh-shape has a group of size " << s
                                 << "; every axis needs at least one rank";
  bool hsdp = shape.size() == 2;
  MeshLayout mesh;
  mesh.shape = shape;
  mesh.shardSize = shape.back();
  mesh.replicateSize = hsdp ? shape.front() : 1;
  mesh.name = hsdp ? "hsdp" : "dp";
  mesh.ref = FlatSymbolRefAttr::get(func.getContext(), mesh.name);
  mesh.shardAxes = b.getStrArrayAttr({"shard"});
  mesh.replicateAxes = b.getStrArrayAttr({"replicate"});
  mesh.dpAxes = hsdp ? b.getStrArrayAttr({"replicate", "shard"})
                     : b.getStrArrayAttr({"shard"});
  return mesh;
}

bool fsdp::isPipelinedStep(func::FuncOp func) {
  return func->hasAttr(LoomDialect::kProgramRanksAttrName);
}

/// Option `mesh`: one axis of a mesh declared before the pass (the
/// pipeline's [pp, dp] mesh) is the shard group; the others are not FSDP's.
static FailureOr<MeshLayout>
resolveExistingMesh(func::FuncOp func, const LoomFsdpOptions &options) {
  Builder b(func.getContext());
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(
      func, b.getStringAttr(options.meshName));
  if (!mesh)
    return emitFsdpError(func)
           << "mesh '" << options.meshName
           << "' names no loom.mesh; 'mesh' takes a mesh declared before "
              "this pass (loom-pipeline-schedule declares @pp)";
  if (options.shardAxes.size() != 1)
    return emitFsdpError(func)
           << "with mesh=" << options.meshName
           << ", shard-axes must name exactly one of its axes "
           << mesh.getAxes() << " (got " << options.shardAxes.size() << ")";
  std::optional<unsigned> axis = mesh.getAxisIndex(options.shardAxes.front());
  if (!axis)
    return emitFsdpError(func)
           << "shard-axes names '" << options.shardAxes.front()
           << "', which is not an axis of mesh @" << options.meshName << " "
           << mesh.getAxes();
  if (!options.meshShape.empty() &&
      ArrayRef<int64_t>(options.meshShape) != mesh.getShape())
    return emitFsdpError(func)
           << "mesh-shape disagrees with the shape of mesh @"
           << options.meshName << "; leave it out with 'mesh'";
  MeshLayout layout;
  layout.existing = true;
  layout.name = mesh.getSymName();
  layout.shape.assign(mesh.getShape().begin(), mesh.getShape().end());
  layout.ref = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  layout.shardAxes = b.getStrArrayAttr({options.shardAxes.front()});
  layout.replicateAxes = b.getStrArrayAttr({});
  layout.dpAxes = layout.shardAxes;
  layout.shardSize = mesh.getShape()[*axis];
  if (options.replicateAxes.empty())
    return layout;
  // HSDP on the existing mesh: replicas of the shards over one more axis,
  // before the shard axis (the data-parallel group is row-major over both).
  if (options.replicateAxes.size() != 1)
    return emitFsdpError(func)
           << "with mesh=" << options.meshName
           << ", replicate-axes names at most one of its axes (got "
           << options.replicateAxes.size() << ")";
  std::optional<unsigned> replicate =
      mesh.getAxisIndex(options.replicateAxes.front());
  if (!replicate || *replicate >= *axis)
    return emitFsdpError(func)
           << "replicate-axes names '" << options.replicateAxes.front()
           << "', which is not an axis of mesh @" << options.meshName << " "
           << mesh.getAxes() << " before the shard axis";
  layout.replicateAxes = b.getStrArrayAttr({options.replicateAxes.front()});
  layout.replicateSize = mesh.getShape()[*replicate];
  layout.dpAxes = b.getStrArrayAttr(
      {options.replicateAxes.front(), options.shardAxes.front()});
  return layout;
}

/// Reshard after forward, as _get_post_forward_mesh_info resolves it: an
/// integer k is false for 1, true for the shard size, groups of k between.
static FailureOr<ReshardAfterForward>
resolveReshardAfterForward(func::FuncOp func, StringRef text, int64_t shardSize,
                           int64_t &k) {
  if (text == "auto" || text == "none")
    return ReshardAfterForward::Auto;
  if (text == "true")
    return ReshardAfterForward::True;
  if (text == "false")
    return ReshardAfterForward::False;
  if (text.getAsInteger(10, k))
    return emitFsdpError(func) << "reshard-after-forward '" << text
                               << "' is not auto, true, false or an integer";
  if (k < 1 || k > shardSize || shardSize % k != 0)
    return emitFsdpError(func)
           << "reshard-after-forward=" << k << " must divide the shard size "
           << shardSize << " (1 <= k <= " << shardSize << ")";
  if (k == 1)
    return ReshardAfterForward::False;
  if (k == shardSize)
    return ReshardAfterForward::True;
  return ReshardAfterForward::Group;
}

/// Resharding to groups of k after forward: FSDP2's post-forward mesh is
/// mesh.view(-1, k), k consecutive ranks. The shard axis is factored into
/// (shard_outer, shard_inner) of sizes (S/k, k): the shard group is both
/// axes (the same S ranks in the same order), the post-forward group is
/// shard_inner.
static void factorShardAxis(MeshLayout &mesh, int64_t k) {
  Builder b(mesh.ref.getContext());
  bool hsdp = mesh.shape.size() == 2;
  mesh.postForwardSize = k;
  mesh.shape.back() = mesh.shardSize / k;
  mesh.shape.push_back(k);
  SmallVector<StringRef> axisNames;
  if (hsdp)
    axisNames.push_back("replicate");
  axisNames.append({"shard_outer", "shard_inner"});
  mesh.shardAxes = b.getStrArrayAttr({"shard_outer", "shard_inner"});
  mesh.postForwardAxes = b.getStrArrayAttr({"shard_inner"});
  mesh.dpAxes = b.getStrArrayAttr(axisNames);
}

FailureOr<UnitSetting> fsdp::parseUnitSetting(func::FuncOp func, StringRef text,
                                              StringRef pass) {
  using Key = UnitSetting::Key;
  UnitSetting setting;
  setting.text = text.str();
  auto [pattern, assignment] = text.split(':');
  auto [keyText, valueText] = assignment.split('=');
  if (pattern.empty() || keyText.empty() || valueText.empty())
    return emitFsdpError(func, pass) << "unit-settings entry '" << text
                                     << "' is not UNIT:KEY=VALUE (e.g. "
                                        "'layers.0:gradient-sync=every')";
  setting.pattern = pattern.str();
  std::optional<Key> key =
      llvm::StringSwitch<std::optional<Key>>(keyText)
          .Case("reshard-after-forward", Key::ReshardAfterForward)
          .Case("reshard-after-backward", Key::ReshardAfterBackward)
          .Case("gradient-sync", Key::GradientSync)
          .Case("all-reduce", Key::AllReduce)
          .Case("unshard-in-backward", Key::UnshardInBackward)
          .Default(std::nullopt);
  if (!key)
    return emitFsdpError(func, pass)
           << "unit-settings entry '" << text << "' sets '" << keyText
           << "', which is not one of reshard-after-forward, "
              "reshard-after-backward, gradient-sync, all-reduce, "
              "unshard-in-backward";
  setting.key = *key;
  bool schedule = *key == Key::GradientSync || *key == Key::AllReduce;
  if (schedule && (valueText == "every" || valueText == "last")) {
    setting.value = valueText == "every";
    return setting;
  }
  if (!schedule && (valueText == "true" || valueText == "false")) {
    setting.value = valueText == "true";
    return setting;
  }
  if (*key == Key::ReshardAfterForward && valueText == "auto")
    return setting;
  return emitFsdpError(func, pass)
         << "unit-settings entry '" << text << "': " << keyText << " takes "
         << (schedule ? "last or every"
             : *key == Key::ReshardAfterForward
                 ? "auto, true or false (an integer applies to the whole "
                   "mesh: give it as reshard-after-forward)"
                 : "true or false")
         << ", not '" << valueText << "'";
}

static LogicalResult resolveUnitSettings(func::FuncOp func,
                                         const LoomFsdpOptions &options,
                                         Config &config) {
  if (options.unitSettings.empty())
    return success();
  if (config.pipelined)
    return emitFsdpError(func)
           << "unit-settings on a pipelined step: the schedule's UNSHARD "
              "and REDUCE_GRAD decide when every stage gathers and reduces";
  bool hsdp = llvm::any_of(config.mesh.dpAxes, [](Attribute axis) {
    return cast<StringAttr>(axis).getValue() == "replicate";
  });
  for (const std::string &text : options.unitSettings) {
    FailureOr<UnitSetting> setting = parseUnitSetting(func, text);
    if (failed(setting))
      return failure();
    if (setting->key == UnitSetting::Key::AllReduce && !hsdp)
      return emitFsdpError(func)
             << "unit-settings entry '" << text
             << "': all-reduce needs HSDP's 2-D (replicate, shard) mesh; "
                "on this mesh gradients are only reduce-scattered";
    if (setting->key == UnitSetting::Key::ReshardAfterForward &&
        config.reshardAfterForward == ReshardAfterForward::Group)
      return emitFsdpError(func) << "unit-settings entry '" << text
                                 << "' conflicts with reshard-after-forward="
                                 << options.reshardAfterForward
                                 << ": groups of k ranks apply to every unit";
    config.unitSettings.push_back(std::move(*setting));
  }
  return success();
}

FailureOr<Config> fsdp::resolveOptions(func::FuncOp func,
                                       const LoomFsdpOptions &options) {
  MLIRContext *ctx = func.getContext();
  Config config;
  config.pipelined = isPipelinedStep(func);
  if (config.pipelined && options.meshName.empty())
    return emitFsdpError(func)
           << "is one program of a pipelined step; shard over the data-"
              "parallel axis of its mesh with mesh=pp shard-axes=dp";
  if (options.meshName.empty() && !options.shardAxes.empty())
    return emitFsdpError(func) << "shard-axes needs 'mesh'";
  FailureOr<MeshLayout> mesh = options.meshName.empty()
                                   ? resolveMesh(func, options.meshShape)
                                   : resolveExistingMesh(func, options);
  if (failed(mesh))
    return failure();
  config.mesh = std::move(*mesh);

  if (!options.paramDtype.empty()) {
    FailureOr<Type> t = parseDtype(ctx, options.paramDtype);
    if (failed(t))
      return emitFsdpError(func) << "param-dtype '" << options.paramDtype
                                 << "' is not one of bf16, f16, f32";
    config.computeDtype = *t;
  }
  if (!options.reduceDtype.empty()) {
    FailureOr<Type> t = parseDtype(ctx, options.reduceDtype);
    if (failed(t))
      return emitFsdpError(func) << "reduce-dtype '" << options.reduceDtype
                                 << "' is not one of bf16, f16, f32";
    config.gradReduceDtype = *t;
  }
  if (options.gradientDivideFactor < 0)
    return emitFsdpError(func)
           << "gradient-divide-factor "
           << loom::detail::formatF64Parameter(options.gradientDivideFactor)
           << " is negative";
  config.gradientDivideFactor = options.gradientDivideFactor;

  int64_t k = 0;
  FailureOr<ReshardAfterForward> raf = resolveReshardAfterForward(
      func, options.reshardAfterForward, config.mesh.shardSize, k);
  if (failed(raf))
    return failure();
  config.reshardAfterForward = *raf;
  config.reshardAfterBackward = options.reshardAfterBackward;
  if (config.pipelined) {
    // The schedule's UNSHARD keeps a stage unsharded from its first
    // forward to REDUCE_GRAD (PyTorch sets reshard_after_backward False on
    // every microbatch backward; torchtitan reshard_after_forward False).
    if (*raf != ReshardAfterForward::Auto && *raf != ReshardAfterForward::False)
      return emitFsdpError(func)
             << "reshard-after-forward=" << options.reshardAfterForward
             << " on a pipelined step: a stage stays unsharded from its "
                "first forward to REDUCE_GRAD; use auto or false";
    config.reshardAfterForward = ReshardAfterForward::False;
    config.reshardAfterBackward = false;
  }
  if (*raf == ReshardAfterForward::Group) {
    if (config.mesh.existing)
      return emitFsdpError(func)
             << "reshard-after-forward=" << options.reshardAfterForward
             << " factors the shard axis, which an existing mesh ('mesh') "
                "cannot change";
    factorShardAxis(config.mesh, k);
  }
  config.unitPrefixes.assign(options.units.begin(), options.units.end());
  for (StringRef text : options.shardDims) {
    auto [pattern, dimText] = text.rsplit(':');
    int64_t dim = -1;
    if (pattern.empty() || dimText.empty() ||
        (dimText != "largest" && (dimText.getAsInteger(10, dim) || dim < 0)))
      return emitFsdpError(func)
             << "shard-dims entry '" << text
             << "' is not PARAM:DIM with DIM a dim or 'largest' (e.g. "
                "'*:largest', 'layers.0.attn.wq.weight:1')";
    if (config.pipelined)
      return emitFsdpError(func)
             << "shard-dims on a pipelined step is not supported";
    config.shardDims.push_back({pattern.str(), dim});
  }
  if (failed(resolveUnitSettings(func, options, config)))
    return failure();
  return config;
}

LogicalResult fsdp::declareMesh(ModuleOp module, func::FuncOp func,
                                const MeshLayout &mesh) {
  if (mesh.existing)
    return success();
  SymbolTable symbols(module);
  if (auto existing = symbols.lookup<MeshOp>(mesh.name)) {
    if (existing.getShape() != ArrayRef<int64_t>(mesh.shape) ||
        existing.getAxes() != mesh.dpAxes)
      return existing.emitOpError("--loom-fsdp: mesh @")
             << mesh.name << " exists with another shape or axes";
    return success();
  }
  if (symbols.lookup(mesh.name))
    return emitFsdpError(func)
           << "symbol @" << mesh.name << " exists and is not a mesh";
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  MeshOp::create(b, func.getLoc(), mesh.name, mesh.shape, mesh.dpAxes);
  return success();
}
