//===- Fsdp.h - State shared by the steps of loom-fsdp ----------*- C++ -*-===//
//
// Private to lib/Transforms/Fsdp/. The pass runs as a sequence of steps, one
// file each, which FsdpPass.cpp calls in order: resolve the options and
// declare the mesh (Options.cpp), read the parameters and form the units
// (Units.cpp), then per microbatch (Microbatches.cpp) gather before forward
// use (Gather.cpp), gather again before backward and reshard after it
// (Reshard.cpp), per call of a module called more than once (Calls.cpp);
// then cast to the compute dtype (MixedPrecision.cpp) and reduce the
// gradients (ReduceGradients.cpp). OpTagger.cpp builds the ops.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_FSDP_FSDP_H
#define LOOM_LIB_TRANSFORMS_FSDP_FSDP_H

#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <set>
#include <string>
#include <tuple>

namespace loom::fsdp {

using namespace mlir;

//===----------------------------------------------------------------------===//
// Resolved options (Options.cpp)
//===----------------------------------------------------------------------===//

/// reshard-after-forward, as FSDP2's _get_post_forward_mesh_info resolves it.
enum class ReshardAfterForward { Auto, True, False, Group };

/// The mesh the options describe and the axes each collective runs over.
struct MeshLayout {
  /// "dp" for FSDP, "hsdp" for HSDP.
  StringRef name;
  SmallVector<int64_t> shape;
  FlatSymbolRefAttr ref;
  ArrayAttr shardAxes, replicateAxes, dpAxes, postForwardAxes;
  int64_t shardSize = 1, replicateSize = 1;
  /// reshard-after-forward=k with 1 < k < shardSize: the post-forward
  /// group size (0 otherwise).
  int64_t postForwardSize = 0;
  /// Whether the mesh was declared before the pass (option `mesh`).
  bool existing = false;
};

/// One entry of `unit-settings`: a setting for the units whose label
/// matches `pattern` (a glob; "<root>" names the root).
struct UnitSetting {
  enum class Key {
    ReshardAfterForward,
    ReshardAfterBackward,
    GradientSync,
    AllReduce,
    UnshardInBackward
  };
  std::string text;
  std::string pattern;
  Key key;
  /// The value: true/false, "every" as true and "last" as false;
  /// reshard-after-forward=auto is none.
  std::optional<bool> value;
};

/// The pass options, checked and resolved once per step function.
struct Config {
  /// The pass whose options these are, as its errors name it:
  /// loom-replicate's grouping=units forms its units with Units.cpp.
  StringRef pass = "loom-fsdp";
  MeshLayout mesh;
  ReshardAfterForward reshardAfterForward = ReshardAfterForward::Auto;
  bool reshardAfterBackward = true;
  /// Dtype of the gather and compute, and of the gradient reduction; null
  /// keeps the parameter's and the gradient's.
  Type computeDtype, gradReduceDtype;
  /// 0: the data-parallel size.
  double gradientDivideFactor = 0;
  /// The unit prefixes the user listed (empty: the default units).
  SmallVector<std::string> unitPrefixes;
  /// `shard-dims`, in the order given: a parameter-name glob and its dim
  /// (-1: the largest).
  SmallVector<std::pair<std::string, int64_t>> shardDims;
  /// `unit-settings`, in the order given (a later entry wins).
  SmallVector<UnitSetting> unitSettings;
  /// An MPMD step of loom-pipeline-schedule: one pipeline rank's stages,
  /// unsharded once per step and reduced once after REDUCE_GRAD.
  bool pipelined = false;
};

/// Whether `func` is one program of a pipelined (MPMD) step.
bool isPipelinedStep(func::FuncOp func);

/// An error of the pass, located at the step function `func`; `pass` names
/// another pass that runs these steps (loom-replicate forms units with them).
inline InFlightDiagnostic emitFsdpError(func::FuncOp func,
                                        StringRef pass = "loom-fsdp") {
  return func.emitOpError("--") << pass << ": ";
}

/// Parses one `unit-settings` entry, `UNIT:KEY=VALUE`; errors are located at
/// `func` and name `pass`.
FailureOr<UnitSetting> parseUnitSetting(func::FuncOp func, StringRef text,
                                        StringRef pass = "loom-fsdp");

/// Checks the options against `func` (errors are located at it).
FailureOr<Config> resolveOptions(func::FuncOp func,
                                 const LoomFsdpOptions &options);

/// Declares the mesh at the start of `module`, or checks that the one
/// already there has the layout's shape and axes.
LogicalResult declareMesh(ModuleOp module, func::FuncOp func,
                          const MeshLayout &mesh);

//===----------------------------------------------------------------------===//
// Parameters, units and microbatches (Units.cpp, Microbatches.cpp)
//===----------------------------------------------------------------------===//

/// One parameter argument and its sharding.
struct ParamInfo {
  unsigned argIndex;
  StringRef name;
  RankedTensorType fullType;
  RankedTensorType localType;
  /// Elements of the local shard (rows per rank times the row size).
  int64_t localNumel = 0;
  /// The dim sharded over the ranks (FSDP2's Shard(d)).
  int64_t shardDim = 0;
  unsigned unit = 0;
  /// Result index of the parameter's gradient, if it has one.
  std::optional<unsigned> gradResult;
};

/// One fully_shard unit: a parameter group gathered and reduced together.
struct Unit {
  std::string prefix;
  bool isRoot = false;
  bool reshard = false;
  /// Keep the parameters unsharded from one microbatch's backward to the
  /// next forward (FSDP2's set_reshard_after_backward(is_last)).
  bool keepAfterBackward = false;
  /// Reduce the gradients of every microbatch (a unit not given
  /// set_requires_gradient_sync(is_last)) instead of once on the
  /// accumulated ones.
  bool syncEveryMicrobatch = false;
  /// With syncEveryMicrobatch under HSDP: all-reduce every microbatch's
  /// reduce-scatter output too (false: set_requires_all_reduce(is_last),
  /// the outputs are summed and all-reduced once after the last).
  bool allReduceEveryMicrobatch = false;
  /// Gather again in the pre-backward hook (FSDP2's
  /// set_unshard_in_backward).
  bool unshardInBackward = true;
  /// Indices into the parameter list, in argument order.
  SmallVector<unsigned> params;

  /// The unit as op locations name it.
  std::string label() const { return isRoot ? "<root>" : prefix; }
};

/// The call of `unit`'s module `op` ran in (`loom.calls`; 0 for a module
/// called once, and for the root, which a step calls once).
inline int64_t callOf(const Unit &unit, Operation *op) {
  return unit.isRoot ? 0 : getCallIndex(op, unit.prefix);
}

/// The entries of `op`'s `loom.calls` for `unit`'s module and the modules
/// around it: the calls an op inserted for the unit ran in (null if none).
DictionaryAttr getUnitCalls(const Unit &unit, Operation *op);

/// The microbatches loom-accumulate-gradients tagged the step with: FSDP2
/// unshards and reshards per forward and backward, so every microbatch is a
/// segment gathered on its own.
struct Microbatches {
  bool tagged = false;
  int64_t count = 1;

  static Microbatches find(Block &body);
  /// The microbatch of `op`: 0 in an untagged step, none for the untagged
  /// ops of a tagged step (the accumulation).
  std::optional<int64_t> of(Operation *op) const;
};

//===----------------------------------------------------------------------===//
// Building ops (OpTagger.cpp)
//===----------------------------------------------------------------------===//

/// Builds the ops the pass inserts, each stamped with the module path and
/// phase of the FSDP2 hook that runs it, so that later passes (prefetch,
/// scheduling) group them with the unit's own ops.
struct OpTagger {
  StringAttr module;
  Phase phase = Phase::forward;
  /// The `loom.calls` of the module call a gather serves (null outside a
  /// per-call gather), so that loom-prefetch finds each call's hooks.
  DictionaryAttr calls;

  void tag(Operation *op) const;
  Value aten(OpBuilder &b, Location loc, StringRef kernel, Type result,
             ValueRange inputs, ArrayRef<Attribute> args,
             DictionaryAttr kwargs = {}) const;
  Value view(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape,
             StringRef kernel = "aten::view.default") const;
  /// `v` in `elementType` (unchanged when null or already so).
  Value castTo(OpBuilder &b, Location loc, Value v, Type elementType) const;
  SmallVector<Value> splitWithSizes(OpBuilder &b, Location loc, Value v,
                                    ArrayRef<int64_t> sizes, int64_t dim) const;
  /// Tags `start`, a collective's start op, and returns its result through
  /// a tagged wait right after it.
  Value finishCollective(OpBuilder &b, Location loc, Operation *start,
                         Type type) const;
};

//===----------------------------------------------------------------------===//
// The step being sharded
//===----------------------------------------------------------------------===//

/// What the steps of the pass share about one step function.
struct ShardingState {
  ShardingState(func::FuncOp func, const Config &config)
      : func(func), config(config) {}

  func::FuncOp func;
  const Config &config;
  SmallVector<ParamInfo> params;
  /// The listed units, then the root.
  SmallVector<Unit> units;
  /// Each parameter's direct uses, collected before anything changes.
  SmallVector<SmallVector<OpOperand *>> uses;
  Microbatches microbatches;
  /// The unsharded parameters the gathers produce: they are in the compute
  /// dtype already, so mixed precision leaves their ops alone.
  DenseSet<Value> gatheredValues;
  OpTagger tagger;
  /// (unit, microbatch, call) of each call whose forward inputs require
  /// gradients: FSDP2 runs the unit's post-backward hook (and reshards)
  /// when that call's backward ends (Calls.cpp).
  std::set<std::tuple<unsigned, int64_t, int64_t>> postBackwardCalls;

  Block &body() { return func.getBody().front(); }
  const MeshLayout &mesh() const { return config.mesh; }
  unsigned rootUnit() const { return units.size() - 1; }
  /// An error at the step function, naming the pass that runs the step.
  InFlightDiagnostic emitError() const {
    return emitFsdpError(func, config.pass);
  }
  /// The unit whose prefix is the longest one `path` lies under.
  unsigned unitOfPath(StringRef path) const;
  /// Whether parameter `p`'s unit reshards after forward.
  bool reshardsAfterForward(unsigned p) const {
    return units[params[p].unit].reshard;
  }
};

/// Fills `postBackwardCalls` from the step as captured (Calls.cpp).
void findPostBackwardCalls(ShardingState &s);

/// Reads the parameters and their gradient results (Units.cpp).
LogicalResult collectParams(ShardingState &s);
/// Forms the units, assigns every parameter to one and decides which
/// reshard after forward (Units.cpp).
LogicalResult formUnits(ShardingState &s);

//===----------------------------------------------------------------------===//
// Gathering and resharding (Gather.cpp, Reshard.cpp, Microbatches.cpp)
//===----------------------------------------------------------------------===//

/// What stays unsharded from one FSDP2 hook to the next, per unit: its
/// unsharded parameters and the gathered buffer they come from.
struct Unsharded {
  SmallVector<SmallVector<Value>> params;
  SmallVector<Value> flat;
};

/// What one microbatch's forward gathered.
struct ForwardGathers {
  /// Per parameter, the unsharded value its forward uses read (null if the
  /// microbatch does not use it).
  SmallVector<Value> full;
  /// Per unit, its post-forward shard (reshard-after-forward=k only).
  SmallVector<Value> postForward;
  /// The unsharded values a later call of a module called more than once
  /// reads (gathered again for that call), with their parameter.
  SmallVector<std::pair<Value, unsigned>> laterCalls;
};

/// What one microbatch's backward gathered again.
struct BackwardGathers {
  SmallVector<Value> full;    // per parameter
  SmallVector<Value> flat;    // per unit
  SmallVector<bool> gathered; // per unit
};

/// Builds the all-gather of `unit` at the builder's insertion point and
/// returns one full (unpadded) tensor per parameter of the unit: over the
/// shard axes from the parameters' shards, or, given the unit's
/// post-forward shard `postForward`, over the post-forward axes from it.
/// `flat` receives the gathered buffer (the [G, N] matrix, flattened).
SmallVector<Value> buildGather(ShardingState &s, OpBuilder &b, Location loc,
                               const Unit &unit, Value postForward,
                               Value &flat);

/// All-gathers each unit before its first forward use in microbatch `mb`
/// (unless it is still unsharded) and reshards it after forward; a unit
/// that reshards after forward is gathered again before each later call of
/// its module.
ForwardGathers gatherForForward(ShardingState &s, int64_t mb,
                                Unsharded &unsharded);

/// Gathers again before the backward of microbatch `mb` (whose ops, in
/// order, are `ops`) the units that resharded after forward, recomputing
/// from them the forward values their backward reads, and again before the
/// backward of a module's next call when the previous call's post-backward
/// hook resharded it; fails (with an error at the op) when a backward op
/// needs a unit that does not unshard in backward.
FailureOr<BackwardGathers> gatherForBackward(ShardingState &s, int64_t mb,
                                             ArrayRef<Operation *> ops,
                                             const ForwardGathers &forward);

/// Reshards after the backward of microbatch `mb`, or keeps units unsharded
/// for the next microbatch under reshard-after-backward=false.
void reshardAfterBackward(ShardingState &s, int64_t mb,
                          const BackwardGathers &backward,
                          Unsharded &unsharded);

/// Runs the three above for every microbatch in order; fails when a
/// backward op reads a parameter of a unit with unshard-in-backward=false.
LogicalResult unshardPerMicrobatch(ShardingState &s);

//===----------------------------------------------------------------------===//
// Mixed precision and gradient reduction
//===----------------------------------------------------------------------===//

/// Runs the step in the compute dtype as FSDP2's MixedPrecisionPolicy does
/// (MixedPrecision.cpp): with param-dtype the ops, with param-dtype or
/// reduce-dtype the gradients' accumulation (accumulateInReduceDtype) and
/// the dtype a gradient crosses between pipeline ranks in.
void applyMixedPrecision(ShardingState &s);

/// FSDP2 keeps a unit's gradients of unsynced microbatches in the reduce
/// dtype where that differs from theirs (to_accumulated_grad_if_needed
/// casts the first, accumulate_unsharded_grad_if_needed adds each later
/// one into it): the accumulation of every unit reduced once per step is
/// rebuilt so (ReduceGradients.cpp).
void accumulateInReduceDtype(ShardingState &s);

/// The accumulated gradient `grad` as loom-accumulate-gradients builds it,
/// `div(add(...add(g0, g1)..., gM-1), M)` out of untagged ops: fills
/// `terms` with g0..gM-1 and `chain` with the adds and the division; fails
/// on any other shape.
LogicalResult splitAccumulated(const Microbatches &microbatches, Value grad,
                               SmallVectorImpl<Value> &terms,
                               SmallVectorImpl<Operation *> &chain);

/// Reduce-scatters (and under HSDP all-reduces) each unit's gradients after
/// the last of them, or after each microbatch's for a unit that syncs
/// every microbatch; the step returns the local shards instead
/// (ReduceGradients.cpp).
LogicalResult reduceGradients(ShardingState &s);

//===----------------------------------------------------------------------===//
// Local queries (Units.cpp)
//===----------------------------------------------------------------------===//

/// Whether a forward op may be recomputed in backward from re-gathered
/// parameters: an ATen op with operands and no regions that draws no random
/// numbers.
bool isRecomputable(Operation *op);

} // namespace loom::fsdp

#endif // LOOM_LIB_TRANSFORMS_FSDP_FSDP_H
