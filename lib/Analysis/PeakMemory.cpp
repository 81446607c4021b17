//===- PeakMemory.cpp - Predicted peak memory of a step from liveness -----===//

#include "loom/Analysis/PeakMemory.h"

#include "loom/Dialect/Loom/IR/OpClassification.h"

#include "loomrt/KernelSignature.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace loom;

int64_t loom::getValueBytes(Type type) {
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValueType();
  else if (auto future = dyn_cast<rt::FutureType>(type))
    type = future.getValueType();
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return getTensorBytes(tensor);
  return 0;
}

/// The ATen kernel an op calls ("aten::mse_loss", overload stripped), or "".
static StringRef getAtenName(Operation *op) {
  return stripAtenOverload(getAtenKernel(op));
}

/// The bytes of the storage `value` uses: for a view, its base's (the
/// storage of the value it aliases, through every view); null when a view
/// on the way may overlap itself (an expand's zero strides).
static std::optional<int64_t> getSharedStorageBytes(Value value) {
  while (auto result = dyn_cast<OpResult>(value)) {
    Value base = getAliasedOperand(result.getOwner());
    if (!base)
      break;
    if (llvm::is_contained({"aten::expand", "aten::expand_as",
                            "aten::broadcast_to", "aten::as_strided"},
                           getAtenName(result.getOwner())))
      return std::nullopt;
    value = base;
  }
  return getResultStorageBytes(value);
}

/// These CPU kernels compute the elementwise loss into an input-sized buffer
/// and reduce it in place, so the 0-dim result of reduction `mean` or `sum`
/// keeps the whole buffer as its storage until it dies (PyTorch 2.9.1:
/// `untyped_storage().nbytes()` of the result is the input's bytes; l1,
/// huber, the BCE with logits, NLL and the margin losses return 4 bytes).
/// The functional `copy` and the `*_scatter` kernels clone the whole storage
/// of their first operand and return a view of the clone with its strides
/// (ATen's clone_preserve_strides), so where that operand is a view, their
/// result keeps a copy of its base's storage (a `copy` into an 8 x 1 slice of
/// an 8 x 8 tensor holds 8 x 8; measured with the runtime's allocator
/// tracker on PyTorch 2.9.1).
int64_t loom::getResultStorageBytes(Value result) {
  int64_t bytes = getValueBytes(result.getType());
  auto opResult = dyn_cast<OpResult>(result);
  if (!opResult || opResult.getResultNumber() != 0)
    return bytes;
  Operation *op = opResult.getOwner();
  StringRef name = getAtenName(op);
  if (op->getNumOperands() == 0)
    return bytes;
  if (llvm::is_contained({"aten::copy", "aten::slice_scatter",
                          "aten::select_scatter", "aten::diagonal_scatter",
                          "aten::as_strided_scatter"},
                         name)) {
    std::optional<int64_t> storage = getSharedStorageBytes(op->getOperand(0));
    return storage ? std::max(bytes, *storage) : bytes;
  }
  if (!llvm::is_contained({"aten::mse_loss", "aten::smooth_l1_loss",
                           "aten::binary_cross_entropy",
                           "aten::soft_margin_loss"},
                          name))
    return bytes;
  auto input = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto type = dyn_cast<RankedTensorType>(result.getType());
  if (!input || !type || input.getElementType() != type.getElementType())
    return bytes;
  return std::max(bytes, getTensorBytes(input));
}

/// Bytes an ATen kernel allocates and frees while it runs, beyond its
/// results, where that is large enough to matter. On the CPU,
/// native_dropout multiplies its input by its boolean mask converted to the
/// input's dtype (one input-sized temporary) and native_dropout_backward
/// multiplies the gradient by the converted mask (one grad-sized temporary)
/// and by the scale; the scalars are small tensors of their own (4 bytes in
/// forward, 12 in backward). Measured with torch.profiler(profile_memory=True) on PyTorch 2.9.
/// native_batch_norm_backward holds one grad-sized temporary (measured with
/// the runtime's allocator tracker, runtime/lib/MemoryTracker.h, on PyTorch
/// 2.9.1: f32, bf16 and f64, 2- to 5-D, training and eval, with and without
/// affine parameters). Not counted: the per-thread buffers the kernel uses
/// instead where the batch (times the spatial size) is under twice the
/// intra-op threads and the forward kernels' few channel vectors. What
/// depends on the CPU and the thread count (oneDNN's convolution and bf16
/// matmul workspace) comes from the module's measured profile, which
/// replaces these rules for the signatures it lists (docs/recompute.md,
/// "Kernel workspace").
std::string loom::getKernelSignature(Operation *op) {
  StringRef kernel = getAtenKernel(op);
  if (kernel.empty())
    return "";
  auto spell = [](Type type, std::vector<std::string> &out) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    StringRef dtype = tensor ? rt::getDtypeName(tensor.getElementType()) : "";
    if (dtype.empty())
      return false;
    out.push_back(loomrt::spellSignatureTensor(dtype.str(), tensor.getShape()));
    return true;
  };
  std::vector<std::string> inputs, results;
  for (Type t : op->getOperandTypes())
    if (!spell(t, inputs))
      return "";
  for (Type t : op->getResultTypes())
    if (!spell(t, results))
      return "";
  // The runtime's qualified kernel: name, ".", overload (rt.aten's split).
  auto [name, overload] = kernel.split('.');
  return loomrt::kernelSignature((name + "." + overload).str(),
                                 std::move(inputs), std::move(results));
}

/// The measured workspace of `op`'s signature, if the module has a profile
/// that lists it.
static std::optional<int64_t> getMeasuredWorkspace(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  auto table = module ? module->getAttrOfType<DictionaryAttr>(
                            LoomDialect::kKernelWorkspaceAttrName)
                      : DictionaryAttr();
  if (!table || table.empty())
    return std::nullopt;
  std::string signature = getKernelSignature(op);
  auto bytes = signature.empty()
                   ? IntegerAttr()
                   : dyn_cast_or_null<IntegerAttr>(table.get(signature));
  if (!bytes)
    return std::nullopt;
  return bytes.getInt();
}

bool loom::hasMeasuredWorkspace(Operation *op) {
  return getMeasuredWorkspace(op).has_value();
}

bool loom::hasMachineDependentWorkspace(Operation *op) {
  StringRef name = getAtenName(op);
  if (llvm::is_contained({"aten::convolution", "aten::_convolution",
                          "aten::convolution_backward", "aten::conv1d",
                          "aten::conv2d", "aten::conv3d",
                          "aten::conv_transpose1d", "aten::conv_transpose2d",
                          "aten::conv_transpose3d"},
                         name))
    return true;
  if (!llvm::is_contained({"aten::mm", "aten::addmm", "aten::bmm",
                           "aten::baddbmm", "aten::addbmm", "aten::matmul",
                           "aten::linear", "aten::_addmm_activation"},
                          name))
    return false;
  return llvm::any_of(op->getOperandTypes(), [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && (tensor.getElementType().isBF16() ||
                      tensor.getElementType().isF16());
  });
}

void loom::recordMemoryBudget(ModuleOp module, int64_t bytes) {
  if (auto recorded = module->getAttrOfType<IntegerAttr>(
          LoomDialect::kMemoryBudgetAttrName))
    bytes = std::min(bytes, recorded.getInt());
  module->setAttr(LoomDialect::kMemoryBudgetAttrName,
                  Builder(module.getContext()).getI64IntegerAttr(bytes));
}

/// The temporaries of `update`, as runtime/lib/Optimizer.cpp runs
/// torch.optim's algorithms (measured with the runtime's allocator tracker
/// on PyTorch 2.9.1, f32 parameters of 4 B to 1.6 KB). The single-tensor Adam
/// and AdamW hold `sqrt()` and its `div` at once (two parameter-sized
/// tensors) beside the negated (`maximize`) or weight-decayed (Adam's
/// `grad.add(param)`) gradient when there is one, and 12 bytes of scalar
/// tensors. The single-tensor SGD holds the negated, weight-decayed and
/// Nesterov gradients, at most two at once, and with momentum 12 bytes of
/// scalars. The single-tensor RMSprop, Adagrad and Adamax hold those
/// gradients and then one parameter-sized tensor beside them (`avg`, `std`,
/// `grad.abs()`), and 12 bytes of scalars; Adadelta two (`std`, `delta`).
/// Rprop holds three parameter-sized tensors at once (`grad.mul(prev)` and
/// its `sign` beside the negated gradient, which the clone replaces; `sign`,
/// the clone and its `sign()`), or `sign`, the clone and the one-byte mask
/// `sign.eq(etaminus)` with its 8-byte wrapped scalar. ASGD holds SGD's
/// negated and weight-decayed gradients, with the 8-byte wrapped scalar of
/// `param.mul_(1 - lambd * eta)` beside them, and once averaging starts
/// (after step t0 + 1) `param.sub(ax)` and the 4-byte `mu`. The fused Adam,
/// AdamW and Adagrad kernels take a 4-byte step tensor; fused SGD nothing.
static int64_t getOptimizerScratchBytes(const OptimizerUpdate &update) {
  const OptimizerConfig &config = update.config;
  int64_t bytes = getValueBytes(update.param.getType());
  bool sgd = config.name == "sgd";
  if (update.fused)
    return sgd ? 0 : 4;
  if (llvm::is_contained({"adam", "adamw", "radam", "nadam"}, config.name)) {
    // Two parameter-sized tensors at once (Adam's and NAdam's `div` and its
    // `sqrt`; RAdam's `update` and, once rectified, `adaptive`) beside the
    // negated or L2-decayed gradient when there is one; 12 B of scalars.
    bool decoupled = config.name == "adamw" || config.decoupledWeightDecay;
    bool gradCopy = config.maximize || (config.weightDecay != 0 && !decoupled);
    return (gradCopy ? 3 : 2) * bytes + 12;
  }
  if (config.name == "rprop") {
    auto type = cast<RankedTensorType>(update.param.getType());
    int64_t mask = type.getNumElements();
    if (isa<ComplexType>(type.getElementType()))
      mask *= 2; // the masks of its view_as_real
    return std::max(3 * bytes, 2 * bytes + mask + 8);
  }
  // SGD, RMSprop and Adagrad: the negated gradient, then the
  // weight-decayed one made from it (both alive while it is made).
  int64_t alive = config.maximize ? 1 : 0, most = alive;
  if (config.weightDecay != 0) {
    most = std::max(most, alive + 1);
    alive = 1;
  }
  if (config.name == "asgd") {
    // Averaging may start at any step the run reaches: counted always.
    return std::max({most * bytes, alive * bytes + 8, bytes + 4});
  }
  if (sgd) {
    if (config.momentum != 0 && config.nesterov)
      most = std::max(most, alive + 1);
    return most * bytes + (config.momentum != 0 ? 12 : 0);
  }
  // RMSprop's `avg`, Adagrad's `std` and Adamax's `grad.abs()`, beside
  // that gradient; Adadelta's `std` and `delta` both.
  most = std::max(most, alive + (config.name == "adadelta" ? 2 : 1));
  return most * bytes + 12;
}

std::optional<OptimizerUpdate> loom::getOptimizerUpdate(Operation *op) {
  Attribute optimizer;
  Operation *owner = nullptr;
  Value param;
  if (auto update = dyn_cast<OptimizerUpdateOp>(op)) {
    optimizer = update.getOptimizer();
    owner = op->getParentOfType<func::FuncOp>();
    param = update.getParam();
  } else if (auto update = dyn_cast<rt::OptimizerOp>(op)) {
    auto program = op->getParentOfType<rt::ProgramOp>();
    optimizer = update.getOptimizerAttr();
    if (!optimizer && program && program.getOptimizer())
      optimizer = *program.getOptimizer();
    owner = program;
    param = update.getParam();
  } else {
    return std::nullopt;
  }
  std::optional<OptimizerConfig> config = getOptimizerConfig(optimizer);
  if (!config)
    return std::nullopt;
  auto impl = owner ? owner->getAttrOfType<StringAttr>(
                          LoomDialect::kOptimizerImplAttrName)
                    : StringAttr();
  return OptimizerUpdate{*config, impl && impl == "fused", param};
}

int64_t loom::getKernelScratchBytes(Operation *op) {
  if (std::optional<OptimizerUpdate> update = getOptimizerUpdate(op))
    return getOptimizerScratchBytes(*update);
  StringRef name = getAtenName(op);
  if (name.empty())
    return 0;
  if (std::optional<int64_t> measured = getMeasuredWorkspace(op))
    return *measured;
  if (op->getNumOperands() == 0)
    return 0;
  int64_t input = getValueBytes(op->getOperand(0).getType());
  if (name == "aten::native_dropout")
    return input + 4;
  if (name == "aten::native_dropout_backward")
    return input + 12;
  if (name == "aten::native_batch_norm_backward")
    return input;
  return 0;
}

namespace {
/// The liveness sweep both levels share; the hooks say what a level's ops
/// mean for memory.
struct Sweep {
  /// Values the runtime or the caller keeps for the whole step.
  function_ref<bool(Value)> isPersistent;
  /// For a result that allocates nothing, the value whose storage it uses.
  function_ref<Value(OpResult)> getAliasee;
  /// For the argument of a recompute body, the region input bound to it.
  static Value getRecomputeInput(Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg)
      return {};
    auto region = dyn_cast_or_null<RecomputeOp>(arg.getOwner()->getParentOp());
    return region ? region.getInputs()[arg.getArgNumber()] : Value();
  }
  /// Users that keep a value to the end of the step (results, outputs).
  function_ref<bool(Operation *)> keepsToEnd;
  /// Users that are not reads (frees).
  function_ref<bool(Operation *)> isIgnoredUser;
  /// The op until which a user keeps reading its operands: a collective
  /// start reads its input until its wait (the runtime holds it); other
  /// users only while they run.
  function_ref<Operation *(Operation *)> getHoldUntil;

  /// Sweeps the ops of `block` in `order` (every op but the terminator, which
  /// comes last), or in block order when `order` is empty.
  void run(Block &block, PeakMemory &out, ArrayRef<Operation *> order = {}) {
    DenseMap<Operation *, int64_t> position;
    SmallVector<Operation *> ops;
    // A recompute region runs its body where it stands, as the lowering
    // inlines it: the region itself (where its inputs are read), then its
    // ops, then its yield, each a step of the sweep, so that a body value
    // lives only inside the region and the transient peak of the body
    // counts.
    auto append = [&](Operation *op) {
      position[op] = ops.size();
      ops.push_back(op);
      if (auto region = dyn_cast<RecomputeOp>(op))
        for (Operation &inner : region.getBodyBlock()) {
          position[&inner] = ops.size();
          ops.push_back(&inner);
        }
    };
    if (order.empty()) {
      for (Operation &op : block)
        append(&op);
    } else {
      for (Operation *op : order)
        append(op);
      if (Operation *term = block.empty() ? nullptr : &block.back())
        if (term->hasTrait<OpTrait::IsTerminator>() && !position.count(term))
          append(term);
    }
    int64_t end = ops.size();

    // The allocating value whose storage each value is (null: persistent).
    DenseMap<Value, Value> storageOf;
    std::function<Value(Value)> storage = [&](Value v) -> Value {
      auto it = storageOf.find(v);
      if (it != storageOf.end())
        return it->second;
      Value s;
      if (Value input = getRecomputeInput(v))
        s = storage(input);
      else if (isPersistent(v))
        s = {};
      else if (auto result = dyn_cast<OpResult>(v)) {
        Value aliasee = getAliasee(result);
        s = aliasee ? storage(aliasee) : v;
      }
      storageOf[v] = s;
      return s;
    };

    for (BlockArgument arg : block.getArguments())
      if (isPersistent(arg))
        out.persistentBytes += getValueBytes(arg.getType());
    // Where each storage is allocated (by the op defining it) and the last
    // op that needs it.
    llvm::MapVector<Value, std::pair<int64_t, int64_t>> lifetime;
    auto extend = [&](Value v, Operation *op) {
      Value s = storage(v);
      if (!s)
        return;
      // Allocated by the op defining the storage, which a region's result
      // follows (its body op runs after the region's own step).
      Operation *def = s.getDefiningOp();
      int64_t first = def && position.count(def) ? position[def] : position[op];
      auto [it, inserted] =
          lifetime.try_emplace(s, std::make_pair(first, position[op]));
      int64_t &last = it->second.second;
      for (Operation *user : v.getUsers()) {
        if (isIgnoredUser(user))
          continue;
        Operation *holder = getHoldUntil(user);
        if (!holder || !position.count(holder))
          holder = user;
        last = std::max(last, keepsToEnd(user) ? end : position[holder]);
      }
    };
    for (Operation *op : ops) {
      for (Value v : op->getResults()) {
        if (isPersistent(v)) {
          out.persistentBytes += getValueBytes(v.getType());
          continue;
        }
        extend(v, op);
      }
      // A body argument is the region's input: its reads inside the body
      // keep the input alive.
      if (auto region = dyn_cast<RecomputeOp>(op))
        for (BlockArgument arg : region.getBodyBlock().getArguments())
          extend(arg, op);
    }

    SmallVector<int64_t> delta(end + 2, 0);
    for (auto &[s, span] : lifetime) {
      int64_t bytes = getResultStorageBytes(s);
      delta[span.first] += bytes;
      delta[span.second + 1] -= bytes;
    }
    // A kernel's own temporaries live while it runs.
    for (auto [i, op] : llvm::enumerate(ops)) {
      int64_t scratch = getKernelScratchBytes(op);
      delta[i] += scratch;
      delta[i + 1] -= scratch;
    }
    int64_t live = 0, peakAt = -1;
    out.order.assign(ops.begin(), ops.end());
    out.activationBytesAt.clear();
    for (int64_t i = 0; i < end; ++i) {
      live += delta[i];
      out.activationBytesAt.push_back(live);
      if (live > out.peakActivationBytes || !out.peakOp) {
        out.peakActivationBytes = std::max(out.peakActivationBytes, live);
        out.peakOp = ops[i];
        peakAt = i;
      }
    }
    out.peakBytes = out.persistentBytes + out.peakActivationBytes;
    recordLiveAt(peakAt, ops, lifetime, out);
  }

  /// Fills out.liveAtPeak with the storages live at position `at`.
  template <typename Lifetimes>
  static void recordLiveAt(int64_t at, ArrayRef<Operation *> ops,
                           const Lifetimes &lifetime, PeakMemory &out) {
    out.liveAtPeak.clear();
    if (at < 0)
      return;
    for (auto &[s, span] : lifetime)
      if (span.first <= at && at <= span.second)
        if (int64_t bytes = getResultStorageBytes(s))
          out.liveAtPeak.push_back({s, bytes});
    if (int64_t scratch = getKernelScratchBytes(ops[at]))
      out.liveAtPeak.push_back({Value(), scratch});
    llvm::stable_sort(out.liveAtPeak, [](const auto &a, const auto &b) {
      return a.second > b.second;
    });
  }
};
} // namespace

PeakMemory::PeakMemory(func::FuncOp step) : PeakMemory(step, {}) {}

PeakMemory::PeakMemory(func::FuncOp step, ArrayRef<Operation *> order) {
  Sweep sweep;
  // Every argument of a step is a parameter, buffer, constant, optimizer
  // state or batch input: all live throughout. (The arguments of recompute
  // bodies are the regions' inputs, resolved before this is asked.)
  Block *body = &step.getBody().front();
  // Named: the sweep's function_ref must not outlive what it refers to.
  auto isStepArgument = [body](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == body;
  };
  sweep.isPersistent = isStepArgument;
  sweep.getAliasee = [](OpResult r) -> Value {
    Operation *op = r.getOwner();
    if (isa<AtenOp>(op))
      return getAliasedOperand(op);
    if (auto update = dyn_cast<OptimizerUpdateOp>(op))
      return r.getResultNumber() == 0
                 ? update.getParam()
                 : update.getState()[r.getResultNumber() - 1];
    // A collective's buffer is allocated when it starts.
    if (auto wait = dyn_cast<WaitOp>(op))
      return wait.getFuture();
    // A recompute region's result is the body value it yields (allocated
    // inside the region, or a view of an input): counted once.
    if (auto region = dyn_cast<RecomputeOp>(op))
      return region.getYield().getValues()[r.getResultNumber()];
    return {};
  };
  sweep.keepsToEnd = [](Operation *op) { return isa<func::ReturnOp>(op); };
  sweep.isIgnoredUser = [](Operation *) { return false; };
  sweep.getHoldUntil = [](Operation *user) -> Operation * {
    if (!getCollectiveKind(user))
      return nullptr;
    for (Operation *waitUser : user->getResult(0).getUsers())
      if (isa<WaitOp>(waitUser))
        return waitUser;
    return nullptr;
  };
  sweep.run(step.getBody().front(), *this, order);
}

PeakMemory::PeakMemory(rt::ProgramOp program) {
  Sweep sweep;
  sweep.isPersistent = [](Value v) {
    return isa_and_nonnull<rt::InputOp, rt::StateOp>(v.getDefiningOp());
  };
  sweep.getAliasee = [](OpResult r) -> Value {
    // The runtime allocates a collective's result when it issues it (the
    // buffer an all-gather receives into, the chunk a reduce-scatter
    // returns) and hands that buffer out at the wait: with the wait deferred
    // (a prefetched all-gather) it is live across everything in between.
    if (auto wait = dyn_cast<rt::WaitOp>(r.getOwner()))
      return wait.getFuture();
    if (isa<rt::AtenOp>(r.getOwner()))
      return getAliasedOperand(r.getOwner());
    return {};
  };
  sweep.keepsToEnd = [](Operation *op) { return isa<rt::OutputOp>(op); };
  sweep.isIgnoredUser = [](Operation *op) { return isa<rt::FreeOp>(op); };
  sweep.getHoldUntil = [](Operation *user) -> Operation * {
    if (auto start = dyn_cast<rt::CollectiveStartOp>(user))
      return start.getWait();
    return nullptr;
  };
  sweep.run(program.getBody().front(), *this);
}

/// A short name for an op: its graph node name where the location has one
/// (IR read back from text has lost them), else its ATen kernel, which says
/// nearly as much, else its op name.
static std::string getShortName(Operation *op) {
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    return name.getName().str();
  StringRef kernel = getAtenKernel(op);
  return (kernel.empty() ? op->getName().getStringRef() : kernel).str();
}

std::string PeakMemory::peakOpName() const {
  return peakOp ? getShortName(peakOp) : "";
}

/// A short name for the op that allocated a storage; "kernel scratch" for a
/// null storage.
static std::string getStorageName(Value storage) {
  if (!storage)
    return "kernel scratch";
  Operation *op = storage.getDefiningOp();
  return op ? getShortName(op) : "argument";
}

/// "module (phase)" for the op that allocated a storage; "kernel scratch"
/// for a null storage.
static std::string getStorageGroup(Value storage) {
  if (!storage)
    return "kernel scratch";
  Operation *op = storage.getDefiningOp();
  if (!op)
    return "argument";
  // A region's body op runs where the region stands, in backward.
  StringRef module = getModulePath(op);
  std::optional<Phase> phase = getPhase(op);
  if (op->getParentOfType<RecomputeOp>())
    phase = Phase::backward;
  std::string group = module.empty() ? "<root>" : module.str();
  // A wait's result is the buffer its start allocated (the sweeps' alias
  // rule), so the start is the storage.
  if (getCollectiveKind(op) || isa<rt::CollectiveStartOp>(op))
    return group + " (collective)";
  return group + " (" + (phase ? stringifyPhase(*phase).str() : "untagged") +
         ")";
}

SmallVector<std::pair<std::string, int64_t>>
PeakMemory::getLiveGroupsAtPeak() const {
  llvm::StringMap<int64_t> byGroup;
  for (auto [storage, bytes] : liveAtPeak)
    byGroup[getStorageGroup(storage)] += bytes;
  SmallVector<std::pair<std::string, int64_t>> groups;
  for (auto &entry : byGroup)
    groups.push_back({entry.getKey().str(), entry.getValue()});
  // Largest first; the name breaks ties (the map's order is not stable).
  llvm::sort(groups, [](const auto &a, const auto &b) {
    return std::tie(b.second, a.first) < std::tie(a.second, b.first);
  });
  return groups;
}

void PeakMemory::printLiveAtPeak(raw_ostream &os, size_t groups) const {
  auto all = getLiveGroupsAtPeak();
  os << "live at the peak:";
  for (auto &[group, bytes] : ArrayRef(all).take_front(groups))
    os << " " << group << " " << bytes << ";";
  if (all.size() > groups) {
    int64_t rest = 0;
    for (auto &entry : ArrayRef(all).drop_front(groups))
      rest += entry.second;
    os << " " << all.size() - groups << " more " << rest << ";";
  }
  os << "\n";
}

llvm::json::Value PeakMemory::toJSON() const {
  // What is live at the peak: bytes by module and phase of the op that
  // allocated it, and the largest tensors.
  llvm::json::Array groupArray, largest;
  for (auto &[group, bytes] : getLiveGroupsAtPeak())
    groupArray.push_back(
        llvm::json::Object{{"group", group}, {"bytes", bytes}});
  for (auto [storage, bytes] : ArrayRef(liveAtPeak).take_front(kLargestAtPeak))
    largest.push_back(llvm::json::Object{
        {"name", getStorageName(storage)},
        {"group", getStorageGroup(storage)},
        {"bytes", bytes}});
  return llvm::json::Object{
      {"persistent_bytes", persistentBytes},
      {"peak_activation_bytes", peakActivationBytes},
      {"peak_bytes", peakBytes},
      {"peak_op", peakOpName()},
      {"peak_module", peakOp ? getModulePath(peakOp).str() : ""},
      {"live_at_peak", std::move(groupArray)},
      {"largest_at_peak", std::move(largest)}};
}
