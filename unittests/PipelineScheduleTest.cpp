//===- PipelineScheduleTest.cpp - Actions, spec checks and stage placement
//-===//

#include "loom/Transforms/Pipeline/Schedule.h"

#include "llvm/ADT/SmallVector.h"

#include <gtest/gtest.h>

using namespace loom::pipeline;

namespace {

std::string errorOf(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : std::string();
}

TEST(PipelineAction, PrintsAsPyTorch) {
  EXPECT_EQ((Action{2, ActionKind::Forward, 0}).str(), "2F0");
  EXPECT_EQ((Action{1, ActionKind::Unshard, std::nullopt}).str(), "1UNSHARD");
  EXPECT_EQ((Action{3, ActionKind::SendF, 1}).str(), "3SEND_F1");
  EXPECT_EQ((Action{0, ActionKind::ReduceGrad, std::nullopt}).str(),
            "0REDUCE_GRAD");
  EXPECT_EQ((Action{12, ActionKind::BackwardWeight, 31}).str(), "12W31");
}

TEST(PipelineAction, ParseRoundTrips) {
  for (const char *text :
       {"0F0", "2B7", "1I3", "1W3", "0UNSHARD", "5RESHARD", "0REDUCE_GRAD",
        "3SEND_F1", "2RECV_F0", "3SEND_B12", "0RECV_B6", "10F10"}) {
    llvm::Expected<Action> action = Action::parse(text);
    ASSERT_TRUE(static_cast<bool>(action))
        << text << ": " << llvm::toString(action.takeError());
    EXPECT_EQ(action->str(), text);
  }
  llvm::Expected<Action> reduce = Action::parse("4REDUCE_GRAD");
  ASSERT_TRUE(static_cast<bool>(reduce));
  EXPECT_EQ(reduce->kind, ActionKind::ReduceGrad);
  EXPECT_EQ(reduce->stage, 4);
  EXPECT_FALSE(reduce->microbatch.has_value());
  EXPECT_FALSE(reduce->isCompute());
  llvm::Expected<Action> weight = Action::parse("1W2");
  ASSERT_TRUE(static_cast<bool>(weight));
  EXPECT_TRUE(weight->isCompute());
  EXPECT_EQ(*weight, (Action{1, ActionKind::BackwardWeight, 2}));
}

TEST(PipelineAction, OverlapRoundTrips) {
  llvm::Expected<Action> overlap = Action::parse("(0F3;3B1)OVERLAP_F_B");
  ASSERT_TRUE(static_cast<bool>(overlap))
      << llvm::toString(overlap.takeError());
  EXPECT_EQ(overlap->kind, ActionKind::OverlapFB);
  EXPECT_EQ(overlap->stage, -1);
  EXPECT_TRUE(overlap->isCompute());
  ASSERT_EQ(overlap->leaves().size(), 2u);
  EXPECT_EQ(overlap->leaves()[0], (Action{0, ActionKind::Forward, 3}));
  EXPECT_EQ(overlap->leaves()[1], (Action{3, ActionKind::FullBackward, 1}));
  EXPECT_EQ(overlap->str(), "(0F3;3B1)OVERLAP_F_B");
  Action plain{2, ActionKind::Forward, 0};
  EXPECT_EQ(plain.leaves().size(), 1u);
  EXPECT_EQ(plain.leaves()[0], plain);
  for (const char *text :
       {"(0F3;3B1)", "(0F3;3UNSHARD)OVERLAP_F_B", "(0F3;3B1)OVERLAP_F_Bx",
        "(0F3;3B1", "0OVERLAP_F_B", "((0F3)OVERLAP_F_B)OVERLAP_F_B"}) {
    llvm::Expected<Action> bad = Action::parse(text);
    EXPECT_FALSE(static_cast<bool>(bad)) << text;
    if (!bad)
      llvm::consumeError(bad.takeError());
  }
}

TEST(PipelineAction, ParseRefusesMalformed) {
  for (const char *text : {"", "F0", "0X1", "0F", "0SEND_F", "0UNSHARD1",
                           "0REDUCE_GRAD0", "0F1x", "-1F0"}) {
    llvm::Expected<Action> action = Action::parse(text);
    EXPECT_FALSE(static_cast<bool>(action)) << text;
    if (!action) {
      std::string message = llvm::toString(action.takeError());
      EXPECT_NE(message.find("invalid action"), std::string::npos) << message;
    }
  }
}

TEST(PipelineScheduleKind, NamesRoundTrip) {
  for (const char *name :
       {"GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS",
        "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"}) {
    llvm::Expected<ScheduleKind> kind = parseScheduleKind(name);
    ASSERT_TRUE(static_cast<bool>(kind)) << name;
    EXPECT_EQ(stringifyScheduleKind(*kind), name);
  }
  llvm::Expected<ScheduleKind> bad = parseScheduleKind("ZeroBubble");
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("unknown pipeline schedule"),
            std::string::npos);
}

TEST(PipelineStages, LoopAndV) {
  ScheduleSpec loop{ScheduleKind::Interleaved1F1B, 4, 2, 8};
  EXPECT_EQ(layoutOf(loop.kind), StageLayout::Loop);
  EXPECT_EQ(numStages(loop), 8);
  std::vector<int64_t> loopRanks;
  for (int64_t s = 0; s < 8; ++s)
    loopRanks.push_back(stageToRank(loop, s));
  EXPECT_EQ(loopRanks, (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(rankStages(loop, 1), (std::vector<int64_t>{1, 5}));

  ScheduleSpec v{ScheduleKind::ZBVZeroBubble, 4, 2, 8};
  EXPECT_EQ(layoutOf(v.kind), StageLayout::V);
  std::vector<int64_t> vRanks;
  for (int64_t s = 0; s < 8; ++s)
    vRanks.push_back(stageToRank(v, s));
  EXPECT_EQ(vRanks, (std::vector<int64_t>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(rankStages(v, 0), (std::vector<int64_t>{0, 7}));
  EXPECT_EQ(rankStages(v, 3), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(layoutOf(ScheduleKind::DualPipeV), StageLayout::V);
}

TEST(PipelineStages, WhichSchedulesSplitBackward) {
  // The zero-bubble schedules and DualPipeV schedule I and W apart; the
  // others run whole backwards.
  for (ScheduleKind kind :
       {ScheduleKind::InterleavedZeroBubble, ScheduleKind::ZBVZeroBubble,
        ScheduleKind::DualPipeV})
    EXPECT_TRUE(splitsBackward(kind)) << stringifyScheduleKind(kind).str();
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
        ScheduleKind::Interleaved1F1B, ScheduleKind::LoopedBFS})
    EXPECT_FALSE(splitsBackward(kind)) << stringifyScheduleKind(kind).str();
}

TEST(PipelineSpec, Refusals) {
  auto check = [](ScheduleSpec spec, const char *expected) {
    std::string message = errorOf(verifySpec(spec));
    EXPECT_NE(message.find(expected), std::string::npos)
        << "got '" << message << "'";
    llvm::Expected<RankComputeOrder> order = buildComputeSchedule(spec);
    EXPECT_FALSE(static_cast<bool>(order));
    if (!order)
      llvm::consumeError(order.takeError());
  };
  check({ScheduleKind::GPipe, 0, 1, 4}, "at least 1 pipeline rank, got pp=0");
  check({ScheduleKind::OneFOneB, 2, 1, 0}, "at least 1 microbatch, got 0");
  check({ScheduleKind::OneFOneB, 2, 2, 8},
        "1F1B runs exactly 1 stage per rank, got 2");
  check({ScheduleKind::GPipe, 4, 1, 3},
        "GPipe needs at least as many microbatches as stages (4), got 3");
  check({ScheduleKind::Interleaved1F1B, 2, 1, 8},
        "Interleaved1F1B needs at least 2 stages per rank, got 1");
  check({ScheduleKind::LoopedBFS, 2, 1, 8},
        "LoopedBFS needs at least 2 stages per rank, got 1");
  check({ScheduleKind::ZBVZeroBubble, 2, 3, 8},
        "ZBVZeroBubble needs exactly 2 stages per rank, got 3");
  check({ScheduleKind::DualPipeV, 2, 1, 8},
        "DualPipeV needs exactly 2 stages per rank, got 1");
  check({ScheduleKind::DualPipeV, 4, 2, 7},
        "DualPipeV needs at least as many microbatches as stages (8), got 7");
  check({ScheduleKind::Interleaved1F1B, 2, 2, 5},
        "Interleaved1F1B needs the microbatches (5) to be a multiple of the "
        "number of rounds, max(1, microbatches / pp) = 2");
  check({ScheduleKind::InterleavedZeroBubble, 4, 2, 9},
        "multiple of the number of rounds");
  // Accepted where PyTorch accepts them.
  EXPECT_EQ(errorOf(verifySpec({ScheduleKind::LoopedBFS, 2, 2, 5})), "");
  EXPECT_EQ(errorOf(verifySpec({ScheduleKind::Interleaved1F1B, 4, 2, 3})), "");
  EXPECT_EQ(errorOf(verifySpec({ScheduleKind::ZBVZeroBubble, 4, 2, 2})), "");
}

TEST(PipelineValidate, RefusesBrokenOrders) {
  ScheduleSpec spec{ScheduleKind::GPipe, 2, 1, 2};
  llvm::Expected<RankComputeOrder> good = buildComputeSchedule(spec);
  ASSERT_TRUE(static_cast<bool>(good));
  EXPECT_EQ(errorOf(validateComputeSchedule(spec, *good)), "");

  auto expectError = [&](RankComputeOrder order, const char *expected) {
    std::string message = errorOf(validateComputeSchedule(spec, order));
    EXPECT_NE(message.find(expected), std::string::npos)
        << "got '" << message << "'";
  };
  using K = ActionKind;
  // 1F1B's last rank as PyTorch's pipeline_order lists it: its first
  // backward has no forward.
  expectError({{Action{0, K::Forward, 0}, Action{0, K::Forward, 1},
                Action{0, K::FullBackward, 0}, Action{0, K::FullBackward, 1}},
               {Action{1, K::Forward, 1}, Action{1, K::FullBackward, 0}}},
              "rank 1, step 1 (1B0): a backward runs before the forward");
  expectError({{Action{0, K::Forward, 0}}}, "the schedule has 1 ranks");
  expectError({{Action{1, K::Forward, 0}}, {}}, "stage 1 belongs to rank 1");
  expectError({{Action{0, K::Unshard, std::nullopt}}, {}},
              "only F, B, I and W");
  expectError({{Action{0, K::Forward, 0}, Action{0, K::Forward, 0}}, {}},
              "runs a second time");
  expectError({{Action{0, K::Forward, 0}, Action{0, K::BackwardInput, 0},
                Action{0, K::FullBackward, 0}},
               {}},
              "already had its backward");
  expectError({{Action{0, K::Forward, 0}, Action{0, K::BackwardWeight, 0}}, {}},
              "W runs before the I");
  expectError({{Action{0, K::Forward, 2}}, {}}, "microbatch 2 is not one");
  expectError({{Action{0, K::Forward, 0}, Action{0, K::Forward, 1},
                Action{0, K::FullBackward, 0}, Action{0, K::FullBackward, 1}},
               {Action{1, K::Forward, 0}, Action{1, K::FullBackward, 0}}},
              "stage 1 runs F for 1 microbatches, expected 2");
}

TEST(PipelineLowering, UnshardReshardKeepsThreeStages) {
  using K = ActionKind;
  std::vector<std::optional<Action>> order = {
      Action{0, K::Forward, 0}, std::nullopt,
      Action{1, K::Forward, 0}, Action{2, K::Forward, 0},
      Action{3, K::Forward, 0}, Action{0, K::FullBackward, 0}};
  std::vector<std::string> texts;
  for (const Action &a : addUnshardReshard(order))
    texts.push_back(a.str());
  // PyTorch 2.9's _add_unshard_reshard gives the same list without the
  // final 0RESHARD, which newer releases add.
  EXPECT_EQ(texts, (std::vector<std::string>{
                       "0UNSHARD", "1UNSHARD", "2UNSHARD", "0F0", "0RESHARD",
                       "3UNSHARD", "1F0", "1RESHARD", "0UNSHARD", "2F0",
                       "2RESHARD", "3F0", "3RESHARD", "0B0", "0RESHARD"}));
}

TEST(PipelineLowering, ReduceGradAfterLastBOrW) {
  using K = ActionKind;
  std::vector<Action> actions = {
      Action{0, K::Forward, 0},        Action{0, K::Forward, 1},
      Action{0, K::BackwardInput, 0},  Action{0, K::BackwardInput, 1},
      Action{0, K::BackwardWeight, 0}, Action{1, K::FullBackward, 0},
      Action{1, K::FullBackward, 1},   Action{0, K::BackwardWeight, 1}};
  std::vector<std::string> texts;
  for (const Action &a : addReduceGrad(actions, 2))
    texts.push_back(a.str());
  EXPECT_EQ(texts, (std::vector<std::string>{"0F0", "0F1", "0I0", "0I1", "0W0",
                                             "1B0", "1B1", "1REDUCE_GRAD",
                                             "0W1", "0REDUCE_GRAD"}));
}

// The cases of PyTorch's test_schedule.py (TestScheduleLowering):
// test_unshard_reshard and test_reduce_grad, on one rank's list.
std::vector<std::optional<Action>> parseOrder(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef> words;
  text.split(words, ' ', -1, /*KeepEmpty=*/false);
  std::vector<std::optional<Action>> order;
  for (llvm::StringRef word : words) {
    if (word == "_") {
      order.push_back(std::nullopt);
      continue;
    }
    llvm::Expected<Action> action = Action::parse(word);
    EXPECT_TRUE(static_cast<bool>(action)) << word.str();
    if (!action) {
      llvm::consumeError(action.takeError());
      continue;
    }
    order.push_back(*action);
  }
  return order;
}

std::string join(llvm::ArrayRef<Action> actions) {
  std::string text;
  for (const Action &a : actions)
    text += (text.empty() ? "" : " ") + a.str();
  return text;
}

TEST(PipelineLowering, PyTorchUnshardReshardCases) {
  EXPECT_EQ(join(addUnshardReshard(parseOrder("0F0 0F1 _ 0B0 0B1"))),
            "0UNSHARD 0F0 0F1 0B0 0B1 0RESHARD");
  EXPECT_EQ(
      join(addUnshardReshard(parseOrder("0F0 0F1 1F0 1F1 1B0 1B1 0B0 0B1"))),
      "0UNSHARD 1UNSHARD 0F0 0F1 1F0 1F1 1B0 1B1 1RESHARD 0B0 0B1 "
      "0RESHARD");
}

TEST(PipelineLowering, PyTorchReduceGradCases) {
  auto withoutBubbles = [](llvm::StringRef text) {
    std::vector<Action> actions;
    for (const std::optional<Action> &a : parseOrder(text))
      if (a)
        actions.push_back(*a);
    return actions;
  };
  EXPECT_EQ(join(addReduceGrad(withoutBubbles("0F0 0F1 _ 0B0 0B1"), 2)),
            "0F0 0F1 0B0 0B1 0REDUCE_GRAD");
  EXPECT_EQ(
      join(addReduceGrad(withoutBubbles("0F0 0F1 1F0 1F1 1B0 1B1 0B0 0B1"), 2)),
      "0F0 0F1 1F0 1F1 1B0 1B1 1REDUCE_GRAD 0B0 0B1 0REDUCE_GRAD");
}

TEST(PipelineLowering, SendRecvRefusesDeadlock) {
  using K = ActionKind;
  ScheduleSpec spec{ScheduleKind::GPipe, 2, 1, 1};
  // Rank 0 waits for stage 1's backward before running the forward that
  // stage 1 needs.
  RankActions actions = {
      {Action{0, K::FullBackward, 0}, Action{0, K::Forward, 0}},
      {Action{1, K::Forward, 0}, Action{1, K::FullBackward, 0}}};
  llvm::Expected<RankActions> lowered = addSendRecv(spec, actions);
  ASSERT_FALSE(static_cast<bool>(lowered));
  std::string message = llvm::toString(lowered.takeError());
  EXPECT_NE(message.find("Malformed compute schedule, can't schedule "
                         "sends/recvs"),
            std::string::npos);
  EXPECT_NE(message.find("rank 0 at 0B0, rank 1 at 1F0"), std::string::npos)
      << message;
}

TEST(PipelineLowering, SendRecvRefusesBadGeometry) {
  using K = ActionKind;
  ScheduleSpec spec{ScheduleKind::GPipe, 2, 1, 1};
  RankActions oneRank = {{Action{0, K::Forward, 0}}};
  llvm::Expected<RankActions> lowered = addSendRecv(spec, oneRank);
  ASSERT_FALSE(static_cast<bool>(lowered));
  EXPECT_NE(llvm::toString(lowered.takeError())
                .find("1 ranks' actions, expected pp=2"),
            std::string::npos);

  RankActions farStage = {{Action{0, K::Forward, 0}},
                          {Action{5, K::Forward, 0}}};
  lowered = addSendRecv(spec, farStage);
  ASSERT_FALSE(static_cast<bool>(lowered));
  EXPECT_NE(llvm::toString(lowered.takeError())
                .find("rank 1 runs 5F0, but stage 5 is not one of the 2 "
                      "stages"),
            std::string::npos);

  spec.pp = 0;
  lowered = addSendRecv(spec, {});
  ASSERT_FALSE(static_cast<bool>(lowered));
  EXPECT_NE(llvm::toString(lowered.takeError()).find("pp=0"),
            std::string::npos);
}

} // namespace
