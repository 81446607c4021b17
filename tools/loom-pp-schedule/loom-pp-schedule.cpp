//===- loom-pp-schedule.cpp - Print a pipeline schedule's per-rank lists --===//

#include "loom/Transforms/Pipeline/Schedule.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace loom::pipeline;

static cl::opt<ScheduleKind> scheduleKind(
    "schedule", cl::Required, cl::desc("The schedule, by PyTorch's name"),
    cl::values(clEnumValN(ScheduleKind::GPipe, "GPipe",
                          "all forwards, then all "
                          "backwards"),
               clEnumValN(ScheduleKind::OneFOneB, "1F1B",
                          "one forward, one backward in the steady state"),
               clEnumValN(ScheduleKind::Interleaved1F1B, "Interleaved1F1B",
                          "1F1B over several stages per rank, depth first"),
               clEnumValN(ScheduleKind::LoopedBFS, "LoopedBFS",
                          "several stages per rank, breadth first"),
               clEnumValN(ScheduleKind::InterleavedZeroBubble,
                          "InterleavedZeroBubble",
                          "interleaved, backward split into I and W (ZB1P)"),
               clEnumValN(ScheduleKind::ZBVZeroBubble, "ZBVZeroBubble",
                          "zero bubble over two stages per rank placed in a V"),
               clEnumValN(ScheduleKind::DualPipeV, "DualPipeV",
                          "DeepSeek's DualPipe in a V: overlapped forward and "
                          "backward")));
static cl::opt<int64_t> pp("pp", cl::Required,
                           cl::desc("Ranks in the pipeline group"));
static cl::opt<int64_t> microbatches("microbatches", cl::Required,
                                     cl::desc("Microbatches per step"));
static cl::opt<int64_t> stagesPerRank(
    "stages-per-rank", cl::init(0),
    cl::desc("Stages each rank holds (default: 1 for GPipe and 1F1B, 2 for "
             "the others)"));
static cl::opt<bool>
    lowered("lowered",
            cl::desc("Print what each rank executes: with UNSHARD/RESHARD, "
                     "REDUCE_GRAD and sends/receives, without bubbles"));
static cl::opt<bool> asJson("json",
                            cl::desc("Print {\"<rank>\": [actions]} as JSON "
                                     "(bubbles are null)"));

static int fail(const Twine &message) {
  WithColor::error(errs(), "loom-pp-schedule") << message << "\n";
  return 1;
}

// One list per rank, as text lines or as one JSON object keyed by rank.
template <typename List, typename Print>
static void printRanks(const std::vector<List> &ranks, Print entryText) {
  if (asJson) {
    json::OStream out(outs());
    out.object([&] {
      for (size_t rank = 0; rank < ranks.size(); ++rank)
        out.attributeArray(std::to_string(rank), [&] {
          for (const auto &entry : ranks[rank]) {
            std::optional<std::string> text = entryText(entry);
            if (text)
              out.value(*text);
            else
              out.value(nullptr);
          }
        });
    });
    outs() << "\n";
    return;
  }
  for (auto [rank, list] : llvm::enumerate(ranks)) {
    outs() << "rank " << rank << ":";
    for (const auto &entry : list)
      outs() << " " << entryText(entry).value_or("_");
    outs() << "\n";
  }
}

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv,
      "loom-pp-schedule: the per-rank action lists of a pipeline schedule, "
      "as PyTorch's torch.distributed.pipelining builds them\n");

  ScheduleSpec spec;
  spec.kind = scheduleKind;
  spec.pp = pp;
  spec.microbatches = microbatches;
  spec.stagesPerRank = stagesPerRank.getNumOccurrences()
                           ? static_cast<int64_t>(stagesPerRank)
                           : (isSingleStage(spec.kind) ? 1 : 2);

  if (lowered) {
    Expected<RankActions> actions = lowerSchedule(spec);
    if (!actions)
      return fail(toString(actions.takeError()));
    printRanks(*actions, [](const Action &a) {
      return std::optional<std::string>(a.str());
    });
    return 0;
  }
  Expected<RankComputeOrder> order = buildComputeSchedule(spec);
  if (!order)
    return fail(toString(order.takeError()));
  printRanks(*order, [](const std::optional<Action> &a) {
    return a ? std::optional<std::string>(a->str()) : std::nullopt;
  });
  return 0;
}
