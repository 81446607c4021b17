//===- Trace.cpp - Chrome trace-event output of step timings --------------===//

#include "loomrt/Trace.h"

#include "FileUtil.h"
#include "loomrt/Dtype.h"
#include "loomrt/Error.h"
#include "loomrt/KernelSignature.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

using nlohmann::json;

namespace loomrt {

namespace {

constexpr int kStepsTid = 0;
constexpr int kComputeTid = 1;
constexpr int kFirstCommTid = 2;

std::string laneName(size_t lane) {
  return lane == 0 ? "comm" : "comm " + std::to_string(lane + 1);
}

/// The signature of an optimizer instruction's update
/// (loomrt/KernelSignature.h), by which the cost model's `op-times` prices
/// the step's updates; "" without the artifact's optimizer or the input.
std::string optimizerTraceSignature(const Artifact &artifact,
                                    const Program &program,
                                    const Instruction &inst) {
  int64_t input = program.findInput(inst.param);
  if (!artifact.optimizer || input < 0)
    return "";
  const OptimizerSpec &spec = *artifact.optimizer;
  const InputSpec &param = program.inputs[size_t(input)];
  double weightDecay = inst.weightDecay.value_or(spec.weightDecay);
  return optimizerSignature(
      toString(spec.kind), spec.impl == OptimizerImpl::Fused, spec.maximize,
      weightDecay != 0, spec.momentum != 0, spec.nesterov, spec.amsgrad,
      spec.centered, spec.decoupledWeightDecay,
      spellSignatureTensor(artifactDtypeName(param.dtype), param.shape));
}

} // namespace

struct TraceWriter::Events {
  json list = json::array();
  /// Per comm lane, when its last collective completed.
  std::vector<double> laneEnds;
  double epochUs = -1;
  int64_t worldSize = 1;
};

/// The metadata events that name thread `tid` of process `pid` and sort it.
static void nameThread(json &l, int64_t pid, int tid, const std::string &name) {
  l.push_back({{"ph", "M"},
               {"name", "thread_name"},
               {"pid", pid},
               {"tid", tid},
               {"args", {{"name", name}}}});
  l.push_back({{"ph", "M"},
               {"name", "thread_sort_index"},
               {"pid", pid},
               {"tid", tid},
               {"args", {{"sort_index", tid}}}});
}

TraceWriter::TraceWriter(const Artifact &artifact, int64_t rank,
                         int64_t worldSize)
    : artifact_(artifact), rank_(rank), events_(std::make_unique<Events>()) {
  events_->worldSize = worldSize;
  json &l = events_->list;
  l.push_back({{"ph", "M"},
               {"name", "process_name"},
               {"pid", rank},
               {"args", {{"name", "rank " + std::to_string(rank)}}}});
  l.push_back({{"ph", "M"},
               {"name", "process_sort_index"},
               {"pid", rank},
               {"args", {{"sort_index", rank}}}});
  nameThread(l, rank, kStepsTid, "steps");
  nameThread(l, rank, kComputeTid, "compute");
}

TraceWriter::~TraceWriter() = default;

void TraceWriter::addStep(const StepStats &stats) {
  if (events_->epochUs < 0)
    events_->epochUs = stats.epochUs;
  addStepSummary(stats);
  // This rank's program (MPMD artifacts run one per pipeline stage).
  int64_t own = artifact_.programOf(rank_);
  const Program &program = artifact_.programs[size_t(own < 0 ? 0 : own)];
  for (const InstructionTiming &t : stats.instructions)
    addInstruction(stats.step, program, t);
  addCollectives(stats, program);
}

void TraceWriter::addStepSummary(const StepStats &stats) {
  json &l = events_->list;
  double inFlightUs = 0, waitUs = 0;
  for (const CollectiveTiming &c : stats.collectiveTimings) {
    inFlightUs += c.completeUs - c.issueUs;
    waitUs += c.waitEndUs - c.waitBeginUs;
  }
  l.push_back({{"ph", "X"},
               {"name", "step " + std::to_string(stats.step)},
               {"cat", "step"},
               {"pid", rank_},
               {"tid", kStepsTid},
               {"ts", stats.startUs},
               {"dur", stats.timeMs * 1000.0},
               {"args",
                {{"loss", stats.loss},
                 {"start_bytes", stats.startBytes},
                 {"peak_bytes", stats.peakBytes},
                 {"allocations", stats.allocations},
                 {"collectives", stats.collectiveTimings.size()},
                 {"comm_in_flight_us", inFlightUs},
                 {"comm_wait_us", waitUs}}}});
  l.push_back({{"ph", "C"},
               {"name", "memory"},
               {"pid", rank_},
               {"ts", stats.startUs},
               {"args",
                {{"start MiB", double(stats.startBytes) / (1 << 20)},
                 {"peak MiB", double(stats.peakBytes) / (1 << 20)}}}});
}

void TraceWriter::addInstruction(int64_t step, const Program &program,
                                 const InstructionTiming &t) {
  const Instruction &inst = program.instructions[t.index];
  const char *op = toString(inst.op);
  const char *collective = collectiveName(inst.op);
  std::string name = !inst.name.empty()             ? inst.name
                     : inst.op == OpKind::Aten      ? inst.qualifiedKernel()
                     : inst.op == OpKind::Optimizer ? "optimizer " + inst.param
                                                    : std::string(op);
  json args = {{"step", step}, {"index", t.index}, {"op", op}};
  if (inst.op == OpKind::Aten)
    args["kernel"] = inst.qualifiedKernel();
  if (!inst.signature.empty())
    args["signature"] = inst.signature;
  else if (inst.op == OpKind::Optimizer)
    if (std::string signature =
            optimizerTraceSignature(artifact_, program, inst);
        !signature.empty())
      args["signature"] = signature;
  if (!inst.module.empty())
    args["module"] = inst.module;
  if (!inst.phase.empty())
    args["phase"] = inst.phase;
  std::string cat = inst.phase.empty() ? op : inst.phase;
  if (collective || inst.op == OpKind::Wait) {
    // The session's thread issues and waits on every device; the program's
    // stream is recorded (on CUDA the collective itself runs on its kind's
    // stream, Device.h).
    args["stream"] =
        inst.stream >= 0 && size_t(inst.stream) < program.streams.size()
            ? program.streams[size_t(inst.stream)]
            : std::to_string(inst.stream);
    cat = collective ? "comm_issue" : "comm_wait";
  }
  events_->list.push_back({{"ph", "X"},
                           {"name", name},
                           {"cat", cat},
                           {"pid", rank_},
                           {"tid", kComputeTid},
                           {"ts", t.startUs},
                           {"dur", t.durationUs},
                           {"args", std::move(args)}});
}

int TraceWriter::laneFor(double issueUs, double completeUs) {
  std::vector<double> &lanes = events_->laneEnds;
  size_t lane = 0;
  while (lane < lanes.size() && lanes[lane] > issueUs)
    ++lane;
  if (lane == lanes.size()) {
    lanes.push_back(0);
    nameThread(events_->list, rank_, kFirstCommTid + int(lane), laneName(lane));
  }
  lanes[lane] = completeUs;
  return kFirstCommTid + int(lane);
}

void TraceWriter::addCollectives(const StepStats &stats,
                                 const Program &program) {
  // Collectives in flight, each on the first lane free at its issue
  // (several can be in flight at once: each process group has its own
  // worker threads).
  std::vector<const CollectiveTiming *> order;
  for (const CollectiveTiming &c : stats.collectiveTimings)
    order.push_back(&c);
  std::stable_sort(order.begin(), order.end(),
                   [](const CollectiveTiming *a, const CollectiveTiming *b) {
                     return a->issueUs < b->issueUs;
                   });
  for (const CollectiveTiming *c : order) {
    int tid = laneFor(c->issueUs, c->completeUs);
    const Instruction &start = program.instructions[c->start];
    const char *kind = collectiveName(start.op);
    std::string name = kind ? kind : "collective";
    if (!start.module.empty())
      name += " " + start.module;
    else if (!start.name.empty())
      name += " " + start.name;
    json args = {{"step", stats.step},
                 {"kind", kind ? kind : ""},
                 {"start_index", c->start},
                 {"wait_index", c->wait},
                 {"bytes", c->bytes},
                 {"collective", c->describe},
                 {"wait_us", c->waitEndUs - c->waitBeginUs},
                 {"issue_to_wait_us", c->waitBeginUs - c->issueUs}};
    if (!start.module.empty())
      args["module"] = start.module;
    if (!start.phase.empty())
      args["phase"] = start.phase;
    events_->list.push_back({{"ph", "X"},
                             {"name", name},
                             {"cat", "comm"},
                             {"pid", rank_},
                             {"tid", tid},
                             {"ts", c->issueUs},
                             {"dur", std::max(0.0, c->completeUs - c->issueUs)},
                             {"args", std::move(args)}});
  }
}

void TraceWriter::write(const std::string &path) const {
  json root = {{"traceEvents", events_->list},
               {"displayTimeUnit", "ms"},
               {"otherData",
                {{"rank", rank_},
                 {"world_size", events_->worldSize},
                 {"steady_clock_epoch_us", std::max(0.0, events_->epochUs)}}}};
  std::string text = root.dump();
  AtomicFileWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

std::string rankTracePath(const std::string &path, int64_t rank) {
  std::string suffix = ".rank" + std::to_string(rank);
  size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot == (slash == std::string::npos ? 0 : slash + 1))
    return path + suffix;
  return path.substr(0, dot) + suffix + path.substr(dot);
}

void mergeTraces(const std::vector<std::string> &parts,
                 const std::string &path) {
  std::vector<json> traces;
  double origin = std::numeric_limits<double>::infinity();
  for (const std::string &part : parts) {
    json t = json::parse(readFile(part), nullptr, /*allow_exceptions=*/false);
    if (!t.is_object() || !t.contains("traceEvents") ||
        !t["traceEvents"].is_array())
      throw Error(part + ": not a Chrome trace (no traceEvents array)");
    double epoch = t.value("otherData", json::object())
                       .value("steady_clock_epoch_us", 0.0);
    origin = std::min(origin, epoch);
    traces.push_back(std::move(t));
  }
  json events = json::array();
  for (json &t : traces) {
    double shift = t["otherData"].value("steady_clock_epoch_us", 0.0) - origin;
    for (json &e : t["traceEvents"]) {
      if (e.contains("ts") && e["ts"].is_number())
        e["ts"] = e["ts"].get<double>() + shift;
      events.push_back(std::move(e));
    }
  }
  json root = {{"traceEvents", std::move(events)},
               {"displayTimeUnit", "ms"},
               {"otherData",
                {{"world_size", int64_t(parts.size())},
                 {"steady_clock_epoch_us", parts.empty() ? 0.0 : origin}}}};
  std::string text = root.dump();
  AtomicFileWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

} // namespace loomrt
