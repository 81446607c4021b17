//===- CostModel.h - Device specs and the time of ops and collectives -----===//
//
// A device is described by data (`data/devices/<name>.json`), not code: peak
// FLOP/s per precision, memory bandwidth, intra- and inter-node links. The
// cost model turns that into seconds: a roofline for each op on the compute
// stream and an alpha-beta model (NCCL's ring and tree algorithms) for each
// collective over a mesh group, placed on nodes. See docs/simulator.md.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_COSTMODEL_H
#define LOOM_ANALYSIS_COSTMODEL_H

#include "loom/Analysis/OpTimes.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <optional>
#include <string>

namespace loom {

/// The arithmetic precision an op runs at, which picks the peak FLOP/s.
/// `tf32` is fp32 data on tensor cores (matmuls only, when allowed).
enum class Precision { fp32, tf32, bf16, fp16 };
llvm::StringRef stringifyPrecision(Precision p);

/// One kind of link between devices. `bandwidth` is bytes/s one device can
/// send (and, at the same time, receive) over it, unidirectional; `latency`
/// is the alpha of one message hop in seconds.
struct LinkSpec {
  double bandwidth = 0;
  double latency = 0;
};

/// One device kind, as read from a spec file. The JSON schema (every field
/// required unless marked optional; units in the names):
///
/// ```json
/// {
///   "name": "H100 SXM5 80GB",
///   "source": "where each number comes from",
///   "peak_flops": {"fp32": 67e12, "tf32": 494.7e12, "bf16": 989.4e12,
///                  "fp16": 989.4e12},
///   "memory_bandwidth": 3.35e12,
///   "intra_node": {"bandwidth": 450e9, "latency": 3e-6},
///   "inter_node": {"bandwidth": 50e9, "latency": 10e-6},
///   "devices_per_node": 8,
///   "efficiency": {"compute": 0.7, "memory": 0.8, "link": 0.8},
///   "op_overhead": 4e-6,
///   "view_overhead": 0       // optional, default 0
/// }
/// ```
///
/// FLOP/s are dense (no sparsity), bandwidths bytes/s, times seconds. The
/// efficiency factors scale the peaks to what kernels reach (fractions in
/// (0, 1]); `op_overhead` is paid by every op that launches a kernel,
/// `view_overhead` by ops that only make a view (no kernel, no traffic).
struct DeviceSpec {
  std::string name;
  std::string source;
  double peakFp32 = 0, peakTf32 = 0, peakBf16 = 0, peakFp16 = 0;
  double memoryBandwidth = 0;
  LinkSpec intraNode, interNode;
  int64_t devicesPerNode = 1;
  double computeEfficiency = 1, memoryEfficiency = 1, linkEfficiency = 1;
  double opOverhead = 0;
  double viewOverhead = 0;
  /// The file the spec was read from (empty when parsed from a string).
  std::string path;

  /// Peak FLOP/s at `p`.
  double peakFlops(Precision p) const;

  /// Parses a spec from JSON text. Errors name `fileName` and where in it:
  /// `file:LINE:COL: ...` for syntax, `file: at peak_flops.bf16: ...` for a
  /// missing, mistyped or out-of-range field.
  static llvm::Expected<DeviceSpec> parse(llvm::StringRef json,
                                          llvm::StringRef fileName);
  /// Reads a spec file.
  static llvm::Expected<DeviceSpec> loadFile(llvm::StringRef path);
  /// `nameOrPath` is either a path (it contains a '/' or ends in `.json`)
  /// or a name looked up as `<dir>/<name>.json` in `searchDir` when given,
  /// else in the installed `data/devices` folder (getDefaultDeviceDir()).
  /// An unknown name is an error that lists the known ones.
  static llvm::Expected<DeviceSpec> load(llvm::StringRef nameOrPath,
                                         llvm::StringRef searchDir = "");

  llvm::json::Value toJSON() const;
};

/// Parses JSON `text` read from `fileName`; a syntax error names the file,
/// line and column (`file:LINE:COL: invalid JSON: ...`).
llvm::Expected<llvm::json::Value> parseJsonText(llvm::StringRef text,
                                                llvm::StringRef fileName);

/// The folder of the device specs Loom ships (the source tree's
/// `data/devices`, overridden by the environment variable
/// `LOOM_DEVICE_DIR`).
std::string getDefaultDeviceDir();
/// Names of the specs in `dir` (file stems), sorted.
llvm::SmallVector<std::string> listDeviceSpecs(llvm::StringRef dir);

/// How many nodes the job has and how many ranks each runs. Ranks are
/// numbered row-major over the mesh and fill node 0 first (rank r is on
/// node r / devicesPerNode), as torchrun assigns them.
struct Topology {
  int64_t nodes = 1;
  int64_t devicesPerNode = 1;
  int64_t numDevices() const { return nodes * devicesPerNode; }
};

/// Where the ranks of one collective's group sit.
struct GroupPlacement {
  /// Ranks in the group.
  int64_t size = 1;
  /// The most nodes any group of this mesh axis set spans (1: the group is
  /// inside one node and uses the intra-node link).
  int64_t nodesSpanned = 1;
};

/// The placement of the groups of `axes` (indices into `meshShape`) over
/// `topology`: the worst group over the mesh. Fails (with a message in
/// `error`) when the mesh has more ranks than the topology has devices.
std::optional<GroupPlacement> placeGroup(llvm::ArrayRef<int64_t> meshShape,
                                         llvm::ArrayRef<unsigned> axes,
                                         const Topology &topology,
                                         std::string *error = nullptr);

/// NCCL's algorithms. `ring` is bandwidth-optimal; `tree` (NCCL's double
/// binary tree) has log-depth latency and is used only for all-reduce and
/// broadcast (NCCL has no tree all-gather or reduce-scatter: those fall back
/// to ring). `autoSelect` takes the faster of the two, as NCCL's tuner does.
enum class CollectiveAlgorithm { ring, tree, autoSelect };
std::optional<CollectiveAlgorithm> parseCollectiveAlgorithm(llvm::StringRef s);

/// The alpha-beta formulas, for a group of `p` ranks over a link of latency
/// `alpha` seconds and `beta` bytes/s (already scaled by efficiency).
/// `bytes` is the full buffer: the all-gather's output, the
/// reduce-scatter's input, the all-reduce's and broadcast's tensor.
///
/// ring all-gather / reduce-scatter: (p-1) * alpha + (p-1)/p * bytes / beta
/// ring all-reduce:  2(p-1) * alpha + 2(p-1)/p * bytes / beta
/// ring broadcast (pipelined chain): (p-1) * alpha + bytes / beta
/// tree all-reduce:  2 ceil(log2 p) * alpha + 2 * bytes / beta
/// tree broadcast:   ceil(log2 p) * alpha + bytes / beta
/// send/recv: alpha + bytes / beta.
/// A group of one rank costs 0.
double alphaBetaTime(CollectiveKind kind, CollectiveAlgorithm algorithm,
                     int64_t p, double bytes, double alpha, double beta);

/// The cost of one op on the compute stream.
struct OpCost {
  double seconds = 0;
  /// FLOPs (torch.utils.flop_counter's count) and bytes read plus written.
  double flops = 0, bytes = 0;
  Precision precision = Precision::fp32;
  /// Whether FLOPs (not bytes) set the roofline time.
  bool computeBound = false;
  /// An aliasing view: no kernel, no traffic.
  bool isView = false;
  /// `seconds` is the op's measured time (CostModelConfig::opTimes), not the
  /// roofline's.
  bool measured = false;
};

/// The cost of one collective.
struct CollectiveCost {
  double seconds = 0;
  CollectiveKind kind = CollectiveKind::allReduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  GroupPlacement placement;
  double bytes = 0;
  /// Whether the group spans nodes (inter-node link).
  bool interNode = false;
};

struct CostModelOptions {
  Topology topology;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::autoSelect;
  /// Run fp32 matmuls and convolutions at the tf32 peak
  /// (`torch.backends.cuda.matmul.allow_tf32`).
  bool allowTf32 = false;
};

/// Seconds for ops and collectives on one device kind.
class CostModel {
public:
  CostModel(DeviceSpec spec, CostModelOptions options = {});

  const DeviceSpec &getSpec() const { return spec; }
  const CostModelOptions &getOptions() const { return options; }

  /// Measured times that replace the roofline of the ATen ops they know
  /// (null: the roofline prices every op).
  void setMeasuredOpTimes(std::shared_ptr<const MeasuredOpTimes> times) {
    measured = std::move(times);
  }
  const MeasuredOpTimes *getMeasuredOpTimes() const { return measured.get(); }

  /// The roofline: max(flops / (peak(p) * eff_compute),
  ///                   bytes / (memory_bandwidth * eff_memory)) + op_overhead.
  double rooflineTime(double flops, double bytes, Precision p) const;

  /// The cost of a compute-stream op: `loom.aten` (FLOPs from
  /// countFlops(), bytes = its operands plus results; view ops cost
  /// view_overhead only; an op the measured times know costs its median
  /// measured time instead) and `loom.optimizer_update` (the memory traffic and
  /// kernel launches of PyTorch's single-tensor SGD/Adam/AdamW) and
  /// `loom.recompute` (the sum of its body's ops: the recompute time; the
  /// precision and bound of its longest op). Other ops (return, wait,
  /// collective starts) cost 0 here.
  OpCost opCost(mlir::Operation *op) const;

  /// The time of one collective of `bytes` over a group placed as `group`:
  /// the intra-node link when the group is inside a node, else the
  /// inter-node link (the bottleneck), with the configured algorithm.
  CollectiveCost collectiveCost(CollectiveKind kind, double bytes,
                                const GroupPlacement &group) const;

  /// The cost of a `loom.*_start` op: its kind, bytes (see alphaBetaTime)
  /// and group resolved through the mesh. Fails with a located error when
  /// the mesh does not resolve or does not fit the topology.
  mlir::FailureOr<CollectiveCost>
  collectiveCost(mlir::Operation *start,
                 mlir::SymbolTableCollection &symbols) const;

private:
  /// The roofline cost of a `loom.aten` op.
  OpCost atenCost(AtenOp aten) const;

  DeviceSpec spec;
  CostModelOptions options;
  std::shared_ptr<const MeasuredOpTimes> measured;
};

/// The cost-model options of the passes that build one (`loom-simulate`,
/// `loom-schedule`), as given on the command line.
struct CostModelConfig {
  /// A device name (in `deviceDir`, else the installed specs) or a path.
  std::string device;
  std::string deviceDir;
  /// "ring", "tree" or "auto".
  std::string algorithm = "auto";
  int64_t nodes = 1;
  /// 0: the spec's devices_per_node.
  int64_t devicesPerNode = 0;
  bool tf32 = false;
  /// A `loom-run --trace` file whose ATen times replace the roofline (empty:
  /// none).
  std::string opTimes;
};

/// Loads the device spec of `config` and checks the options against it
/// (a known algorithm, positive nodes, no more devices per node than the
/// device has), and the measured op times when given, which must know at
/// least one ATen op of `scope` (the module or step the pass prices): a
/// trace of another step is an error, not a silent fall-back to the
/// roofline. Errors are reported at `scope`, prefixed with `passName`.
mlir::FailureOr<CostModel> buildCostModel(const CostModelConfig &config,
                                          mlir::Operation *scope,
                                          llvm::StringRef passName);

} // namespace loom

#endif // LOOM_ANALYSIS_COSTMODEL_H
