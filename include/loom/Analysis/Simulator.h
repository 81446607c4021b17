//===- Simulator.h - Replay a scheduled step on compute and comm streams --===//
//
// The simulator replays one step function (loom dialect, after the
// distribution passes: `loom.*_start` ops returning futures, `loom.wait`)
// on one compute stream and one or more communication streams, with op and
// collective times from a CostModel, and reports the step time, how much
// communication the compute stream waits for, and the peak memory. It can
// replay the ops in their block order or in any other topological order, so
// a scheduler can compare candidate orders without rewriting the IR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_SIMULATOR_H
#define LOOM_ANALYSIS_SIMULATOR_H

#include "loom/Analysis/CostModel.h"
#include "loom/Analysis/PeakMemory.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <array>
#include <string>
#include <vector>

namespace loom {

struct SimOptions {
  /// Communication streams: 1 puts every collective on one `comm` stream
  /// (DDP, the CPU runtime); 2 gives all-gathers (and broadcasts, recvs)
  /// `comm.all_gather` and reduce-scatters, all-reduces and sends
  /// `comm.reduce_scatter`, as FSDP2's separate streams; 3 also gives
  /// all-reduces (HSDP's replicate reduction) their own `comm.all_reduce`.
  unsigned commStreams = 2;
  /// Keep one TimelineEvent per op (for toChromeTrace()).
  bool recordTimeline = false;
  /// Compute the peak memory of the order (PeakMemory's liveness sweep).
  bool computeMemory = true;
};

/// One op's interval on one stream.
struct TimelineEvent {
  mlir::Operation *op = nullptr;
  /// Index into SimulationResult::streams.
  unsigned stream = 0;
  double start = 0, end = 0;
  /// For a wait: how long it blocked the compute stream.
  double blocked = 0;
  /// The op's FLOPs and bytes (a collective's: its buffer), for the trace.
  double flops = 0, bytes = 0;
  /// For an op of a recompute body: the `loom.recompute` it runs in (each
  /// body op is its own event, in backward).
  mlir::Operation *region = nullptr;
};

struct SimulationResult {
  /// When the last stream finishes (seconds).
  double stepTime = 0;
  /// Busy time of the compute stream (sum of op costs).
  double computeTime = 0;
  /// Sum of the collectives' times (over all comm streams).
  double commTime = 0;
  /// Time the compute stream is blocked in `loom.wait` for a collective
  /// that has not finished: the communication not hidden behind compute.
  double exposedCommTime = 0;
  /// Op and collective counts (the ops of a recompute body count one by
  /// one; the region itself does not).
  int64_t numOps = 0, numCollectives = 0;
  /// Ops priced by measured times (CostModelConfig::opTimes) rather than the
  /// roofline.
  int64_t numMeasuredOps = 0;
  /// The part of computeTime spent re-running forward ops in
  /// `loom.recompute` regions, with their FLOPs, ops and regions.
  double recomputeTime = 0, recomputeFlops = 0;
  int64_t numRecomputeOps = 0, numRecomputeRegions = 0;
  /// Per collective kind (indexed by CollectiveKind): how many, their time,
  /// and the part of it the compute stream waited for.
  struct KindStats {
    int64_t count = 0;
    double time = 0, exposed = 0;
  };
  std::array<KindStats, 5> byKind{};
  /// Stream names, compute first: "compute", then "comm" or
  /// "comm.all_gather", "comm.reduce_scatter", "comm.all_reduce".
  llvm::SmallVector<std::string> streams;
  /// Busy seconds per stream (same indices as `streams`).
  llvm::SmallVector<double> streamBusy;
  /// Predicted peak memory per rank in the replayed order (unset when
  /// SimOptions::computeMemory is false).
  std::optional<PeakMemory> memory;
  /// The timeline, in issue order (only with SimOptions::recordTimeline).
  std::vector<TimelineEvent> timeline;

  /// hidden communication = commTime - exposedCommTime (on one rank; a
  /// collective that ends after the last wait would count as hidden).
  double hiddenCommTime() const {
    return std::max(0.0, commTime - exposedCommTime);
  }

  /// A human-readable report (times in ms or us).
  void print(llvm::raw_ostream &os) const;
  /// The report as JSON (times in seconds).
  llvm::json::Value toJSON() const;
  /// A Chrome/Perfetto trace: `{"traceEvents": [...]}` with one track
  /// (tid) per stream, "X" events in microseconds named by kernel or op,
  /// with module, phase, FLOPs and bytes in `args`. Needs recordTimeline.
  /// The events are those of process `pid` called `processName`, so traces
  /// of several steps can share one file.
  llvm::json::Value
  toChromeTrace(int64_t pid = 0,
                llvm::StringRef processName = "loom-simulate") const;
};

/// Replays one step. Costs are computed once at construction, so run() can
/// be called on many orders of the same block cheaply (linear in the ops).
///
/// The replay: ops are issued in order. A compute op starts when the compute
/// stream is free (in order, so its compute operands are ready) and takes
/// CostModel::opCost(). A `loom.*_start` is enqueued on its comm stream at
/// the compute stream's current time (its input was produced by an earlier
/// compute op or wait) and starts when that comm stream is free. A
/// `loom.wait` blocks the compute stream until its collective has finished;
/// the blocked time is exposed communication. A `loom.recompute` region
/// runs its body's ops one after another on the compute stream, as the
/// lowering inlines them (one node for a scheduler: the order never splits
/// it). The step ends when every
/// stream is idle. Contention between compute and communication kernels
/// for the same SMs or memory bandwidth is not modelled.
class StepSimulator {
public:
  /// Prepares the simulation of `step`'s body (a func.func with one block,
  /// normally with `loom.step`). Fails with a located error when a
  /// collective's mesh does not resolve or its groups do not fit the
  /// topology.
  static mlir::FailureOr<StepSimulator> create(mlir::func::FuncOp step,
                                               const CostModel &model,
                                               const SimOptions &options = {});

  /// Replays the ops in block order.
  SimulationResult run() const;
  /// Replays the ops of the block in `order`: every op of the block but the
  /// terminator exactly once, each after the ops defining its operands.
  /// Fails with a located error on an order that is not such a
  /// permutation.
  mlir::FailureOr<SimulationResult>
  run(llvm::ArrayRef<mlir::Operation *> order) const;

  /// The precomputed cost of a compute-stream op (zero for starts and
  /// waits).
  const OpCost &getOpCost(mlir::Operation *op) const;
  /// The precomputed cost of a `loom.*_start` op.
  const CollectiveCost &getCollectiveCost(mlir::Operation *start) const;
  /// The comm stream (index into SimulationResult::streams) of a start.
  unsigned getStream(mlir::Operation *start) const;

  mlir::func::FuncOp getStep() const { return step; }
  const SimOptions &getOptions() const { return options; }

private:
  StepSimulator(mlir::func::FuncOp step, SimOptions options)
      : step(step), options(options) {}
  SimulationResult replay(llvm::ArrayRef<mlir::Operation *> order) const;

  mlir::func::FuncOp step;
  SimOptions options;
  llvm::SmallVector<std::string> streams;
  llvm::DenseMap<mlir::Operation *, OpCost> opCosts;
  llvm::DenseMap<mlir::Operation *, CollectiveCost> collectiveCosts;
  llvm::DenseMap<mlir::Operation *, unsigned> streamOf;
};

/// One program (pipeline rank) of a pipelined step in a joint simulation.
struct ProgramTimeline {
  /// The program's step function and the global ranks that run it.
  mlir::func::FuncOp step;
  llvm::SmallVector<int64_t> ranks;
  /// The program's own replay: its stepTime is when this program finishes,
  /// its computeTime the busy time of its compute stream. Point-to-point
  /// transfers are on the streams "p2p.send" and "p2p.recv".
  SimulationResult result;
  /// The whole step's time minus this program's compute busy time: what
  /// the rank spends in bubbles, blocked waits and the tail after it is done.
  double idleTime = 0;
};

/// The joint replay of a pipelined (MPMD) step: every program on its own
/// streams, each transfer shared by the send and the recv that match.
struct PipelineSimulationResult {
  /// Programs in the module's order.
  std::vector<ProgramTimeline> programs;
  /// The step time: the latest program's end.
  double stepTime = 0;
  /// Sum over programs of their compute busy time.
  double computeTime = 0;
  /// 1 - computeTime / (programs * stepTime): the share of the ranks'
  /// time their compute streams are idle (PyTorch's (p-1)/(m+p-1) for
  /// equal stages and free transfers).
  double bubbleFraction = 0;

  void print(llvm::raw_ostream &os) const;
  llvm::json::Value toJSON() const;
  /// One process per program (pid = program index, named by the function
  /// and its ranks), one track per stream, on one time axis.
  llvm::json::Value toChromeTrace() const;
};

/// Replays the programs of a pipelined step together. Each program runs as
/// StepSimulator replays a step, except for point-to-point transfers: a
/// `loom.send_start` and the `loom.recv_start` that matches it (same tag,
/// each naming the other's rank as peer) form one transfer that starts when
/// both have been posted (the later of the two issue times) and takes the
/// cost model's send/recv time; the waits of both complete when it ends.
/// Transfers do not queue behind the collectives of a comm stream (they
/// are their own channel, as NCCL's and Gloo's point-to-point operations
/// are). Fails with a located error on a send or recv with no match in the
/// peer's program, a peer rank no program runs, or a deadlock (waits that
/// can never complete), naming the programs involved.
mlir::FailureOr<PipelineSimulationResult>
simulatePipeline(llvm::ArrayRef<mlir::func::FuncOp> programs,
                 const CostModel &model, const SimOptions &options = {});

/// StepSimulator::create(...)->run() in one call.
mlir::FailureOr<SimulationResult> simulate(mlir::func::FuncOp step,
                                           const CostModel &model,
                                           const SimOptions &options = {});

} // namespace loom

#endif // LOOM_ANALYSIS_SIMULATOR_H
