//===- Schedule.h - Pipeline schedules as per-rank action lists -----------===//
//
// The schedule IR of PyTorch's `torch.distributed.pipelining`, rebuilt as
// plain data: the actions (`2F0`, `1UNSHARD`, `3SEND_F1`, ...), the
// compute-only orders of its seven schedules with their bubbles, the stage to
// rank mappings, and the three lowering steps that turn a compute order into
// what each rank executes (UNSHARD/RESHARD, REDUCE_GRAD, sends and
// receives). Everything here is pure arithmetic over integers so that the
// passes, the simulator, a command-line tool and the unit tests share one
// definition; nothing depends on MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_PIPELINE_SCHEDULE_H
#define LOOM_TRANSFORMS_PIPELINE_SCHEDULE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom {
namespace pipeline {

/// What one action does. The compute kinds are a stage's forward (F), its
/// full backward (B), or the backward split in two for zero-bubble schedules:
/// the input gradient (I) and the weight gradient (W). OverlapFB (DualPipeV
/// only) is a forward and a backward meant to overlap, held as two
/// sub-actions.
enum class ActionKind {
  Forward,
  FullBackward,
  BackwardInput,
  BackwardWeight,
  Unshard,
  Reshard,
  SendF,
  RecvF,
  SendB,
  RecvB,
  ReduceGrad,
  OverlapFB
};

/// The name PyTorch prints for a kind: "F", "B", "I", "W", "UNSHARD",
/// "RESHARD", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD",
/// "OVERLAP_F_B".
llvm::StringRef stringifyActionKind(ActionKind kind);

/// One entry of a rank's list: `kind` on `stage`, for `microbatch` when the
/// kind is per microbatch (compute and transfers; UNSHARD, RESHARD and
/// REDUCE_GRAD act on the whole stage and have none). An OverlapFB holds its
/// forward and backward in `subActions`, with stage -1 and no microbatch, as
/// PyTorch does.
struct Action {
  int64_t stage = 0;
  ActionKind kind = ActionKind::Forward;
  std::optional<int64_t> microbatch;
  std::vector<Action> subActions;

  Action() = default;
  Action(int64_t stage, ActionKind kind,
         std::optional<int64_t> microbatch = std::nullopt,
         std::vector<Action> subActions = {})
      : stage(stage), kind(kind), microbatch(microbatch),
        subActions(std::move(subActions)) {}

  /// PyTorch's `_Action.__repr__`: stage, kind, microbatch, e.g. "2F0",
  /// "1UNSHARD", "3SEND_F1", "0REDUCE_GRAD"; "(0F3;3B1)OVERLAP_F_B".
  std::string str() const;
  /// The inverse of str(). The whole string must be one action; a compute or
  /// transfer kind needs a microbatch and the others must not have one.
  static llvm::Expected<Action> parse(llvm::StringRef text);
  /// F, B, I, W or OVERLAP_F_B.
  bool isCompute() const;
  /// The actions this one runs: its sub-actions for an OverlapFB, else
  /// itself.
  llvm::ArrayRef<Action> leaves() const;
  bool operator==(const Action &other) const;
  bool operator!=(const Action &other) const { return !(*this == other); }
};

enum class ScheduleKind {
  GPipe,
  OneFOneB,
  Interleaved1F1B,
  LoopedBFS,
  InterleavedZeroBubble,
  ZBVZeroBubble,
  DualPipeV
};

/// PyTorch's names, as `get_schedule_class` accepts them: "GPipe", "1F1B",
/// "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble",
/// "DualPipeV".
llvm::Expected<ScheduleKind> parseScheduleKind(llvm::StringRef name);
llvm::StringRef stringifyScheduleKind(ScheduleKind kind);

/// How stages are placed on ranks: `Loop` puts stage s on rank s % pp (stage
/// 0, 1, ..., pp-1, then around again); `V` goes down the ranks and back up,
/// so each rank holds stage r and stage 2*pp-1-r.
enum class StageLayout { Loop, V };

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::GPipe;
  /// Ranks in the pipeline group.
  int64_t pp = 1;
  /// Stages each rank holds: 1 for GPipe and 1F1B, at least 2 for the
  /// interleaved schedules, exactly 2 for ZBVZeroBubble and DualPipeV.
  int64_t stagesPerRank = 1;
  int64_t microbatches = 1;
};

/// V for ZBVZeroBubble and DualPipeV, Loop otherwise.
StageLayout layoutOf(ScheduleKind kind);
/// True for GPipe and 1F1B, which PyTorch runs with one stage per rank.
bool isSingleStage(ScheduleKind kind);
/// True for the schedules that run a backward's input- and weight-gradient
/// parts apart (I and W): InterleavedZeroBubble, ZBVZeroBubble, DualPipeV.
bool splitsBackward(ScheduleKind kind);
/// pp * stagesPerRank.
int64_t numStages(const ScheduleSpec &spec);
/// The rank that holds `stage` under the schedule's layout.
int64_t stageToRank(const ScheduleSpec &spec, int64_t stage);
/// The stages of `rank` in ascending order.
std::vector<int64_t> rankStages(const ScheduleSpec &spec, int64_t rank);

/// Why PyTorch (or Loom, where noted in the message) refuses `spec`, or
/// success: pp, stages per rank and microbatches in range for the schedule.
llvm::Error verifySpec(const ScheduleSpec &spec);

/// [rank] -> the actions that rank runs, in order (no bubbles).
using RankActions = std::vector<std::vector<Action>>;
/// [rank] -> compute actions in time steps, std::nullopt for a bubble: the
/// layout of PyTorch's `pipeline_order`.
using RankComputeOrder = std::vector<std::vector<std::optional<Action>>>;

/// The compute-only order of `spec`'s schedule, checked by
/// validateComputeSchedule before it is returned.
llvm::Expected<RankComputeOrder> buildComputeSchedule(const ScheduleSpec &spec);

/// PyTorch's schedule validation plus Loom's placement check: one list per
/// rank, compute actions only, each on a stage the rank holds, every stage
/// runs F once per microbatch, B or I only after the F of the same
/// microbatch, W only after its I, one backward (B, or I and W) per
/// microbatch.
llvm::Error validateComputeSchedule(const ScheduleSpec &spec,
                                    const RankComputeOrder &order);

/// The lowering steps of PyTorch's `_PipelineScheduleRuntime`, in the order
/// lowerSchedule applies them.
///
/// FSDP prefetch: before each compute action, the (up to) `maxActiveStages`
/// distinct stages that compute next are unsharded (UNSHARD, in the order
/// they will be needed) and every other unsharded stage is resharded
/// (RESHARD, ascending); at the end every stage still unsharded is resharded.
/// Bubbles are dropped.
std::vector<Action>
addUnshardReshard(llvm::ArrayRef<std::optional<Action>> rankOrder,
                  int64_t maxActiveStages = 3);
RankActions addUnshardReshard(const RankComputeOrder &order,
                              int64_t maxActiveStages = 3);

/// REDUCE_GRAD(s) right after the `microbatches`-th B or W of stage s (I
/// does not count: it leaves the weight gradient to its W).
std::vector<Action> addReduceGrad(llvm::ArrayRef<Action> rankActions,
                                  int64_t microbatches);
RankActions addReduceGrad(const RankActions &actions, int64_t microbatches);

/// Sends and receives between stages on different ranks. An OverlapFB is
/// first replaced by its forward and backward, run one after the other. The
/// ranks' lists are merged round-robin in rank order; an action whose input
/// comes from another rank waits until that rank has scheduled the producing
/// action, which also places the matching receive in the consumer's list. Fails
/// ("Malformed compute schedule ...") when no rank can make progress.
llvm::Expected<RankActions> addSendRecv(const ScheduleSpec &spec,
                                        const RankActions &actions);

/// buildComputeSchedule, then addUnshardReshard (3 active stages),
/// addReduceGrad and addSendRecv: what each rank executes in one step.
llvm::Expected<RankActions> lowerSchedule(const ScheduleSpec &spec);

} // namespace pipeline
} // namespace loom

#endif // LOOM_TRANSFORMS_PIPELINE_SCHEDULE_H
