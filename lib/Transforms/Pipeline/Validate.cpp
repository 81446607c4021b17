//===- Validate.cpp - Checks on a compute-only pipeline schedule ----------===//
//
// The rules of PyTorch's `_validate_schedule`, with a sentence naming the
// rank, the step and the action that breaks one.
//
//===----------------------------------------------------------------------===//

#include "loom/Transforms/Pipeline/Schedule.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>

using namespace llvm;

namespace loom {
namespace pipeline {

static Error makeError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

Error validateComputeSchedule(const ScheduleSpec &spec,
                              const RankComputeOrder &order) {
  StringRef name = stringifyScheduleKind(spec.kind);
  if (static_cast<int64_t>(order.size()) != spec.pp)
    return makeError(formatv("{0}: the schedule has {1} ranks, expected pp={2}",
                             name, order.size(), spec.pp));
  int64_t stages = numStages(spec);
  // Per stage, the microbatches that have run F, B, I and W.
  std::vector<std::array<DenseSet<int64_t>, 4>> done(stages);
  enum { kF, kB, kI, kW };

  for (int64_t rank = 0; rank < spec.pp; ++rank) {
    // An index loop: the diagnostics lambda below captures the step, and
    // C++17 lambdas cannot capture structured bindings.
    for (size_t step = 0, e = order[rank].size(); step < e; ++step) {
      if (!order[rank][step])
        continue;
      const Action &entry = *order[rank][step];
      if (entry.kind == ActionKind::OverlapFB && entry.subActions.empty())
        return makeError(formatv("{0}: rank {1}, step {2}: an OVERLAP_F_B "
                                 "without sub-actions",
                                 name, rank, step));
      for (const Action &a : entry.leaves()) {
        auto fail = [&](const Twine &why) {
          return makeError(formatv("{0}: rank {1}, step {2} ({3}): ", name,
                                   rank, step, a.str()) +
                           why);
        };
        if (!a.isCompute() || a.kind == ActionKind::OverlapFB)
          return fail("a compute schedule holds only F, B, I and W actions "
                      "(or an OVERLAP_F_B of two)");
        if (a.stage < 0 || a.stage >= stages)
          return fail(formatv("stage {0} is not one of the {1} stages", a.stage,
                              stages));
        if (stageToRank(spec, a.stage) != rank)
          return fail(formatv("stage {0} belongs to rank {1}", a.stage,
                              stageToRank(spec, a.stage)));
        int64_t mb = a.microbatch.value_or(-1);
        if (mb < 0 || mb >= spec.microbatches)
          return fail(formatv("microbatch {0} is not one of the {1}", mb,
                              spec.microbatches));
        auto &stageDone = done[a.stage];
        auto record = [&](int kindIndex) -> Error {
          if (!stageDone[kindIndex].insert(mb).second)
            return fail("runs a second time");
          return Error::success();
        };
        switch (a.kind) {
        case ActionKind::Forward:
          if (Error e = record(kF))
            return e;
          break;
        case ActionKind::FullBackward:
        case ActionKind::BackwardInput:
          if (!stageDone[kF].count(mb))
            return fail("a backward runs before the forward of its microbatch");
          if (stageDone[kB].count(mb) || stageDone[kI].count(mb))
            return fail("the microbatch already had its backward");
          if (Error e = record(a.kind == ActionKind::FullBackward ? kB : kI))
            return e;
          break;
        case ActionKind::BackwardWeight:
          if (!stageDone[kI].count(mb))
            return fail("W runs before the I of its microbatch");
          if (Error e = record(kW))
            return e;
          break;
        default:
          llvm_unreachable("compute kinds only");
        }
      }
    }
  }
  for (int64_t stage = 0; stage < stages; ++stage) {
    auto &stageDone = done[stage];
    int64_t f = stageDone[kF].size(), b = stageDone[kB].size(),
            i = stageDone[kI].size(), w = stageDone[kW].size();
    if (f != spec.microbatches)
      return makeError(formatv("{0}: stage {1} runs F for {2} microbatches, "
                               "expected {3}",
                               name, stage, f, spec.microbatches));
    if (i != w)
      return makeError(formatv("{0}: stage {1} runs I for {2} microbatches "
                               "but W for {3}",
                               name, stage, i, w));
    if (b + i != spec.microbatches)
      return makeError(formatv("{0}: stage {1} runs the backward for {2} "
                               "microbatches, expected {3}",
                               name, stage, b + i, spec.microbatches));
  }
  return Error::success();
}

} // namespace pipeline
} // namespace loom
