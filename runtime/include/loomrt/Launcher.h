//===- Launcher.h - Start the ranks of an artifact --------------*- C++ -*-===//
//
// loom-run's process management as a library: with no RANK in the
// environment, a multi-rank artifact is launched as `world_size` copies of
// the running executable on this machine (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR=127.0.0.1, MASTER_PORT=a free port whose listening socket
// rank 0 inherits, so no other process can take it), rank 0's output passed
// through, the others' prefixed with "[rank k] ", all stopped when one
// fails, and the rank that failed first named. With RANK set (by this
// launcher or torchrun) the process runs its rank (Runner.h).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LAUNCHER_H
#define LOOMRT_LAUNCHER_H

#include "loomrt/Runner.h"

namespace loomrt {

/// Starts `nproc` copies of this executable with `argv` as ranks 0..nproc-1
/// and waits for them; returns the exit status of the rank that failed
/// first (preferring one that failed on its own over one that lost a peer),
/// or 0.
int launchRanks(char **argv, int nproc);

/// Everything loom-run does once its options are parsed: launch the
/// artifact's ranks (merging their traces), or run this process's rank,
/// reporting errors on stderr. `argv` is re-executed for each rank. Returns
/// the exit status (ExitStatus).
int runOrLaunch(const RunOptions &options, char **argv);

} // namespace loomrt

#endif // LOOMRT_LAUNCHER_H
