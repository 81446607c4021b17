//===- Runner.cpp - One rank of loom-run: steps, progress, --check --------===//

#include "loomrt/Runner.h"

#include "loomrt/Check.h"
#include "loomrt/Checkpoint.h"
#include "loomrt/Error.h"
#include "loomrt/Trace.h"

#include "KernelWorkspace.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace loomrt {

namespace {

/// Set by the launcher for its ranks: it merges their traces itself.
constexpr const char *kTraceMergeEnv = "LOOMRT_TRACE_MERGE";
/// Runs at least this long get a progress bar (when stderr is a terminal).
constexpr int64_t kProgressMinSteps = 50;

/// A one-line progress bar on stderr, cleared before anything else prints.
class Progress {
public:
  Progress(bool enabled, int64_t total) : enabled(enabled), total(total) {}
  void clear() {
    if (enabled && drawn)
      std::fputs("\r\033[K", stderr);
    drawn = false;
  }
  void draw(int64_t done) {
    if (!enabled)
      return;
    constexpr int kWidth = 40;
    int filled = int(kWidth * done / total);
    std::string bar(size_t(filled), '#');
    bar.append(size_t(kWidth - filled), ' ');
    std::fprintf(stderr, "\r[%s] %lld/%lld steps", bar.c_str(), (long long)done,
                 (long long)total);
    std::fflush(stderr);
    drawn = true;
  }

private:
  bool enabled;
  int64_t total;
  bool drawn = false;
};

double mib(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

/// What the kernel counts for this process, in bytes: the allocator's
/// caches, Gloo's buffers, the libraries' own memory, everything the
/// session's MemoryTracker does not see.
struct ProcessMemory {
  int64_t rss = 0; // VmRSS: resident now
  int64_t hwm = 0; // VmHWM: the most ever resident
};

ProcessMemory readProcessMemory() {
  constexpr const char *kStatus = "/proc/self/status";
  std::FILE *f = std::fopen(kStatus, "r");
  if (!f)
    throw Error(std::string(kStatus) + ": " + std::strerror(errno) +
                " (--memory-report reads the resident set size there)");
  ProcessMemory m;
  bool rss = false, hwm = false;
  char line[256];
  long long kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "VmRSS: %lld kB", &kib) == 1) {
      m.rss = kib * 1024;
      rss = true;
    } else if (std::sscanf(line, "VmHWM: %lld kB", &kib) == 1) {
      m.hwm = kib * 1024;
      hwm = true;
    }
  }
  std::fclose(f);
  if (!rss || !hwm)
    throw Error(std::string(kStatus) + ": no VmRSS or VmHWM line");
  return m;
}

/// Every rank whose measured peak broke the compiler's plan says so: the
/// budget is a promise (loom-sac-ilp and loom-schedule fail rather than
/// exceed it), so a peak above it means the prediction missed memory.
static void warnOverBudget(int64_t rank, int64_t peak, int64_t step,
                           int64_t budget, DeviceKind device) {
  std::fprintf(
      stderr,
      "loom-run: warning: rank %lld: the measured peak, %lld B at step %lld, "
      "is %lld B above the memory budget the step was compiled for (%lld "
      "B)%s\n",
      (long long)rank, (long long)peak, (long long)step,
      (long long)(peak - budget), (long long)budget,
      device == DeviceKind::Cpu
          ? ": the prediction does not know some kernels' temporaries on "
            "this machine; measure them (loom-run --kernel-workspace FILE "
            "on the step compiled without the budget) and compile with "
            "loom-compile --kernel-workspace FILE"
          : "");
}

/// --memory-report: one JSON line per step, flushed as it is written, so a
/// run that fails or hangs still shows how its memory went.
class MemoryReport {
public:
  MemoryReport(std::string path, int64_t rank)
      : path(std::move(path)), rank(rank) {
    file = std::fopen(this->path.c_str(), "w");
    if (!file)
      throw Error(this->path +
                  ": cannot write the memory report: " + std::strerror(errno));
  }
  MemoryReport(const MemoryReport &) = delete;
  MemoryReport &operator=(const MemoryReport &) = delete;
  ~MemoryReport() { std::fclose(file); }

  /// After step `step` and its checkpoint save (`saved`), if any: a save
  /// that leaked would show here. The loss, every digit, lets a report
  /// alone tell whether two runs computed the same steps.
  void add(int64_t step, double loss, const StepStats &st, bool saved) {
    ProcessMemory m = readProcessMemory();
    std::fprintf(file,
                 "{\"rank\": %lld, \"step\": %lld, \"loss\": %.17g, "
                 "\"rss_bytes\": %lld, \"hwm_bytes\": %lld, "
                 "\"tracked_peak_bytes\": %lld, \"tracked_end_bytes\": "
                 "%lld, \"checkpoint\": %s}\n",
                 (long long)rank, (long long)step, loss, (long long)m.rss,
                 (long long)m.hwm, (long long)st.peakBytes,
                 (long long)st.endBytes, saved ? "true" : "false");
    if (std::fflush(file) != 0)
      throw Error(path +
                  ": writing the memory report: " + std::strerror(errno));
  }

private:
  std::string path;
  int64_t rank;
  std::FILE *file = nullptr;
};

/// A tolerance as the user would write it: 1e-05, 0.002, 0.
std::string formatTolerance(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string collectivesText(const StepStats &st) {
  std::string out;
  for (const auto &[kind, c] : st.collectives) {
    char buf[128];
    if (c.bytes < 1024 * 1024)
      std::snprintf(buf, sizeof buf, " %s %lld (%.2f KiB)", kind.c_str(),
                    (long long)c.count, double(c.bytes) / 1024.0);
    else
      std::snprintf(buf, sizeof buf, " %s %lld (%.2f MiB)", kind.c_str(),
                    (long long)c.count, mib(c.bytes));
    out += buf;
  }
  return out.empty() ? out : "  |" + out;
}

/// Compares this rank's tensors with the reference and prints what failed
/// (every rank) and the summary (rank 0). Returns the number of mismatches.
int64_t checkTensors(const Session &session, const Reference &reference,
                     double rtol, double atol) {
  std::vector<TensorComparison> tensors =
      compareRankTensors(session, reference, rtol, atol);
  const bool leader = session.rank() == 0;
  // Under a launcher that does not prefix the ranks' output (torchrun), the
  // lines of the other ranks still say whose they are.
  const std::string who =
      leader ? "" : "rank " + std::to_string(session.rank()) + ": ";
  const std::string tensorTol =
      "max(" + formatTolerance(atol) + ", " + formatTolerance(rtol) + "*|ref|)";
  int64_t failures = 0;
  const TensorComparison *worst = nullptr;
  for (const TensorComparison &t : tensors) {
    if (!t.ok) {
      ++failures;
      std::string part = t.slice.empty() ? "" : " (" + t.slice + ")";
      if (!t.problem.empty())
        std::printf("check: %s%s '%s'%s: %s\n", who.c_str(), t.role.c_str(),
                    t.name.c_str(), part.c_str(), t.problem.c_str());
      else
        std::printf("check: %s%s '%s'%s: MISMATCH max |a-b|/max(1,|b|) = "
                    "%.3e (max |a-b| = %.3e): %lld of %lld elements beyond "
                    "%s; worst |a-b| = %.3e where |ref| = %.3e allows "
                    "%.3e\n",
                    who.c_str(), t.role.c_str(), t.name.c_str(), part.c_str(),
                    t.score, t.maxAbsDiff, (long long)t.failing,
                    (long long)t.numel, tensorTol.c_str(), t.worstDiff,
                    t.worstRef, std::max(atol, rtol * t.worstRef));
    }
    if (!worst || !(t.toleranceUsed <= worst->toleranceUsed))
      worst = &t;
  }
  if (!leader)
    return failures;
  std::printf("check: tensors %lld/%lld within %s",
              (long long)(tensors.size() - failures), (long long)tensors.size(),
              tensorTol.c_str());
  if (worst)
    std::printf(" (worst %s '%s': %.3e, max |a-b| %.3e)", worst->role.c_str(),
                worst->name.c_str(), worst->score, worst->maxAbsDiff);
  if (session.worldSize() > 1)
    std::printf("; every rank checks its own");
  std::printf("\n");
  return failures;
}

/// The steps to run, a total counted from step 0: --steps, else the
/// reference's count with --check, else one per batch.
int64_t countSteps(const RunOptions &o, const std::optional<Reference> &ref,
                   const BatchFile &batches, int64_t first) {
  int64_t steps = o.steps ? *o.steps
                  : ref   ? int64_t(ref->losses.size())
                          : batches.numSteps();
  if (steps < 1)
    throw Error("nothing to run: 0 steps");
  if (steps <= first)
    throw Error("nothing to run: the checkpoint is at step " +
                std::to_string(first) + " and --steps is " +
                std::to_string(steps) + " (the total, counted from step 0)");
  if (ref && steps > int64_t(ref->losses.size()))
    throw Error(o.check + " has " + std::to_string(ref->losses.size()) +
                " losses; cannot check " + std::to_string(steps) + " steps");
  return steps;
}

/// Rank 0's first line: the model, the optimizer, threads and ranks; and a
/// warning when the kernel workspace was measured with other threads.
void printBanner(const RunOptions &o, const Session &session) {
  const Artifact &a = session.artifact();
  int64_t paramBytes = 0;
  for (const auto &p : session.parameters())
    paramBytes += p.second.numel() * p.second.element_size();
  std::fprintf(
      stderr,
      "loom-run: %s: %zu parameters (%.2f MiB%s), %zu buffers, "
      "%zu instructions, optimizer %s, %d threads%s\n",
      o.artifact.c_str(), session.parameters().size(), mib(paramBytes),
      a.worldSize > 1 ? " on rank 0" : "", session.buffers().size(),
      a.programs[size_t(a.programOf(session.rank()))].instructions.size(),
      a.optimizer ? toString(a.optimizer->kind) : "none", at::get_num_threads(),
      a.worldSize > 1 ? (", " + std::to_string(a.worldSize) + " ranks").c_str()
                      : "");
  if (a.kernelWorkspaceThreads &&
      *a.kernelWorkspaceThreads != at::get_num_threads())
    std::fprintf(stderr,
                 "loom-run: warning: %s was compiled with the kernel "
                 "workspace measured with %lld ATen threads, and runs with "
                 "%d: the measured peak can differ from the prediction "
                 "(measure again with --threads %d, or run with --threads "
                 "%lld)\n",
                 o.artifact.c_str(), (long long)*a.kernelWorkspaceThreads,
                 at::get_num_threads(), at::get_num_threads(),
                 (long long)*a.kernelWorkspaceThreads);
}

/// --check's loss comparisons: each step's, and the worst.
class LossCheck {
public:
  LossCheck(double rtol, double atol) : rtol(rtol), atol(atol) {}

  /// Compares step `step`'s loss and prints the comparison on the step's
  /// line.
  void add(int64_t step, double loss, double want) {
    LossComparison c = compareLoss(loss, want, rtol, atol);
    std::printf("  ref %.7f  rel %.1e  %s", c.want, c.relError,
                c.ok ? "ok" : "MISMATCH");
    if (!c.ok)
      ++failures;
    if (worstStep < 0 || !(c.relError <= worst.relError)) {
      worst = c;
      worstStep = step;
    }
  }

  void printSummary(int64_t checked) const {
    std::string tolerance = "rtol " + formatTolerance(rtol);
    if (atol > 0)
      tolerance += " atol " + formatTolerance(atol);
    std::printf("check: losses  %lld/%lld within %s (worst step %lld: "
                "%.7f vs %.7f, rel %.1e)\n",
                (long long)(checked - failures), (long long)checked,
                tolerance.c_str(), (long long)worstStep, worst.got, worst.want,
                worst.relError);
  }

  int64_t numFailures() const { return failures; }

private:
  double rtol, atol;
  int64_t failures = 0;
  LossComparison worst;
  int64_t worstStep = -1;
};

/// The highest measured peak of the run and its step.
struct WorstPeak {
  int64_t bytes = -1;
  int64_t step = -1;
  void add(int64_t s, int64_t peakBytes) {
    if (peakBytes > bytes) {
      bytes = peakBytes;
      step = s;
    }
  }
};

/// The file this rank writes for `path`: `path` itself on one rank, else
/// its own part (rankTracePath), which the launcher merges.
std::string rankFile(const std::string &path, const Session &session) {
  return session.worldSize() > 1 ? rankTracePath(path, session.rank()) : path;
}

/// Writes --trace: each rank its own part when there are several (the
/// launcher merges them into o.trace).
void writeTrace(const TraceWriter &trace, const RunOptions &o,
                const Session &session) {
  std::string part = rankFile(o.trace, session);
  trace.write(part);
  if (session.worldSize() == 1)
    std::fprintf(stderr, "loom-run: wrote trace %s\n", part.c_str());
  else if (!std::getenv(kTraceMergeEnv))
    std::fprintf(stderr, "loom-run: rank %lld wrote trace %s\n",
                 (long long)session.rank(), part.c_str());
}

/// Writes --kernel-workspace: each rank its own (the launcher merges them).
void writeKernelWorkspace(const RunOptions &o, const Session &session) {
  KernelWorkspace w;
  w.device = "cpu";
  w.threads = at::get_num_threads();
  w.bytes = session.kernelWorkspace();
  std::string path = rankFile(o.kernelWorkspace, session);
  w.write(path);
  if (session.worldSize() == 1)
    std::fprintf(stderr,
                 "loom-run: wrote the workspace of %zu kernel signatures "
                 "to %s\n",
                 w.bytes.size(), path.c_str());
}

/// --check after the run: the loss summary (rank 0), then every rank
/// compares what it holds (replicated tensors whole, sharded parameters as
/// its shard against the matching slice of the reference, so a rank whose
/// replicas drifted apart fails on its own); the exit code.
int finishCheck(const RunOptions &o, Session &session, const Reference &ref,
                int64_t first, int64_t steps, const LossCheck &losses) {
  const bool leader = session.rank() == 0;
  if (leader)
    losses.printSummary(steps - first);
  int64_t tensorFailures = 0;
  if (steps == int64_t(ref.losses.size())) {
    if (o.beforeCheck)
      o.beforeCheck(session);
    tensorFailures =
        checkTensors(session, ref, o.rtol, o.atol.value_or(o.rtol));
  } else if (leader) {
    std::printf("check: tensors not compared: %s holds the state after %zu "
                "steps, this run stopped after %lld\n",
                ref.tensorsPath.c_str(), ref.losses.size(), (long long)steps);
  }
  std::string who =
      leader ? "" : "rank " + std::to_string(session.rank()) + ": ";
  if (losses.numFailures() || tensorFailures) {
    std::printf("FAIL: %s%lld loss mismatches, %lld tensor mismatches\n",
                who.c_str(), (long long)losses.numFailures(),
                (long long)tensorFailures);
    std::fflush(stdout);
    return kExitMismatch;
  }
  if (leader)
    std::printf("PASS\n");
  std::fflush(stdout);
  return kExitSuccess;
}

/// Saves a checkpoint after step `s` when --save-every asks for one;
/// whether it did.
bool saveIfDue(const RunOptions &o, Session &session, int64_t s,
               CheckpointSaveOptions &saveOptions, Progress &progress) {
  if (o.saveEvery <= 0 || (s + 1) % o.saveEvery != 0)
    return false;
  // Kept in saveOptions past this call: `s` by value.
  if (o.duringSave)
    saveOptions.afterRankFile = [&o, s](int64_t rank) {
      o.duringSave(rank, s + 1);
    };
  std::string saved =
      saveCheckpoint(session, o.checkpointDir, s + 1, saveOptions);
  if (session.rank() == 0) {
    progress.clear();
    std::fprintf(stderr, "loom-run: saved checkpoint %s\n", saved.c_str());
  }
  return true;
}

/// Loads the session's starting point: --weights, then --resume; the
/// number of steps already run (the resumed run continues the step
/// numbering, the batches and --check's losses where the checkpoint
/// stopped).
int64_t loadStart(const RunOptions &o, Session &session) {
  if (!o.weights.empty())
    session.loadWeights(o.weights);
  if (o.resume.empty())
    return 0;
  CheckpointInfo info = loadCheckpoint(session, o.resume);
  if (session.rank() == 0)
    std::fprintf(stderr, "loom-run: resumed from %s at step %lld\n",
                 info.path.c_str(), (long long)info.step);
  return info.dataPosition;
}

} // namespace

int runRank(const RunOptions &o, const DistributedConfig &config) {
  // Ranks on one machine share its cores: one ATen thread each unless asked.
  if (o.threads > 0)
    at::set_num_threads(o.threads);
  else if (config.worldSize > 1)
    at::set_num_threads(1);
  // A fixed seed (0 unless --seed): random ops (dropout) draw the same
  // numbers on every run, so two runs of a step (with and without
  // recompute) compare bitwise, and a capture's eager reference, seeded the
  // same before its first step, draws them too.
  at::manual_seed(o.seed);

  Session session = Session::load(o.artifact, config);
  const bool leader = session.rank() == 0;
  const int64_t first = loadStart(o, session);
  BatchFile batches = BatchFile::open(o.batches);
  if (size_t(batches.numArgs()) < session.numBatchElements())
    throw Error(o.batches + ": batches have " +
                std::to_string(batches.numArgs()) +
                " elements, the artifact takes " +
                std::to_string(session.numBatchElements()));
  std::optional<Reference> reference;
  if (!o.check.empty())
    reference = Reference::load(o.check);
  const int64_t steps = countSteps(o, reference, batches, first);
  if (leader)
    printBanner(o, session);

  const Artifact &a = session.artifact();
  std::optional<TraceWriter> trace;
  if (!o.trace.empty()) {
    trace.emplace(a, session.rank(), session.worldSize());
    session.setTracing(true);
  }
  if (!o.kernelWorkspace.empty())
    session.setMeasuringKernels(true);
  std::optional<MemoryReport> memoryReport;
  if (!o.memoryReport.empty())
    memoryReport.emplace(rankFile(o.memoryReport, session), session.rank());

  Progress progress(leader && o.progress && isatty(STDERR_FILENO) &&
                        steps >= kProgressMinSteps,
                    steps);
  LossCheck losses(o.rtol, o.atol.value_or(0.0));
  CheckpointSaveOptions saveOptions;
  saveOptions.keep = o.keep;
  WorstPeak worstPeak;
  for (int64_t s = first; s < steps; ++s) {
    if (o.beforeStep)
      o.beforeStep(session.rank(), s);
    double loss = session.step(batches.batch(s));
    const StepStats &st = session.lastStats();
    if (trace)
      trace->addStep(st);
    bool saved = saveIfDue(o, session, s, saveOptions, progress);
    if (memoryReport)
      memoryReport->add(s, loss, st, saved);
    worstPeak.add(s, st.peakBytes);
    if (!leader)
      continue;
    progress.clear();
    std::printf("step %3lld  loss %.7f  time %.2f ms  peak %.2f MiB",
                (long long)s, loss, st.timeMs, mib(st.peakBytes));
    // The scheduled rate of the step just run, every digit: it is meant to
    // equal lr_scheduler's get_last_lr() exactly.
    if (a.lrSchedule)
      std::printf("  lr %.17g", *session.learningRate(session.stepsRun() - 1));
    // Every rank reports the loss reduced over the ranks, so rank 0's
    // comparison is every rank's.
    if (reference)
      losses.add(s, loss, reference->losses[size_t(s)]);
    std::printf("%s\n", collectivesText(st).c_str());
    std::fflush(stdout);
    progress.draw(s + 1);
  }
  progress.clear();
  // The highest measured peak against the budget the step was compiled
  // under.
  if (a.memoryBudget && worstPeak.bytes > *a.memoryBudget)
    warnOverBudget(session.rank(), worstPeak.bytes, worstPeak.step,
                   *a.memoryBudget, config.device.value_or(a.device));
  if (trace)
    writeTrace(*trace, o, session);
  if (!o.kernelWorkspace.empty())
    writeKernelWorkspace(o, session);
  if (!o.saveParams.empty())
    session.saveParameters(o.saveParams); // every rank: shards are gathered
  if (!reference)
    return kExitSuccess;
  return finishCheck(o, session, *reference, first, steps, losses);
}

} // namespace loomrt
