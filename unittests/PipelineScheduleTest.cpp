//===- PipelineScheduleTest.cpp - Actions, spec checks and stage placement
//-===//

#include "loom/Transforms/Pipeline/Schedule.h"

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
  for (const char *name : {"GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS",
                           "InterleavedZeroBubble", "ZBVZeroBubble"}) {
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

} // namespace
