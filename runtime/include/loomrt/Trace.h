//===- Trace.h - Chrome trace-event output of step timings -----*- C++ -*-===//
//
// Collects StepStats (with per-instruction timings, Session::setTracing)
// and writes them in the Chrome trace-event JSON format, which Perfetto and
// chrome://tracing open: one complete ("X") event per step and per
// instruction (named after the graph node, with its module, phase and
// kernel), one thread per stream, and a counter for peak memory.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_TRACE_H
#define LOOMRT_TRACE_H

#include "loomrt/Session.h"

#include <memory>
#include <string>

namespace loomrt {

class TraceWriter {
public:
  explicit TraceWriter(const Artifact &artifact);
  ~TraceWriter();
  TraceWriter(const TraceWriter &) = delete;
  TraceWriter &operator=(const TraceWriter &) = delete;

  void addStep(const StepStats &stats);
  /// Writes the trace (atomically). Throws loomrt::Error.
  void write(const std::string &path) const;

private:
  struct Events;
  const Artifact &artifact_;
  std::unique_ptr<Events> events_;
};

} // namespace loomrt

#endif // LOOMRT_TRACE_H
