//===- Session.cpp - Owned state and the step executor --------------------===//

#include "loomrt/Session.h"

#include "Comm.h"
#include "Device.h"
#include "Kernel.h"
#include "MemoryTracker.h"
#include "SlotTable.h"
#include "VectorMath.h"
#include "loomrt/Dtype.h"
#include "loomrt/Error.h"
#include "loomrt/Optimizer.h"
#include "loomrt/Safetensors.h"

#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <set>
#include <unordered_set>

namespace loomrt {

namespace {

using Clock = std::chrono::steady_clock;

double microsSince(Clock::time_point epoch, Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t - epoch).count();
}

std::string describe(const at::Tensor &t) {
  if (!t.defined())
    return "an undefined tensor";
  return artifactDtypeName(t.scalar_type()) + " " + formatShape(t.sizes());
}

/// This rank's chunk of `full`: zero-padded on `dim` to a multiple of the
/// group size, chunk `index` (docs/distributed.md).
at::Tensor shardOf(const at::Tensor &full, const ShardSpec &shard,
                   int64_t groupSize, int64_t index) {
  int64_t n = full.size(shard.dim);
  int64_t chunk = (n + groupSize - 1) / groupSize;
  std::vector<int64_t> padded(full.sizes().begin(), full.sizes().end());
  padded[size_t(shard.dim)] = chunk * groupSize;
  at::Tensor p = at::zeros(padded, full.options());
  p.narrow(shard.dim, 0, n).copy_(full);
  return p.narrow(shard.dim, index * chunk, chunk).clone();
}

/// A value leaving its slot that other streams than its maker's read.
struct Release {
  int64_t slot = 0;
  StreamSet usedOn = 0;
};

/// What an optimizer instruction updates, resolved at load time.
struct OptimizerPlan {
  size_t paramInput = 0;
  std::vector<size_t> stateIndices;
};

} // namespace

class SessionImpl {
public:
  Artifact artifact;
  DistributedConfig config;
  /// The program this rank runs.
  size_t programIndex = 0;
  std::shared_ptr<MemoryTracker> tracker = std::make_shared<MemoryTracker>();
  /// Everything that differs per device (Device.h); outlives `comm`.
  std::unique_ptr<Device> dev;
  /// Where the owned state and every kernel's tensors live.
  c10::Device device() const { return dev->device(); }
  /// Process groups and collectives; null for an artifact without a mesh.
  std::unique_ptr<Comm> comm;
  /// Collectives in flight, by future slot.
  std::map<int64_t, PendingCollective> pending;
  std::map<std::string, CollectiveCount> counts;
  /// When tracing: the collectives in flight by future slot, with the time
  /// their backend reported completion (set on the backend's thread).
  struct TracedCollective {
    CollectiveTiming timing;
    std::shared_ptr<std::atomic<double>> completeUs;
    /// The Work has no future (Gloo's _reduce_scatter_base): completion is
    /// polled with isCompleted() after every instruction instead.
    bool poll = false;
  };
  std::map<int64_t, TracedCollective> traced;
  std::vector<CollectiveTiming> collectiveTimings;

  /// Per instruction of programs[0]: the bound kernel (aten) or the
  /// optimizer plan (optimizer); free needs neither.
  std::vector<std::optional<BoundKernel>> kernels;
  std::vector<std::optional<OptimizerPlan>> optimizerPlans;
  /// Per output: the index in `inputs` of its target (-1 for the loss).
  std::vector<int64_t> outputTargets;
  /// Per instruction: a collective start whose input the program never
  /// reads again (Comm::start may reduce in it).
  std::vector<char> donatesInput;
  /// Per instruction: the values to release before it runs (Device::
  /// release; the instruction frees or overwrites their slots), and those
  /// still in their slots when the step ends.
  std::vector<std::vector<Release>> releases;
  std::vector<Release> endReleases;

  /// Per input: the owned tensor (parameter, buffer, constant), undefined
  /// for batch inputs.
  std::vector<at::Tensor> owned;
  /// Per `state` entry.
  std::vector<at::Tensor> state;
  /// Per input: torch.optim's per-parameter scalars (the step count,
  /// NAdam's mu_product, ASGD's eta and mu) for parameters.
  std::vector<OptimizerScalars> scalars;
  /// The artifact's lr_schedule, if any.
  std::optional<LrSchedule> lrSchedule;
  std::map<std::string, at::Tensor> grads;

  SlotTable slots;
  StepStats last;
  int64_t stepsRun = 0;
  bool tracing = false;
  /// setMeasuringKernels: the workspace of each kernel signature run.
  bool measuringKernels = false;
  std::map<std::string, int64_t> kernelWorkspace;
  Clock::time_point epoch = Clock::now();
  size_t numBatchElements = 0;

  /// Drops the owned tensors under the tracker, so the CPU allocator's
  /// table forgets the blocks it was told about when they were allocated.
  ~SessionImpl() {
    MemoryTracker::Scope scope(tracker);
    pending.clear();
    slots.clear();
    owned.clear();
    state.clear();
    grads.clear();
  }

  void bind();
  /// Fills donatesInput from the program's frees and reads.
  void findDonatedInputs();
  /// Fills releases and endReleases from the program's waits and frees.
  void findReleases();
  /// Hands the values of `rs` still in their slots to Device::release.
  void release(const std::vector<Release> &rs);
  /// Tracing: a collective was issued by instruction `index` into `future`.
  void traceStart(size_t index, int64_t future, PendingCollective &p,
                  double issueUs);
  /// Tracing: instruction `index` waited for `future` from `waitBeginUs`.
  void traceWait(size_t index, int64_t future, double waitBeginUs);
  /// Tracing: notes the completion of collectives without a future.
  void tracePoll();
  /// Counts and traces the collective or transfer instruction `index`
  /// started, and keeps it in flight until its wait.
  void keepPending(size_t index, PendingCollective p, double issueUs);
  void resetOptimizerState();
  int64_t heldBytes(const std::vector<at::Tensor> &batch) const;
  std::string where(size_t index) const;
  /// ", started by programs[p].instructions[i] in step s [module m]": the
  /// end of a collective's or transfer's description.
  std::string origin(size_t index) const;
  void checkBatch(const std::vector<at::Tensor> &batch) const;
  void runInstruction(size_t index);
  /// Per input: this rank's contiguous slice of a split batch input
  /// (undefined for the others).
  std::vector<at::Tensor>
  splitInputs(const std::vector<at::Tensor> &batch) const;
  /// Puts the owned tensors, the batch (or this rank's slices) and the
  /// optimizer state in their slots.
  void bindSlots(const std::vector<at::Tensor> &batch,
                 const std::vector<at::Tensor> &slices);
  /// Runs every instruction, naming the one that fails; traces each when
  /// tracing.
  void runInstructions(StepStats &stats);
  /// Checks the loss and the new buffer values, changing nothing; returns
  /// the loss (reduced over the ranks where the artifact says so).
  double checkOutputs();
  double reduceLoss(const ReduceSpec &reduce, const at::Tensor &loss,
                    const std::string &op);
  /// Copies the new buffer values into the owned buffers and keeps the
  /// gradients.
  void applyOutputs();
  /// MPMD: the loss of the last stage, on every rank.
  double shareLoss(double loss);
  /// Completes `stats` (time, memory, collectives) and keeps it as `last`.
  void finishStats(StepStats &stats, Clock::time_point start, double loss);
  size_t inputIndex(const std::string &name, InputRole role) const;
  const Program &program() const { return artifact.programs[programIndex]; }
  /// This rank's index in its group over `axes` and the group's size.
  std::pair<int64_t, int64_t>
  groupPosition(const std::vector<std::string> &axes) const;
  /// The owned tensor of input `i` from the full tensor in a weights file.
  at::Tensor ownedFromFull(size_t i, const at::Tensor &full) const;
};

std::pair<int64_t, int64_t>
SessionImpl::groupPosition(const std::vector<std::string> &axes) const {
  std::vector<int64_t> g = artifact.mesh->group(axes, config.rank);
  for (size_t k = 0; k < g.size(); ++k)
    if (g[k] == config.rank)
      return {int64_t(k), int64_t(g.size())};
  return {0, int64_t(g.size())};
}

at::Tensor SessionImpl::ownedFromFull(size_t i, const at::Tensor &full) const {
  const InputSpec &in = program().inputs[i];
  if (!in.shard)
    return full;
  auto [index, size] = groupPosition(in.shard->axes);
  return shardOf(full, *in.shard, size, index);
}

std::string SessionImpl::origin(size_t index) const {
  // A failed transfer is reported at its wait, and a peer's failure names
  // what this rank last started: say which instruction of which step.
  const Instruction &inst = program().instructions[index];
  std::string o = ", started by " +
                  artifact.instructionPath(programIndex, index) + " in step " +
                  std::to_string(stepsRun);
  if (!inst.module.empty())
    o += " [module " + inst.module + "]";
  return o;
}

std::string SessionImpl::where(size_t index) const {
  const Instruction &inst = program().instructions[index];
  std::string w =
      artifact.what() + ": " +
      (artifact.worldSize > 1 ? "rank " + std::to_string(config.rank) + ": "
                              : std::string()) +
      artifact.instructionPath(programIndex, index);
  if (inst.op == OpKind::Aten)
    w += " " + inst.qualifiedKernel();
  else if (inst.op != OpKind::Free && inst.op != OpKind::Optimizer)
    w += std::string(" ") + toString(inst.op);
  if (!inst.module.empty())
    w += " [module " + inst.module + "]";
  return w;
}

void SessionImpl::bind() {
  if (artifact.worldSize != config.worldSize)
    throw Error(artifact.what() + ": world_size is " +
                std::to_string(artifact.worldSize) + " but this process is " +
                (config.worldSize == 1
                     ? std::string("a single rank (run it with loom-run "
                                   "--nproc ") +
                           std::to_string(artifact.worldSize) + ")"
                     : "rank " + std::to_string(config.rank) + " of " +
                           std::to_string(config.worldSize)));
  if (config.rank < 0 || config.rank >= config.worldSize)
    throw Error("rank " + std::to_string(config.rank) +
                " is out of range for world size " +
                std::to_string(config.worldSize));
  if (artifact.worldSize > 1 && !artifact.mesh)
    throw Error(artifact.what() + ": world_size is " +
                std::to_string(artifact.worldSize) +
                " but the artifact has no mesh (format version 2 is needed "
                "to run on several ranks)");
  programIndex = size_t(artifact.programOf(config.rank));
  const Program &program = this->program();
  kernels.resize(program.instructions.size());
  optimizerPlans.resize(program.instructions.size());
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction &inst = program.instructions[i];
    std::string path =
        artifact.what() + ": " + artifact.instructionPath(programIndex, i);
    if (inst.op == OpKind::Aten) {
      kernels[i] = BoundKernel::bind(inst, device(), path);
    } else if (inst.op == OpKind::Optimizer) {
      // Artifact::load checked the names and slots; resolve them to indices.
      OptimizerPlan plan;
      plan.paramInput = size_t(program.findInput(inst.param));
      for (int64_t slot : inst.state)
        for (size_t s = 0; s < program.state.size(); ++s)
          if (program.state[s].slot == slot)
            plan.stateIndices.push_back(s);
      optimizerPlans[i] = std::move(plan);
    }
  }
  for (const OutputSpec &out : program.outputs)
    outputTargets.push_back(
        out.role == OutputRole::Loss ? -1 : program.findInput(out.target));
  for (const InputSpec &in : program.inputs)
    if (in.role == InputRole::Input)
      numBatchElements = std::max(numBatchElements, size_t(in.batchIndex + 1));
  slots.resize(size_t(program.numSlots));
  owned.resize(program.inputs.size());
  scalars.assign(program.inputs.size(), OptimizerScalars());
  if (artifact.lrSchedule)
    lrSchedule.emplace(*artifact.lrSchedule);
  findDonatedInputs();
  findReleases();
}

/// The slots an instruction reads.
static std::vector<int64_t> slotsRead(const Instruction &inst) {
  std::vector<int64_t> out;
  auto addArg = [&](const ArgValue &arg) {
    for (int64_t s : arg.slots)
      if (s >= 0)
        out.push_back(s);
  };
  switch (inst.op) {
  case OpKind::Aten:
    for (const ArgValue &arg : inst.args)
      addArg(arg);
    for (const auto &kw : inst.kwargs)
      addArg(kw.second);
    break;
  case OpKind::Optimizer:
    out.push_back(inst.grad);
    break;
  case OpKind::AllGatherStart:
  case OpKind::ReduceScatterStart:
  case OpKind::AllReduceStart:
  case OpKind::BroadcastStart:
  case OpKind::AllSliceStart:
  case OpKind::SendStart:
    out.push_back(inst.input);
    break;
  default:
    break;
  }
  return out;
}

/// The slots an instruction writes (and so ends the value they held).
static std::vector<int64_t> slotsWritten(const Instruction &inst) {
  std::vector<int64_t> out;
  if (inst.op == OpKind::Aten) {
    for (const ResultSpec &r : inst.results) {
      if (r.kind == ResultSpec::Kind::Slot)
        out.push_back(r.slot);
      for (int64_t s : r.slots)
        if (s >= 0)
          out.push_back(s);
    }
  } else if (inst.op == OpKind::Wait && inst.result >= 0) {
    out.push_back(inst.result);
  }
  return out;
}

void SessionImpl::findDonatedInputs() {
  // A reduce-scatter's input dies at its start when it is an intermediate
  // (written by an earlier instruction, not the runtime-owned value a slot
  // is bound to every step) and, after the start, the program frees or
  // overwrites its slot before anything reads it (or never reads it again
  // and it is not an output).
  const std::vector<Instruction> &insts = program().instructions;
  donatesInput.assign(insts.size(), 0);
  std::set<int64_t> outputs;
  for (const OutputSpec &out : program().outputs)
    outputs.insert(out.slot);
  std::vector<char> written(size_t(program().numSlots), 0);
  for (size_t i = 0; i < insts.size(); ++i) {
    int64_t slot = insts[i].input;
    if (insts[i].op == OpKind::ReduceScatterStart && written[size_t(slot)]) {
      bool dead = !outputs.count(slot);
      for (size_t j = i + 1; j < insts.size(); ++j) {
        std::vector<int64_t> r = slotsRead(insts[j]);
        if (std::find(r.begin(), r.end(), slot) != r.end()) {
          dead = false;
          break;
        }
        std::vector<int64_t> w = slotsWritten(insts[j]);
        bool freed = insts[j].op == OpKind::Free &&
                     std::find(insts[j].slots.begin(), insts[j].slots.end(),
                               slot) != insts[j].slots.end();
        if (freed || std::find(w.begin(), w.end(), slot) != w.end()) {
          dead = true;
          break;
        }
      }
      donatesInput[i] = dead;
    }
    for (int64_t w : slotsWritten(insts[i]))
      written[size_t(w)] = 1;
  }
}

void SessionImpl::findReleases() {
  // A wait's result was made on its collective's stream (the buffer the
  // backend filled) and is read on compute from then on, so compute is
  // recorded on it when its slot lets it go. The program is static: where
  // each such value ends (a free, the next write of its slot, or the step's
  // end) is known at load time, and a step does no bookkeeping of its own.
  const std::vector<Instruction> &insts = program().instructions;
  std::vector<StreamSet> usedOn(size_t(program().numSlots), 0);
  releases.assign(insts.size(), {});
  endReleases.clear();
  for (size_t i = 0; i < insts.size(); ++i) {
    const Instruction &inst = insts[i];
    std::vector<int64_t> ends = slotsWritten(inst);
    if (inst.op == OpKind::Free)
      ends.insert(ends.end(), inst.slots.begin(), inst.slots.end());
    for (int64_t slot : ends)
      if (StreamSet &u = usedOn[size_t(slot)]) {
        releases[i].push_back({slot, u});
        u = 0;
      }
    if (inst.op == OpKind::Wait && inst.result >= 0)
      usedOn[size_t(inst.result)] = streamBit(StreamKind::Compute);
  }
  for (size_t slot = 0; slot < usedOn.size(); ++slot)
    if (usedOn[slot])
      endReleases.push_back({int64_t(slot), usedOn[slot]});
}

void SessionImpl::release(const std::vector<Release> &rs) {
  for (const Release &r : rs)
    if (slots.live(r.slot) && slots.get(r.slot).defined())
      dev->release(slots.get(r.slot), r.usedOn);
}

void SessionImpl::resetOptimizerState() {
  state.clear();
  OptimizerSpec none;
  for (const StateSpec &s : program().state)
    state.push_back(createOptimizerState(
        artifact.optimizer ? *artifact.optimizer : none, s.init, s.shape,
        at::TensorOptions().dtype(s.dtype).device(device())));
  std::fill(scalars.begin(), scalars.end(), OptimizerScalars());
  grads.clear();
}

int64_t SessionImpl::heldBytes(const std::vector<at::Tensor> &batch) const {
  // Count each storage once: views and tied tensors share one.
  std::unordered_set<const void *> seen;
  int64_t bytes = 0;
  auto add = [&](const at::Tensor &t) {
    if (!t.defined() || !t.has_storage())
      return;
    const c10::StorageImpl *s = t.storage().unsafeGetStorageImpl();
    if (seen.insert(s).second)
      bytes += int64_t(s->nbytes());
  };
  for (const at::Tensor &t : owned)
    add(t);
  for (const at::Tensor &t : state)
    add(t);
  for (const auto &g : grads)
    add(g.second);
  // A split input holds this rank's slice: what the compiler counts, and
  // all a rank would load were it not handed the global batch (loom-run
  // gives every rank the whole of it).
  for (const InputSpec &in : program().inputs) {
    if (in.role != InputRole::Input || size_t(in.batchIndex) >= batch.size())
      continue;
    const at::Tensor &t = batch[size_t(in.batchIndex)];
    if (!in.split) {
      add(t);
      continue;
    }
    int64_t numel = 1;
    for (int64_t d : in.shape)
      numel *= d;
    bytes += numel * int64_t(t.element_size());
  }
  return bytes;
}

void SessionImpl::checkBatch(const std::vector<at::Tensor> &batch) const {
  for (size_t i = 0; i < program().inputs.size(); ++i) {
    const InputSpec &in = program().inputs[i];
    if (in.role != InputRole::Input)
      continue;
    std::string ip = "inputs[" + std::to_string(i) + "] ('" + in.name + "')";
    if (size_t(in.batchIndex) >= batch.size())
      throw Error(artifact.what() + ": the batch has " +
                  std::to_string(batch.size()) + " elements, but " + ip +
                  " takes element " + std::to_string(in.batchIndex));
    const at::Tensor &t = batch[size_t(in.batchIndex)];
    // A split input takes the global batch: the group's slices together.
    std::vector<int64_t> want = in.shape;
    std::string split;
    if (in.split) {
      int64_t g = groupPosition(in.split->axes).second;
      want[size_t(in.split->dim)] *= g;
      split = " (the global batch: " + std::to_string(g) + " slices of " +
              formatShape(in.shape) + " on dim " +
              std::to_string(in.split->dim) + ")";
      if (t.defined() && t.dim() == int64_t(want.size()) &&
          t.size(in.split->dim) % g != 0)
        throw Error(artifact.what() + ": batch element " +
                    std::to_string(in.batchIndex) + " has " +
                    std::to_string(t.size(in.split->dim)) + " rows on dim " +
                    std::to_string(in.split->dim) + ", not divisible by the " +
                    std::to_string(g) + " ranks " + ip + " is split over");
    }
    if (!t.defined() || t.scalar_type() != in.dtype ||
        t.sizes() != c10::IntArrayRef(want))
      throw Error(artifact.what() + ": batch element " +
                  std::to_string(in.batchIndex) + " is " + describe(t) +
                  ", but " + ip + " declares " + artifactDtypeName(in.dtype) +
                  " " + formatShape(want) + split);
    // Host batches are copied to the device by step().
    if (t.device() != device() && !t.device().is_cpu())
      throw Error(artifact.what() + ": batch element " +
                  std::to_string(in.batchIndex) + " is on " + t.device().str() +
                  ", this session runs on " + device().str());
  }
}

void SessionImpl::traceStart(size_t index, int64_t future, PendingCollective &p,
                             double issueUs) {
  TracedCollective t;
  t.timing.start = index;
  t.timing.bytes = p.bytes;
  t.timing.describe = p.describe;
  t.timing.issueUs = issueUs;
  t.completeUs = std::make_shared<std::atomic<double>>(-1.0);
  if (!p.work) {
    // A local collective (all_slice) is done when it is issued.
    t.completeUs->store(issueUs);
    traced[future] = std::move(t);
    return;
  }
  // The Work's future completes on the backend's thread when the data has
  // arrived, before wait() returns (Gloo marks it, then finishes the work):
  // the real end of the transfer, however late the program waits for it.
  c10::intrusive_ptr<c10::ivalue::Future> f;
  try {
    f = p.work->getFuture();
  } catch (const c10::Error &) {
    // "Work::getFuture not implemented": poll instead.
  }
  if (f) {
    std::shared_ptr<std::atomic<double>> done = t.completeUs;
    Clock::time_point origin = epoch;
    f->addCallback([done, origin](c10::ivalue::Future &) {
      done->store(microsSince(origin, Clock::now()));
    });
  } else {
    t.poll = true;
  }
  traced[future] = std::move(t);
}

void SessionImpl::tracePoll() {
  for (auto &[future, t] : traced) {
    if (!t.poll || t.completeUs->load() >= 0)
      continue;
    auto it = pending.find(future);
    if (it != pending.end() && it->second.work &&
        it->second.work->isCompleted())
      t.completeUs->store(microsSince(epoch, Clock::now()));
  }
}

void SessionImpl::traceWait(size_t index, int64_t future, double waitBeginUs) {
  auto it = traced.find(future);
  if (it == traced.end())
    return;
  CollectiveTiming t = it->second.timing;
  t.wait = index;
  t.waitBeginUs = waitBeginUs;
  t.waitEndUs = microsSince(epoch, Clock::now());
  double done = it->second.completeUs->load();
  // A backend whose future does not report (or reports late) completed no
  // later than the wait returned.
  t.completeUs = done >= 0 && done <= t.waitEndUs ? done : t.waitEndUs;
  traced.erase(it);
  collectiveTimings.push_back(std::move(t));
}

void SessionImpl::keepPending(size_t index, PendingCollective p,
                              double issueUs) {
  const Instruction &inst = program().instructions[index];
  CollectiveCount &c = counts[collectiveName(inst.op)];
  ++c.count;
  c.bytes += p.bytes;
  if (tracing)
    traceStart(index, inst.future, p, issueUs);
  slots.set(inst.future, at::Tensor());
  pending[inst.future] = std::move(p);
}

namespace {
/// A collective start's stream switch: begins it, and ends it when the
/// start is issued (keeping its event) or fails (back on compute).
class OnCollectiveStream {
public:
  OnCollectiveStream(Device &dev, StreamKind stream)
      : dev_(dev), stream_(stream) {
    dev_.beginCollective(stream_);
  }
  ~OnCollectiveStream() {
    if (!ended_)
      dev_.endCollective(stream_);
  }
  void issued(PendingCollective &p) {
    ended_ = true;
    p.stream = stream_;
    p.issued = dev_.endCollective(stream_);
  }

private:
  Device &dev_;
  StreamKind stream_;
  bool ended_ = false;
};
} // namespace

void SessionImpl::runInstruction(size_t index) {
  const Instruction &inst = program().instructions[index];
  switch (inst.op) {
  case OpKind::AllGatherStart:
  case OpKind::ReduceScatterStart:
  case OpKind::AllReduceStart:
  case OpKind::BroadcastStart:
  case OpKind::AllSliceStart: {
    double issueUs = tracing ? microsSince(epoch, Clock::now()) : 0;
    OnCollectiveStream on(*dev, streamFor(inst.op));
    PendingCollective p = comm->start(inst.op, inst.axes, slots.get(inst.input),
                                      inst.dim, inst.reduce, inst.root,
                                      donatesInput[index] != 0, origin(index));
    on.issued(p);
    keepPending(index, std::move(p), issueUs);
    return;
  }
  case OpKind::SendStart:
  case OpKind::RecvStart: {
    double issueUs = tracing ? microsSince(epoch, Clock::now()) : 0;
    OnCollectiveStream on(*dev, streamFor(inst.op));
    PendingCollective p = comm->startPointToPoint(
        inst.op, inst.axes,
        inst.op == OpKind::SendStart ? slots.get(inst.input) : at::Tensor(),
        inst.peer, inst.tag, inst.recvDtype, inst.recvShape, origin(index));
    on.issued(p);
    keepPending(index, std::move(p), issueUs);
    return;
  }
  case OpKind::Wait: {
    auto it = pending.find(inst.future);
    if (it == pending.end())
      throw Error("slot " + std::to_string(inst.future) +
                  " holds no collective in flight");
    if (tracing)
      tracePoll();
    double waitBeginUs = tracing ? microsSince(epoch, Clock::now()) : 0;
    dev->waitCollective(it->second.stream, it->second.issued.get());
    at::Tensor result = Comm::finish(it->second);
    if (tracing)
      traceWait(index, inst.future, waitBeginUs);
    pending.erase(it);
    slots.free(inst.future);
    // The wait of a send has no result.
    if (inst.result >= 0)
      slots.set(inst.result, std::move(result));
    return;
  }
  case OpKind::RecordEvent:
  case OpKind::WaitEvent:
    // The compiled events order compute and comm; the device layer already
    // keeps those edges for every start and wait (the start's stream waits
    // for compute, compute waits for the wait's event), and instructions are
    // issued in program order from this thread. The load-time checks made
    // sure every waited event was recorded.
    return;
  case OpKind::Aten: {
    if (!measuringKernels) {
      kernels[index]->run(slots);
      return;
    }
    KernelMeasurement m;
    kernels[index]->run(slots, &m);
    int64_t &bytes = kernelWorkspace[m.signature];
    bytes = std::max(bytes, m.workspaceBytes);
    return;
  }
  case OpKind::Free:
    for (int64_t s : inst.slots)
      slots.free(s);
    return;
  case OpKind::Optimizer: {
    const OptimizerPlan &plan = *optimizerPlans[index];
    std::vector<at::Tensor> st;
    for (size_t s : plan.stateIndices)
      st.push_back(state[s]);
    // The parameter's group's rates, at this step of the schedule: the
    // step count before the update is the number of scheduler.step()
    // calls PyTorch made before this optimizer.step().
    OptimizerSpec spec = *artifact.optimizer;
    spec.lr = inst.lr.value_or(spec.lr);
    spec.weightDecay = inst.weightDecay.value_or(spec.weightDecay);
    if (lrSchedule)
      spec.lr = lrSchedule->lr(spec.lr, int64_t(scalars[plan.paramInput].step));
    optimizerStep(spec, owned[plan.paramInput], slots.get(inst.grad), st,
                  scalars[plan.paramInput]);
    return;
  }
  }
}

size_t SessionImpl::inputIndex(const std::string &name, InputRole role) const {
  int64_t i = program().findInput(name);
  if (i < 0 || program().inputs[size_t(i)].role != role)
    throw Error(artifact.what() + ": there is no " + toString(role) + " '" +
                name + "'");
  return size_t(i);
}

//===----------------------------------------------------------------------===//
// Session
//===----------------------------------------------------------------------===//

Session::Session(std::unique_ptr<SessionImpl> impl) : impl_(std::move(impl)) {}
Session::Session(Session &&) noexcept = default;
Session &Session::operator=(Session &&) noexcept = default;
Session::~Session() = default;

Session Session::load(const std::string &artifactPath) {
  return load(artifactPath, DistributedConfig());
}

Session Session::load(const std::string &artifactPath,
                      const DistributedConfig &config) {
  // Before any kernel runs on several threads (VectorMath.h).
  resolveVectorMathKernels();
  auto impl = std::make_unique<SessionImpl>();
  impl->artifact = Artifact::load(artifactPath);
  impl->config = config;
  DeviceOptions options;
  options.kind = config.device.value_or(impl->artifact.device);
  options.tracker = impl->tracker;
  options.localRank = config.localRank;
  impl->dev = makeDevice(options);
  impl->bind();
  if (impl->artifact.mesh && !impl->artifact.groupAxes().empty())
    impl->comm = std::make_unique<Comm>(impl->artifact, config, *impl->dev);
  // Allocate the owned state under the tracker so the CPU allocator's table
  // knows these blocks and reports their frees (e.g. when weights are
  // reloaded) instead of warning about blocks of unknown size.
  MemoryTracker::Scope scope(impl->tracker);
  SafetensorsFile weights = SafetensorsFile::open(
      impl->artifact.weightsPath, impl->artifact.weightsOffset,
      impl->artifact.weightsLength, artifactPath + ": weights section");
  for (size_t i = 0; i < impl->program().inputs.size(); ++i)
    if (impl->program().inputs[i].role != InputRole::Input)
      impl->owned[i] =
          impl->ownedFromFull(i, weights.read(impl->program().inputs[i].name))
              .to(impl->device());
  impl->resetOptimizerState();
  return Session(std::move(impl));
}

const Artifact &Session::artifact() const { return impl_->artifact; }

void Session::loadWeights(const std::string &path) {
  SessionImpl &s = *impl_;
  MemoryTracker::Scope scope(s.tracker);
  c10::AutoGradMode noGrad(false);
  SafetensorsFile file = SafetensorsFile::open(path);
  // Check everything before changing anything, so a bad file leaves the
  // session as it was.
  for (size_t i = 0; i < s.program().inputs.size(); ++i) {
    const InputSpec &in = s.program().inputs[i];
    if (in.role == InputRole::Input)
      continue;
    const SafetensorsEntry *e = file.find(in.name);
    if (!e)
      throw Error(path + ": no tensor '" + in.name + "' (the artifact's " +
                  toString(in.role) + ")");
    const std::vector<int64_t> &want =
        in.shard ? in.shard->globalShape : in.shape;
    if (e->dtype != in.dtype || e->shape != want)
      throw Error(path + ": '" + in.name + "' is " +
                  artifactDtypeName(e->dtype) + " " + formatShape(e->shape) +
                  ", the artifact declares " + artifactDtypeName(in.dtype) +
                  " " + formatShape(want));
  }
  for (size_t i = 0; i < s.program().inputs.size(); ++i)
    if (s.program().inputs[i].role != InputRole::Input)
      s.owned[i].copy_(
          s.ownedFromFull(i, file.read(s.program().inputs[i].name)));
  s.resetOptimizerState();
}

std::vector<at::Tensor>
SessionImpl::splitInputs(const std::vector<at::Tensor> &batch) const {
  std::vector<at::Tensor> slices(program().inputs.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    const InputSpec &in = program().inputs[i];
    if (in.role != InputRole::Input || !in.split)
      continue;
    int64_t index = groupPosition(in.split->axes).first;
    int64_t rows = in.shape[size_t(in.split->dim)];
    slices[i] = batch[size_t(in.batchIndex)]
                    .narrow(in.split->dim, index * rows, rows)
                    .contiguous();
  }
  return slices;
}

void SessionImpl::bindSlots(const std::vector<at::Tensor> &batch,
                            const std::vector<at::Tensor> &slices) {
  for (size_t i = 0; i < program().inputs.size(); ++i) {
    const InputSpec &in = program().inputs[i];
    if (in.role != InputRole::Input)
      slots.set(in.slot, owned[i]);
    else if (in.split)
      slots.set(in.slot, slices[i]);
    else
      slots.set(in.slot, batch[size_t(in.batchIndex)]);
  }
  for (size_t i = 0; i < program().state.size(); ++i)
    slots.set(program().state[i].slot, state[i]);
}

void SessionImpl::runInstructions(StepStats &stats) {
  const std::vector<Instruction> &insts = program().instructions;
  if (tracing)
    stats.instructions.reserve(insts.size());
  for (size_t i = 0; i < insts.size(); ++i) {
    Clock::time_point t0 = tracing ? Clock::now() : Clock::time_point();
    try {
      if (!releases[i].empty())
        release(releases[i]);
      runInstruction(i);
    } catch (const CollectiveError &e) {
      throw CollectiveError(where(i) + ": " + e.what());
    } catch (const c10::Error &e) {
      throw Error(where(i) + ": " + e.what_without_backtrace());
    } catch (const std::exception &e) {
      throw Error(where(i) + ": " + e.what());
    }
    if (tracing) {
      Clock::time_point t1 = Clock::now();
      stats.instructions.push_back(
          {i, microsSince(epoch, t0),
           std::chrono::duration<double, std::micro>(t1 - t0).count()});
      tracePoll();
    }
  }
}

double SessionImpl::checkOutputs() {
  double loss = 0;
  for (size_t k = 0; k < program().outputs.size(); ++k) {
    const OutputSpec &out = program().outputs[k];
    const at::Tensor &t = slots.get(out.slot);
    std::string op = artifact.what() + ": outputs[" + std::to_string(k) + "]";
    if (out.role == OutputRole::Loss) {
      if (!t.defined() || t.dim() != 0 || t.is_complex())
        throw Error(op + ": the loss must be a real 0-d tensor, found " +
                    describe(t));
      loss = out.reduce ? reduceLoss(*out.reduce, t, op) : t.item<double>();
    } else if (out.role == OutputRole::BufferMutation) {
      const InputSpec &in = program().inputs[size_t(outputTargets[k])];
      if (!t.defined() || t.scalar_type() != in.dtype ||
          t.sizes() != c10::IntArrayRef(in.shape))
        throw Error(op + ": the new value of buffer '" + out.target + "' is " +
                    describe(t) + ", the buffer is " +
                    artifactDtypeName(in.dtype) + " " + formatShape(in.shape));
    }
  }
  return loss;
}

double SessionImpl::reduceLoss(const ReduceSpec &reduce, const at::Tensor &loss,
                               const std::string &op) {
  // The runtime's own reduction (not a step collective): every rank reports
  // the loss over the whole batch, a bf16 or f16 loss averaged in float32
  // (as loom.dp_reference averages PyTorch's).
  try {
    return comm
        ->allReduce(reduce.axes,
                    at::isReducedFloatingType(loss.scalar_type())
                        ? loss.to(at::kFloat)
                        : loss,
                    reduce.op,
                    ", the runtime's reduction of step " +
                        std::to_string(stepsRun) + "'s loss")
        .item<double>();
  } catch (const CollectiveError &e) {
    throw CollectiveError(op + ": reducing the loss: " + e.what());
  }
}

void SessionImpl::applyOutputs() {
  for (size_t k = 0; k < program().outputs.size(); ++k) {
    const OutputSpec &out = program().outputs[k];
    const at::Tensor &t = slots.get(out.slot);
    if (out.role == OutputRole::BufferMutation) {
      // PyTorch updates buffers in place; copying keeps the stored tensor's
      // identity (views of it stay valid) and never pins the storage of an
      // intermediate the new value may be a view of.
      at::Tensor &buffer = owned[size_t(outputTargets[k])];
      if (!t.is_same(buffer))
        buffer.copy_(t.is_alias_of(buffer) ? t.clone() : t);
    } else if (out.role == OutputRole::Grad) {
      grads[out.target] = t;
    }
  }
}

double SessionImpl::shareLoss(double loss) {
  // MPMD: only the last stage's program computed the loss; its first rank
  // hands it to every rank (the runtime's own broadcast, not a step
  // collective), so every rank reports the same loss, as SPMD ranks do.
  if (!artifact.mpmd || !comm || artifact.worldSize <= 1)
    return loss;
  const Program &lossProgram = artifact.programs[artifact.lossProgram()];
  int64_t root = lossProgram.ranks[0];
  try {
    return comm
        ->broadcast(artifact.mesh->axes,
                    at::full({}, loss, at::TensorOptions().dtype(at::kDouble)),
                    root,
                    ", the runtime's broadcast of step " +
                        std::to_string(stepsRun) + "'s loss")
        .item<double>();
  } catch (const CollectiveError &e) {
    throw CollectiveError(artifact.what() + ": rank " +
                          std::to_string(config.rank) +
                          ": receiving the loss from rank " +
                          std::to_string(root) + ": " + e.what());
  }
}

void SessionImpl::finishStats(StepStats &stats, Clock::time_point start,
                              double loss) {
  Clock::time_point end = Clock::now();
  stats.loss = loss;
  stats.timeMs = std::chrono::duration<double, std::milli>(end - start).count();
  DeviceMemory memory = dev->memory();
  stats.peakBytes = memory.peak;
  stats.endBytes = memory.current;
  stats.allocations = memory.allocations;
  stats.collectives = counts;
  stats.collectiveTimings = std::move(collectiveTimings);
  stats.epochUs =
      std::chrono::duration<double, std::micro>(epoch.time_since_epoch())
          .count();
  last = std::move(stats);
}

double Session::step(const std::vector<at::Tensor> &batch) {
  SessionImpl &s = *impl_;
  s.checkBatch(batch);
  c10::AutoGradMode noGrad(false);
  MemoryTracker::Scope scope(s.tracker);
  // A host batch goes to the device once, before the step is timed.
  std::vector<at::Tensor> onDevice;
  const bool onCpu = s.device().is_cpu();
  if (!onCpu)
    for (const at::Tensor &t : batch)
      onDevice.push_back(t.to(s.device()));
  const std::vector<at::Tensor> &b = onCpu ? batch : onDevice;
  // This rank's slice of each split input. The step was traced on a
  // contiguous slice, so a slice of a later dim (a sequence-first batch's
  // dim 1) is copied into one, before the measurement starts: heldBytes
  // counts every slice as held for the whole step, as the compiler does.
  std::vector<at::Tensor> slices = s.splitInputs(b);
  s.dev->beginStep(s.heldBytes(b));

  StepStats stats;
  stats.step = s.stepsRun;
  stats.startBytes = s.dev->memory().current;
  Clock::time_point start = Clock::now();
  stats.startUs = microsSince(s.epoch, start);

  // Drop every slot on the way out, also when an instruction throws, so a
  // failed step does not pin its intermediates.
  struct ClearSlots {
    SlotTable &slots;
    std::map<int64_t, PendingCollective> &pending;
    ~ClearSlots() {
      pending.clear();
      slots.clear();
    }
  } clearSlots{s.slots, s.pending};
  s.counts.clear();
  s.traced.clear();
  s.collectiveTimings.clear();

  s.bindSlots(b, slices);
  s.runInstructions(stats);
  // Outputs: check all of them before changing any owned state.
  double loss = s.checkOutputs();
  s.applyOutputs();
  s.release(s.endReleases);
  s.slots.clear();
  loss = s.shareLoss(loss);
  s.finishStats(stats, start, loss);
  ++s.stepsRun;
  return loss;
}

NamedTensors Session::fullParameters() const {
  const SessionImpl &s = *impl_;
  NamedTensors out;
  for (size_t i = 0; i < s.program().inputs.size(); ++i) {
    const InputSpec &in = s.program().inputs[i];
    if (in.role != InputRole::Parameter)
      continue;
    at::Tensor t = s.owned[i];
    if (in.shard)
      t = s.comm
              ->allGather(in.shard->axes, t, in.shard->dim,
                          ", the runtime's gathering of '" + in.name + "'")
              .narrow(in.shard->dim, 0,
                      in.shard->globalShape[size_t(in.shard->dim)])
              .contiguous();
    out.emplace_back(in.name, t);
  }
  return out;
}

int64_t Session::rank() const { return impl_->config.rank; }
int64_t Session::worldSize() const { return impl_->config.worldSize; }

void Session::saveParameters(const std::string &path) const {
  NamedTensors tensors = fullParameters();
  const Artifact &a = impl_->artifact;
  if (a.mpmd && impl_->comm && a.worldSize > 1) {
    // The parameters and buffers live on the ranks of the programs that
    // bind them: each comes to rank 0 from the first rank of the first
    // program binding it (a tied weight held by two stages is written once,
    // from the first; --check compares every copy). Every rank walks the
    // same list, so the broadcasts match.
    for (auto &b : buffers())
      tensors.push_back(std::move(b));
    std::map<std::string, at::Tensor> mine(tensors.begin(), tensors.end());
    NamedTensors all;
    std::set<std::string> done;
    for (const Program &p : a.programs)
      for (const InputSpec &in : p.inputs) {
        if ((in.role != InputRole::Parameter && in.role != InputRole::Buffer) ||
            !done.insert(in.name).second)
          continue;
        int64_t root = p.ranks[0];
        at::Tensor t =
            impl_->config.rank == root
                ? mine.at(in.name)
                : at::empty(in.shard ? in.shard->globalShape : in.shape,
                            at::TensorOptions().dtype(in.dtype));
        all.emplace_back(in.name,
                         impl_->comm->broadcast(
                             a.mesh->axes, t, root,
                             ", the runtime's broadcast of '" + in.name + "'"));
      }
    tensors = std::move(all);
    if (impl_->config.rank != 0)
      return;
  } else {
    if (impl_->config.rank != 0)
      return;
    for (auto &b : buffers())
      tensors.push_back(std::move(b));
  }
  // The file is written from host memory (the tensors themselves on the
  // CPU).
  for (auto &named : tensors)
    named.second = named.second.cpu();
  writeSafetensors(path, tensors,
                   {{"producer", "loomrt"},
                    {"artifact", impl_->artifact.what()},
                    {"steps", std::to_string(impl_->stepsRun)}});
}

void Session::loadParameters(const std::string &path) {
  SessionImpl &s = *impl_;
  MemoryTracker::Scope scope(s.tracker);
  c10::AutoGradMode noGrad(false);
  SafetensorsFile file = SafetensorsFile::open(path);
  std::vector<std::pair<size_t, const SafetensorsEntry *>> toLoad;
  for (size_t i = 0; i < s.program().inputs.size(); ++i) {
    const InputSpec &in = s.program().inputs[i];
    if (in.role != InputRole::Parameter && in.role != InputRole::Buffer)
      continue;
    const SafetensorsEntry *e = file.find(in.name);
    if (!e) {
      if (in.role == InputRole::Parameter)
        throw Error(path + ": no tensor for parameter '" + in.name + "'");
      continue;
    }
    const std::vector<int64_t> &want =
        in.shard ? in.shard->globalShape : in.shape;
    if (e->dtype != in.dtype || e->shape != want)
      throw Error(path + ": '" + in.name + "' is " +
                  artifactDtypeName(e->dtype) + " " + formatShape(e->shape) +
                  ", the artifact declares " + artifactDtypeName(in.dtype) +
                  " " + formatShape(want));
    toLoad.emplace_back(i, e);
  }
  for (const auto &[i, e] : toLoad)
    s.owned[i].copy_(s.ownedFromFull(i, file.read(*e)));
}

static NamedTensors ownedWithRole(const SessionImpl &s, InputRole role) {
  NamedTensors out;
  for (size_t i = 0; i < s.program().inputs.size(); ++i)
    if (s.program().inputs[i].role == role)
      out.emplace_back(s.program().inputs[i].name, s.owned[i]);
  return out;
}

NamedTensors Session::parameters() const {
  return ownedWithRole(*impl_, InputRole::Parameter);
}
NamedTensors Session::buffers() const {
  return ownedWithRole(*impl_, InputRole::Buffer);
}
NamedTensors Session::constants() const {
  return ownedWithRole(*impl_, InputRole::Constant);
}

NamedTensors Session::optimizerState() const {
  NamedTensors out;
  for (size_t i = 0; i < impl_->program().state.size(); ++i)
    out.emplace_back(impl_->program().state[i].name, impl_->state[i]);
  return out;
}

const std::map<std::string, at::Tensor> &Session::gradients() const {
  return impl_->grads;
}

at::Tensor Session::parameter(const std::string &name) const {
  return impl_->owned[impl_->inputIndex(name, InputRole::Parameter)];
}

at::Tensor Session::buffer(const std::string &name) const {
  return impl_->owned[impl_->inputIndex(name, InputRole::Buffer)];
}

std::optional<double> Session::learningRate(int64_t step) const {
  SessionImpl &impl = *impl_;
  if (!impl.artifact.optimizer)
    return std::nullopt;
  double lr = impl.artifact.optimizer->lr;
  return impl.lrSchedule ? impl.lrSchedule->lr(lr, step) : lr;
}

double Session::stepCount(const std::string &param) const {
  return impl_->scalars[impl_->inputIndex(param, InputRole::Parameter)].step;
}

/// Parameter `param`'s optimizer scalar `name` (OptimizerScalars::find).
static float &optimizerScalarOf(SessionImpl &s, const std::string &param,
                                const std::string &name) {
  float *value =
      s.scalars[s.inputIndex(param, InputRole::Parameter)].find(name);
  if (!value)
    throw Error("there is no optimizer scalar '" + name + "'");
  return *value;
}

double Session::optimizerScalar(const std::string &param,
                                const std::string &name) const {
  return optimizerScalarOf(*impl_, param, name);
}

void Session::assignFromFull(const std::string &name, const at::Tensor &full) {
  SessionImpl &s = *impl_;
  MemoryTracker::Scope scope(s.tracker);
  c10::AutoGradMode noGrad(false);
  auto check = [&](c10::ScalarType dtype, const std::vector<int64_t> &shape) {
    if (full.scalar_type() != dtype || full.sizes() != c10::IntArrayRef(shape))
      throw Error(s.artifact.what() + ": '" + name + "' is " +
                  artifactDtypeName(dtype) + " " + formatShape(shape) +
                  ", cannot assign " + describe(full));
  };
  int64_t i = s.program().findInput(name);
  if (i >= 0 && s.program().inputs[size_t(i)].role != InputRole::Input) {
    const InputSpec &in = s.program().inputs[size_t(i)];
    check(in.dtype, in.shard ? in.shard->globalShape : in.shape);
    s.owned[size_t(i)].copy_(s.ownedFromFull(size_t(i), full));
    return;
  }
  for (size_t k = 0; k < s.program().state.size(); ++k) {
    const StateSpec &st = s.program().state[k];
    if (st.name != name)
      continue;
    check(st.dtype, st.shard ? st.shard->globalShape : st.shape);
    if (!st.shard) {
      s.state[k].copy_(full);
    } else {
      auto [index, size] = s.groupPosition(st.shard->axes);
      s.state[k].copy_(shardOf(full, *st.shard, size, index));
    }
    return;
  }
  throw Error(s.artifact.what() +
              ": there is no parameter, buffer or "
              "optimizer state '" +
              name + "'");
}

void Session::setStepCount(const std::string &param, double count) {
  impl_->scalars[impl_->inputIndex(param, InputRole::Parameter)].step =
      float(count);
}

void Session::setOptimizerScalar(const std::string &param,
                                 const std::string &name, double value) {
  optimizerScalarOf(*impl_, param, name) = float(value);
}

void Session::setStepsRun(int64_t steps) { impl_->stepsRun = steps; }

at::Tensor Session::gatherFromAllRanks(const at::Tensor &t,
                                       const std::string &what) const {
  const SessionImpl &s = *impl_;
  if (!s.comm || s.config.worldSize == 1)
    return t;
  return s.comm
      ->allGather(s.artifact.mesh->axes, t, 0,
                  ", " + what + " (after step " + std::to_string(s.stepsRun) +
                      ")")
      .cpu();
}

size_t Session::numBatchElements() const { return impl_->numBatchElements; }
int64_t Session::stepsRun() const { return impl_->stepsRun; }
void Session::setTracing(bool on) { impl_->tracing = on; }
void Session::setMeasuringKernels(bool on) {
  if (on && !impl_->device().is_cpu())
    throw Error("measuring kernel workspace needs the CPU: on " +
                impl_->device().str() +
                " the runtime does not see each kernel's allocations");
  impl_->measuringKernels = on;
}
const std::map<std::string, int64_t> &Session::kernelWorkspace() const {
  return impl_->kernelWorkspace;
}
const StepStats &Session::lastStats() const { return impl_->last; }

std::optional<DistributedConfig> DistributedConfig::fromEnvironment() {
  const char *rank = std::getenv("RANK");
  if (!rank || !*rank)
    return std::nullopt;
  auto number = [](const char *name, const char *text, int64_t min,
                   int64_t max) {
    char *end = nullptr;
    errno = 0;
    long long v = text ? std::strtoll(text, &end, 10) : 0;
    if (!text || !*text || *end || errno || v < min || v > max)
      throw Error(std::string("environment variable ") + name + "='" +
                  (text ? text : "") + "' is not an integer in [" +
                  std::to_string(min) + ", " + std::to_string(max) + "]" +
                  (text ? "" : " (it is not set)"));
    return int64_t(v);
  };
  DistributedConfig c;
  c.worldSize = number("WORLD_SIZE", std::getenv("WORLD_SIZE"), 1, 1 << 20);
  c.rank = number("RANK", rank, 0, c.worldSize - 1);
  if (const char *addr = std::getenv("MASTER_ADDR"); addr && *addr)
    c.masterAddr = addr;
  if (const char *port = std::getenv("MASTER_PORT"); port && *port)
    c.masterPort = int(number("MASTER_PORT", port, 1, 65535));
  if (const char *fd = std::getenv(kMasterListenFdEnv);
      fd && *fd && c.rank == 0)
    c.masterListenFd = int(number(kMasterListenFdEnv, fd, 0, INT32_MAX));
  if (const char *local = std::getenv("LOCAL_RANK"); local && *local)
    c.localRank = number("LOCAL_RANK", local, 0, 1 << 20);
  return c;
}

//===----------------------------------------------------------------------===//
// BatchFile
//===----------------------------------------------------------------------===//

BatchFile BatchFile::open(const std::string &path) {
  SafetensorsFile file = SafetensorsFile::open(path);
  auto count = [&](const char *key) -> int64_t {
    auto it = file.metadata().find(key);
    if (it == file.metadata().end())
      throw Error(path + ": metadata has no '" + key +
                  "' (a capture's batches.safetensors records num_steps and "
                  "num_args)");
    size_t used = 0;
    int64_t n = -1;
    try {
      n = std::stoll(it->second, &used);
    } catch (const std::exception &) {
    }
    if (n < 0 || used != it->second.size())
      throw Error(path + ": metadata '" + key + "' is '" + it->second +
                  "', not a non-negative integer");
    return n;
  };
  BatchFile b;
  int64_t numSteps = count("num_steps");
  b.numArgs_ = count("num_args");
  if (numSteps < 1)
    throw Error(path + ": num_steps is 0; there is no batch to run");
  if (size_t(numSteps) * size_t(b.numArgs_) != file.entries().size())
    throw Error(path + ": has " + std::to_string(file.entries().size()) +
                " tensors, expected num_steps x num_args = " +
                std::to_string(numSteps) + " x " + std::to_string(b.numArgs_) +
                " named step{i}.arg{j}");
  for (int64_t i = 0; i < numSteps; ++i) {
    std::vector<at::Tensor> batch;
    for (int64_t j = 0; j < b.numArgs_; ++j) {
      std::string name =
          "step" + std::to_string(i) + ".arg" + std::to_string(j);
      if (!file.find(name))
        throw Error(path + ": no tensor '" + name + "' (num_steps " +
                    std::to_string(numSteps) + ", num_args " +
                    std::to_string(b.numArgs_) + ")");
      batch.push_back(file.read(name));
    }
    b.batches_.push_back(std::move(batch));
  }
  return b;
}

const std::vector<at::Tensor> &BatchFile::batch(int64_t step) const {
  if (step < 0)
    throw Error("batch index " + std::to_string(step) + " is negative");
  return batches_[size_t(step % numSteps())];
}

} // namespace loomrt
