//===- Session.h - Load a .loomx artifact and run training steps -*- C++
//-*-===//
//
// A Session owns everything that lives across steps: the parameters, buffers
// and constants (initialised from the artifact's weights), the optimizer
// state (zeros before the first step) and the per-parameter step counts. A
// step binds those and the batch to their slots, runs the program's
// instructions through the ATen dispatcher, applies the buffer mutations,
// keeps the gradients it outputs, and returns the loss.
//
// On the artifact's device (or DistributedConfig::device): the CPU with
// Gloo, or a CUDA GPU with NCCL (docs/runtime.md, "Devices"); a multi-rank
// artifact (docs/distributed.md) runs as one rank per process.
// Every failure throws loomrt::Error with a message that names the file,
// field or instruction. A Session is not thread-safe; use one per thread.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SESSION_H
#define LOOMRT_SESSION_H

#include "loomrt/Artifact.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loomrt {

/// Collectives a step issued of one kind (all_gather, reduce_scatter,
/// all_reduce, broadcast): how many, and the bytes of their inputs.
struct CollectiveCount {
  int64_t count = 0;
  int64_t bytes = 0;
};

/// The environment variable by which loom-run's launcher passes rank 0 the
/// listening socket of the rendezvous (DistributedConfig::masterListenFd).
constexpr const char *kMasterListenFdEnv = "LOOMRT_MASTER_LISTEN_FD";

/// Where this process stands among the ranks of a multi-rank artifact, and
/// the device it runs on.
struct DistributedConfig {
  int64_t rank = 0;
  int64_t worldSize = 1;
  /// Rank 0 hosts the c10d::TCPStore here; the others connect to it.
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  /// Rank 0's store listens on this socket, already bound to masterPort,
  /// instead of binding the port itself (how loom-run's launcher hands the
  /// port over without a window in which another process can take it).
  std::optional<int> masterListenFd;
  /// For the rendezvous, process group creation and every collective.
  double timeoutSeconds = 60;
  /// torchrun's LOCAL_RANK: which GPU of this machine the rank uses.
  int64_t localRank = 0;
  /// Runs the step here instead of on the artifact's `device`.
  std::optional<DeviceKind> device;

  /// From RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun's variables)
  /// and, on rank 0, kMasterListenFdEnv; nullopt when RANK is not set.
  /// Throws on malformed values.
  static std::optional<DistributedConfig> fromEnvironment();
};

/// Wall time of one instruction, when tracing is on.
struct InstructionTiming {
  size_t index = 0;   // into this rank's program's instructions
  double startUs = 0; // since the session was created
  double durationUs = 0;
};

/// A collective of a traced step, from its start instruction to its wait.
/// Times are microseconds since the session was created.
struct CollectiveTiming {
  size_t start = 0; // indices into this rank's program's instructions
  size_t wait = 0;
  double issueUs = 0; // the start instruction began issuing it
  /// The backend finished it (its c10d Work's future completed, on the
  /// backend's thread); the end of the wait when the backend did not say.
  double completeUs = 0;
  double waitBeginUs = 0; // the wait instruction blocked from here ...
  double waitEndUs = 0;   // ... to here (the exposed part)
  int64_t bytes = 0;
  std::string describe; // "all_gather over axes [shard] ranks [0, 1] (...)"
};

/// What the last step measured.
struct StepStats {
  int64_t step = -1; // 0 for the session's first step
  double loss = 0;
  double startUs = 0; // since the session was created
  double timeMs = 0;
  /// Tensor memory (bytes) the session held when the step started: owned
  /// state, the batch, the previous step's gradients.
  int64_t startBytes = 0;
  /// The most tensor memory alive at any point of the step, measured from
  /// the CPU allocator's reports, or on CUDA the caching allocator's
  /// statistics (see docs/runtime.md).
  int64_t peakBytes = 0;
  /// Tensor memory alive after the step, once its slots are dropped.
  int64_t endBytes = 0;
  /// Allocations the CPU allocator reported during the step.
  int64_t allocations = 0;
  /// The collectives the step issued, by kind (the loss reduction the
  /// runtime does after the step is not counted).
  std::map<std::string, CollectiveCount> collectives;
  /// One per instruction when tracing is on, else empty.
  std::vector<InstructionTiming> instructions;
  /// One per collective the step issued when tracing is on, else empty.
  std::vector<CollectiveTiming> collectiveTimings;
  /// The session's time origin on the steady clock (CLOCK_MONOTONIC, which
  /// the processes of one machine share), in microseconds: aligns the traces
  /// of several ranks.
  double epochUs = 0;
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class SessionImpl;

class Session {
public:
  /// Loads and validates the artifact, resolves every kernel against the
  /// dispatcher and converts its arguments, and creates the owned state from
  /// the embedded weights.
  static Session load(const std::string &artifactPath);
  /// As load(path), as rank `config.rank` of a multi-rank artifact:
  /// connects to the other ranks, creates the process groups, and keeps this
  /// rank's shards of sharded parameters and state. Every rank must call it.
  static Session load(const std::string &artifactPath,
                      const DistributedConfig &config);

  Session(Session &&) noexcept;
  Session &operator=(Session &&) noexcept;
  ~Session();

  const Artifact &artifact() const;

  /// Replaces parameters, buffers and constants with the tensors of the same
  /// names in a safetensors file (e.g. loom-import's step.weights
  /// .safetensors); every one must be present with the declared dtype and
  /// shape (other tensors in the file are ignored). Resets the optimizer
  /// state and step counts: training starts afresh.
  void loadWeights(const std::string &safetensorsPath);

  /// Runs one training step on `batch` (element i is the batch tuple's
  /// element i; each must have the dtype and shape its input declares) and
  /// returns the loss (reduced over the ranks as the loss output's `reduce`
  /// says; for an MPMD artifact the loss program's, handed to every rank).
  /// Split inputs take the global batch; each rank slices its rows.
  /// The batch tensors are read, not copied: an
  /// instruction that mutates an input mutates the caller's tensor.
  double step(const std::vector<at::Tensor> &batch);

  /// Writes the parameters and buffers (fully-qualified names) to a
  /// safetensors file. On several ranks every rank must call it (sharded
  /// parameters are gathered; for an MPMD artifact, every program's tensors
  /// come to rank 0); rank 0 writes the file.
  void saveParameters(const std::string &safetensorsPath) const;
  /// The full parameters of this rank's program, in parameters() order:
  /// sharded ones all-gathered over their groups with the padding dropped. On several ranks a
  /// collective: every rank must call it.
  NamedTensors fullParameters() const;
  /// This process's rank and the world size (0 and 1 for one rank).
  int64_t rank() const;
  int64_t worldSize() const;
  /// Loads parameters from a file saveParameters wrote (or any safetensors
  /// with those names): every parameter must be present; buffers are loaded
  /// when present. Optimizer state and step counts are kept.
  void loadParameters(const std::string &safetensorsPath);

  /// The runtime-owned tensors, in the artifact's `inputs` order (this
  /// rank's chunks of sharded parameters). The
  /// tensors are the session's own: reading them is fine, and writing them
  /// in place changes what the next step sees.
  NamedTensors parameters() const;
  NamedTensors buffers() const;
  NamedTensors constants() const;
  /// Optimizer state by its `state` name (e.g. "fc1.weight.exp_avg").
  NamedTensors optimizerState() const;
  /// The `grad` outputs of the last step, by parameter name.
  const std::map<std::string, at::Tensor> &gradients() const;
  /// Throws when there is no parameter (or buffer) of that name.
  at::Tensor parameter(const std::string &name) const;
  at::Tensor buffer(const std::string &name) const;
  /// The optimizer's step count of a parameter (torch.optim's
  /// state["step"]).
  double stepCount(const std::string &param) const;
  /// A per-parameter scalar of the optimizer's state by its state_dict
  /// name (OptimizerScalars::find: "step", NAdam's "mu_product", ASGD's
  /// "eta" and "mu"); throws for any other name.
  double optimizerScalar(const std::string &param,
                         const std::string &name) const;
  /// The learning rate step `step` (0-based) applies to the parameters
  /// outside any parameter group (the artifact optimizer's lr after its
  /// lr_schedule); std::nullopt without an optimizer.
  std::optional<double> learningRate(int64_t step) const;

  /// What a checkpoint (loomrt/Checkpoint.h) restores. assignFromFull
  /// replaces the parameter, buffer or optimizer state `name` with this
  /// rank's part of `full`, its global value (a sharded one takes its chunk,
  /// zero-padded as at load); throws when the dtype or shape differs.
  void assignFromFull(const std::string &name, const at::Tensor &full);
  void setStepCount(const std::string &param, double count);
  void setOptimizerScalar(const std::string &param, const std::string &name,
                          double value);
  /// The step count lastStats() and the next step report.
  void setStepsRun(int64_t steps);
  /// Blocking all-gather of a 1-d tensor over every rank, in rank order
  /// (the input itself on one rank): the runtime's own exchanges, such as a
  /// checkpoint's file checksums. Every rank must call it. `what` says what
  /// the exchange is for: a peer that waits on this rank in a step names it.
  at::Tensor gatherFromAllRanks(const at::Tensor &t,
                                const std::string &what) const;

  /// How many batch elements step() needs (1 + the largest batch_index).
  size_t numBatchElements() const;
  /// Steps run so far.
  int64_t stepsRun() const;

  /// Record per-instruction timings in lastStats().instructions.
  void setTracing(bool on);
  /// Measure every ATen instruction's workspace (CPU only; see
  /// kernelWorkspace()).
  void setMeasuringKernels(bool on);
  /// Per kernel signature ("aten::mm.default(bf16[8,16],bf16[16,4])->
  /// (bf16[8,4])"), the most tensor bytes a run of it held beyond its
  /// results, over the steps measured so far (docs/recompute.md, "Kernel
  /// workspace").
  const std::map<std::string, int64_t> &kernelWorkspace() const;
  const StepStats &lastStats() const;

private:
  explicit Session(std::unique_ptr<SessionImpl> impl);
  std::unique_ptr<SessionImpl> impl_;
};

/// The batches a capture wrote (`batches.safetensors`): tensors
/// `step{i}.arg{j}` with metadata `num_steps` and `num_args`. All batches are
/// read when the file is opened.
class BatchFile {
public:
  static BatchFile open(const std::string &path);
  int64_t numSteps() const { return int64_t(batches_.size()); }
  int64_t numArgs() const { return numArgs_; }
  /// The batch of step `step` (steps cycle: step mod numSteps()).
  const std::vector<at::Tensor> &batch(int64_t step) const;

private:
  std::vector<std::vector<at::Tensor>> batches_;
  int64_t numArgs_ = 0;
};

} // namespace loomrt

#endif // LOOMRT_SESSION_H
