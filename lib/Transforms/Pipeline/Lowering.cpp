//===- Lowering.cpp - Compute orders to what each pipeline rank executes --===//
//
// The three steps PyTorch's `_PipelineScheduleRuntime` applies to a
// compute-only schedule: FSDP unshard/reshard, gradient reduction, and
// point-to-point transfers. They are reproduced action for action, so that
// a rank's list is the one PyTorch's runtime would run.
//
//===----------------------------------------------------------------------===//

#include "loom/Transforms/Pipeline/Schedule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <deque>
#include <set>
#include <tuple>

using namespace llvm;

namespace loom {
namespace pipeline {

//===----------------------------------------------------------------------===//
// UNSHARD / RESHARD
//===----------------------------------------------------------------------===//

std::vector<Action> addUnshardReshard(ArrayRef<std::optional<Action>> rankOrder,
                                      int64_t maxActiveStages) {
  // Ascending order for evictions and the final reshard: that is the order
  // in which PyTorch iterates its set of active stages (small integers hash
  // to themselves).
  std::set<int64_t> active;
  std::vector<Action> result;
  auto upcomingStages = [&](size_t from) {
    std::vector<int64_t> stages;
    for (const std::optional<Action> &a : rankOrder.drop_front(from)) {
      if (!a)
        continue;
      for (const Action &leaf : a->leaves()) {
        if (llvm::is_contained(stages, leaf.stage))
          continue;
        stages.push_back(leaf.stage);
        if (static_cast<int64_t>(stages.size()) == maxActiveStages)
          return stages;
      }
    }
    return stages;
  };

  for (auto [index, entry] : llvm::enumerate(rankOrder)) {
    if (!entry)
      continue;
    std::vector<int64_t> next = upcomingStages(index);
    std::vector<int64_t> evict;
    for (int64_t stage : active)
      if (!llvm::is_contained(next, stage))
        evict.push_back(stage);
    for (int64_t stage : evict) {
      active.erase(stage);
      result.push_back(Action{stage, ActionKind::Reshard, std::nullopt});
    }
    for (int64_t stage : next)
      if (active.insert(stage).second)
        result.push_back(Action{stage, ActionKind::Unshard, std::nullopt});
    result.push_back(*entry);
  }
  for (int64_t stage : active)
    result.push_back(Action{stage, ActionKind::Reshard, std::nullopt});
  return result;
}

RankActions addUnshardReshard(const RankComputeOrder &order,
                              int64_t maxActiveStages) {
  RankActions result;
  for (const auto &rankOrder : order)
    result.push_back(addUnshardReshard(rankOrder, maxActiveStages));
  return result;
}

//===----------------------------------------------------------------------===//
// REDUCE_GRAD
//===----------------------------------------------------------------------===//

std::vector<Action> addReduceGrad(ArrayRef<Action> rankActions,
                                  int64_t microbatches) {
  DenseMap<int64_t, int64_t> gradients;
  std::vector<Action> result;
  for (const Action &a : rankActions) {
    result.push_back(a);
    for (const Action &leaf : a.leaves()) {
      // B and W produce weight gradients; I only the input gradient.
      if (leaf.kind != ActionKind::FullBackward &&
          leaf.kind != ActionKind::BackwardWeight)
        continue;
      if (++gradients[leaf.stage] == microbatches)
        result.push_back(
            Action{leaf.stage, ActionKind::ReduceGrad, std::nullopt});
    }
  }
  return result;
}

RankActions addReduceGrad(const RankActions &actions, int64_t microbatches) {
  RankActions result;
  for (const auto &rankActions : actions)
    result.push_back(addReduceGrad(rankActions, microbatches));
  return result;
}

//===----------------------------------------------------------------------===//
// SEND / RECV
//===----------------------------------------------------------------------===//

Expected<RankActions> addSendRecv(const ScheduleSpec &spec,
                                  const RankActions &actions) {
  // Only the geometry matters here (the microbatch rules of verifySpec do
  // not): the stage-to-rank arithmetic below divides by pp.
  if (spec.pp < 1 || spec.stagesPerRank < 1)
    return createStringError(
        inconvertibleErrorCode(),
        formatv("{0}: sends and receives need pp >= 1 and stages per rank "
                ">= 1, got pp={1} and {2}",
                stringifyScheduleKind(spec.kind), spec.pp, spec.stagesPerRank));
  if (static_cast<int64_t>(actions.size()) != spec.pp)
    return createStringError(inconvertibleErrorCode(),
                             formatv("{0}: {1} ranks' actions, expected pp={2}",
                                     stringifyScheduleKind(spec.kind),
                                     actions.size(), spec.pp));
  int64_t lastStage = numStages(spec) - 1;
  for (auto [rank, rankActions] : llvm::enumerate(actions))
    for (const Action &entry : rankActions)
      for (const Action &a : entry.leaves())
        if (a.stage < 0 || a.stage > lastStage)
          return createStringError(
              inconvertibleErrorCode(),
              formatv("{0}: rank {1} runs {2}, but stage {3} is not one of the "
                      "{4} stages",
                      stringifyScheduleKind(spec.kind), rank, a.str(), a.stage,
                      lastStage + 1));
  auto rankOf = [&](int64_t stage) { return stageToRank(spec, stage); };

  // The transfer an action's result needs, if its consumer stage lives on
  // another rank: F feeds the next stage, B and I the previous one.
  auto transfer =
      [&](const Action &a) -> std::optional<std::pair<Action, Action>> {
    if (a.kind == ActionKind::Forward) {
      if (a.stage == lastStage || rankOf(a.stage + 1) == rankOf(a.stage))
        return std::nullopt;
      return std::make_pair(
          Action{a.stage, ActionKind::SendF, a.microbatch},
          Action{a.stage + 1, ActionKind::RecvF, a.microbatch});
    }
    if (a.kind == ActionKind::FullBackward ||
        a.kind == ActionKind::BackwardInput) {
      if (a.stage == 0 || rankOf(a.stage - 1) == rankOf(a.stage))
        return std::nullopt;
      return std::make_pair(
          Action{a.stage, ActionKind::SendB, a.microbatch},
          Action{a.stage - 1, ActionKind::RecvB, a.microbatch});
    }
    return std::nullopt;
  };

  using Key = std::tuple<int64_t, ActionKind, int64_t>;
  auto key = [](int64_t stage, ActionKind kind, std::optional<int64_t> mb) {
    return Key{stage, kind, mb.value_or(-1)};
  };
  std::vector<std::set<Key>> scheduled(actions.size());
  // An action is ready once its input is on this rank: received, or made by
  // the neighbouring stage earlier in this rank's own list.
  auto ready = [&](const Action &a, const std::set<Key> &before) {
    if (a.kind == ActionKind::Forward && a.stage != 0)
      return before.count(key(a.stage, ActionKind::RecvF, a.microbatch)) ||
             before.count(key(a.stage - 1, ActionKind::Forward, a.microbatch));
    if ((a.kind == ActionKind::FullBackward ||
         a.kind == ActionKind::BackwardInput) &&
        a.stage != lastStage)
      return before.count(key(a.stage, ActionKind::RecvB, a.microbatch)) ||
             before.count(
                 key(a.stage + 1, ActionKind::BackwardInput, a.microbatch)) ||
             before.count(
                 key(a.stage + 1, ActionKind::FullBackward, a.microbatch));
    return true;
  };

  // An overlapped forward and backward run one after the other here: a rank
  // executes one action at a time, and the split lets each half wait for
  // its own input.
  std::vector<std::deque<Action>> pending(actions.size());
  for (auto [rank, rankActions] : llvm::enumerate(actions))
    for (const Action &a : rankActions)
      for (const Action &leaf : a.leaves())
        pending[rank].push_back(leaf);
  RankActions result(actions.size());
  auto append = [&](size_t rank, const Action &a) {
    result[rank].push_back(a);
    scheduled[rank].insert(key(a.stage, a.kind, a.microbatch));
  };

  while (llvm::any_of(pending, [](const auto &q) { return !q.empty(); })) {
    bool progress = false;
    for (size_t rank = 0; rank < pending.size(); ++rank) {
      if (pending[rank].empty())
        continue;
      const Action head = pending[rank].front();
      if (!ready(head, scheduled[rank]))
        continue;
      append(rank, head);
      if (auto comms = transfer(head)) {
        append(rank, comms->first);
        append(rankOf(comms->second.stage), comms->second);
      }
      pending[rank].pop_front();
      progress = true;
    }
    if (!progress) {
      std::string waiting;
      for (size_t rank = 0; rank < pending.size(); ++rank)
        if (!pending[rank].empty())
          waiting += formatv("{0}rank {1} at {2}", waiting.empty() ? "" : ", ",
                             rank, pending[rank].front().str());
      return createStringError(
          inconvertibleErrorCode(),
          "Malformed compute schedule, can't schedule sends/recvs: every "
          "rank waits for an input no other rank will send (" +
              waiting + ")");
    }
  }
  return result;
}

Expected<RankActions> lowerSchedule(const ScheduleSpec &spec) {
  Expected<RankComputeOrder> order = buildComputeSchedule(spec);
  if (!order)
    return order.takeError();
  RankActions actions =
      addReduceGrad(addUnshardReshard(*order), spec.microbatches);
  return addSendRecv(spec, actions);
}

} // namespace pipeline
} // namespace loom
