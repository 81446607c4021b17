//===- Options.cpp - loom-fsdp's options checked and resolved, its mesh ---===//

#include "Fsdp.h"

#include "mlir/IR/SymbolTable.h"

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

FailureOr<Config> fsdp::resolveOptions(func::FuncOp func,
                                       const LoomFsdpOptions &options) {
  MLIRContext *ctx = func.getContext();
  FailureOr<MeshLayout> mesh = resolveMesh(func, options.meshShape);
  if (failed(mesh))
    return failure();
  Config config;
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
  if (*raf == ReshardAfterForward::Group)
    factorShardAxis(config.mesh, k);
  config.reshardAfterBackward = options.reshardAfterBackward;
  config.unitPrefixes.assign(options.units.begin(), options.units.end());
  return config;
}

LogicalResult fsdp::declareMesh(ModuleOp module, func::FuncOp func,
                                const MeshLayout &mesh) {
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
