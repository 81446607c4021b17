//===- loom-run.cpp - Run a compiled training step for K steps ------------===//
//
// loom-run STEP.loomx --batches DIR/batches.safetensors [--steps K]
//          [--check DIR/reference.json] [--trace trace.json] [--threads N]
//          [--weights FILE] [--save-params FILE] [--no-progress]
//          [--nproc N] [--timeout SECONDS] [--rtol R] [--atol A]
//
// Prints one line per step; with --check compares each loss and, at the
// end, every parameter and buffer with PyTorch eager's reference and exits 1
// on a mismatch. Exit status 2 is for usage errors and runtime failures, 3
// for a collective that failed (a peer died or timed out).
//
// With --nproc N and no RANK in the environment, loom-run is the launcher:
// it starts N copies of itself as ranks 0..N-1 (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT=a free port), passes rank
// 0's output through, prefixes the others' with "[rank k] ", and stops them
// all when one fails. With RANK set (by this launcher or torchrun), it runs
// that rank.
//
// --trace FILE on N ranks: every rank writes FILE with `.rankR` before the
// extension (pid R in its events); the --nproc launcher merges them into
// FILE on one time axis and removes them.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Check.h"
#include "loomrt/Error.h"
#include "loomrt/Session.h"
#include "loomrt/Trace.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace loomrt;

namespace {

/// Set by the launcher for its ranks: it merges their traces itself.
constexpr const char *kTraceMergeEnv = "LOOMRT_TRACE_MERGE";

/// --check's default tolerances: losses within 1e-5 relative, tensors
/// within 1e-5 * max(1, |ref|) (atol defaults to 0 for losses and to rtol
/// for tensors).
constexpr double kDefaultRtol = 1e-5;
/// Runs at least this long get a progress bar (when stderr is a terminal).
constexpr int64_t kProgressMinSteps = 50;
/// Exit status of a rank whose collective failed (a peer died or hung).
constexpr int kCollectiveFailed = 3;
/// How long the launcher lets the other ranks finish (report their own
/// errors) after one failed, before it terminates them.
constexpr auto kGracePeriod = std::chrono::seconds(2);

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
  int nproc = 0;
  double timeout = 60;
  double rtol = kDefaultRtol;
  std::optional<double> atol;
};

void usage(FILE *out) {
  std::fprintf(
      out,
      "usage: loom-run STEP.loomx --batches FILE [--steps K]\n"
      "                [--check DIR/reference.json] [--trace FILE]\n"
      "                [--threads N] [--weights FILE] [--save-params FILE]\n"
      "                [--no-progress] [--nproc N] [--timeout SECONDS]\n"
      "                [--rtol R] [--atol A]\n"
      "\n"
      "  --batches FILE     a capture's batches.safetensors (step s uses\n"
      "                     batch s mod num_steps)\n"
      "  --steps K          steps to run (default: the reference's count\n"
      "                     with --check, else the number of batches)\n"
      "  --check FILE       compare losses with FILE's \"losses\" (relative\n"
      "                     tolerance 1e-5) and, after the run, parameters\n"
      "                     and buffers with reference.safetensors next to\n"
      "                     it (|a-b| <= 1e-5*max(1,|b|)); exit 1 on mismatch\n"
      "  --rtol R           --check's relative tolerance (default 1e-5): a\n"
      "                     loss or tensor element passes when\n"
      "                     |a-b| <= max(atol, R*|ref|)\n"
      "  --atol A           --check's absolute tolerance (default: 0 for\n"
      "                     losses, R for tensors, i.e. R*max(1,|ref|))\n"
      "  --trace FILE       write a Chrome trace-event JSON (Perfetto)\n"
      "  --threads N        ATen intra-op threads\n"
      "  --weights FILE     start from these weights instead of the\n"
      "                     artifact's (safetensors)\n"
      "  --save-params FILE write the final parameters and buffers\n"
      "  --no-progress      no progress bar on stderr\n"
      "  --nproc N          run a multi-rank artifact as N processes on this\n"
      "                     machine (Gloo over loopback); under a launcher\n"
      "                     that sets RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT\n"
      "                     each process runs its rank\n"
      "  --timeout SECONDS  rendezvous and collective timeout (default 60)\n");
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
    } else if (a == "--nproc") {
      o.nproc = int(parseInt(a, value(), 1));
    } else if (a == "--rtol" || a == "--atol") {
      const char *t = value();
      char *end = nullptr;
      double v = std::strtod(t, &end);
      if (!*t || *end || !std::isfinite(v) || v < 0)
        usageError(a + " expects a finite number >= 0, found '" +
                   std::string(t) + "'");
      if (a == "--rtol")
        o.rtol = v;
      else
        o.atol = v;
    } else if (a == "--timeout") {
      const char *t = value();
      char *end = nullptr;
      o.timeout = std::strtod(t, &end);
      if (!*t || *end || !(o.timeout > 0))
        usageError("--timeout expects a positive number of seconds, found '" +
                   std::string(t) + "'");
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
  if (o.check.empty() && (o.atol || o.rtol != kDefaultRtol))
    usageError("--rtol and --atol apply to --check; no --check given");
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

/// LOOMRT_TEST_FAIL_RANK / LOOMRT_TEST_FAIL_STEP (tests only): that rank
/// exits with status 2 when it reaches that step, as a crashed rank would;
/// with LOOMRT_TEST_FAIL_MODE=hang it stops responding instead (its peers'
/// collectives must time out).
void maybeInjectFailure(int64_t rank, int64_t step) {
  const char *r = std::getenv("LOOMRT_TEST_FAIL_RANK");
  const char *s = std::getenv("LOOMRT_TEST_FAIL_STEP");
  if (!r || !s || std::atoll(r) != rank || std::atoll(s) != step)
    return;
  const char *mode = std::getenv("LOOMRT_TEST_FAIL_MODE");
  if (mode && std::string(mode) == "hang") {
    std::fprintf(stderr,
                 "loom-run: rank %lld: test hang injected at step %lld\n",
                 (long long)rank, (long long)step);
    for (;;)
      ::pause();
  }
  std::fflush(stdout);
  std::fprintf(stderr,
               "loom-run: error: rank %lld: test failure injected at step "
               "%lld (LOOMRT_TEST_FAIL_RANK/LOOMRT_TEST_FAIL_STEP)\n",
               (long long)rank, (long long)step);
  std::_Exit(2);
}

int run(const Options &o, const std::optional<DistributedConfig> &dist) {
  // Ranks on one machine share its cores: one ATen thread each unless asked.
  if (o.threads > 0)
    at::set_num_threads(o.threads);
  else if (dist && dist->worldSize > 1)
    at::set_num_threads(1);

  Session session =
      dist ? Session::load(o.artifact, *dist) : Session::load(o.artifact);
  const bool leader = session.rank() == 0;
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
  if (leader)
    std::fprintf(stderr,
                 "loom-run: %s: %zu parameters (%.2f MiB%s), %zu buffers, "
                 "%zu instructions, optimizer %s, %d threads%s\n",
                 o.artifact.c_str(), session.parameters().size(),
                 mib(paramBytes), a.worldSize > 1 ? " on rank 0" : "",
                 session.buffers().size(), a.programs[0].instructions.size(),
                 a.optimizer ? toString(a.optimizer->kind) : "none",
                 at::get_num_threads(),
                 a.worldSize > 1
                     ? (", " + std::to_string(a.worldSize) + " ranks").c_str()
                     : "");

  std::optional<TraceWriter> trace;
  if (!o.trace.empty()) {
    trace.emplace(a, session.rank(), session.worldSize());
    session.setTracing(true);
  }

  Progress progress(leader && o.progress && isatty(STDERR_FILENO) &&
                        steps >= kProgressMinSteps,
                    steps);
  const double lossAtol = o.atol.value_or(0.0);
  const double tensorAtol = o.atol.value_or(o.rtol);
  int64_t lossFailures = 0;
  LossComparison worstLoss;
  int64_t worstLossStep = -1;
  for (int64_t s = 0; s < steps; ++s) {
    maybeInjectFailure(session.rank(), s);
    double loss = session.step(batches.batch(s));
    const StepStats &st = session.lastStats();
    if (trace)
      trace->addStep(st);
    if (!leader)
      continue;
    progress.clear();
    std::printf("step %3lld  loss %.7f  time %.2f ms  peak %.2f MiB",
                (long long)s, loss, st.timeMs, mib(st.peakBytes));
    if (reference) {
      LossComparison c =
          compareLoss(loss, reference->losses[size_t(s)], o.rtol, lossAtol);
      std::printf("  ref %.7f  rel %.1e  %s", c.want, c.relError,
                  c.ok ? "ok" : "MISMATCH");
      if (!c.ok)
        ++lossFailures;
      if (worstLossStep < 0 || !(c.relError <= worstLoss.relError)) {
        worstLoss = c;
        worstLossStep = s;
      }
    }
    std::printf("%s\n", collectivesText(st).c_str());
    std::fflush(stdout);
    progress.draw(s + 1);
  }
  progress.clear();

  if (trace && session.worldSize() > 1) {
    // Every rank writes its own; `--nproc` merges them into o.trace.
    std::string part = rankTracePath(o.trace, session.rank());
    trace->write(part);
    if (!std::getenv(kTraceMergeEnv))
      std::fprintf(stderr, "loom-run: rank %lld wrote trace %s\n",
                   (long long)session.rank(), part.c_str());
  } else if (trace) {
    trace->write(o.trace);
    std::fprintf(stderr, "loom-run: wrote trace %s\n", o.trace.c_str());
  }
  if (!o.saveParams.empty())
    session.saveParameters(o.saveParams); // every rank: shards are gathered
  if (!reference)
    return 0;
  // Every rank gathers its shards; rank 0 compares.
  bool compareTensorsNow = steps == int64_t(reference->losses.size());
  NamedTensors fullParams;
  if (compareTensorsNow)
    fullParams = session.fullParameters();
  if (!leader)
    return 0;

  std::string lossTol = "rtol " + formatTolerance(o.rtol);
  if (lossAtol > 0)
    lossTol += " atol " + formatTolerance(lossAtol);
  std::printf("check: losses  %lld/%lld within %s (worst step %lld: "
              "%.7f vs %.7f, rel %.1e)\n",
              (long long)(steps - lossFailures), (long long)steps,
              lossTol.c_str(), (long long)worstLossStep, worstLoss.got,
              worstLoss.want, worstLoss.relError);

  int64_t tensorFailures = 0;
  if (compareTensorsNow) {
    std::vector<TensorComparison> tensors =
        compareTensors(fullParams, session.buffers(), session.constants(),
                       *reference, o.rtol, tensorAtol);
    const std::string tensorTol = "max(" + formatTolerance(tensorAtol) + ", " +
                                  formatTolerance(o.rtol) + "*|ref|)";
    const TensorComparison *worst = nullptr;
    for (const TensorComparison &t : tensors) {
      if (!t.ok) {
        ++tensorFailures;
        if (!t.problem.empty())
          std::printf("check: %s '%s': %s\n", t.role.c_str(), t.name.c_str(),
                      t.problem.c_str());
        else
          std::printf("check: %s '%s': MISMATCH max |a-b|/max(1,|b|) = %.3e "
                      "(max |a-b| = %.3e): %lld of %lld elements beyond "
                      "%s; worst |a-b| = %.3e where |ref| = %.3e allows "
                      "%.3e\n",
                      t.role.c_str(), t.name.c_str(), t.score, t.maxAbsDiff,
                      (long long)t.failing, (long long)t.numel,
                      tensorTol.c_str(), t.worstDiff, t.worstRef,
                      std::max(tensorAtol, o.rtol * t.worstRef));
      }
      if (!worst || !(t.toleranceUsed <= worst->toleranceUsed))
        worst = &t;
    }
    std::printf("check: tensors %lld/%lld within %s",
                (long long)(tensors.size() - tensorFailures),
                (long long)tensors.size(), tensorTol.c_str());
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

//===----------------------------------------------------------------------===//
// The launcher
//===----------------------------------------------------------------------===//

int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

struct RankProcess {
  pid_t pid = -1;
  int out = -1; // read end of the rank's stdout+stderr (ranks > 0)
  std::string pending;
  bool exited = false;
  int status = 0;
};

/// Forwards complete lines of a rank's output with its prefix.
void forward(RankProcess &p, int rank, bool flushAll) {
  size_t start = 0, nl;
  while ((nl = p.pending.find('\n', start)) != std::string::npos) {
    std::fprintf(stderr, "[rank %d] %.*s\n", rank, int(nl - start),
                 p.pending.data() + start);
    start = nl + 1;
  }
  p.pending.erase(0, start);
  if (flushAll && !p.pending.empty()) {
    std::fprintf(stderr, "[rank %d] %s\n", rank, p.pending.c_str());
    p.pending.clear();
  }
}

std::string describeStatus(int status) {
  if (WIFSIGNALED(status))
    return "signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "exit code " + std::to_string(WEXITSTATUS(status));
}

bool failed(int status) {
  return WIFSIGNALED(status) || WEXITSTATUS(status) != 0;
}

int launch(int argc, char **argv, int nproc) {
  int port = freeLoopbackPort();
  if (port < 0) {
    std::fprintf(stderr, "loom-run: error: no free port on 127.0.0.1: %s\n",
                 std::strerror(errno));
    return 2;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<RankProcess> ranks(static_cast<size_t>(nproc));
  for (int k = 0; k < nproc; ++k) {
    int fds[2] = {-1, -1};
    if (k > 0 && ::pipe(fds) != 0) {
      std::fprintf(stderr, "loom-run: error: pipe: %s\n", std::strerror(errno));
      return 2;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(stderr, "loom-run: error: fork: %s\n", std::strerror(errno));
      return 2;
    }
    if (pid == 0) {
      // A rank dies with the launcher: nothing outlives a killed run.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (k > 0) {
        ::dup2(fds[1], STDOUT_FILENO);
        ::dup2(fds[1], STDERR_FILENO);
        ::close(fds[0]);
        ::close(fds[1]);
      }
      for (const RankProcess &other : ranks)
        if (other.out >= 0)
          ::close(other.out);
      ::setenv("RANK", std::to_string(k).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(k).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::execv("/proc/self/exe", argv);
      std::fprintf(stderr, "loom-run: error: rank %d: exec failed: %s\n", k,
                   std::strerror(errno));
      std::_Exit(127);
    }
    ranks[size_t(k)].pid = pid;
    if (k > 0) {
      ::close(fds[1]);
      ranks[size_t(k)].out = fds[0];
    }
  }

  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> firstFailure;
  bool terminated = false, killed = false;
  std::vector<int> exitOrder;
  auto running = [&] {
    for (const RankProcess &p : ranks)
      if (!p.exited)
        return true;
    return false;
  };
  while (running()) {
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (int k = 0; k < nproc; ++k)
      if (ranks[size_t(k)].out >= 0) {
        fds.push_back({ranks[size_t(k)].out, POLLIN, 0});
        who.push_back(k);
      }
    if (!fds.empty())
      ::poll(fds.data(), fds.size(), 50);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      RankProcess &p = ranks[size_t(who[i])];
      char buf[4096];
      ssize_t n = ::read(p.out, buf, sizeof buf);
      if (n > 0) {
        p.pending.append(buf, size_t(n));
        forward(p, who[i], false);
      } else if (n == 0 || errno != EINTR) {
        forward(p, who[i], true);
        ::close(p.out);
        p.out = -1;
      }
    }
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0)
      for (int k = 0; k < nproc; ++k)
        if (ranks[size_t(k)].pid == pid) {
          ranks[size_t(k)].exited = true;
          ranks[size_t(k)].status = status;
          exitOrder.push_back(k);
          if (failed(status) && !firstFailure)
            firstFailure = Clock::now();
        }
    if (firstFailure && running()) {
      auto since = Clock::now() - *firstFailure;
      int sig = 0;
      if (!terminated && since >= kGracePeriod) {
        sig = SIGTERM;
        terminated = true;
      } else if (!killed && since >= kGracePeriod + std::chrono::seconds(1)) {
        sig = SIGKILL;
        killed = true;
      }
      if (sig)
        for (const RankProcess &p : ranks)
          if (!p.exited)
            ::kill(p.pid, sig);
    }
  }
  for (int k = 0; k < nproc; ++k) {
    RankProcess &p = ranks[size_t(k)];
    if (p.out >= 0) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(p.out, buf, sizeof buf)) > 0)
        p.pending.append(buf, size_t(n));
      forward(p, k, true);
      ::close(p.out);
    }
  }
  // Name the rank that failed first. A rank whose collective failed (status
  // 3) or that the launcher stopped lost a peer; prefer one that failed on
  // its own.
  int culprit = -1;
  for (int pass = 0; pass < 2 && culprit < 0; ++pass)
    for (int k : exitOrder) {
      int st = ranks[size_t(k)].status;
      if (!failed(st))
        continue;
      // SIGPIPE: written to a socket whose peer had died first.
      bool secondary = WIFSIGNALED(st)
                           ? terminated || WTERMSIG(st) == SIGPIPE
                           : WEXITSTATUS(st) == kCollectiveFailed;
      if (pass == 1 || !secondary) {
        culprit = k;
        break;
      }
    }
  if (culprit < 0)
    return 0;
  int st = ranks[size_t(culprit)].status;
  std::fprintf(stderr, "loom-run: rank %d failed (%s)\n", culprit,
               describeStatus(st).c_str());
  // Ranks still running when the grace period ended (a hung rank shows up
  // here when its peers' collectives timed out).
  if (terminated) {
    std::string stopped;
    for (int k = 0; k < nproc; ++k) {
      int sk = ranks[size_t(k)].status;
      if (k != culprit && WIFSIGNALED(sk) &&
          (WTERMSIG(sk) == SIGTERM || WTERMSIG(sk) == SIGKILL))
        stopped += (stopped.empty() ? "" : ", ") + std::to_string(k);
    }
    if (!stopped.empty())
      std::fprintf(stderr,
                   "loom-run: stopped rank(s) %s, still running %lld s after "
                   "the first failure\n",
                   stopped.c_str(),
                   (long long)std::chrono::duration_cast<std::chrono::seconds>(
                       kGracePeriod)
                       .count());
  }
  return WIFSIGNALED(st) ? 2 : WEXITSTATUS(st);
}

} // namespace

int main(int argc, char **argv) {
  // A peer that dies closes its sockets; writing to one must surface as a
  // failed collective naming the peer (EPIPE), not kill this rank.
  std::signal(SIGPIPE, SIG_IGN);
  Options o = parseOptions(argc, argv);
  std::optional<DistributedConfig> dist;
  try {
    dist = DistributedConfig::fromEnvironment();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "loom-run: error: %s\n", e.what());
    return 2;
  }
  if (o.nproc > 0 && !dist) {
    if (o.nproc > 1) {
      if (o.trace.empty())
        return launch(argc, argv, o.nproc);
      // The ranks write one trace each; merge them once all have (also
      // when a check failed afterwards: the trace helps to see why).
      ::setenv(kTraceMergeEnv, "1", 1);
      int rc = launch(argc, argv, o.nproc);
      std::vector<std::string> parts;
      bool all = true;
      for (int k = 0; k < o.nproc; ++k) {
        parts.push_back(rankTracePath(o.trace, k));
        all = all && ::access(parts.back().c_str(), R_OK) == 0;
      }
      try {
        if (all || rc == 0) {
          mergeTraces(parts, o.trace);
          std::fprintf(stderr, "loom-run: wrote trace %s (%d ranks)\n",
                       o.trace.c_str(), o.nproc);
        }
      } catch (const std::exception &e) {
        std::fprintf(stderr, "loom-run: error: merging the traces: %s\n",
                     e.what());
        rc = 2;
      }
      for (const std::string &part : parts)
        std::remove(part.c_str());
      return rc;
    }
    dist = DistributedConfig();
  }
  if (dist) {
    if (o.nproc > 0 && dist->worldSize != o.nproc)
      usageError("--nproc " + std::to_string(o.nproc) +
                 " but the environment says WORLD_SIZE=" +
                 std::to_string(dist->worldSize));
    dist->timeoutSeconds = o.timeout;
  }
  try {
    return run(o, dist);
  } catch (const CollectiveError &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "loom-run: error: %s\n", e.what());
    return kCollectiveFailed;
  } catch (const c10::Error &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "loom-run: error: %s\n", e.what_without_backtrace());
  } catch (const std::exception &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "loom-run: error: %s\n", e.what());
  }
  return 2;
}
