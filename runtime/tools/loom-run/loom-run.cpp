//===- loom-run.cpp - Run a compiled training step for K steps ------------===//
//
// loom-run STEP.loomx --batches DIR/batches.safetensors [--steps K]
//          [--check DIR/reference.json] [--trace trace.json] [--threads N]
//          [--weights FILE] [--save-params FILE] [--no-progress]
//
// Prints one line per step; with --check compares each loss and, at the
// end, every parameter and buffer with PyTorch eager's reference and exits 1
// on a mismatch. Exit status 2 is for usage errors and runtime failures.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Check.h"
#include "loomrt/Error.h"
#include "loomrt/Session.h"
#include "loomrt/Trace.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <unistd.h>

using namespace loomrt;

namespace {

constexpr double kLossRtol = 1e-5;
constexpr double kTensorTol = 1e-5;
/// Runs at least this long get a progress bar (when stderr is a terminal).
constexpr int64_t kProgressMinSteps = 50;

struct Options {
  std::string artifact;
  std::string batches;
  std::optional<int64_t> steps;
  std::string check;
  std::string trace;
  std::string weights;
  std::string saveParams;
  int threads = 0;
  bool progress = true;
};

void usage(FILE *out) {
  std::fprintf(
      out,
      "usage: loom-run STEP.loomx --batches FILE [--steps K]\n"
      "                [--check DIR/reference.json] [--trace FILE]\n"
      "                [--threads N] [--weights FILE] [--save-params FILE]\n"
      "                [--no-progress]\n"
      "\n"
      "  --batches FILE     a capture's batches.safetensors (step s uses\n"
      "                     batch s mod num_steps)\n"
      "  --steps K          steps to run (default: the reference's count\n"
      "                     with --check, else the number of batches)\n"
      "  --check FILE       compare losses with FILE's \"losses\" (relative\n"
      "                     tolerance 1e-5) and, after the run, parameters\n"
      "                     and buffers with reference.safetensors next to\n"
      "                     it (|a-b| <= 1e-5*max(1,|b|)); exit 1 on mismatch\n"
      "  --trace FILE       write a Chrome trace-event JSON (Perfetto)\n"
      "  --threads N        ATen intra-op threads\n"
      "  --weights FILE     start from these weights instead of the\n"
      "                     artifact's (safetensors)\n"
      "  --save-params FILE write the final parameters and buffers\n"
      "  --no-progress      no progress bar on stderr\n");
}

[[noreturn]] void usageError(const std::string &message) {
  std::fprintf(stderr, "loom-run: error: %s\n", message.c_str());
  usage(stderr);
  std::exit(2);
}

int64_t parseInt(const std::string &flag, const char *text, int64_t min) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || !*text || *end || v < min)
    usageError(flag + " expects an integer >= " + std::to_string(min) +
               ", found '" + text + "'");
  return v;
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        usageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(0);
    } else if (a == "--batches") {
      o.batches = value();
    } else if (a == "--steps") {
      o.steps = parseInt(a, value(), 1);
    } else if (a == "--check") {
      o.check = value();
    } else if (a == "--trace") {
      o.trace = value();
    } else if (a == "--threads") {
      o.threads = int(parseInt(a, value(), 1));
    } else if (a == "--weights") {
      o.weights = value();
    } else if (a == "--save-params") {
      o.saveParams = value();
    } else if (a == "--no-progress") {
      o.progress = false;
    } else if (!a.empty() && a[0] == '-') {
      usageError("unknown option '" + a + "'");
    } else if (o.artifact.empty()) {
      o.artifact = a;
    } else {
      usageError("a second artifact '" + a + "' (one step.loomx expected)");
    }
  }
  if (o.artifact.empty())
    usageError("no artifact given");
  if (o.batches.empty())
    usageError("--batches is required");
  return o;
}

/// A one-line progress bar on stderr, cleared before anything else prints.
class Progress {
public:
  Progress(bool enabled, int64_t total) : enabled_(enabled), total_(total) {}
  void clear() {
    if (enabled_ && drawn_)
      std::fputs("\r\033[K", stderr);
    drawn_ = false;
  }
  void draw(int64_t done) {
    if (!enabled_)
      return;
    constexpr int kWidth = 40;
    int filled = int(kWidth * done / total_);
    std::string bar(size_t(filled), '#');
    bar.append(size_t(kWidth - filled), ' ');
    std::fprintf(stderr, "\r[%s] %lld/%lld steps", bar.c_str(), (long long)done,
                 (long long)total_);
    std::fflush(stderr);
    drawn_ = true;
  }

private:
  bool enabled_;
  int64_t total_;
  bool drawn_ = false;
};

double mib(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

int run(const Options &o) {
  if (o.threads > 0)
    at::set_num_threads(o.threads);

  Session session = Session::load(o.artifact);
  if (!o.weights.empty())
    session.loadWeights(o.weights);
  BatchFile batches = BatchFile::open(o.batches);
  if (size_t(batches.numArgs()) < session.numBatchElements())
    throw Error(o.batches + ": batches have " +
                std::to_string(batches.numArgs()) +
                " elements, the artifact takes " +
                std::to_string(session.numBatchElements()));

  std::optional<Reference> reference;
  if (!o.check.empty())
    reference = Reference::load(o.check);
  int64_t steps = o.steps     ? *o.steps
                  : reference ? int64_t(reference->losses.size())
                              : batches.numSteps();
  if (steps < 1)
    throw Error("nothing to run: 0 steps");
  if (reference && steps > int64_t(reference->losses.size()))
    throw Error(o.check + " has " + std::to_string(reference->losses.size()) +
                " losses; cannot check " + std::to_string(steps) + " steps");

  const Artifact &a = session.artifact();
  int64_t paramBytes = 0;
  for (const auto &p : session.parameters())
    paramBytes += p.second.numel() * p.second.element_size();
  std::fprintf(stderr,
               "loom-run: %s: %zu parameters (%.2f MiB), %zu buffers, %zu "
               "instructions, optimizer %s, %d threads\n",
               o.artifact.c_str(), session.parameters().size(), mib(paramBytes),
               session.buffers().size(), a.programs[0].instructions.size(),
               a.optimizer ? toString(a.optimizer->kind) : "none",
               at::get_num_threads());

  std::optional<TraceWriter> trace;
  if (!o.trace.empty()) {
    trace.emplace(a);
    session.setTracing(true);
  }

  Progress progress(
      o.progress && isatty(STDERR_FILENO) && steps >= kProgressMinSteps, steps);
  int64_t lossFailures = 0;
  LossComparison worstLoss;
  int64_t worstLossStep = -1;
  for (int64_t s = 0; s < steps; ++s) {
    double loss = session.step(batches.batch(s));
    const StepStats &st = session.lastStats();
    if (trace)
      trace->addStep(st);
    progress.clear();
    std::printf("step %3lld  loss %.7f  time %.2f ms  peak %.2f MiB",
                (long long)s, loss, st.timeMs, mib(st.peakBytes));
    if (reference) {
      LossComparison c =
          compareLoss(loss, reference->losses[size_t(s)], kLossRtol);
      std::printf("  ref %.7f  rel %.1e  %s", c.want, c.relError,
                  c.ok ? "ok" : "MISMATCH");
      if (!c.ok)
        ++lossFailures;
      if (worstLossStep < 0 || !(c.relError <= worstLoss.relError)) {
        worstLoss = c;
        worstLossStep = s;
      }
    }
    std::printf("\n");
    std::fflush(stdout);
    progress.draw(s + 1);
  }
  progress.clear();

  if (trace) {
    trace->write(o.trace);
    std::fprintf(stderr, "loom-run: wrote trace %s\n", o.trace.c_str());
  }
  if (!o.saveParams.empty())
    session.saveParameters(o.saveParams);
  if (!reference)
    return 0;

  std::printf("check: losses  %lld/%lld within rtol %.0e (worst step %lld: "
              "%.7f vs %.7f, rel %.1e)\n",
              (long long)(steps - lossFailures), (long long)steps, kLossRtol,
              (long long)worstLossStep, worstLoss.got, worstLoss.want,
              worstLoss.relError);

  int64_t tensorFailures = 0;
  if (steps == int64_t(reference->losses.size())) {
    std::vector<TensorComparison> tensors =
        compareTensors(session, *reference, kTensorTol);
    const TensorComparison *worst = nullptr;
    for (const TensorComparison &t : tensors) {
      if (!t.ok) {
        ++tensorFailures;
        if (!t.problem.empty())
          std::printf("check: %s '%s': %s\n", t.role.c_str(), t.name.c_str(),
                      t.problem.c_str());
        else
          std::printf("check: %s '%s': MISMATCH max |a-b|/max(1,|b|) = %.3e "
                      "(max |a-b| = %.3e)\n",
                      t.role.c_str(), t.name.c_str(), t.score, t.maxAbsDiff);
      }
      if (!worst || !(t.score <= worst->score))
        worst = &t;
    }
    std::printf("check: tensors %lld/%lld within %.0e*max(1,|ref|)",
                (long long)(tensors.size() - tensorFailures),
                (long long)tensors.size(), kTensorTol);
    if (worst)
      std::printf(" (worst %s '%s': %.3e, max |a-b| %.3e)", worst->role.c_str(),
                  worst->name.c_str(), worst->score, worst->maxAbsDiff);
    std::printf("\n");
  } else {
    std::printf("check: tensors not compared: %s holds the state after %zu "
                "steps, this run stopped after %lld\n",
                reference->tensorsPath.c_str(), reference->losses.size(),
                (long long)steps);
  }

  if (lossFailures || tensorFailures) {
    std::printf("FAIL: %lld loss mismatches, %lld tensor mismatches\n",
                (long long)lossFailures, (long long)tensorFailures);
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseOptions(argc, argv);
  try {
    return run(o);
  } catch (const c10::Error &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "loom-run: error: %s\n", e.what_without_backtrace());
  } catch (const std::exception &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "loom-run: error: %s\n", e.what());
  }
  return 2;
}
