//===- Runner.h - One rank of loom-run, as a library ------------*- C++ -*-===//
//
// What one `loom-run` process does, as a library: load the artifact as its
// rank, run K steps printing one line each (and a progress bar), compare
// with PyTorch eager's reference on every rank (--check), write traces and
// parameters. Launcher.h starts the ranks; tools/loom-run only parses the
// command line into RunOptions.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_RUNNER_H
#define LOOMRT_RUNNER_H

#include "loomrt/Session.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace loomrt {

/// --check's default relative tolerance: losses within 1e-5 relative,
/// tensors within 1e-5 * max(1, |ref|).
inline constexpr double kDefaultCheckRtol = 1e-5;

/// loom-run's exit statuses.
enum ExitStatus : int {
  kExitSuccess = 0,
  /// --check found a loss or tensor outside the tolerance.
  kExitMismatch = 1,
  /// Usage errors and runtime failures.
  kExitError = 2,
  /// A collective failed (a peer died or timed out): the launcher tells a
  /// rank that lost its peer from the rank that failed first by it.
  kExitCollectiveFailed = 3,
};

struct RunOptions {
  std::string artifact;
  std::string batches;
  /// Steps to run; by default the reference's count with --check, else the
  /// number of batches.
  std::optional<int64_t> steps;
  /// reference.json of a capture, or empty for no check.
  std::string check;
  std::string trace;
  std::string weights;
  std::string saveParams;
  /// Checkpoints (loomrt/Checkpoint.h): written to checkpointDir every
  /// saveEvery steps, keeping the newest `keep` (0: all); resume names a
  /// checkpoint, or a directory of them (its newest), to continue from.
  std::string checkpointDir;
  int64_t saveEvery = 0;
  int64_t keep = 0;
  std::string resume;
  /// JSON lines, one per rank and step: the process's resident set size
  /// and high-water mark (/proc/self/status) next to the session's tracked
  /// tensor bytes. A multi-rank run's ranks each write rankTracePath(
  /// memoryReport, rank), which the launcher concatenates into memoryReport.
  std::string memoryReport;
  /// The kernel workspace profile to write (KernelWorkspace.h): every ATen
  /// instruction's workspace, the most per kernel signature over the steps
  /// and ranks run. A multi-rank run's ranks each write rankTracePath(
  /// kernelWorkspace, rank), which the launcher merges. CPU only.
  std::string kernelWorkspace;
  /// ATen intra-op threads; 0: one per rank on several ranks, else ATen's.
  int threads = 0;
  /// The generator's seed before the first step (at::manual_seed, as
  /// torch.manual_seed; a negative seed is its two's complement): random
  /// ops (dropout) draw what PyTorch seeded alike draws in the same order.
  uint64_t seed = 0;
  bool progress = true;
  /// Ranks to run; 0 takes the artifact's world_size. Given, it must equal
  /// it (and WORLD_SIZE under an external launcher).
  int nproc = 0;
  double timeout = 60;
  /// --device: overrides the artifact's device.
  std::optional<DeviceKind> device;
  double rtol = kDefaultCheckRtol;
  /// Default: 0 for losses, rtol for tensors (rtol * max(1, |ref|)).
  std::optional<double> atol;

  /// Test builds only (tools/loom-run's loom-run-faults): called before
  /// each step, and on every rank before the tensors are compared. The
  /// shipped tool sets neither.
  std::function<void(int64_t rank, int64_t step)> beforeStep;
  std::function<void(Session &session)> beforeCheck;
  /// Called on each rank in a checkpoint save, once its file is written
  /// and before the index is published.
  std::function<void(int64_t rank, int64_t step)> duringSave;
};

/// Runs `options` as rank `config.rank` of `config.worldSize` (one rank:
/// the default config) and returns the exit status; prints the step lines
/// (rank 0) and the check results (every rank that has something to say).
/// Throws loomrt::Error (CollectiveError for a failed collective) on runtime
/// failures.
int runRank(const RunOptions &options, const DistributedConfig &config);

} // namespace loomrt

#endif // LOOMRT_RUNNER_H
