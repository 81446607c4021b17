//===- Comm.h - Rendezvous, process groups and collectives -------*- C++
//-*-===//
//
// The multi-rank half of a Session: a c10d::TCPStore for the rendezvous
// (rank 0 hosts it), one process group per group of ranks the program uses
// (the Device makes it: Gloo on the CPU, NCCL on CUDA), and the collectives
// of docs/distributed.md issued asynchronously on them. Kept out of the
// public headers so that users of libloomrt do not need c10d's (and Gloo's)
// headers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LIB_COMM_H
#define LOOMRT_LIB_COMM_H

#include "Device.h"
#include "Progress.h"

#include "loomrt/Artifact.h"
#include "loomrt/Session.h"

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace loomrt {

/// A process group: the ranks of one mesh group, this rank's index in it.
struct CommGroup {
  std::vector<int64_t> ranks;
  int64_t index = 0;
  std::string label; // "axes [shard] ranks [0, 1]"
  c10::intrusive_ptr<c10d::Backend> backend;
};

/// A collective in flight between its start and its wait.
class MemoryTracker;

struct PendingCollective {
  OpKind kind = OpKind::AllReduceStart;
  const CommGroup *group = nullptr;
  c10::intrusive_ptr<c10d::Work> work;
  /// Works issued before `work` for the same collective (an all_gather is
  /// one broadcast per group member), waited with it.
  std::vector<c10::intrusive_ptr<c10d::Work>> earlierWorks;
  /// all_gather: one tensor per group member; others: the reduced or
  /// broadcast buffer.
  std::vector<at::Tensor> outputs;
  at::Tensor buffer;
  /// The (contiguous) tensor the collective reads, alive until its wait.
  at::Tensor input;
  int64_t dim = 0;
  ReduceOp reduce = ReduceOp::Sum;
  int64_t bytes = 0;
  /// "all_gather over axes [shard] ranks [0, 1], 1.2 KiB": for messages.
  std::string describe;
  /// The memory tracker installed when it started and its staging id
  /// (MemoryTracker.h), released at the wait.
  MemoryTracker *tracker = nullptr;
  int64_t staging = 0;
  /// reduce_scatter on a donated input: all-reduced in `input` itself; the
  /// wait copies this rank's chunk out and releases the input.
  bool inPlace = false;
  /// Its number among the group's collectives (1 for the first), the same
  /// on every member, and the board a failure asks where the peers are;
  /// null for point-to-point transfers (their message names the peer).
  int64_t sequence = 0;
  ProgressBoard *progress = nullptr;
  /// The device it runs on and the timeout its wait allows.
  Device *device = nullptr;
  std::chrono::milliseconds timeout{0};
  /// The stream it was issued on and the event recorded there after it
  /// (null on the CPU), which its wait makes compute wait on.
  StreamKind stream = StreamKind::Compute;
  std::shared_ptr<DeviceEvent> issued;
};

class Comm {
public:
  /// Connects to the store (rank 0 hosts it) and creates the process
  /// groups for every axes list the artifact uses, in the order every rank
  /// follows, on `device`, which must outlive it. Throws loomrt::Error
  /// naming the rank and what failed.
  Comm(const Artifact &artifact, const DistributedConfig &config,
       Device &device);
  ~Comm();

  int64_t rank() const { return rank_; }
  int64_t worldSize() const { return worldSize_; }
  /// The group of this rank over `axes`.
  const CommGroup &group(const std::vector<std::string> &axes) const;

  /// Issues a collective on `input` (asynchronously). `donated`: the
  /// program never reads the input again (Session derives this from its
  /// frees), so a reduce_scatter may reduce in it instead of in a copy when
  /// nothing else shares its storage. `origin` (", started by ...") ends
  /// its description, in this rank's messages and in its peers'.
  PendingCollective start(OpKind kind, const std::vector<std::string> &axes,
                          const at::Tensor &input, int64_t dim, ReduceOp reduce,
                          int64_t root, bool donated = false,
                          const std::string &origin = std::string());
  /// Issues a send of `input` (send_start) or a recv of a `dtype` `shape`
  /// tensor (recv_start) to or from the rank at index `peer` of this rank's
  /// group over `axes`, with `tag` (asynchronously). The send keeps its
  /// (contiguous) input alive until finish(); finish() of a recv returns
  /// the received tensor, of a send an undefined tensor. A transfer whose
  /// peer never comes fails at finish() after the group's timeout.
  PendingCollective startPointToPoint(OpKind kind,
                                      const std::vector<std::string> &axes,
                                      const at::Tensor &input, int64_t peer,
                                      int64_t tag, c10::ScalarType dtype,
                                      const std::vector<int64_t> &shape,
                                      const std::string &origin);
  /// Waits for it and returns its result. Throws on failure or timeout.
  /// Releases the work on the calling thread (releaseOnThisThread).
  static at::Tensor finish(PendingCollective &pending);
  /// Drops the finished work once the backend's worker thread no longer
  /// holds it (Gloo's; Device::workerReleasesLate),
  /// so the tensors it holds are freed on this thread, where the session's
  /// MemoryTracker sees the frees.
  static void releaseOnThisThread(PendingCollective &pending);

  /// Blocking all-gather of a shard along `dim` (the runtime's own, for
  /// checks and saving; not a step collective).
  /// `origin` ends its description, as for start().
  at::Tensor allGather(const std::vector<std::string> &axes,
                       const at::Tensor &input, int64_t dim,
                       const std::string &origin = std::string());
  /// Blocking broadcast from the group member at index `root` (the
  /// runtime's own: an MPMD step's loss and saved parameters).
  at::Tensor broadcast(const std::vector<std::string> &axes,
                       const at::Tensor &input, int64_t root,
                       const std::string &origin = std::string());
  /// Blocking all-reduce (the runtime's own: the reported loss).
  at::Tensor allReduce(const std::vector<std::string> &axes,
                       const at::Tensor &input, ReduceOp op,
                       const std::string &origin = std::string());

private:
  at::Tensor onDevice(const at::Tensor &t) const;

  int64_t rank_ = 0;
  int64_t worldSize_ = 1;
  Device &device_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::map<std::vector<std::string>, CommGroup> groups_;
  /// Where this rank is in each group's collectives, for the peers' errors
  /// (several ranks only).
  std::unique_ptr<ProgressBoard> progress_;
};

} // namespace loomrt

#endif // LOOMRT_LIB_COMM_H
