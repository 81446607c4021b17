//===- loom-sac.cpp - PyTorch's SAC MILPs on statistics read as JSON ------===//

#include "loom/Analysis/SacSolvers.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {
enum class Mode { Knapsack, Milp };
} // namespace

static cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                                      cl::desc("<statistics.json>"));
static cl::opt<Mode>
    mode("mode", cl::Required, cl::desc("Which formulation to solve"),
         cl::values(clEnumValN(Mode::Knapsack, "knapsack",
                               "per-op knapsack over one module's SACStats "
                               "(get_optimal_checkpointing_policy_per_module)"),
                    clEnumValN(Mode::Milp, "milp",
                               "module-level MILP over a module graph "
                               "(sac_milp)")));
static cl::opt<double>
    budget("budget", cl::Required,
           cl::desc("knapsack: the fraction of the module's activation "
                    "memory to keep, in [0, 1]; milp: GiB per rank"));
static cl::opt<unsigned>
    worldSize("world-size", cl::init(1),
              cl::desc("milp: ranks that parameters and gradients are "
                       "sharded over"));
static cl::list<std::string>
    acUnits("ac-units", cl::CommaSeparated,
            cl::desc("milp: the only modules that may be checkpointed"));
static cl::list<std::string>
    fsdpUnits("fsdp-units", cl::CommaSeparated,
              cl::desc("milp: FSDP units, which no checkpointed module may "
                       "contain"));
static cl::opt<double>
    gap("gap", cl::init(0.05),
        cl::desc("Relative optimality gap at which CBC stops (PyTorch: "
                 "0.05)"));
static cl::opt<double>
    timeLimit("time-limit", cl::init(-1),
              cl::desc("CBC's time limit in seconds (default: PyTorch's, "
                       "10 for knapsack, 180 for milp)"));

static int fail(const Twine &message) {
  WithColor::error(errs(), "loom-sac") << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv,
      "loom-sac: PyTorch's two selective-activation-checkpointing MILPs, "
      "solved with CBC on statistics read as JSON; prints the result as "
      "JSON\n");

  ErrorOr<std::unique_ptr<MemoryBuffer>> file =
      MemoryBuffer::getFileOrSTDIN(inputPath);
  if (!file)
    return fail(inputPath + ": " + file.getError().message());
  Expected<json::Value> document = json::parse((*file)->getBuffer());
  if (!document)
    return fail(inputPath +
                ": invalid JSON: " + toString(document.takeError()));

  loom::MilpOptions options = mode == Mode::Knapsack
                                  ? loom::defaultKnapsackOptions()
                                  : loom::defaultSacMilpOptions();
  options.relativeGap = gap;
  if (timeLimit >= 0)
    options.timeLimitSeconds = timeLimit;

  json::Path::Root root(mode == Mode::Knapsack ? "sac_stats" : "graph");
  json::Value output = nullptr;
  if (mode == Mode::Knapsack) {
    loom::SacStats stats;
    if (!fromJSON(*document, stats, root))
      return fail(inputPath + ": " + toString(root.getError()));
    Expected<std::vector<int>> decisions =
        loom::solveSacKnapsack(stats, budget, options);
    if (!decisions)
      return fail(inputPath + ": " + toString(decisions.takeError()));
    output = json::Object{{"decisions", json::Array(*decisions)}};
  } else {
    loom::SacModuleGraph graph;
    if (!fromJSON(*document, graph, root))
      return fail(inputPath + ": " + toString(root.getError()));
    std::optional<std::vector<std::string>> ac, fsdp;
    if (!acUnits.empty())
      ac.emplace(acUnits.begin(), acUnits.end());
    if (!fsdpUnits.empty())
      fsdp.emplace(fsdpUnits.begin(), fsdpUnits.end());
    Expected<loom::SacMilpResult> result =
        loom::solveSacMilp(graph, budget, worldSize, ac, fsdp, options);
    if (!result)
      return fail(inputPath + ": " + toString(result.takeError()));
    json::Object object = std::move(*toJSON(*result).getAsObject());
    auto [peak, computeTime] = loom::sacBaseline(graph);
    object["baseline_peak_memory"] = peak;
    object["compute_time"] = computeTime;
    output = std::move(object);
  }
  outs() << formatv("{0:2}", output) << "\n";
  return 0;
}
