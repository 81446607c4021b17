//===- Schedule.cpp - The compute orders of the pipeline schedules -------===//
//
// Each schedule reproduces the per-rank order (bubbles included) that
// PyTorch's schedule class stores in `pipeline_order`, so a rank's list can
// be compared entry by entry with PyTorch's. The one deliberate difference
// is 1F1B's last rank, where PyTorch's list starts at F1 (see oneFOneB).
//
//===----------------------------------------------------------------------===//

#include "loom/Transforms/Pipeline/Schedule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <deque>
#include <set>
#include <tuple>

using namespace llvm;

namespace loom {
namespace pipeline {

static Error makeError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// What each schedule accepts
//===----------------------------------------------------------------------===//

// PyTorch's interleaved schedules split the microbatches into rounds of
// about pp each; every round must hold the same number.
static int64_t numRounds(const ScheduleSpec &spec) {
  return std::max<int64_t>(1, spec.microbatches / spec.pp);
}

Error verifySpec(const ScheduleSpec &spec) {
  StringRef name = stringifyScheduleKind(spec.kind);
  if (spec.pp < 1)
    return makeError(formatv("{0} needs at least 1 pipeline rank, got pp={1}",
                             name, spec.pp));
  if (spec.microbatches < 1)
    return makeError(formatv("{0} needs at least 1 microbatch, got {1}", name,
                             spec.microbatches));
  if (isSingleStage(spec.kind)) {
    if (spec.stagesPerRank != 1)
      return makeError(formatv("{0} runs exactly 1 stage per rank, got {1}",
                               name, spec.stagesPerRank));
    if (spec.microbatches < numStages(spec))
      return makeError(
          formatv("{0} needs at least as many microbatches as stages ({1}), "
                  "got {2}",
                  name, numStages(spec), spec.microbatches));
    return Error::success();
  }
  if (layoutOf(spec.kind) == StageLayout::V) {
    if (spec.stagesPerRank != 2)
      return makeError(formatv("{0} needs exactly 2 stages per rank, got {1}",
                               name, spec.stagesPerRank));
    if (spec.kind == ScheduleKind::DualPipeV &&
        spec.microbatches < numStages(spec))
      return makeError(
          formatv("{0} needs at least as many microbatches as stages ({1}), "
                  "got {2}",
                  name, numStages(spec), spec.microbatches));
    return Error::success();
  }
  // With one stage per rank a multi-stage schedule is 1F1B or GPipe under
  // another name; asking for those keeps one spelling per schedule.
  if (spec.stagesPerRank < 2)
    return makeError(formatv("{0} needs at least 2 stages per rank, got {1}",
                             name, spec.stagesPerRank));
  if (spec.kind != ScheduleKind::LoopedBFS &&
      spec.microbatches % numRounds(spec) != 0)
    return makeError(formatv(
        "{0} needs the microbatches ({1}) to be a multiple of the number of "
        "rounds, max(1, microbatches / pp) = {2}",
        name, spec.microbatches, numRounds(spec)));
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Compute orders
//===----------------------------------------------------------------------===//

namespace {
using RankOrder = std::vector<std::optional<Action>>;

void addBubbles(RankOrder &order, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    order.push_back(std::nullopt);
}

Action make(int64_t stage, ActionKind kind, int64_t microbatch) {
  return Action{stage, kind, microbatch};
}
} // namespace

// All forwards, then all backwards. Rank r starts r steps late, and the
// first backward reaches it 3 steps per rank below the last one.
static RankOrder gpipe(const ScheduleSpec &spec, int64_t rank) {
  RankOrder order;
  addBubbles(order, rank);
  for (int64_t mb = 0; mb < spec.microbatches; ++mb)
    order.push_back(make(rank, ActionKind::Forward, mb));
  addBubbles(order, 3 * (spec.pp - 1 - rank));
  for (int64_t mb = 0; mb < spec.microbatches; ++mb)
    order.push_back(make(rank, ActionKind::FullBackward, mb));
  return order;
}

// pp-1-r warm-up forwards, a wait of 2 steps per rank below, then pairs of
// (F, B) and a cool-down of (bubble, B). The microbatch of the k-th steady
// forward is warm-up + k on every rank. PyTorch's `pipeline_order` numbers
// the last rank's forwards from 1 instead (its warm-up is empty and the
// counter is bumped before use), a list its own `_validate_schedule`
// rejects; what PyTorch runs on that rank is F0 B0 F1 B1 ..., as here.
static RankOrder oneFOneB(const ScheduleSpec &spec, int64_t rank) {
  RankOrder order;
  int64_t warmup = spec.pp - 1 - rank;
  addBubbles(order, rank);
  for (int64_t mb = 0; mb < warmup; ++mb)
    order.push_back(make(rank, ActionKind::Forward, mb));
  addBubbles(order, 2 * warmup);
  int64_t backward = 0;
  for (int64_t mb = warmup; mb < spec.microbatches; ++mb) {
    order.push_back(make(rank, ActionKind::Forward, mb));
    order.push_back(make(rank, ActionKind::FullBackward, backward++));
  }
  while (backward < spec.microbatches) {
    order.push_back(std::nullopt);
    order.push_back(make(rank, ActionKind::FullBackward, backward++));
  }
  return order;
}

// Breadth first: every microbatch through one local stage before the next
// local stage; backward in reverse, last local stage and last microbatch
// first.
static RankOrder loopedBFS(const ScheduleSpec &spec, int64_t rank) {
  RankOrder order;
  std::vector<int64_t> stages = rankStages(spec, rank);
  addBubbles(order, rank);
  for (int64_t stage : stages)
    for (int64_t mb = 0; mb < spec.microbatches; ++mb)
      order.push_back(make(stage, ActionKind::Forward, mb));
  addBubbles(order, 2 * (spec.pp - 1 - rank));
  for (int64_t stage : llvm::reverse(stages))
    for (int64_t mb = spec.microbatches - 1; mb >= 0; --mb)
      order.push_back(make(stage, ActionKind::FullBackward, mb));
  return order;
}

// Interleaved 1F1B and its zero-bubble variant (ZB1P). Microbatches go
// through the local stages in rounds of `perRound`: forward step k runs the
// local stage (k / perRound) % stagesPerRank, backward step k the same
// count from the last local stage down. A warm-up of forwards, a steady
// phase of (F, backward) pairs, and a cool-down of backwards.
//
// Zero bubble differs in four ways: the warm-up grows by 1 (not 2) per rank
// below the last, the backward is I, each steady or cool-down step from the
// (rank+1)-th on also runs the W of the oldest backward still without one
// (the rest come at the end), and there are no cool-down bubbles.
static RankOrder interleaved(const ScheduleSpec &spec, int64_t rank,
                             bool zeroBubble) {
  int64_t local = spec.stagesPerRank, pp = spec.pp;
  int64_t perRound = spec.microbatches / numRounds(spec);
  int64_t hops = zeroBubble ? 1 : 2;
  int64_t totalOps = local * spec.microbatches;
  int64_t warmup =
      std::min((local - 1) * perRound + hops * (pp - 1 - rank), totalOps);
  int64_t steady = totalOps - warmup;
  // The first backward reaches rank r at step local*pp + 2*(pp-1-r).
  int64_t waitAfterWarmup =
      zeroBubble ? pp - 1 - rank
                 : local * pp + 2 * (pp - 1 - rank) - (warmup + rank);

  auto forwardStage = [&](int64_t step) {
    return ((step / perRound) % local) * pp + rank;
  };
  auto backwardStage = [&](int64_t step) {
    return (local - 1 - ((step - warmup) / perRound) % local) * pp + rank;
  };
  ActionKind backwardKind =
      zeroBubble ? ActionKind::BackwardInput : ActionKind::FullBackward;

  DenseMap<int64_t, int64_t> nextForward, nextBackward, nextWeight;
  std::vector<int64_t> backwardSteps;
  size_t weightsDone = 0;
  RankOrder order;
  addBubbles(order, rank);

  auto addForward = [&](int64_t step) {
    int64_t stage = forwardStage(step);
    order.push_back(make(stage, ActionKind::Forward, nextForward[stage]++));
  };
  auto addBackward = [&](int64_t step) {
    int64_t stage = backwardStage(step);
    order.push_back(make(stage, backwardKind, nextBackward[stage]++));
    backwardSteps.push_back(step);
  };
  auto addWeight = [&] {
    int64_t stage = backwardStage(backwardSteps[weightsDone++]);
    order.push_back(
        make(stage, ActionKind::BackwardWeight, nextWeight[stage]++));
  };

  for (int64_t step = 0; step < warmup + steady + warmup; ++step) {
    if (step < warmup) {
      addForward(step);
      if (step == warmup - 1)
        addBubbles(order, waitAfterWarmup);
      continue;
    }
    if (step < warmup + steady)
      addForward(step);
    else if (!zeroBubble)
      order.push_back(std::nullopt);
    addBackward(step);
    if (zeroBubble && step - warmup >= rank)
      addWeight();
  }
  while (zeroBubble && weightsDone < backwardSteps.size())
    addWeight();
  return order;
}

// PyTorch's `_add_bubbles_to_actions` for the interleaved zero-bubble
// schedule: replay all ranks in lock step and hold back (with a bubble) any
// F whose previous stage has not run that microbatch in an earlier step, or
// any B whose next stage has not (its own F on the last stage).
static Expected<RankComputeOrder>
addDependencyBubbles(const ScheduleSpec &spec, const RankComputeOrder &order) {
  int64_t lastStage = numStages(spec) - 1;
  std::set<std::tuple<int64_t, ActionKind, int64_t>> seen;
  auto blocked = [&](const Action &a) {
    int64_t mb = *a.microbatch;
    if (a.kind == ActionKind::Forward)
      return a.stage != 0 && !seen.count({a.stage - 1, a.kind, mb});
    if (a.kind == ActionKind::FullBackward) {
      if (a.stage == lastStage)
        return !seen.count({a.stage, ActionKind::Forward, mb});
      return !seen.count({a.stage + 1, a.kind, mb});
    }
    return false;
  };

  RankComputeOrder result(order.size());
  std::vector<size_t> next(order.size(), 0);
  while (true) {
    bool active = false, progress = false;
    std::vector<std::tuple<int64_t, ActionKind, int64_t>> ranThisStep;
    for (size_t rank = 0; rank < order.size(); ++rank) {
      if (next[rank] >= order[rank].size())
        continue;
      active = true;
      const std::optional<Action> &action = order[rank][next[rank]];
      if (action && blocked(*action)) {
        result[rank].push_back(std::nullopt);
        continue;
      }
      progress = true;
      result[rank].push_back(action);
      if (action)
        ranThisStep.emplace_back(action->stage, action->kind,
                                 *action->microbatch);
      ++next[rank];
    }
    if (!active)
      break;
    if (!progress)
      return makeError(formatv("{0}: every rank waits on another one; the "
                               "compute order deadlocks",
                               stringifyScheduleKind(spec.kind)));
    seen.insert(ranThisStep.begin(), ranThisStep.end());
  }
  return result;
}

// Zero bubble in a V: rank r holds chunk 0 (stage r) and chunk 1 (stage
// 2*pp-1-r). PyTorch plans for at least 2*pp-1 microbatches and blanks the
// actions of the ones that do not exist.
static RankOrder zbv(const ScheduleSpec &spec, int64_t rank) {
  int64_t pp = spec.pp;
  int64_t planned = std::max(2 * pp - 1, spec.microbatches);
  int64_t chunk0 = rank, chunk1 = numStages(spec) - 1 - rank;
  int64_t f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  RankOrder order;
  addBubbles(order, rank);
  auto add = [&](int64_t stage, ActionKind kind, int64_t mb) {
    order.push_back(make(stage, kind, mb));
  };

  for (int64_t i = 0; i < 2 * (pp - rank) - 1; ++i)
    add(chunk0, ActionKind::Forward, f0++);
  for (int64_t i = 0; i < rank; ++i) {
    add(chunk1, ActionKind::Forward, f1++);
    add(chunk0, ActionKind::Forward, f0++);
  }
  for (int64_t i = 0; i < pp - rank; ++i) {
    add(chunk1, ActionKind::Forward, f1++);
    add(chunk1, ActionKind::BackwardInput, b1);
    add(chunk1, ActionKind::BackwardWeight, b1++);
  }
  while (f1 < f0 || f0 < planned) {
    if (f0 < planned)
      add(chunk0, ActionKind::Forward, f0++);
    add(chunk0, ActionKind::BackwardInput, b0);
    add(chunk0, ActionKind::BackwardWeight, b0++);
    add(chunk1, ActionKind::Forward, f1++);
    add(chunk1, ActionKind::BackwardInput, b1);
    add(chunk1, ActionKind::BackwardWeight, b1++);
  }
  int64_t w0 = b0, w1 = b1;
  for (int64_t i = 0; i < rank; ++i) {
    add(chunk0, ActionKind::BackwardInput, b0++);
    add(chunk1, ActionKind::BackwardInput, b1++);
  }
  for (int64_t i = 0; i < pp - rank; ++i) {
    add(chunk0, ActionKind::BackwardInput, b0++);
    add(chunk0, ActionKind::BackwardWeight, w0++);
  }
  while (w1 < b1)
    add(chunk1, ActionKind::BackwardWeight, w1++);
  while (w0 < b0)
    add(chunk0, ActionKind::BackwardWeight, w0++);

  for (std::optional<Action> &action : order)
    if (action && *action->microbatch >= spec.microbatches)
      action = std::nullopt;
  return order;
}

// DualPipeV (DeepSeek's DualPipe folded into a V, as PyTorch builds it):
// rank r holds stage r (chunk 0) and 2*pp-1-r (chunk 1) and runs eight
// phases. In the middle, a forward of one chunk and a backward of the other
// are issued together as an OVERLAP_F_B; zero-bubble I/W splits fill the
// edges, each W taking the oldest I still without one. A full backward
// counts as both the I and the W of its microbatch. No bubbles.
static RankOrder dualPipeV(const ScheduleSpec &spec, int64_t rank) {
  int64_t pp = spec.pp;
  int64_t chunk0 = rank, chunk1 = numStages(spec) - 1 - rank;
  // Next microbatch per (stage, F) and per (stage, I): a B takes the I
  // count.
  DenseMap<int64_t, int64_t> nextForward, nextBackward;
  std::deque<std::pair<int64_t, int64_t>> pendingWeights;
  RankOrder order;

  auto single = [&](int64_t stage, ActionKind kind) {
    int64_t mb = kind == ActionKind::Forward ? nextForward[stage]++
                                             : nextBackward[stage]++;
    if (kind == ActionKind::BackwardInput)
      pendingWeights.emplace_back(stage, mb);
    return make(stage, kind, mb);
  };
  auto add = [&](int64_t stage, ActionKind kind) {
    order.push_back(single(stage, kind));
  };
  auto overlap = [&](int64_t forwardStage, int64_t backwardStage) {
    Action both{-1, ActionKind::OverlapFB, std::nullopt};
    both.subActions.push_back(single(forwardStage, ActionKind::Forward));
    both.subActions.push_back(single(backwardStage, ActionKind::FullBackward));
    order.push_back(std::move(both));
  };
  auto weightIfPending = [&] {
    if (pendingWeights.empty())
      return;
    auto [stage, mb] = pendingWeights.front();
    pendingWeights.pop_front();
    order.push_back(make(stage, ActionKind::BackwardWeight, mb));
  };

  for (int64_t i = 0; i < 2 * (pp - rank - 1); ++i)
    add(chunk0, ActionKind::Forward);
  for (int64_t i = 0; i < rank + 1; ++i) {
    add(chunk0, ActionKind::Forward);
    add(chunk1, ActionKind::Forward);
  }
  for (int64_t i = 0; i < pp - rank - 1; ++i) {
    add(chunk1, ActionKind::BackwardInput);
    weightIfPending();
    add(chunk1, ActionKind::Forward);
  }
  for (int64_t i = 0; i < spec.microbatches - 2 * pp + rank + 1; ++i) {
    // The last rank runs its first pair apart, which shortens the bubble.
    if (i == 0 && rank == pp - 1) {
      add(chunk0, ActionKind::Forward);
      add(chunk1, ActionKind::FullBackward);
    } else {
      overlap(chunk0, chunk1);
    }
    overlap(chunk1, chunk0);
  }
  for (int64_t i = 0; i < pp - rank - 1; ++i) {
    add(chunk1, ActionKind::FullBackward);
    overlap(chunk1, chunk0);
  }
  // The second half of these backwards is split into I and W; odd ranks
  // switch one backward earlier than even ones.
  bool split = false;
  auto backwardKind = [&] {
    return split ? ActionKind::BackwardInput : ActionKind::FullBackward;
  };
  for (int64_t i = 0; i < rank + 1; ++i) {
    if (i == (rank + 1) / 2 && rank % 2 == 1)
      split = true;
    add(chunk1, backwardKind());
    if (i == (rank + 1) / 2 && rank % 2 == 0)
      split = true;
    add(chunk0, backwardKind());
  }
  for (int64_t i = 0; i < pp - rank - 1; ++i) {
    weightIfPending();
    add(chunk0, backwardKind());
  }
  for (int64_t i = 0; i < rank + 1; ++i)
    weightIfPending();
  return order;
}

Expected<RankComputeOrder> buildComputeSchedule(const ScheduleSpec &spec) {
  if (Error error = verifySpec(spec))
    return std::move(error);
  RankComputeOrder order;
  for (int64_t rank = 0; rank < spec.pp; ++rank) {
    switch (spec.kind) {
    case ScheduleKind::GPipe:
      order.push_back(gpipe(spec, rank));
      break;
    case ScheduleKind::OneFOneB:
      order.push_back(oneFOneB(spec, rank));
      break;
    case ScheduleKind::LoopedBFS:
      order.push_back(loopedBFS(spec, rank));
      break;
    case ScheduleKind::Interleaved1F1B:
      order.push_back(interleaved(spec, rank, /*zeroBubble=*/false));
      break;
    case ScheduleKind::InterleavedZeroBubble:
      order.push_back(interleaved(spec, rank, /*zeroBubble=*/true));
      break;
    case ScheduleKind::ZBVZeroBubble:
      order.push_back(zbv(spec, rank));
      break;
    case ScheduleKind::DualPipeV:
      order.push_back(dualPipeV(spec, rank));
      break;
    }
  }
  if (spec.kind == ScheduleKind::InterleavedZeroBubble) {
    Expected<RankComputeOrder> withBubbles = addDependencyBubbles(spec, order);
    if (!withBubbles)
      return withBubbles.takeError();
    order = std::move(*withBubbles);
  }
  if (Error error = validateComputeSchedule(spec, order))
    return std::move(error);
  return order;
}

} // namespace pipeline
} // namespace loom
