//===- Simulate.cpp - The loom-simulate report pass -----------------------===//

#include "loom/Analysis/Simulator.h"
#include "loom/Transforms/Passes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace loom {
#define GEN_PASS_DEF_LOOMSIMULATE
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {
struct LoomSimulatePass
    : public loom::impl::LoomSimulateBase<LoomSimulatePass> {
  using LoomSimulateBase::LoomSimulateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    CostModelConfig config{device,         deviceDir, algorithm, nodes,
                           devicesPerNode, tf32,      opTimes};
    FailureOr<CostModel> built =
        buildCostModel(config, module, "loom-simulate");
    if (failed(built))
      return signalPassFailure();
    const CostModel &model = *built;
    const DeviceSpec &spec = model.getSpec();
    int64_t perNode = model.getOptions().topology.devicesPerNode;

    SimOptions simOptions;
    simOptions.commStreams = commStreams;
    simOptions.recordTimeline = !timeline.empty();

    // A pipelined module's steps are the programs of one step, replayed
    // together so that a recv waits for its send.
    SmallVector<func::FuncOp> programs, steps;
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(LoomDialect::kStepAttrName))
        (func->hasAttr(LoomDialect::kProgramRanksAttrName) ? programs : steps)
            .push_back(func);
    if (!programs.empty()) {
      if (!steps.empty()) {
        steps.front().emitError("a pipelined module's steps all need '")
            << LoomDialect::kProgramRanksAttrName << "', as @"
            << programs.front().getSymName() << " has";
        return signalPassFailure();
      }
      if (failed(simulatePipelined(programs, model, simOptions)))
        return signalPassFailure();
      markAllAnalysesPreserved();
      return;
    }

    llvm::json::Array traceEvents;
    int64_t pid = 0;
    bool any = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (!func->hasAttr(LoomDialect::kStepAttrName))
        continue;
      any = true;
      FailureOr<SimulationResult> result = simulate(func, model, simOptions);
      if (failed(result))
        return signalPassFailure();
      if (json) {
        llvm::json::Object obj{
            {"function", func.getSymName().str()},
            {"device", spec.name},
            {"nodes", nodes.getValue()},
            {"devices_per_node", perNode},
            {"comm_streams", static_cast<int64_t>(commStreams)},
            {"algorithm", algorithm.getValue()}};
        llvm::json::Value report = result->toJSON();
        for (auto &kv : *report.getAsObject())
          obj[kv.first] = std::move(kv.second);
        llvm::errs() << llvm::formatv("{0:2}",
                                      llvm::json::Value(std::move(obj)))
                     << "\n";
      } else {
        llvm::errs() << "=== loom-simulate @" << func.getSymName() << " on "
                     << spec.name << " (" << nodes << " node(s) x " << perNode
                     << " devices, " << algorithm << " collectives, "
                     << commStreams << " comm stream(s)) ===\n";
        result->print(llvm::errs());
      }
      if (!timeline.empty()) {
        llvm::json::Value trace =
            result->toChromeTrace(pid++, ("@" + func.getSymName()).str());
        for (llvm::json::Value &e :
             *trace.getAsObject()->getArray("traceEvents"))
          traceEvents.push_back(std::move(e));
      }
    }
    if (!any) {
      module.emitError("no step function (func.func with '")
          << LoomDialect::kStepAttrName << "') to simulate";
      return signalPassFailure();
    }
    if (!timeline.empty()) {
      std::error_code ec;
      llvm::ToolOutputFile out(timeline, ec, llvm::sys::fs::OF_Text);
      if (ec) {
        module.emitError("loom-simulate: cannot write timeline '")
            << timeline << "': " << ec.message();
        return signalPassFailure();
      }
      out.os() << llvm::formatv("{0}",
                                llvm::json::Value(llvm::json::Object{
                                    {"traceEvents", std::move(traceEvents)},
                                    {"displayTimeUnit", "ns"}}))
               << "\n";
      out.keep();
    }
    markAllAnalysesPreserved();
  }

  LogicalResult writeTimeline(ModuleOp module, llvm::json::Value trace) {
    std::error_code ec;
    llvm::ToolOutputFile out(timeline, ec, llvm::sys::fs::OF_Text);
    if (ec)
      return module.emitError("loom-simulate: cannot write timeline '")
             << timeline << "': " << ec.message();
    out.os() << llvm::formatv("{0}", trace) << "\n";
    out.keep();
    return success();
  }

  LogicalResult simulatePipelined(ArrayRef<func::FuncOp> programs,
                                  const CostModel &model,
                                  const SimOptions &simOptions) {
    FailureOr<PipelineSimulationResult> result =
        simulatePipeline(programs, model, simOptions);
    if (failed(result))
      return failure();
    const DeviceSpec &spec = model.getSpec();
    int64_t perNode = model.getOptions().topology.devicesPerNode;
    if (json) {
      llvm::json::Object obj{
          {"device", spec.name},
          {"nodes", nodes.getValue()},
          {"devices_per_node", perNode},
          {"comm_streams", static_cast<int64_t>(commStreams)},
          {"algorithm", algorithm.getValue()}};
      llvm::json::Value report = result->toJSON();
      for (auto &kv : *report.getAsObject())
        obj[kv.first] = std::move(kv.second);
      llvm::errs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(obj)))
                   << "\n";
    } else {
      llvm::errs() << "=== loom-simulate: pipelined step of " << programs.size()
                   << " programs on " << spec.name << " (" << nodes
                   << " node(s) x " << perNode << " devices, " << algorithm
                   << " collectives, " << commStreams
                   << " comm stream(s)) ===\n";
      result->print(llvm::errs());
    }
    if (!timeline.empty())
      return writeTimeline(programs.front()->getParentOfType<ModuleOp>(),
                           result->toChromeTrace());
    return success();
  }
};
} // namespace
