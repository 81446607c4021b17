//===- Comm.cpp - Rendezvous, process groups and collectives --------------===//
//
// Implements the collectives of docs/distributed.md over the c10d backend
// the Device creates (ProcessGroupGloo on the CPU, ProcessGroupNCCL on
// CUDA), with the same calls on both. Gloo has no AVG reduction: like
// PyTorch's own Gloo path for averaged gradients, `avg` is a SUM followed by
// a division by the group size (NCCL gets the same, so both backends round
// alike). reduce_scatter along any dim is ProcessGroupGloo's
// _reduce_scatter_base (reduce_scatter_tensor, which Gloo supports in torch
// 2.9) on the tensor with that dim moved to the front. That call clones the
// whole input and all-reduces the clone, so while it is in flight the rank
// holds the input twice, which the compiler's liveness does not count; when
// the input is the runtime's own (donated by the program, or a private
// contiguous copy), the runtime all-reduces it in place instead, the same
// reduction without the clone.
//
//===----------------------------------------------------------------------===//

#include "Comm.h"
#include "MemoryTracker.h"

#include "loomrt/Dtype.h"
#include "loomrt/Error.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

namespace loomrt {

namespace {

std::string listOf(const std::vector<std::string> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + v[i];
  return s + "]";
}

std::string listOf(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string bytesText(int64_t bytes) {
  char buf[64];
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%lld B", (long long)bytes);
  else if (bytes < 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1024 * 1024));
  return buf;
}

::c10d::ReduceOp glooOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
  case ReduceOp::Avg: // SUM, then divided by the group size.
    return ::c10d::ReduceOp::SUM;
  case ReduceOp::Max:
    return ::c10d::ReduceOp::MAX;
  case ReduceOp::Min:
    return ::c10d::ReduceOp::MIN;
  case ReduceOp::Product:
    return ::c10d::ReduceOp::PRODUCT;
  }
  return ::c10d::ReduceOp::SUM;
}

/// Divides `t` by the group size in place. `t.div_(groupSize)` would wrap
/// the size in an 8-byte tensor and cast it to `t`'s dtype (4 more bytes
/// for f32), allocations the compiler's memory plan does not have (NCCL
/// averages natively), which at a wait at the step's peak put the measured
/// peak 12 bytes over the prediction. So the divisor is a 0-dim tensor of
/// `t`'s dtype over a local: no allocation, and the same quotient (ATen
/// divides by the divisor's value in the op's math type either way), as
/// long as the size is exact in the dtype (up to 256 in bf16, 2048 in f16);
/// otherwise the plain division.
void divideForAvg(at::Tensor &t, int64_t groupSize) {
  at::ScalarType dtype = t.scalar_type();
  if (!at::isFloatingType(dtype) && !at::isComplexType(dtype))
    throw Error("an avg reduction of a " + artifactDtypeName(dtype) +
                " tensor (avg needs a floating-point dtype)");
  auto over = [&](auto value) {
    at::Tensor divisor =
        at::from_blob(&value, {}, at::TensorOptions().dtype(dtype));
    t.div_(divisor);
  };
  switch (dtype) {
  case at::kFloat:
    return over(float(groupSize));
  case at::kDouble:
    return over(double(groupSize));
  case at::kBFloat16:
    if (groupSize <= 256)
      return over(c10::BFloat16(float(groupSize)));
    break;
  case at::kHalf:
    if (groupSize <= 2048)
      return over(c10::Half(float(groupSize)));
    break;
  default:
    break;
  }
  t.div_(groupSize);
}

/// Redirects stdout and stderr into temporary files for its lifetime, then
/// replays them without Gloo's connectivity announcements. File descriptors
/// are per process, so sessions connecting in several threads at once share
/// one redirection: the first to start holds it, the last to finish replays.
class QuietConnectivity {
public:
  QuietConnectivity() {
    std::lock_guard<std::mutex> lock(mutex());
    if (depth()++ == 0) {
      hold(STDOUT_FILENO, out());
      hold(STDERR_FILENO, err());
    }
  }
  ~QuietConnectivity() {
    std::lock_guard<std::mutex> lock(mutex());
    if (--depth() == 0) {
      replay(STDOUT_FILENO, out(), stdout);
      replay(STDERR_FILENO, err(), stderr);
    }
  }
  QuietConnectivity(const QuietConnectivity &) = delete;
  QuietConnectivity &operator=(const QuietConnectivity &) = delete;

private:
  struct Held {
    std::FILE *file = nullptr;
    int saved = -1;
  };
  static void flushAll() {
    std::fflush(stdout);
    std::fflush(stderr);
    std::cout.flush();
    std::cerr.flush();
  }
  static void hold(int fd, Held &h) {
    flushAll();
    h.file = std::tmpfile();
    h.saved = h.file ? ::dup(fd) : -1;
    if (h.saved >= 0)
      ::dup2(::fileno(h.file), fd);
  }
  static void replay(int fd, Held &h, std::FILE *stream) {
    if (h.saved < 0) {
      if (h.file)
        std::fclose(h.file);
      h = Held();
      return;
    }
    flushAll();
    ::dup2(h.saved, fd);
    ::close(h.saved);
    std::rewind(h.file);
    char line[4096];
    while (std::fgets(line, sizeof line, h.file))
      if (!(std::strstr(line, "[Gloo] Rank") &&
            std::strstr(line, "is connected to")))
        std::fputs(line, stream);
    std::fflush(stream);
    std::fclose(h.file);
    h = Held();
  }
  static std::mutex &mutex() {
    static std::mutex m;
    return m;
  }
  static int &depth() {
    static int d = 0;
    return d;
  }
  static Held &out() {
    static Held h;
    return h;
  }
  static Held &err() {
    static Held h;
    return h;
  }
};

} // namespace

Comm::Comm(const Artifact &artifact, const DistributedConfig &config,
           Device &device)
    : rank_(config.rank), worldSize_(config.worldSize), device_(device),
      timeout_(
          std::chrono::milliseconds(int64_t(config.timeoutSeconds * 1000.0))) {
  std::string who = "rank " + std::to_string(rank_);
  if (!artifact.mesh)
    throw Error(artifact.what() + ": world_size is " +
                std::to_string(artifact.worldSize) +
                " but the artifact has no mesh (version 2 is needed to run "
                "on several ranks)");
  try {
    if (worldSize_ == 1) {
      // One rank (a mesh of size 1): nothing to meet.
      store_ = c10::make_intrusive<::c10d::HashStore>();
    } else {
      ::c10d::TCPStoreOptions opts;
      opts.port = uint16_t(config.masterPort);
      opts.isServer = rank_ == 0;
      if (opts.isServer)
        opts.masterListenFd = config.masterListenFd;
      opts.numWorkers = size_t(worldSize_);
      opts.waitWorkers = true;
      opts.timeout = timeout_;
      store_ = c10::make_intrusive<::c10d::TCPStore>(config.masterAddr, opts);
    }
  } catch (const std::exception &e) {
    throw Error(who + ": rendezvous at " + config.masterAddr + ":" +
                std::to_string(config.masterPort) + " failed: " + e.what());
  }

  // Gloo announces every connection on stdout ("[Gloo] Rank 0 is connected
  // to 1 peer ranks ..."), whatever c10's log level: hold stdout and
  // stderr while the groups connect and pass on everything but those
  // lines, unless the user asked for c10's logs (TORCH_CPP_LOG_LEVEL).
  std::optional<QuietConnectivity> quiet;
  if (!std::getenv("TORCH_CPP_LOG_LEVEL"))
    quiet.emplace();

  // Every rank walks the same axes lists in the same order and joins the
  // one group of each it belongs to; groups of one axes list are disjoint,
  // so the creations cannot wait on each other in a cycle.
  for (const std::vector<std::string> &axes : artifact.groupAxes()) {
    std::vector<int64_t> ranks = artifact.mesh->group(axes, rank_);
    CommGroup g;
    g.ranks = ranks;
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] == rank_)
        g.index = int64_t(i);
    g.label = "axes " + listOf(axes) + " ranks " + listOf(ranks);
    std::string prefix = "loomrt/group/" + listOf(axes) + "/" + listOf(ranks);
    try {
      auto prefixed = c10::make_intrusive<::c10d::PrefixStore>(prefix, store_);
      g.backend = device_.createProcessGroup(prefixed, g.index,
                                             int64_t(ranks.size()), timeout_);
    } catch (const std::exception &e) {
      throw Error(who + ": creating the process group over " + g.label +
                  " failed: " + e.what());
    }
    groups_.emplace(axes, std::move(g));
  }
  if (worldSize_ > 1) {
    // After a failure the board's query waits for the store at most a few
    // seconds: the store may have gone with rank 0.
    auto patience = std::min(timeout_, std::chrono::milliseconds(3000));
    try {
      progress_ = std::make_unique<ProgressBoard>(store_, rank_, patience);
    } catch (const std::exception &e) {
      throw Error(who + ": connecting to the store for progress reports " +
                  "failed: " + e.what());
    }
  }
}

Comm::~Comm() = default;

const CommGroup &Comm::group(const std::vector<std::string> &axes) const {
  auto it = groups_.find(axes);
  if (it == groups_.end())
    throw Error("no process group over axes " + listOf(axes));
  return it->second;
}

namespace {

/// Whether `t`, held by the caller's slot and one copy (two references),
/// is the only way to its storage. ATen records the base of a view even
/// without autograd, so a view's bases hold the storage too; they count as
/// long as nothing but the next view in the chain holds them.
bool soleHolder(const at::Tensor &t) {
  if (t.use_count() > 2)
    return false;
  std::vector<at::Tensor> bases;
  for (const at::Tensor *v = &t; v->is_view();) {
    bases.emplace_back(at::Tensor(v->_base()));
    // The view that records it, and `bases`.
    if (bases.back().use_count() > 2)
      return false;
    v = &bases.back();
    if (bases.size() > 64)
      return false;
  }
  return t.storage().use_count() == 1 + bases.size();
}

/// Marks what the backend allocates on this thread while it issues a
/// collective as that collective's staging (MemoryTracker.h).
struct StagingScope {
  explicit StagingScope(PendingCollective &p) : p(p) {
    p.tracker = MemoryTracker::installed();
    if (p.tracker)
      p.staging = p.tracker->beginStaging();
  }
  ~StagingScope() {
    if (p.tracker)
      p.tracker->endStaging();
  }
  PendingCollective &p;
};

/// Starts an all-reduce of `t`, in place, over `g`, as `p`'s work.
void startAllReduce(PendingCollective &p, const CommGroup &g, at::Tensor t,
                    ReduceOp reduce) {
  std::vector<at::Tensor> tensors{std::move(t)};
  ::c10d::AllreduceOptions o;
  o.reduceOp = glooOp(reduce);
  StagingScope staging(p);
  p.work = g.backend->allreduce(tensors, o);
}

} // namespace

PendingCollective Comm::start(OpKind kind, const std::vector<std::string> &axes,
                              const at::Tensor &input, int64_t dim,
                              ReduceOp reduce, int64_t root, bool donated,
                              const std::string &origin) {
  const CommGroup &g = group(axes);
  int64_t size = int64_t(g.ranks.size());
  PendingCollective p;
  p.kind = kind;
  p.group = &g;
  p.device = &device_;
  p.timeout = timeout_;
  p.dim = dim;
  p.reduce = reduce;
  if (!input.defined())
    throw Error("the input slot holds no tensor");
  p.bytes = int64_t(input.numel()) * int64_t(input.element_size());
  p.describe = std::string(collectiveName(kind)) + " over " + g.label + " (" +
               artifactDtypeName(input.scalar_type()) + " " +
               formatShape(input.sizes()) + ", " + bytesText(p.bytes) + ")";
  if ((kind == OpKind::AllGatherStart || kind == OpKind::ReduceScatterStart ||
       kind == OpKind::AllSliceStart) &&
      dim >= input.dim())
    throw Error(p.describe + ": dim " + std::to_string(dim) +
                " out of range for a " + std::to_string(input.dim()) +
                "-d tensor");
  if ((kind == OpKind::ReduceScatterStart || kind == OpKind::AllSliceStart) &&
      input.size(dim) % size != 0)
    throw Error(p.describe + ": dim " + std::to_string(dim) + " has size " +
                std::to_string(input.size(dim)) +
                ", not divisible by the group size " + std::to_string(size));
  try {
    switch (kind) {
    case OpKind::AllGatherStart: {
      p.input = input.contiguous();
      if (dim == 0) {
        // Straight into the gathered tensor: the rank blocks of dim 0 are
        // contiguous, so no per-rank outputs and no concatenation at the
        // wait. Gloo's allgather gathers into a flat copy of its own and
        // copies out of it, a second gathered-size buffer the compiler's
        // liveness does not count; one in-place broadcast per member into
        // its block moves the same bytes with the one buffer.
        std::vector<int64_t> shape = p.input.sizes().vec();
        int64_t rows = shape[0];
        shape[0] *= size;
        p.buffer = at::empty(shape, p.input.options());
        StagingScope staging(p);
        if (device_.gathersInPlace()) {
          // NCCL writes every block, this rank's too, in one collective.
          p.work = g.backend->_allgather_base(p.buffer, p.input);
          break;
        }
        p.buffer.narrow(0, g.index * rows, rows).copy_(p.input);
        for (int64_t k = 0; k < size; ++k) {
          std::vector<at::Tensor> block{p.buffer.narrow(0, k * rows, rows)};
          ::c10d::BroadcastOptions o;
          o.rootRank = k;
          if (p.work)
            p.earlierWorks.push_back(std::move(p.work));
          p.work = g.backend->broadcast(block, o);
        }
        break;
      }
      std::vector<at::Tensor> in{p.input};
      std::vector<std::vector<at::Tensor>> out(1);
      for (int64_t i = 0; i < size; ++i)
        out[0].push_back(at::empty_like(in[0]));
      p.outputs = out[0];
      {
        StagingScope staging(p);
        p.work = g.backend->allgather(out, in);
      }
      break;
    }
    case OpKind::ReduceScatterStart: {
      // Scatter along dim 0 of the tensor with `dim` moved first: chunk i of
      // the flat result is chunk i of `dim`.
      p.input =
          dim == 0 ? input.contiguous() : input.movedim(dim, 0).contiguous();
      // Whether the rank may reduce in p.input: a fresh contiguous copy is
      // its own; the slot's tensor is when the program donated it and no
      // other tensor (a view, another slot, a parameter) shares its storage.
      bool ownCopy = !p.input.is_alias_of(input);
      bool sole = ownCopy || (donated && soleHolder(p.input));
      // The result exists from the start on both paths, as the compiler's
      // liveness counts every collective's result (PeakMemory): the
      // in-place path copies its chunk into it at the wait.
      std::vector<int64_t> shape = p.input.sizes().vec();
      shape[0] /= size;
      p.buffer = at::empty(shape, p.input.options());
      if (sole) {
        p.inPlace = true;
        startAllReduce(p, g, p.input, reduce);
        break;
      }
      ::c10d::ReduceScatterOptions o;
      o.reduceOp = glooOp(reduce);
      {
        StagingScope staging(p);
        p.work = g.backend->_reduce_scatter_base(p.buffer, p.input, o);
      }
      break;
    }
    case OpKind::AllReduceStart: {
      // A copy: the input slot's tensor may still be read by others.
      p.buffer = input.clone(at::MemoryFormat::Contiguous);
      startAllReduce(p, g, p.buffer, reduce);
      break;
    }
    case OpKind::AllSliceStart:
      // No data moves: a copy of this rank's slice, so that the input may
      // be freed after the wait.
      p.bytes = 0;
      p.buffer = input.chunk(size, dim)[size_t(g.index)].clone(
          at::MemoryFormat::Contiguous);
      break;
    case OpKind::BroadcastStart: {
      p.buffer = input.clone(at::MemoryFormat::Contiguous);
      std::vector<at::Tensor> t{p.buffer};
      ::c10d::BroadcastOptions o;
      o.rootRank = root;
      {
        StagingScope staging(p);
        p.work = g.backend->broadcast(t, o);
      }
      break;
    }
    default:
      throw Error("not a collective");
    }
  } catch (const Error &) {
    throw;
  } catch (const std::exception &e) {
    throw Error(p.describe + " failed to start: " + e.what());
  }
  // Errors so far are reported at this start instruction itself; from here
  // on, at the wait or in a peer's message, the description says where it
  // started.
  p.describe += origin;
  // all_slice moves no data: nothing for a peer to wait on.
  if (progress_ && p.work) {
    p.sequence = progress_->started(g.label, p.describe);
    p.progress = progress_.get();
  }
  return p;
}

PendingCollective Comm::startPointToPoint(OpKind kind,
                                          const std::vector<std::string> &axes,
                                          const at::Tensor &input, int64_t peer,
                                          int64_t tag, c10::ScalarType dtype,
                                          const std::vector<int64_t> &shape,
                                          const std::string &origin) {
  const CommGroup &g = group(axes);
  if (peer < 0 || peer >= int64_t(g.ranks.size()) || peer == g.index)
    throw Error("peer " + std::to_string(peer) +
                " is not another member of the group over " + g.label);
  bool send = kind == OpKind::SendStart;
  PendingCollective p;
  p.kind = kind;
  p.group = &g;
  p.device = &device_;
  p.timeout = timeout_;
  if (send && !input.defined())
    throw Error("the input slot holds no tensor");
  at::Tensor t = send
                     ? input.contiguous()
                     : at::empty(shape, at::TensorOptions().dtype(dtype).device(
                                            device_.device()));
  p.bytes = int64_t(t.numel()) * int64_t(t.element_size());
  // The peer's global rank and the tag: what a user needs to find the
  // other half of a transfer that never matched.
  p.describe = std::string(send ? "send to" : "recv from") + " rank " +
               std::to_string(g.ranks[size_t(peer)]) + " (index " +
               std::to_string(peer) + " of " + g.label + "), tag " +
               std::to_string(tag) + " (" + artifactDtypeName(t.scalar_type()) +
               " " + formatShape(t.sizes()) + ", " + bytesText(p.bytes) + ")";
  try {
    std::vector<at::Tensor> tensors{t};
    StagingScope staging(p);
    if (send) {
      p.input = t;
      p.work = g.backend->send(tensors, int(peer), int(tag));
    } else {
      p.buffer = t;
      p.work = g.backend->recv(tensors, int(peer), int(tag));
    }
  } catch (const std::exception &e) {
    throw Error(p.describe + " failed to start: " + e.what());
  }
  p.describe += origin;
  return p;
}

at::Tensor Comm::finish(PendingCollective &p) {
  try {
    for (auto &w : p.earlierWorks)
      p.device->waitWork(*w, p.timeout);
    if (p.work)
      p.device->waitWork(*p.work, p.timeout);
  } catch (const std::exception &e) {
    std::string where;
    if (p.progress)
      where = "; " +
              p.progress->explain(p.group->label, p.group->ranks, p.sequence);
    throw CollectiveError(p.describe + " failed (a peer exited, or the " +
                          "timeout passed): " + e.what() + where);
  }
  releaseOnThisThread(p);
  if (p.tracker)
    p.tracker->releaseStaging(p.staging);
  int64_t size = int64_t(p.group->ranks.size());
  switch (p.kind) {
  case OpKind::AllGatherStart:
    return p.outputs.empty() ? p.buffer : at::cat(p.outputs, p.dim);
  case OpKind::ReduceScatterStart:
    if (p.inPlace) {
      // This rank's chunk of the reduced input, then the input goes, as
      // for the compiler (input held to the wait, result from the start).
      int64_t rows = p.input.size(0) / size;
      p.buffer.copy_(p.input.narrow(0, p.group->index * rows, rows));
      p.input = at::Tensor();
    }
    if (p.reduce == ReduceOp::Avg)
      divideForAvg(p.buffer, size);
    return p.dim == 0 ? p.buffer : p.buffer.movedim(0, p.dim).contiguous();
  case OpKind::AllReduceStart:
    if (p.reduce == ReduceOp::Avg)
      divideForAvg(p.buffer, size);
    return p.buffer;
  case OpKind::SendStart:
    // The input may go now that the peer has it.
    p.input = at::Tensor();
    return at::Tensor();
  default:
    return p.buffer;
  }
}

void Comm::releaseOnThisThread(PendingCollective &p) {
  // wait() returns once Gloo's worker thread marked the work done; the
  // worker drops its own references to the work (and so to the tensors the
  // work holds: inputs, outputs, its flattened copies) a moment later. Were
  // the last reference dropped there, those tensors would be freed on the
  // worker thread after it left the work's thread-local state, where no
  // MemoryTracker sees the free, and the step's live and peak bytes would
  // depend on that race. So wait (briefly: the worker is between two
  // statements; at most 1 s, then release anyway) until only this
  // PendingCollective holds the work, and release it here, at the wait
  // instruction, on every run.
  bool late = p.device && p.device->workerReleasesLate();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  p.earlierWorks.push_back(std::move(p.work));
  for (auto &w : p.earlierWorks) {
    while (late && w.use_count() > 1 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    w.reset();
  }
  p.earlierWorks.clear();
}

at::Tensor Comm::onDevice(const at::Tensor &t) const {
  // The runtime's own exchanges (the loss, checksums, saved parameters) may
  // start from host tensors; NCCL moves only device memory. On the CPU
  // this is the tensor itself.
  return t.defined() ? t.to(device_.device()) : t;
}

at::Tensor Comm::allGather(const std::vector<std::string> &axes,
                           const at::Tensor &input, int64_t dim,
                           const std::string &origin) {
  PendingCollective p = start(OpKind::AllGatherStart, axes, onDevice(input),
                              dim, ReduceOp::Sum, 0, false, origin);
  return finish(p);
}

at::Tensor Comm::broadcast(const std::vector<std::string> &axes,
                           const at::Tensor &input, int64_t root,
                           const std::string &origin) {
  PendingCollective p = start(OpKind::BroadcastStart, axes, onDevice(input), 0,
                              ReduceOp::Sum, root, false, origin);
  return finish(p);
}

at::Tensor Comm::allReduce(const std::vector<std::string> &axes,
                           const at::Tensor &input, ReduceOp op,
                           const std::string &origin) {
  PendingCollective p = start(OpKind::AllReduceStart, axes, onDevice(input), 0,
                              op, 0, false, origin);
  return finish(p);
}

} // namespace loomrt
