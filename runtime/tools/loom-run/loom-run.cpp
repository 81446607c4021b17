//===- loom-run.cpp - Run a compiled training step for K steps ------------===//
//
// loom-run STEP.loomx --batches DIR/batches.safetensors [--steps K]
//          [--check DIR/reference.json] [--trace trace.json] [--threads N]
//          [--weights FILE] [--save-params FILE] [--no-progress]
//          [--nproc N] [--timeout SECONDS] [--rtol R] [--atol A]
//          [--checkpoint-dir DIR --save-every K [--keep N]] [--resume PATH]
//          [--memory-report FILE] [--kernel-workspace FILE]
//          [--device cpu|cuda] [--seed S]
//
// Option parsing over libloomrt's launcher and runner (loomrt/Launcher.h,
// loomrt/Runner.h). Exit status: 0, 1 for a --check mismatch on any rank, 2
// for usage errors and runtime failures, 3 for a collective that failed.
//
// Built twice from this file: `loom-run`, the tool, and `loom-run-faults`
// (tests only, LOOMRT_FAULT_INJECTION), which adds the hooks the runtime's
// failure tests drive through the environment; the tool has none of them.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Launcher.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#ifdef LOOMRT_FAULT_INJECTION
#include "loomrt/Session.h"

#include <c10/core/GradMode.h>
#include <csignal>
#include <cstring>
#include <memory>
#include <unistd.h>
#include <vector>
#endif

using namespace loomrt;

namespace {

void usage(FILE *out) {
  std::fprintf(
      out,
      "usage: loom-run STEP.loomx --batches FILE [--steps K]\n"
      "                [--check DIR/reference.json] [--trace FILE]\n"
      "                [--threads N] [--weights FILE] [--save-params FILE]\n"
      "                [--no-progress] [--nproc N] [--timeout SECONDS]\n"
      "                [--rtol R] [--atol A]\n"
      "                [--checkpoint-dir DIR --save-every K [--keep N]]\n"
      "                [--resume PATH] [--memory-report FILE]\n"
      "                [--kernel-workspace FILE]\n"
      "                [--device cpu|cuda] [--seed S]\n"
      "\n"
      "  --batches FILE     a capture's batches.safetensors (step s uses\n"
      "                     batch s mod num_steps)\n"
      "  --steps K          steps to run (default: the reference's count\n"
      "                     with --check, else the number of batches)\n"
      "  --check FILE       compare losses with FILE's \"losses\" (relative\n"
      "                     tolerance 1e-5) and, after the run, parameters\n"
      "                     and buffers with reference.safetensors next to\n"
      "                     it (|a-b| <= 1e-5*max(1,|b|)), on every rank (a\n"
      "                     shard against its slice); exit 1 on mismatch\n"
      "  --rtol R           --check's relative tolerance (default 1e-5): a\n"
      "                     loss or tensor element passes when\n"
      "                     |a-b| <= max(atol, R*|ref|)\n"
      "  --atol A           --check's absolute tolerance (default: 0 for\n"
      "                     losses, R for tensors, i.e. R*max(1,|ref|))\n"
      "  --trace FILE       write a Chrome trace-event JSON (Perfetto)\n"
      "  --threads N        ATen intra-op threads\n"
      "  --seed S           the random generator's seed before the first\n"
      "                     step (default 0; as torch.manual_seed, so a\n"
      "                     model with dropout draws what eager seeded\n"
      "                     with S draws)\n"
      "  --weights FILE     start from these weights instead of the\n"
      "                     artifact's (safetensors)\n"
      "  --save-params FILE write the final parameters and buffers\n"
      "  --no-progress      no progress bar on stderr\n"
      "  --nproc N          optional: must equal the artifact's world_size.\n"
      "                     A multi-rank artifact runs as world_size\n"
      "                     processes on this machine (Gloo over loopback);\n"
      "                     under a launcher that sets RANK/WORLD_SIZE/\n"
      "                     MASTER_ADDR/MASTER_PORT each process runs its "
      "rank\n"
      "  --timeout SECONDS  rendezvous and collective timeout (default 60)\n"
      "  --device cpu|cuda  run on this device instead of the artifact's\n"
      "                     (cuda: one GPU per rank, LOCAL_RANK selects\n"
      "                     it; NCCL between ranks)\n"
      "  --checkpoint-dir DIR\n"
      "                     write checkpoints to DIR/step-NNNNNNNN: each\n"
      "                     rank's shards of parameters, buffers and\n"
      "                     optimizer state, and an index (see\n"
      "                     docs/checkpoints.md)\n"
      "  --save-every K     a checkpoint after every K steps\n"
      "  --keep N           keep the newest N checkpoints (default: all)\n"
      "  --resume PATH      continue from a checkpoint (PATH, or the newest\n"
      "                     complete one in the directory PATH), on any\n"
      "                     sharding of the same model; --steps counts from\n"
      "                     step 0\n"
      "  --memory-report FILE\n"
      "                     after each step (and its checkpoint save), one\n"
      "                     JSON line per rank: rank, step, loss (every\n"
      "                     digit), rss_bytes and hwm_bytes (VmRSS, VmHWM\n"
      "                     of /proc/self/status), tracked_peak_bytes and\n"
      "                     tracked_end_bytes (the runtime's own count of\n"
      "                     tensor memory: the step's peak, what stays\n"
      "                     after it), checkpoint (a save followed); all\n"
      "                     ranks' lines in one file, rank by rank\n"
      "  --kernel-workspace FILE\n"
      "                     measure every kernel's own temporaries (CPU)\n"
      "                     and write the most per kernel signature, for\n"
      "                     loom-compile --kernel-workspace\n");
}

[[noreturn]] void usageError(const std::string &message) {
  std::fprintf(stderr, "loom-run: error: %s\n", message.c_str());
  usage(stderr);
  std::exit(kExitError);
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

RunOptions parseOptions(int argc, char **argv) {
  RunOptions o;
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
    } else if (a == "--seed") {
      // torch.manual_seed(-1) seeds 2^64 - 1: the two's complement.
      o.seed = uint64_t(parseInt(a, value(), INT64_MIN));
    } else if (a == "--weights") {
      o.weights = value();
    } else if (a == "--save-params") {
      o.saveParams = value();
    } else if (a == "--checkpoint-dir") {
      o.checkpointDir = value();
    } else if (a == "--save-every") {
      o.saveEvery = parseInt(a, value(), 1);
    } else if (a == "--keep") {
      o.keep = parseInt(a, value(), 1);
    } else if (a == "--resume") {
      o.resume = value();
    } else if (a == "--memory-report") {
      o.memoryReport = value();
    } else if (a == "--kernel-workspace") {
      o.kernelWorkspace = value();
    } else if (a == "--device") {
      std::string d = value();
      o.device = parseDeviceKind(d);
      if (!o.device)
        usageError("--device expects cpu or cuda, found '" + d + "'");
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
  if (o.checkpointDir.empty() != (o.saveEvery == 0))
    usageError("--checkpoint-dir and --save-every go together");
  if (o.keep && !o.saveEvery)
    usageError("--keep applies to --save-every; no --save-every given");
  if (!o.resume.empty() && !o.weights.empty())
    usageError("--resume and --weights both set the parameters; give one");
  if (o.check.empty() && (o.atol || o.rtol != kDefaultCheckRtol))
    usageError("--rtol and --atol apply to --check; no --check given");
  return o;
}

#ifdef LOOMRT_FAULT_INJECTION
/// LOOMRT_TEST_FAIL_RANK / LOOMRT_TEST_FAIL_STEP: that rank exits with
/// status 2 when it reaches that step, as a crashed rank would; with
/// LOOMRT_TEST_FAIL_MODE=hang it stops responding instead (its peers'
/// collectives must time out).
void injectFailure(int64_t rank, int64_t step) {
  const char *r = std::getenv("LOOMRT_TEST_FAIL_RANK");
  const char *s = std::getenv("LOOMRT_TEST_FAIL_STEP");
  if (!r || !s || std::atoll(r) != rank || std::atoll(s) != step)
    return;
  const char *mode = std::getenv("LOOMRT_TEST_FAIL_MODE");
  if (mode && std::string(mode) == "kill") {
    std::fflush(stdout);
    std::fprintf(stderr, "loom-run: rank %lld: test SIGKILL at step %lld\n",
                 (long long)rank, (long long)step);
    ::raise(SIGKILL);
  }
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
  std::_Exit(kExitError);
}

/// LOOMRT_TEST_SAVE_KILL_RANK / LOOMRT_TEST_SAVE_KILL_STEP: that rank is
/// SIGKILLed in the checkpoint save of that step, after writing its file and
/// before the index is published.
void killDuringSave(int64_t rank, int64_t step) {
  const char *r = std::getenv("LOOMRT_TEST_SAVE_KILL_RANK");
  const char *s = std::getenv("LOOMRT_TEST_SAVE_KILL_STEP");
  if (!r || !s || std::atoll(r) != rank || std::atoll(s) != step)
    return;
  std::fflush(stdout);
  std::fprintf(stderr,
               "loom-run: rank %lld: test SIGKILL in the save of "
               "step %lld\n",
               (long long)rank, (long long)step);
  ::raise(SIGKILL);
}

/// LOOMRT_TEST_LEAK_RANK / LOOMRT_TEST_LEAK_BYTES: before each step that
/// rank allocates LEAK_BYTES, writes them (so they are resident) and never
/// frees them, as a leak in the runtime would: the load test's memory check
/// must see it.
void leakBeforeStep(int64_t rank, int64_t /*step*/) {
  const char *r = std::getenv("LOOMRT_TEST_LEAK_RANK");
  const char *n = std::getenv("LOOMRT_TEST_LEAK_BYTES");
  if (!r || !n || std::atoll(r) != rank || std::atoll(n) <= 0)
    return;
  static std::vector<std::unique_ptr<char[]>> leaked;
  size_t bytes = size_t(std::atoll(n));
  leaked.emplace_back(new char[bytes]);
  std::memset(leaked.back().get(), 0x5a, bytes);
}

/// LOOMRT_TEST_PERTURB_RANK=k: rank k adds 1e-2 to every parameter it
/// holds before --check compares them, as a rank whose replica drifted
/// would (the check must fail on that rank alone).
void perturbBeforeCheck(Session &session) {
  const char *r = std::getenv("LOOMRT_TEST_PERTURB_RANK");
  if (!r || std::atoll(r) != session.rank())
    return;
  c10::AutoGradMode noGrad(false);
  for (auto &named : session.parameters())
    named.second.add_(1e-2);
}
#endif

} // namespace

int main(int argc, char **argv) {
  RunOptions options = parseOptions(argc, argv);
#ifdef LOOMRT_FAULT_INJECTION
  options.beforeStep = [](int64_t rank, int64_t step) {
    leakBeforeStep(rank, step);
    injectFailure(rank, step);
  };
  options.beforeCheck = perturbBeforeCheck;
  options.duringSave = killDuringSave;
#endif
  return runOrLaunch(options, argv);
}
