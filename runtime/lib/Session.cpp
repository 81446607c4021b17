//===- Session.cpp - Owned state and the step executor --------------------===//

#include "loomrt/Session.h"

#include "Kernel.h"
#include "MemoryTracker.h"
#include "SlotTable.h"
#include "loomrt/Dtype.h"
#include "loomrt/Error.h"
#include "loomrt/Optimizer.h"
#include "loomrt/Safetensors.h"

#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <chrono>
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

/// What an optimizer instruction updates, resolved at load time.
struct OptimizerPlan {
  size_t paramInput = 0;
  std::vector<size_t> stateIndices;
};

} // namespace

class SessionImpl {
public:
  Artifact artifact;
  c10::Device device{c10::DeviceType::CPU};

  /// Per instruction of programs[0]: the bound kernel (aten) or the
  /// optimizer plan (optimizer); free needs neither.
  std::vector<std::optional<BoundKernel>> kernels;
  std::vector<std::optional<OptimizerPlan>> optimizerPlans;
  /// Per output: the index in `inputs` of its target (-1 for the loss).
  std::vector<int64_t> outputTargets;

  /// Per input: the owned tensor (parameter, buffer, constant), undefined
  /// for batch inputs.
  std::vector<at::Tensor> owned;
  /// Per `state` entry.
  std::vector<at::Tensor> state;
  /// Per input: torch.optim's state["step"] for parameters.
  std::vector<float> stepCounts;
  std::map<std::string, at::Tensor> grads;

  SlotTable slots;
  std::shared_ptr<MemoryTracker> tracker = std::make_shared<MemoryTracker>();
  StepStats last;
  int64_t stepsRun = 0;
  bool tracing = false;
  Clock::time_point epoch = Clock::now();
  size_t numBatchElements = 0;

  /// Drops the owned tensors under the tracker, so the CPU allocator's
  /// table forgets the blocks it was told about when they were allocated.
  ~SessionImpl() {
    MemoryTracker::Scope scope(tracker);
    slots.clear();
    owned.clear();
    state.clear();
    grads.clear();
  }

  void bind();
  void resetOptimizerState();
  int64_t heldBytes(const std::vector<at::Tensor> &batch) const;
  std::string where(size_t index) const;
  void checkBatch(const std::vector<at::Tensor> &batch) const;
  void runInstruction(size_t index);
  size_t inputIndex(const std::string &name, InputRole role) const;
};

std::string SessionImpl::where(size_t index) const {
  const Instruction &inst = artifact.programs[0].instructions[index];
  std::string w = artifact.what() + ": " + artifact.instructionPath(0, index);
  if (inst.op == OpKind::Aten)
    w += " " + inst.qualifiedKernel();
  if (!inst.module.empty())
    w += " [module " + inst.module + "]";
  return w;
}

void SessionImpl::bind() {
  if (artifact.worldSize != 1)
    throw Error(artifact.what() + ": world_size is " +
                std::to_string(artifact.worldSize) +
                "; this runtime runs a single rank on the CPU");
  const Program &program = artifact.programs[0];
  kernels.resize(program.instructions.size());
  optimizerPlans.resize(program.instructions.size());
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction &inst = program.instructions[i];
    std::string path = artifact.what() + ": " + artifact.instructionPath(0, i);
    if (inst.op == OpKind::Aten) {
      kernels[i] = BoundKernel::bind(inst, device, path);
    } else if (inst.op == OpKind::Optimizer) {
      // Artifact::load checked the names and slots; resolve them to indices.
      OptimizerPlan plan;
      plan.paramInput = size_t(artifact.findInput(inst.param));
      for (int64_t slot : inst.state)
        for (size_t s = 0; s < artifact.state.size(); ++s)
          if (artifact.state[s].slot == slot)
            plan.stateIndices.push_back(s);
      optimizerPlans[i] = std::move(plan);
    }
  }
  for (const OutputSpec &out : artifact.outputs)
    outputTargets.push_back(
        out.role == OutputRole::Loss ? -1 : artifact.findInput(out.target));
  for (const InputSpec &in : artifact.inputs)
    if (in.role == InputRole::Input)
      numBatchElements = std::max(numBatchElements, size_t(in.batchIndex + 1));
  slots.resize(size_t(artifact.numSlots));
  owned.resize(artifact.inputs.size());
  stepCounts.assign(artifact.inputs.size(), 0.0f);
}

void SessionImpl::resetOptimizerState() {
  state.clear();
  for (const StateSpec &s : artifact.state)
    state.push_back(
        at::zeros(s.shape, at::TensorOptions().dtype(s.dtype).device(device)));
  std::fill(stepCounts.begin(), stepCounts.end(), 0.0f);
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
  for (const at::Tensor &t : batch)
    add(t);
  return bytes;
}

void SessionImpl::checkBatch(const std::vector<at::Tensor> &batch) const {
  for (size_t i = 0; i < artifact.inputs.size(); ++i) {
    const InputSpec &in = artifact.inputs[i];
    if (in.role != InputRole::Input)
      continue;
    std::string ip = "inputs[" + std::to_string(i) + "] ('" + in.name + "')";
    if (size_t(in.batchIndex) >= batch.size())
      throw Error(artifact.what() + ": the batch has " +
                  std::to_string(batch.size()) + " elements, but " + ip +
                  " takes element " + std::to_string(in.batchIndex));
    const at::Tensor &t = batch[size_t(in.batchIndex)];
    if (!t.defined() || t.scalar_type() != in.dtype ||
        t.sizes() != c10::IntArrayRef(in.shape))
      throw Error(artifact.what() + ": batch element " +
                  std::to_string(in.batchIndex) + " is " + describe(t) +
                  ", but " + ip + " declares " + artifactDtypeName(in.dtype) +
                  " " + formatShape(in.shape));
    if (t.device() != device)
      throw Error(artifact.what() + ": batch element " +
                  std::to_string(in.batchIndex) + " is on " + t.device().str() +
                  ", this session runs on " + device.str());
  }
}

void SessionImpl::runInstruction(size_t index) {
  const Instruction &inst = artifact.programs[0].instructions[index];
  switch (inst.op) {
  case OpKind::Aten:
    kernels[index]->run(slots);
    return;
  case OpKind::Free:
    for (int64_t s : inst.slots)
      slots.free(s);
    return;
  case OpKind::Optimizer: {
    const OptimizerPlan &plan = *optimizerPlans[index];
    std::vector<at::Tensor> st;
    for (size_t s : plan.stateIndices)
      st.push_back(state[s]);
    optimizerStep(*artifact.optimizer, owned[plan.paramInput],
                  slots.get(inst.grad), st, stepCounts[plan.paramInput]);
    return;
  }
  }
}

size_t SessionImpl::inputIndex(const std::string &name, InputRole role) const {
  int64_t i = artifact.findInput(name);
  if (i < 0 || artifact.inputs[size_t(i)].role != role)
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
  auto impl = std::make_unique<SessionImpl>();
  impl->artifact = Artifact::load(artifactPath);
  impl->bind();
  // Allocate the owned state under the tracker so the CPU allocator's table
  // knows these blocks and reports their frees (e.g. when weights are
  // reloaded) instead of warning about blocks of unknown size.
  MemoryTracker::Scope scope(impl->tracker);
  SafetensorsFile weights = SafetensorsFile::open(
      impl->artifact.weightsPath, impl->artifact.weightsOffset,
      impl->artifact.weightsLength, artifactPath + ": weights section");
  for (size_t i = 0; i < impl->artifact.inputs.size(); ++i)
    if (impl->artifact.inputs[i].role != InputRole::Input)
      impl->owned[i] = weights.read(impl->artifact.inputs[i].name);
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
  for (size_t i = 0; i < s.artifact.inputs.size(); ++i) {
    const InputSpec &in = s.artifact.inputs[i];
    if (in.role == InputRole::Input)
      continue;
    const SafetensorsEntry *e = file.find(in.name);
    if (!e)
      throw Error(path + ": no tensor '" + in.name + "' (the artifact's " +
                  toString(in.role) + ")");
    if (e->dtype != in.dtype || e->shape != in.shape)
      throw Error(path + ": '" + in.name + "' is " +
                  artifactDtypeName(e->dtype) + " " + formatShape(e->shape) +
                  ", the artifact declares " + artifactDtypeName(in.dtype) +
                  " " + formatShape(in.shape));
  }
  for (size_t i = 0; i < s.artifact.inputs.size(); ++i)
    if (s.artifact.inputs[i].role != InputRole::Input)
      s.owned[i].copy_(file.read(s.artifact.inputs[i].name));
  s.resetOptimizerState();
}

double Session::step(const std::vector<at::Tensor> &batch) {
  SessionImpl &s = *impl_;
  s.checkBatch(batch);
  c10::AutoGradMode noGrad(false);
  MemoryTracker::Scope scope(s.tracker);
  s.tracker->reset(s.heldBytes(batch));

  StepStats stats;
  stats.step = s.stepsRun;
  stats.startBytes = s.tracker->current();
  Clock::time_point start = Clock::now();
  stats.startUs = microsSince(s.epoch, start);

  // Drop every slot on the way out, also when an instruction throws, so a
  // failed step does not pin its intermediates.
  struct ClearSlots {
    SlotTable &slots;
    ~ClearSlots() { slots.clear(); }
  } clearSlots{s.slots};

  for (size_t i = 0; i < s.artifact.inputs.size(); ++i) {
    const InputSpec &in = s.artifact.inputs[i];
    s.slots.set(in.slot, in.role == InputRole::Input
                             ? batch[size_t(in.batchIndex)]
                             : s.owned[i]);
  }
  for (size_t i = 0; i < s.artifact.state.size(); ++i)
    s.slots.set(s.artifact.state[i].slot, s.state[i]);

  const std::vector<Instruction> &insts = s.artifact.programs[0].instructions;
  if (s.tracing)
    stats.instructions.reserve(insts.size());
  for (size_t i = 0; i < insts.size(); ++i) {
    Clock::time_point t0 = s.tracing ? Clock::now() : Clock::time_point();
    try {
      s.runInstruction(i);
    } catch (const c10::Error &e) {
      throw Error(s.where(i) + ": " + e.what_without_backtrace());
    } catch (const std::exception &e) {
      throw Error(s.where(i) + ": " + e.what());
    }
    if (s.tracing) {
      Clock::time_point t1 = Clock::now();
      stats.instructions.push_back(
          {i, microsSince(s.epoch, t0),
           std::chrono::duration<double, std::micro>(t1 - t0).count()});
    }
  }

  // Outputs: check all of them before changing any owned state.
  double loss = 0;
  for (size_t k = 0; k < s.artifact.outputs.size(); ++k) {
    const OutputSpec &out = s.artifact.outputs[k];
    const at::Tensor &t = s.slots.get(out.slot);
    std::string op = s.artifact.what() + ": outputs[" + std::to_string(k) + "]";
    if (out.role == OutputRole::Loss) {
      if (!t.defined() || t.dim() != 0 || t.is_complex())
        throw Error(op + ": the loss must be a real 0-d tensor, found " +
                    describe(t));
      loss = t.item<double>();
    } else if (out.role == OutputRole::BufferMutation) {
      const InputSpec &in = s.artifact.inputs[size_t(s.outputTargets[k])];
      if (!t.defined() || t.scalar_type() != in.dtype ||
          t.sizes() != c10::IntArrayRef(in.shape))
        throw Error(op + ": the new value of buffer '" + out.target + "' is " +
                    describe(t) + ", the buffer is " +
                    artifactDtypeName(in.dtype) + " " + formatShape(in.shape));
    }
  }
  for (size_t k = 0; k < s.artifact.outputs.size(); ++k) {
    const OutputSpec &out = s.artifact.outputs[k];
    const at::Tensor &t = s.slots.get(out.slot);
    if (out.role == OutputRole::BufferMutation) {
      // PyTorch updates buffers in place; copying keeps the stored tensor's
      // identity (views of it stay valid) and never pins the storage of an
      // intermediate the new value may be a view of.
      at::Tensor &buffer = s.owned[size_t(s.outputTargets[k])];
      if (!t.is_same(buffer))
        buffer.copy_(t.is_alias_of(buffer) ? t.clone() : t);
    } else if (out.role == OutputRole::Grad) {
      s.grads[out.target] = t;
    }
  }
  s.slots.clear();

  Clock::time_point end = Clock::now();
  stats.loss = loss;
  stats.timeMs = std::chrono::duration<double, std::milli>(end - start).count();
  stats.peakBytes = s.tracker->peak();
  stats.endBytes = s.tracker->current();
  stats.allocations = s.tracker->allocations();
  s.last = std::move(stats);
  ++s.stepsRun;
  return loss;
}

void Session::saveParameters(const std::string &path) const {
  NamedTensors tensors = parameters();
  for (auto &b : buffers())
    tensors.push_back(std::move(b));
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
  for (size_t i = 0; i < s.artifact.inputs.size(); ++i) {
    const InputSpec &in = s.artifact.inputs[i];
    if (in.role != InputRole::Parameter && in.role != InputRole::Buffer)
      continue;
    const SafetensorsEntry *e = file.find(in.name);
    if (!e) {
      if (in.role == InputRole::Parameter)
        throw Error(path + ": no tensor for parameter '" + in.name + "'");
      continue;
    }
    if (e->dtype != in.dtype || e->shape != in.shape)
      throw Error(path + ": '" + in.name + "' is " +
                  artifactDtypeName(e->dtype) + " " + formatShape(e->shape) +
                  ", the artifact declares " + artifactDtypeName(in.dtype) +
                  " " + formatShape(in.shape));
    toLoad.emplace_back(i, e);
  }
  for (const auto &[i, e] : toLoad)
    s.owned[i].copy_(file.read(*e));
}

static NamedTensors ownedWithRole(const SessionImpl &s, InputRole role) {
  NamedTensors out;
  for (size_t i = 0; i < s.artifact.inputs.size(); ++i)
    if (s.artifact.inputs[i].role == role)
      out.emplace_back(s.artifact.inputs[i].name, s.owned[i]);
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
  for (size_t i = 0; i < impl_->artifact.state.size(); ++i)
    out.emplace_back(impl_->artifact.state[i].name, impl_->state[i]);
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

double Session::stepCount(const std::string &param) const {
  return impl_->stepCounts[impl_->inputIndex(param, InputRole::Parameter)];
}

size_t Session::numBatchElements() const { return impl_->numBatchElements; }
int64_t Session::stepsRun() const { return impl_->stepsRun; }
void Session::setTracing(bool on) { impl_->tracing = on; }
const StepStats &Session::lastStats() const { return impl_->last; }

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
