//===- Action.cpp - Pipeline actions, schedule names, stage placement -----===//
//
// The vocabulary of the schedule IR: how an action prints and parses (as
// PyTorch's `_Action` does), the schedules' names, and which rank holds
// which stage.
//
//===----------------------------------------------------------------------===//

#include "loom/Transforms/Pipeline/Schedule.h"

using namespace llvm;

namespace loom {
namespace pipeline {

static Error makeError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// Actions
//===----------------------------------------------------------------------===//

static constexpr ActionKind kAllKinds[] = {
    ActionKind::Forward,       ActionKind::FullBackward,
    ActionKind::BackwardInput, ActionKind::BackwardWeight,
    ActionKind::Unshard,       ActionKind::Reshard,
    ActionKind::SendF,         ActionKind::RecvF,
    ActionKind::SendB,         ActionKind::RecvB,
    ActionKind::ReduceGrad};

StringRef stringifyActionKind(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
    return "F";
  case ActionKind::FullBackward:
    return "B";
  case ActionKind::BackwardInput:
    return "I";
  case ActionKind::BackwardWeight:
    return "W";
  case ActionKind::Unshard:
    return "UNSHARD";
  case ActionKind::Reshard:
    return "RESHARD";
  case ActionKind::SendF:
    return "SEND_F";
  case ActionKind::RecvF:
    return "RECV_F";
  case ActionKind::SendB:
    return "SEND_B";
  case ActionKind::RecvB:
    return "RECV_B";
  case ActionKind::ReduceGrad:
    return "REDUCE_GRAD";
  case ActionKind::OverlapFB:
    return "OVERLAP_F_B";
  }
  llvm_unreachable("unknown action kind");
}

// Whole-stage kinds (and an overlap, whose sub-actions have their own)
// carry no microbatch; every other kind needs one.
static bool hasMicrobatch(ActionKind kind) {
  return kind != ActionKind::Unshard && kind != ActionKind::Reshard &&
         kind != ActionKind::ReduceGrad && kind != ActionKind::OverlapFB;
}

static constexpr StringLiteral kOverlapSuffix = ")OVERLAP_F_B";

std::string Action::str() const {
  if (kind == ActionKind::OverlapFB) {
    std::string text = "(";
    for (const Action &sub : subActions)
      text += (text.size() > 1 ? ";" : "") + sub.str();
    return text + kOverlapSuffix.str();
  }
  std::string text = std::to_string(stage) + stringifyActionKind(kind).str();
  if (microbatch)
    text += std::to_string(*microbatch);
  return text;
}

Expected<Action> Action::parse(StringRef text) {
  StringRef rest = text.trim();
  auto fail = [&](const Twine &why) {
    return makeError("invalid action '" + text + "': " + why +
                     " (expected <stage><kind>[<microbatch>], e.g. 2F0, "
                     "1UNSHARD, 3SEND_F1)");
  };
  if (rest.consume_front("(")) {
    // "(a;b)OVERLAP_F_B": a forward and a backward to overlap.
    size_t close = rest.find(')');
    if (close == StringRef::npos || rest.drop_front(close) != kOverlapSuffix)
      return fail("a '(' starts an overlap, written (a;b)OVERLAP_F_B");
    Action overlap{-1, ActionKind::OverlapFB, std::nullopt};
    SmallVector<StringRef> parts;
    rest.take_front(close).split(parts, ';');
    for (StringRef part : parts) {
      Expected<Action> sub = parse(part);
      if (!sub)
        return sub.takeError();
      if (!sub->isCompute() || sub->kind == ActionKind::OverlapFB)
        return fail("an overlap holds only F, B, I and W actions");
      overlap.subActions.push_back(std::move(*sub));
    }
    return overlap;
  }
  size_t digits = rest.find_first_not_of("0123456789");
  if (digits == 0 || rest.empty())
    return fail("it does not start with a stage index");
  Action action;
  if (rest.take_front(digits).getAsInteger(10, action.stage))
    return fail("the stage index is out of range");
  rest = rest.drop_front(digits);
  // The longest kind name that prefixes the rest: "RESHARD" and
  // "REDUCE_GRAD" share "RE", "SEND_F" is not "SEND_B".
  std::optional<ActionKind> kind;
  size_t kindLength = 0;
  for (ActionKind candidate : kAllKinds) {
    StringRef name = stringifyActionKind(candidate);
    if (rest.starts_with(name) && name.size() > kindLength) {
      kind = candidate;
      kindLength = name.size();
    }
  }
  if (!kind)
    return fail("unknown kind '" + rest + "'");
  action.kind = *kind;
  rest = rest.drop_front(kindLength);
  if (!rest.empty()) {
    int64_t microbatch;
    if (rest.getAsInteger(10, microbatch) || microbatch < 0)
      return fail("'" + rest + "' is not a microbatch index");
    action.microbatch = microbatch;
  }
  if (hasMicrobatch(action.kind) && !action.microbatch)
    return fail(stringifyActionKind(action.kind) + " needs a microbatch");
  if (!hasMicrobatch(action.kind) && action.microbatch)
    return fail(stringifyActionKind(action.kind) +
                " acts on the whole stage and takes no microbatch");
  return action;
}

bool Action::isCompute() const {
  return kind == ActionKind::Forward || kind == ActionKind::FullBackward ||
         kind == ActionKind::BackwardInput ||
         kind == ActionKind::BackwardWeight || kind == ActionKind::OverlapFB;
}

ArrayRef<Action> Action::leaves() const {
  if (kind == ActionKind::OverlapFB)
    return subActions;
  return ArrayRef<Action>(*this);
}

bool Action::operator==(const Action &other) const {
  return stage == other.stage && kind == other.kind &&
         microbatch == other.microbatch && subActions == other.subActions;
}

//===----------------------------------------------------------------------===//
// Schedule kinds and stage placement
//===----------------------------------------------------------------------===//

static constexpr ScheduleKind kAllSchedules[] = {
    ScheduleKind::GPipe,
    ScheduleKind::OneFOneB,
    ScheduleKind::Interleaved1F1B,
    ScheduleKind::LoopedBFS,
    ScheduleKind::InterleavedZeroBubble,
    ScheduleKind::ZBVZeroBubble,
    ScheduleKind::DualPipeV};

StringRef stringifyScheduleKind(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "GPipe";
  case ScheduleKind::OneFOneB:
    return "1F1B";
  case ScheduleKind::Interleaved1F1B:
    return "Interleaved1F1B";
  case ScheduleKind::LoopedBFS:
    return "LoopedBFS";
  case ScheduleKind::InterleavedZeroBubble:
    return "InterleavedZeroBubble";
  case ScheduleKind::ZBVZeroBubble:
    return "ZBVZeroBubble";
  case ScheduleKind::DualPipeV:
    return "DualPipeV";
  }
  llvm_unreachable("unknown schedule kind");
}

Expected<ScheduleKind> parseScheduleKind(StringRef name) {
  for (ScheduleKind kind : kAllSchedules)
    if (stringifyScheduleKind(kind) == name)
      return kind;
  return makeError("unknown pipeline schedule '" + name +
                   "' (expected GPipe, 1F1B, Interleaved1F1B, LoopedBFS, "
                   "InterleavedZeroBubble, ZBVZeroBubble or DualPipeV)");
}

StageLayout layoutOf(ScheduleKind kind) {
  return kind == ScheduleKind::ZBVZeroBubble || kind == ScheduleKind::DualPipeV
             ? StageLayout::V
             : StageLayout::Loop;
}

bool isSingleStage(ScheduleKind kind) {
  return kind == ScheduleKind::GPipe || kind == ScheduleKind::OneFOneB;
}

bool splitsBackward(ScheduleKind kind) {
  return kind == ScheduleKind::InterleavedZeroBubble ||
         kind == ScheduleKind::ZBVZeroBubble || kind == ScheduleKind::DualPipeV;
}

int64_t numStages(const ScheduleSpec &spec) {
  return spec.pp * spec.stagesPerRank;
}

int64_t stageToRank(const ScheduleSpec &spec, int64_t stage) {
  int64_t position = stage % spec.pp;
  if (layoutOf(spec.kind) == StageLayout::Loop)
    return position;
  // V: even rounds of pp stages go down the ranks, odd rounds come back up.
  bool goingUp = (stage / spec.pp) % 2 == 1;
  return goingUp ? spec.pp - 1 - position : position;
}

std::vector<int64_t> rankStages(const ScheduleSpec &spec, int64_t rank) {
  std::vector<int64_t> stages;
  for (int64_t stage = 0, e = numStages(spec); stage < e; ++stage)
    if (stageToRank(spec, stage) == rank)
      stages.push_back(stage);
  return stages;
}

} // namespace pipeline
} // namespace loom
