//===- Launcher.cpp - Start, watch and stop the ranks of a run ------------===//
//
// The ranks are forked and re-executed from /proc/self/exe, so a test build
// of the tool (loom-run-faults) launches copies of itself.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Launcher.h"

#include "loomrt/Artifact.h"
#include "loomrt/Error.h"
#include "loomrt/Trace.h"

#include "FileUtil.h"
#include "KernelWorkspace.h"

#include <c10/util/Exception.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace loomrt {

namespace {

/// Set for the launched ranks: the launcher merges their traces itself.
constexpr const char *kTraceMergeEnv = "LOOMRT_TRACE_MERGE";
/// How long the launcher lets the other ranks finish (report their own
/// errors) after one failed, before it terminates them.
constexpr auto kGracePeriod = std::chrono::seconds(2);

/// A socket bound to 127.0.0.1 on a port the kernel picked, listening.
/// Rank 0 hosts the rendezvous store on it (kMasterListenFdEnv), so no other
/// process can take the port between the launcher choosing it and rank 0
/// binding it; the other ranks' connections wait in its backlog until rank
/// 0 accepts them. Returns the descriptor and the port, or -1 and errno.
std::pair<int, int> listeningLoopbackSocket() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return {-1, -1};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
      ::listen(fd, SOMAXCONN) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    return {-1, -1};
  }
  return {fd, ntohs(addr.sin_port)};
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

/// Forks `ranks.size()` ranks re-executing argv, with torchrun's variables
/// and a rendezvous on 127.0.0.1:`port`, whose listening socket `listenFd`
/// rank 0 inherits; ranks above 0 write into a pipe the launcher reads.
/// Prints the error and returns false if one cannot be started.
bool forkRanks(char **argv, int listenFd, int port,
               std::vector<RankProcess> &ranks) {
  int nproc = int(ranks.size());
  for (int k = 0; k < nproc; ++k) {
    int fds[2] = {-1, -1};
    if (k > 0 && ::pipe(fds) != 0) {
      std::fprintf(stderr, "loom-run: error: pipe: %s\n", std::strerror(errno));
      return false;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(stderr, "loom-run: error: fork: %s\n", std::strerror(errno));
      return false;
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
      if (k == 0)
        ::setenv(kMasterListenFdEnv, std::to_string(listenFd).c_str(), 1);
      else
        ::close(listenFd);
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
  return true;
}

/// Waits up to 50 ms for output of the ranks and forwards what came.
void forwardSomeOutput(std::vector<RankProcess> &ranks) {
  std::vector<pollfd> fds;
  std::vector<int> who;
  for (int k = 0; k < int(ranks.size()); ++k)
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
}

/// How the ranks ended, in the order they exited.
struct Ending {
  std::vector<int> exitOrder;
  /// Whether the launcher stopped ranks still running after a failure.
  bool terminated = false;
};

/// Runs until every rank has exited, forwarding their output; once one has
/// failed, terminates the others after the grace period (and kills them a
/// second later).
Ending watchRanks(std::vector<RankProcess> &ranks) {
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> firstFailure;
  Ending ending;
  bool killed = false;
  auto running = [&] {
    return std::any_of(ranks.begin(), ranks.end(),
                       [](const RankProcess &p) { return !p.exited; });
  };
  while (running()) {
    forwardSomeOutput(ranks);
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0)
      for (int k = 0; k < int(ranks.size()); ++k)
        if (ranks[size_t(k)].pid == pid) {
          ranks[size_t(k)].exited = true;
          ranks[size_t(k)].status = status;
          ending.exitOrder.push_back(k);
          if (failed(status) && !firstFailure)
            firstFailure = Clock::now();
        }
    if (!firstFailure || !running())
      continue;
    auto since = Clock::now() - *firstFailure;
    int sig = 0;
    if (!ending.terminated && since >= kGracePeriod) {
      sig = SIGTERM;
      ending.terminated = true;
    } else if (!killed && since >= kGracePeriod + std::chrono::seconds(1)) {
      sig = SIGKILL;
      killed = true;
    }
    if (sig)
      for (const RankProcess &p : ranks)
        if (!p.exited)
          ::kill(p.pid, sig);
  }
  return ending;
}

/// Forwards what the ranks wrote before they exited and closes their pipes.
void drainOutput(std::vector<RankProcess> &ranks) {
  for (int k = 0; k < int(ranks.size()); ++k) {
    RankProcess &p = ranks[size_t(k)];
    if (p.out < 0)
      continue;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(p.out, buf, sizeof buf)) > 0)
      p.pending.append(buf, size_t(n));
    forward(p, k, true);
    ::close(p.out);
  }
}

/// The rank that failed first (-1: none failed). A rank whose collective
/// failed (status 3) or that the launcher stopped lost a peer; one that
/// failed on its own is preferred. `onlySecondary` says none did.
int findCulprit(const std::vector<RankProcess> &ranks, const Ending &ending,
                bool &onlySecondary) {
  for (int pass = 0; pass < 2; ++pass)
    for (int k : ending.exitOrder) {
      int st = ranks[size_t(k)].status;
      if (!failed(st))
        continue;
      // SIGPIPE: written to a socket whose peer had died first.
      bool secondary = WIFSIGNALED(st)
                           ? ending.terminated || WTERMSIG(st) == SIGPIPE
                           : WEXITSTATUS(st) == kExitCollectiveFailed;
      if (pass == 1 || !secondary) {
        onlySecondary = pass == 1;
        return k;
      }
    }
  return -1;
}

/// "a, b, c" of the ranks `pick` selects, in `order`.
template <typename Pick>
std::string listRanks(const std::vector<int> &order, Pick pick) {
  std::string list;
  for (int k : order)
    if (pick(k))
      list += (list.empty() ? "" : ", ") + std::to_string(k);
  return list;
}

/// Explains a failed run after naming its culprit: a deadlock, ranks the
/// launcher stopped, ranks whose --check failed.
void explainFailure(const std::vector<RankProcess> &ranks, const Ending &ending,
                    int culprit, bool onlySecondary) {
  auto status = [&](int k) { return ranks[size_t(k)].status; };
  // Only secondary failures and no rank left hanging: every rank gave up
  // waiting on another (a deadlock or a transfer nobody matches), so the
  // first to exit is no more at fault than the others.
  if (onlySecondary && !ending.terminated)
    std::fprintf(stderr,
                 "loom-run: no rank failed on its own: rank(s) %s each "
                 "stopped waiting on a collective or transfer of another "
                 "(a deadlock or an unmatched transfer; each rank's error "
                 "above names its instruction)\n",
                 listRanks(ending.exitOrder, [&](int k) {
                   return failed(status(k));
                 }).c_str());
  std::vector<int> all(ranks.size());
  std::iota(all.begin(), all.end(), 0);
  // Ranks still running when the grace period ended (a hung rank shows up
  // here when its peers' collectives timed out).
  std::string stopped = listRanks(all, [&](int k) {
    return ending.terminated && k != culprit && WIFSIGNALED(status(k)) &&
           (WTERMSIG(status(k)) == SIGTERM || WTERMSIG(status(k)) == SIGKILL);
  });
  if (!stopped.empty())
    std::fprintf(stderr,
                 "loom-run: stopped rank(s) %s, still running %lld s after "
                 "the first failure\n",
                 stopped.c_str(),
                 (long long)std::chrono::duration_cast<std::chrono::seconds>(
                     kGracePeriod)
                     .count());
  // --check runs on every rank: name each rank whose check failed, not only
  // the first to exit.
  std::string mismatched = listRanks(all, [&](int k) {
    return !WIFSIGNALED(status(k)) && WEXITSTATUS(status(k)) == kExitMismatch;
  });
  if (!mismatched.empty())
    std::fprintf(stderr, "loom-run: --check failed on rank(s) %s\n",
                 mismatched.c_str());
}

} // namespace

int launchRanks(char **argv, int nproc) {
  auto [listenFd, port] = listeningLoopbackSocket();
  if (listenFd < 0) {
    std::fprintf(stderr, "loom-run: error: no free port on 127.0.0.1: %s\n",
                 std::strerror(errno));
    return kExitError;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<RankProcess> ranks(static_cast<size_t>(nproc));
  bool started = forkRanks(argv, listenFd, port, ranks);
  ::close(listenFd); // rank 0 holds it now
  if (!started)
    return kExitError;
  Ending ending = watchRanks(ranks);
  drainOutput(ranks);
  bool onlySecondary = false;
  int culprit = findCulprit(ranks, ending, onlySecondary);
  if (culprit < 0)
    return 0;
  int st = ranks[size_t(culprit)].status;
  std::fprintf(stderr, "loom-run: rank %d failed (%s)\n", culprit,
               describeStatus(st).c_str());
  explainFailure(ranks, ending, culprit, onlySecondary);
  return WIFSIGNALED(st) ? kExitError : WEXITSTATUS(st);
}

namespace {

/// The files the ranks write for `path` (rankTracePath), and whether every
/// rank wrote its own.
std::pair<std::vector<std::string>, bool> rankParts(const std::string &path,
                                                    int worldSize) {
  std::vector<std::string> parts;
  bool all = true;
  for (int k = 0; k < worldSize; ++k) {
    parts.push_back(rankTracePath(path, k));
    all = all && ::access(parts.back().c_str(), R_OK) == 0;
  }
  return {parts, all};
}

/// Merges the ranks' traces into options.trace once all have written one
/// (also when a check failed afterwards: the trace helps to see why).
int mergeRankTraces(const RunOptions &o, int worldSize, int rc) {
  auto [parts, all] = rankParts(o.trace, worldSize);
  try {
    if (all || rc == 0) {
      mergeTraces(parts, o.trace);
      std::fprintf(stderr, "loom-run: wrote trace %s (%d ranks)\n",
                   o.trace.c_str(), worldSize);
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "loom-run: error: merging the traces: %s\n", e.what());
    rc = kExitError;
  }
  for (const std::string &part : parts)
    std::remove(part.c_str());
  return rc;
}

/// Concatenates the ranks' memory reports into options.memoryReport in rank
/// order. Whatever lines a failed run's ranks wrote are kept: how memory
/// went up to a failure is what one looks for then.
int mergeMemoryReports(const RunOptions &o, int worldSize, int rc) {
  std::string merged, missing;
  std::vector<std::string> parts;
  for (int k = 0; k < worldSize; ++k) {
    parts.push_back(rankTracePath(o.memoryReport, k));
    if (::access(parts.back().c_str(), R_OK) != 0)
      missing += (missing.empty() ? "" : ", ") + std::to_string(k);
  }
  try {
    for (const std::string &part : parts)
      if (::access(part.c_str(), R_OK) == 0)
        merged += readFile(part);
    AtomicFileWriter out(o.memoryReport);
    out.write(merged.data(), merged.size());
    out.commit();
    if (!missing.empty())
      std::fprintf(stderr,
                   "loom-run: memory report %s lacks rank(s) %s: they wrote "
                   "none\n",
                   o.memoryReport.c_str(), missing.c_str());
    if (rc == 0 && !missing.empty())
      rc = kExitError;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "loom-run: error: merging the memory reports: %s\n",
                 e.what());
    rc = kExitError;
  }
  for (const std::string &part : parts)
    std::remove(part.c_str());
  return rc;
}

/// Merges the ranks' kernel workspace profiles into options.kernelWorkspace
/// (the most per signature) when every rank wrote one.
int mergeKernelWorkspaceParts(const RunOptions &o, int worldSize, int rc) {
  auto [parts, all] = rankParts(o.kernelWorkspace, worldSize);
  try {
    if (all) {
      mergeKernelWorkspaces(parts, o.kernelWorkspace);
      std::fprintf(stderr,
                   "loom-run: wrote the kernel workspace profile %s (%d "
                   "ranks)\n",
                   o.kernelWorkspace.c_str(), worldSize);
    } else if (rc == 0) {
      std::fprintf(stderr,
                   "loom-run: error: a rank wrote no kernel workspace "
                   "profile\n");
      rc = kExitError;
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr,
                 "loom-run: error: merging the kernel workspace profiles: "
                 "%s\n",
                 e.what());
    rc = kExitError;
  }
  for (const std::string &part : parts)
    std::remove(part.c_str());
  return rc;
}

/// Launches `worldSize` ranks and merges what they wrote per rank (traces,
/// memory reports) into the files the options name.
int launchAndMerge(const RunOptions &o, char **argv, int worldSize) {
  // The ranks need not say where their parts went: they are merged here.
  if (!o.trace.empty())
    ::setenv(kTraceMergeEnv, "1", 1);
  int rc = launchRanks(argv, worldSize);
  if (!o.trace.empty())
    rc = mergeRankTraces(o, worldSize, rc);
  if (!o.memoryReport.empty())
    rc = mergeMemoryReports(o, worldSize, rc);
  if (!o.kernelWorkspace.empty())
    rc = mergeKernelWorkspaceParts(o, worldSize, rc);
  return rc;
}

/// The rank this process runs, or the ranks to launch (`launch` > 0).
struct Plan {
  DistributedConfig config;
  int launch = 0;
};

/// Decides from the environment and the artifact; throws loomrt::Error with
/// the message for the user.
Plan plan(const RunOptions &o) {
  Plan p;
  if (std::optional<DistributedConfig> env =
          DistributedConfig::fromEnvironment()) {
    // An external launcher (torchrun, or this one) chose the rank.
    if (o.nproc > 0 && env->worldSize != o.nproc)
      throw Error("--nproc " + std::to_string(o.nproc) +
                  " but the environment says WORLD_SIZE=" +
                  std::to_string(env->worldSize));
    p.config = *env;
  } else {
    // The artifact records how many ranks it was compiled for.
    int64_t world = Artifact::load(o.artifact).worldSize;
    if (o.nproc > 0 && o.nproc != world)
      throw Error("--nproc " + std::to_string(o.nproc) + " but " + o.artifact +
                  " was compiled for world_size " + std::to_string(world) +
                  " (leave --nproc out: loom-run starts the artifact's " +
                  std::to_string(world) + " ranks)");
    if (world > 1)
      p.launch = int(world);
  }
  p.config.timeoutSeconds = o.timeout;
  p.config.device = o.device;
  return p;
}

} // namespace

int runOrLaunch(const RunOptions &o, char **argv) {
  // A peer that dies closes its sockets; writing to one must surface as a
  // failed collective naming the peer (EPIPE), not kill this rank.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    Plan p = plan(o);
    if (p.launch > 0)
      return launchAndMerge(o, argv, p.launch);
    return runRank(o, p.config);
  } catch (const CollectiveError &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "loom-run: error: %s\n", e.what());
    return kExitCollectiveFailed;
  } catch (const c10::Error &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "loom-run: error: %s\n", e.what_without_backtrace());
  } catch (const std::exception &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "loom-run: error: %s\n", e.what());
  }
  return kExitError;
}

} // namespace loomrt
