//===- Trace.h - Chrome trace-event output of step timings -----*- C++ -*-===//
//
// Collects StepStats (with per-instruction timings, Session::setTracing)
// and writes them in the Chrome trace-event JSON format, which Perfetto and
// chrome://tracing open. One process per rank (pid = rank) with the tracks
//
//   tid 0  "steps"                 one complete ("X") event per step
//   tid 1  "compute"               every instruction the rank's main thread
//                                  runs, in program order: ATen kernels,
//                                  frees, optimizer updates, the issue of a
//                                  collective (`*_start`) and the time it is
//                                  blocked waiting for one (`wait`)
//   tid 2+ "comm", "comm 2", ...   each collective from its issue to its real
//                                  completion (the backend's Work future), on
//                                  the first lane free at its issue
//
// so the overlap of compute with communication in flight is visible, and a
// counter for peak memory. Step events carry the time collectives were in
// flight and the part of it the main thread spent waiting (exposed).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_TRACE_H
#define LOOMRT_TRACE_H

#include "loomrt/Session.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loomrt {

class TraceWriter {
public:
  /// `rank` of `worldSize` becomes the process (pid) of every event.
  explicit TraceWriter(const Artifact &artifact, int64_t rank = 0,
                       int64_t worldSize = 1);
  ~TraceWriter();
  TraceWriter(const TraceWriter &) = delete;
  TraceWriter &operator=(const TraceWriter &) = delete;

  void addStep(const StepStats &stats);
  /// Writes the trace (atomically). Throws loomrt::Error.
  void write(const std::string &path) const;

private:
  struct Events;
  /// The step's span on the steps thread and its memory counter.
  void addStepSummary(const StepStats &stats);
  /// One instruction's span on the compute thread.
  void addInstruction(int64_t step, const Program &program,
                      const InstructionTiming &t);
  /// Each collective's span from issue to completion, on a comm lane.
  void addCollectives(const StepStats &stats, const Program &program);
  /// The thread of the first comm lane free at `issueUs` (a new one named
  /// when none is), busy until `completeUs`.
  int laneFor(double issueUs, double completeUs);

  const Artifact &artifact_;
  int64_t rank_;
  std::unique_ptr<Events> events_;
};

/// The file rank `rank` of a multi-rank run writes for the trace `path`:
/// `path` with `.rank<r>` before its extension (`t.json` -> `t.rank1.json`).
std::string rankTracePath(const std::string &path, int64_t rank);

/// Merges the traces of several ranks (each written by a TraceWriter) into
/// one file, shifting each rank's timestamps so that all share the earliest
/// rank's time origin (the ranks' steady clocks are one clock on one
/// machine). Throws loomrt::Error naming a file that is missing or not a
/// trace.
void mergeTraces(const std::vector<std::string> &parts,
                 const std::string &path);

} // namespace loomrt

#endif // LOOMRT_TRACE_H
