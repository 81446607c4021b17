//===- Trace.cpp - Chrome trace-event output of step timings --------------===//

#include "loomrt/Trace.h"

#include "FileUtil.h"

#include <nlohmann/json.hpp>

using nlohmann::json;

namespace loomrt {

struct TraceWriter::Events {
  json list = json::array();
};

TraceWriter::TraceWriter(const Artifact &artifact)
    : artifact_(artifact), events_(std::make_unique<Events>()) {
  json &l = events_->list;
  l.push_back({{"ph", "M"},
               {"name", "process_name"},
               {"pid", 0},
               {"args", {{"name", "rank 0"}}}});
  l.push_back({{"ph", "M"},
               {"name", "thread_name"},
               {"pid", 0},
               {"tid", 0},
               {"args", {{"name", "steps"}}}});
  const std::vector<std::string> &streams = artifact.programs[0].streams;
  for (size_t s = 0; s < streams.size(); ++s)
    l.push_back({{"ph", "M"},
                 {"name", "thread_name"},
                 {"pid", 0},
                 {"tid", s + 1},
                 {"args", {{"name", "stream " + streams[s]}}}});
}

TraceWriter::~TraceWriter() = default;

void TraceWriter::addStep(const StepStats &stats) {
  json &l = events_->list;
  l.push_back({{"ph", "X"},
               {"name", "step " + std::to_string(stats.step)},
               {"cat", "step"},
               {"pid", 0},
               {"tid", 0},
               {"ts", stats.startUs},
               {"dur", stats.timeMs * 1000.0},
               {"args",
                {{"loss", stats.loss},
                 {"start_bytes", stats.startBytes},
                 {"peak_bytes", stats.peakBytes},
                 {"allocations", stats.allocations}}}});
  l.push_back({{"ph", "C"},
               {"name", "memory"},
               {"pid", 0},
               {"ts", stats.startUs},
               {"args",
                {{"start MiB", double(stats.startBytes) / (1 << 20)},
                 {"peak MiB", double(stats.peakBytes) / (1 << 20)}}}});
  const std::vector<Instruction> &insts = artifact_.programs[0].instructions;
  for (const InstructionTiming &t : stats.instructions) {
    const Instruction &inst = insts[t.index];
    const char *op = inst.op == OpKind::Aten   ? "aten"
                     : inst.op == OpKind::Free ? "free"
                                               : "optimizer";
    std::string name = !inst.name.empty()        ? inst.name
                       : inst.op == OpKind::Aten ? inst.qualifiedKernel()
                       : inst.op == OpKind::Optimizer
                           ? "optimizer " + inst.param
                           : std::string(op);
    json args = {{"step", stats.step}, {"index", t.index}, {"op", op}};
    if (inst.op == OpKind::Aten)
      args["kernel"] = inst.qualifiedKernel();
    if (!inst.module.empty())
      args["module"] = inst.module;
    if (!inst.phase.empty())
      args["phase"] = inst.phase;
    l.push_back({{"ph", "X"},
                 {"name", name},
                 {"cat", inst.phase.empty() ? op : inst.phase},
                 {"pid", 0},
                 {"tid", inst.stream + 1},
                 {"ts", t.startUs},
                 {"dur", t.durationUs},
                 {"args", std::move(args)}});
  }
}

void TraceWriter::write(const std::string &path) const {
  json root = {{"traceEvents", events_->list}, {"displayTimeUnit", "ms"}};
  std::string text = root.dump();
  AtomicFileWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

} // namespace loomrt
