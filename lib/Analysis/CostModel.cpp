//===- CostModel.cpp - Device specs and the time of ops and collectives ---===//

#include "loom/Analysis/CostModel.h"

#include "loom/Analysis/StepStats.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <cmath>

using namespace mlir;
using namespace loom;

StringRef loom::stringifyPrecision(Precision p) {
  switch (p) {
  case Precision::fp32:
    return "fp32";
  case Precision::tf32:
    return "tf32";
  case Precision::bf16:
    return "bf16";
  case Precision::fp16:
    return "fp16";
  }
  return "fp32";
}

std::optional<CollectiveAlgorithm> loom::parseCollectiveAlgorithm(StringRef s) {
  return llvm::StringSwitch<std::optional<CollectiveAlgorithm>>(s)
      .Case("ring", CollectiveAlgorithm::ring)
      .Case("tree", CollectiveAlgorithm::tree)
      .Case("auto", CollectiveAlgorithm::autoSelect)
      .Default(std::nullopt);
}

//===----------------------------------------------------------------------===//
// DeviceSpec
//===----------------------------------------------------------------------===//

double DeviceSpec::peakFlops(Precision p) const {
  switch (p) {
  case Precision::fp32:
    return peakFp32;
  case Precision::tf32:
    return peakTf32;
  case Precision::bf16:
    return peakBf16;
  case Precision::fp16:
    return peakFp16;
  }
  return peakFp32;
}

namespace {
constexpr double inf = std::numeric_limits<double>::infinity();

/// A number as a person wrote it (`1.5`, `1e-06`).
std::string num(double d) {
  return llvm::formatv("{0}", llvm::format("%g", d)).str();
}

/// Reads the fields of a spec and reports the first problem with its path
/// (`intra_node.bandwidth`) and, found in the text, its line and column.
class SpecReader {
public:
  SpecReader(StringRef text, StringRef fileName)
      : text(text), fileName(fileName) {}

  llvm::Error error(ArrayRef<StringRef> path, const Twine &msg) const {
    std::string where = fileName.str();
    size_t pos = locate(path);
    if (pos != StringRef::npos) {
      auto [line, col] = lineCol(pos);
      where += llvm::formatv(":{0}:{1}", line, col).str();
    }
    std::string dotted;
    for (StringRef p : path)
      dotted += (dotted.empty() ? "" : ".") + p.str();
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        where + ": " + (dotted.empty() ? "" : "at '" + dotted + "': ") + msg);
  }

  std::pair<size_t, size_t> lineCol(size_t pos) const {
    size_t line = 1 + text.take_front(pos).count('\n');
    size_t lastNl = text.take_front(pos).rfind('\n');
    size_t col = lastNl == StringRef::npos ? pos + 1 : pos - lastNl;
    return {line, col};
  }

  /// The offset of the last key of `path`, found by searching for each key
  /// after the previous one (good enough for the nested objects of a spec).
  size_t locate(ArrayRef<StringRef> path) const {
    size_t pos = 0;
    bool any = false;
    for (StringRef key : path) {
      size_t at = text.find(("\"" + key + "\"").str(), pos);
      if (at == StringRef::npos)
        break;
      pos = at;
      any = true;
    }
    return any ? pos : StringRef::npos;
  }

  /// A required object member of `obj`.
  llvm::Expected<const llvm::json::Value *>
  member(const llvm::json::Object &obj, ArrayRef<StringRef> path) const {
    const llvm::json::Value *v = obj.get(path.back());
    if (!v) {
      SmallVector<StringRef> parent(path.drop_back());
      return error(parent, "missing field '" + path.back() + "'");
    }
    return v;
  }

  /// A number in [lo, hi] (open at lo when `openLo`).
  llvm::Error number(const llvm::json::Object &obj, ArrayRef<StringRef> path,
                     double &out, double lo, double hi, bool openLo,
                     bool optional = false) const {
    if (optional && !obj.get(path.back()))
      return llvm::Error::success();
    auto v = member(obj, path);
    if (!v)
      return v.takeError();
    std::optional<double> d = (*v)->getAsNumber();
    if (!d)
      return error(path, "expected a number");
    if (!std::isfinite(*d) || *d < lo || (openLo && *d == lo) || *d > hi)
      return error(path, llvm::formatv("{0} is out of range: expected {1}{2}, "
                                       "{3}]",
                                       num(*d), openLo ? "(" : "[", num(lo),
                                       hi == inf ? "inf" : num(hi))
                             .str());
    out = *d;
    return llvm::Error::success();
  }

  llvm::Expected<const llvm::json::Object *>
  object(const llvm::json::Object &obj, ArrayRef<StringRef> path) const {
    auto v = member(obj, path);
    if (!v)
      return v.takeError();
    const llvm::json::Object *o = (*v)->getAsObject();
    if (!o)
      return error(path, "expected an object");
    return o;
  }

  /// Rejects members other than `known` (catches misspelt fields).
  llvm::Error onlyKnown(const llvm::json::Object &obj, ArrayRef<StringRef> path,
                        ArrayRef<StringRef> known) const {
    for (const auto &kv : obj) {
      StringRef key = kv.first;
      if (!llvm::is_contained(known, key)) {
        SmallVector<StringRef> p(path);
        p.push_back(key);
        std::string list;
        for (StringRef k : known)
          list += (list.empty() ? "" : ", ") + k.str();
        return error(p, "unknown field (expected one of: " + list + ")");
      }
    }
    return llvm::Error::success();
  }

private:
  StringRef text, fileName;
};
} // namespace

llvm::Expected<llvm::json::Value> loom::parseJsonText(StringRef text,
                                                      StringRef fileName) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (parsed)
    return parsed;
  // llvm::json reports "[LINE:COL, byte=N]: message"; put it in the
  // file:line:col form editors understand.
  std::string msg = llvm::toString(parsed.takeError());
  StringRef m(msg);
  unsigned line = 0, col = 0;
  if (m.consume_front("[")) {
    StringRef l = m.take_until([](char c) { return c == ':'; });
    m = m.drop_front(l.size() + 1);
    StringRef c = m.take_until([](char ch) { return ch == ','; });
    if (!l.getAsInteger(10, line) && !c.getAsInteger(10, col)) {
      size_t close = m.find("]: ");
      if (close != StringRef::npos)
        m = m.drop_front(close + 3);
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}:{1}:{2}: invalid JSON: {3}", fileName, line, col,
                        m)
              .str());
    }
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 fileName + ": invalid JSON: " + msg);
}

llvm::Expected<DeviceSpec> DeviceSpec::parse(StringRef json,
                                             StringRef fileName) {
  SpecReader r(json, fileName);
  llvm::Expected<llvm::json::Value> parsed = parseJsonText(json, fileName);
  if (!parsed)
    return parsed.takeError();
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return r.error({}, "expected a JSON object at the top level");

  if (auto err =
          r.onlyKnown(*root, {},
                      {"name", "source", "peak_flops", "memory_bandwidth",
                       "intra_node", "inter_node", "devices_per_node",
                       "efficiency", "op_overhead", "view_overhead"}))
    return std::move(err);

  DeviceSpec spec;
  spec.path = fileName.str();
  for (auto [key, out] :
       {std::pair<StringRef, std::string *>{"name", &spec.name},
        {"source", &spec.source}}) {
    auto v = r.member(*root, {key});
    if (!v)
      return v.takeError();
    std::optional<StringRef> s = (*v)->getAsString();
    if (!s || s->empty())
      return r.error({key}, "expected a non-empty string");
    *out = s->str();
  }

  auto peaks = r.object(*root, {"peak_flops"});
  if (!peaks)
    return peaks.takeError();
  if (auto err = r.onlyKnown(**peaks, {"peak_flops"},
                             {"fp32", "tf32", "bf16", "fp16"}))
    return std::move(err);
  for (auto [key, out] :
       {std::pair<StringRef, double *>{"fp32", &spec.peakFp32},
        {"tf32", &spec.peakTf32},
        {"bf16", &spec.peakBf16},
        {"fp16", &spec.peakFp16}})
    if (auto err = r.number(**peaks, {"peak_flops", key}, *out, 0, inf, true))
      return std::move(err);

  if (auto err = r.number(*root, {"memory_bandwidth"}, spec.memoryBandwidth, 0,
                          inf, true))
    return std::move(err);

  for (auto [key, out] :
       {std::pair<StringRef, LinkSpec *>{"intra_node", &spec.intraNode},
        {"inter_node", &spec.interNode}}) {
    auto link = r.object(*root, {key});
    if (!link)
      return link.takeError();
    if (auto err = r.onlyKnown(**link, {key}, {"bandwidth", "latency"}))
      return std::move(err);
    if (auto err =
            r.number(**link, {key, "bandwidth"}, out->bandwidth, 0, inf, true))
      return std::move(err);
    if (auto err =
            r.number(**link, {key, "latency"}, out->latency, 0, inf, false))
      return std::move(err);
  }

  double perNode = 0;
  if (auto err =
          r.number(*root, {"devices_per_node"}, perNode, 1, 1 << 20, false))
    return std::move(err);
  if (perNode != std::floor(perNode))
    return r.error({"devices_per_node"}, "expected an integer");
  spec.devicesPerNode = static_cast<int64_t>(perNode);

  auto eff = r.object(*root, {"efficiency"});
  if (!eff)
    return eff.takeError();
  if (auto err =
          r.onlyKnown(**eff, {"efficiency"}, {"compute", "memory", "link"}))
    return std::move(err);
  for (auto [key, out] :
       {std::pair<StringRef, double *>{"compute", &spec.computeEfficiency},
        {"memory", &spec.memoryEfficiency},
        {"link", &spec.linkEfficiency}})
    if (auto err = r.number(**eff, {"efficiency", key}, *out, 0, 1, true))
      return std::move(err);

  if (auto err =
          r.number(*root, {"op_overhead"}, spec.opOverhead, 0, inf, false))
    return std::move(err);
  if (auto err = r.number(*root, {"view_overhead"}, spec.viewOverhead, 0, inf,
                          false, /*optional=*/true))
    return std::move(err);
  return spec;
}

llvm::Expected<DeviceSpec> DeviceSpec::loadFile(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return llvm::createStringError(buffer.getError(),
                                   "cannot read device spec '" + path +
                                       "': " + buffer.getError().message());
  return parse((*buffer)->getBuffer(), path);
}

std::string loom::getDefaultDeviceDir() {
  if (std::optional<std::string> env =
          llvm::sys::Process::GetEnv("LOOM_DEVICE_DIR"))
    if (!env->empty())
      return *env;
  return LOOM_DEVICE_DIR;
}

SmallVector<std::string> loom::listDeviceSpecs(StringRef dir) {
  SmallVector<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".json")
      names.push_back(llvm::sys::path::stem(it->path()).str());
  llvm::sort(names);
  return names;
}

llvm::Expected<DeviceSpec> DeviceSpec::load(StringRef nameOrPath,
                                            StringRef searchDir) {
  if (nameOrPath.contains('/') || nameOrPath.ends_with(".json"))
    return loadFile(nameOrPath);
  std::string dir = searchDir.empty() ? getDefaultDeviceDir() : searchDir.str();
  SmallString<256> path(dir);
  llvm::sys::path::append(path, nameOrPath + ".json");
  if (llvm::sys::fs::exists(path))
    return loadFile(path);
  std::string known;
  for (const std::string &n : listDeviceSpecs(dir))
    known += (known.empty() ? "" : ", ") + n;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "unknown device '" + nameOrPath +
                                     "' (known in " + dir + ": " +
                                     (known.empty() ? "none" : known) +
                                     "; or give the path of a spec file)");
}

llvm::json::Value DeviceSpec::toJSON() const {
  return llvm::json::Object{
      {"name", name},
      {"path", path},
      {"peak_flops", llvm::json::Object{{"fp32", peakFp32},
                                        {"tf32", peakTf32},
                                        {"bf16", peakBf16},
                                        {"fp16", peakFp16}}},
      {"memory_bandwidth", memoryBandwidth},
      {"intra_node", llvm::json::Object{{"bandwidth", intraNode.bandwidth},
                                        {"latency", intraNode.latency}}},
      {"inter_node", llvm::json::Object{{"bandwidth", interNode.bandwidth},
                                        {"latency", interNode.latency}}},
      {"devices_per_node", devicesPerNode},
      {"efficiency", llvm::json::Object{{"compute", computeEfficiency},
                                        {"memory", memoryEfficiency},
                                        {"link", linkEfficiency}}},
      {"op_overhead", opOverhead},
      {"view_overhead", viewOverhead}};
}

//===----------------------------------------------------------------------===//
// Placement and the alpha-beta formulas
//===----------------------------------------------------------------------===//

std::optional<GroupPlacement> loom::placeGroup(ArrayRef<int64_t> meshShape,
                                               ArrayRef<unsigned> axes,
                                               const Topology &topology,
                                               std::string *error) {
  int64_t ranks = 1;
  for (int64_t d : meshShape)
    ranks *= d;
  if (topology.nodes < 1 || topology.devicesPerNode < 1 ||
      ranks > topology.numDevices()) {
    if (error)
      *error = llvm::formatv("the mesh has {0} ranks but {1} node(s) of {2} "
                             "device(s) hold only {3}",
                             ranks, topology.nodes, topology.devicesPerNode,
                             topology.numDevices())
                   .str();
    return std::nullopt;
  }
  // Strides of the row-major rank numbering.
  SmallVector<int64_t> stride(meshShape.size(), 1);
  for (int64_t i = (int64_t)meshShape.size() - 2; i >= 0; --i)
    stride[i] = stride[i + 1] * meshShape[i + 1];
  SmallVector<bool> inGroup(meshShape.size(), false);
  GroupPlacement placement;
  placement.size = 1;
  for (unsigned a : axes) {
    if (a >= meshShape.size()) {
      if (error)
        *error = "mesh axis index out of range";
      return std::nullopt;
    }
    inGroup[a] = true;
    placement.size *= meshShape[a];
  }
  // Enumerate each group by its first rank (zero coordinates on the group's
  // axes) and count the nodes its members occupy; keep the worst.
  placement.nodesSpanned = 1;
  for (int64_t r = 0; r < ranks; ++r) {
    bool first = true;
    for (size_t a = 0; a < meshShape.size(); ++a)
      if (inGroup[a] && (r / stride[a]) % meshShape[a] != 0)
        first = false;
    if (!first)
      continue;
    llvm::SmallDenseSet<int64_t, 8> nodes;
    for (int64_t m = 0; m < placement.size; ++m) {
      // The m-th member: m's row-major digits over the group's axes.
      int64_t rank = r, rest = m;
      for (int64_t a = (int64_t)meshShape.size() - 1; a >= 0; --a) {
        if (!inGroup[a])
          continue;
        rank += (rest % meshShape[a]) * stride[a];
        rest /= meshShape[a];
      }
      nodes.insert(rank / topology.devicesPerNode);
    }
    placement.nodesSpanned =
        std::max<int64_t>(placement.nodesSpanned, nodes.size());
  }
  return placement;
}

static double ceilLog2(int64_t p) {
  return p <= 1 ? 0 : std::ceil(std::log2(static_cast<double>(p)));
}

double loom::alphaBetaTime(CollectiveKind kind, CollectiveAlgorithm algorithm,
                           int64_t p, double bytes, double alpha, double beta) {
  if (p <= 1)
    return 0;
  if (algorithm == CollectiveAlgorithm::autoSelect) {
    double ring =
        alphaBetaTime(kind, CollectiveAlgorithm::ring, p, bytes, alpha, beta);
    double tree =
        alphaBetaTime(kind, CollectiveAlgorithm::tree, p, bytes, alpha, beta);
    return std::min(ring, tree);
  }
  double n = static_cast<double>(p);
  bool tree = algorithm == CollectiveAlgorithm::tree;
  switch (kind) {
  case CollectiveKind::allGather:
  case CollectiveKind::reduceScatter:
    // Ring only (NCCL has no tree variant).
    return (n - 1) * alpha + (n - 1) / n * bytes / beta;
  case CollectiveKind::allReduce:
    if (tree)
      return 2 * ceilLog2(p) * alpha + 2 * bytes / beta;
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * bytes / beta;
  case CollectiveKind::broadcast:
    if (tree)
      return ceilLog2(p) * alpha + bytes / beta;
    return (n - 1) * alpha + bytes / beta;
  case CollectiveKind::sendRecv:
    return alpha + bytes / beta;
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// CostModel
//===----------------------------------------------------------------------===//

CostModel::CostModel(DeviceSpec spec, CostModelOptions options)
    : spec(std::move(spec)), options(options) {}

double CostModel::rooflineTime(double flops, double bytes, Precision p) const {
  double compute =
      flops > 0 ? flops / (spec.peakFlops(p) * spec.computeEfficiency) : 0;
  double memory =
      bytes > 0 ? bytes / (spec.memoryBandwidth * spec.memoryEfficiency) : 0;
  return std::max(compute, memory) + spec.opOverhead;
}

static Precision precisionOf(Type elementType, bool matmul, bool allowTf32) {
  if (elementType.isBF16())
    return Precision::bf16;
  if (elementType.isF16())
    return Precision::fp16;
  return matmul && allowTf32 ? Precision::tf32 : Precision::fp32;
}

static double valueBytes(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return static_cast<double>(getTensorBytes(tensor));
  return 0;
}

/// Tensor-sized reads plus writes (in units of the parameter's bytes) and
/// kernel launches of PyTorch's single-tensor update, as
/// runtime/lib/Optimizer.cpp runs it.
static std::pair<double, int> optimizerTraffic(Attribute optimizer) {
  double traffic = 0;
  int kernels = 0;
  auto add = [&](double t, int k) {
    traffic += t;
    kernels += k;
  };
  std::optional<OptimizerConfig> c = getOptimizerConfig(optimizer);
  if (!c)
    return {0, 0};
  StringRef name = c->name;
  if (c->maximize)
    add(2, 1); // neg
  bool decoupled = name == "adamw" || c->decoupledWeightDecay;
  if (c->weightDecay != 0)
    add(decoupled ? 2 : 3, 1); // param.mul_ / grad.add(param)
  if (name == "sgd") {
    if (c->momentum != 0) {
      add(5, 2); // buf.mul_().add_(grad)
      if (c->nesterov)
        add(3, 1);
    }
    add(3, 1); // param.add_(grad)
  } else if (name == "rmsprop") {
    add(6, 2); // square_avg.mul_().addcmul_(grad, grad)
    if (c->centered)
      add(8, 3); // grad_avg.lerp_(grad), square_avg.addcmul(...).sqrt_()
    else
      add(2, 1); // square_avg.sqrt()
    add(2, 1);   // avg.add_(eps)
    if (c->momentum != 0)
      add(7, 2); // buf.mul_().addcdiv_(grad, avg), param.add_(buf)
    else
      add(4, 1); // param.addcdiv_(grad, avg)
  } else if (name == "adamax") {
    add(3, 1); // exp_avg.lerp_(grad)
    add(2, 1); // exp_inf.mul_(beta2)
    add(4, 2); // grad.abs().add_(eps)
    add(3, 1); // torch.maximum(..., out=exp_inf)
    add(4, 1); // param.addcdiv_(exp_avg, exp_inf)
  } else if (name == "radam") {
    add(3, 1);  // exp_avg.lerp_(grad)
    add(6, 2);  // exp_avg_sq.mul_().addcmul_(grad, grad)
    add(4, 2);  // exp_avg / bias_correction1, * lr
    add(10, 5); // sqrt, add_, reciprocal_, mul_, update.mul_ (rectified)
    add(2, 1);  // * rect
    add(3, 1);  // param.add_(update)
  } else if (name == "nadam") {
    add(3, 1); // exp_avg.lerp_(grad)
    add(6, 2); // exp_avg_sq.mul_().addcmul_(grad, grad)
    add(6, 3); // div, sqrt, add_
    add(8, 2); // param.addcdiv_(grad, denom), param.addcdiv_(exp_avg, denom)
  } else if (name == "adadelta") {
    add(6, 2); // square_avg.mul_().addcmul_(grad, grad)
    add(4, 2); // std = square_avg.add(eps).sqrt_()
    add(4, 2); // delta = acc_delta.add(eps).sqrt_()
    add(6, 2); // delta.div_(std).mul_(grad)
    add(6, 2); // acc_delta.mul_().addcmul_(delta, delta)
    add(3, 1); // param.add_(delta)
  } else if (name == "rprop") {
    add(5, 2); // sign = grad.mul(prev).sign()
    add(9, 6); // three masks of sign and their masked_fill_
    add(5, 2); // step_size.mul_(sign).clamp_()
    add(5, 3); // grad.clone(), masked_fill_(sign.eq(etaminus), 0)
    add(6, 2); // param.addcmul_(grad.sign(), step_size)
    add(2, 1); // prev.copy_(grad)
  } else if (name == "asgd") {
    add(2, 1); // param.mul_(1 - lambd * eta)
    add(3, 1); // param.add_(grad, alpha=-eta)
    add(2, 1); // ax.copy_(param) (until step t0 + 1, 1e6 by default)
  } else if (name == "adagrad") {
    add(4, 1); // state_sum.addcmul_(grad, grad)
    add(4, 2); // state_sum.sqrt().add_(eps)
    add(4, 1); // param.addcdiv_(grad, std)
  } else {
    add(3, 1); // exp_avg.lerp_(grad)
    add(6, 2); // exp_avg_sq.mul_().addcmul_(grad, grad)
    if (c->amsgrad)
      add(3, 1); // torch.maximum(max_exp_avg_sq, exp_avg_sq, out=...)
    add(6, 3);   // sqrt, div, add_
    add(4, 1);   // param.addcdiv_(exp_avg, denom)
  }
  return {traffic, kernels};
}

OpCost CostModel::atenCost(AtenOp aten) const {
  OpCost cost;
  if (isViewAtenOp(aten.getKernel())) {
    cost.isView = true;
    cost.seconds = spec.viewOverhead;
    return cost;
  }
  Operation *op = aten;
  cost.flops = static_cast<double>(countFlops(aten));
  for (Value v : op->getOperands())
    cost.bytes += valueBytes(v.getType());
  for (Value v : op->getResults())
    cost.bytes += valueBytes(v.getType());
  Type element;
  if (op->getNumOperands())
    element =
        cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
  else if (op->getNumResults())
    element =
        cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
  cost.precision = element
                       ? precisionOf(element, cost.flops > 0, options.allowTf32)
                       : Precision::fp32;
  double compute =
      cost.flops / (spec.peakFlops(cost.precision) * spec.computeEfficiency);
  double memory = cost.bytes / (spec.memoryBandwidth * spec.memoryEfficiency);
  cost.computeBound = cost.flops > 0 && compute >= memory;
  cost.seconds = rooflineTime(cost.flops, cost.bytes, cost.precision);
  return cost;
}

OpCost CostModel::opCost(Operation *op) const {
  OpCost cost;
  if (auto aten = dyn_cast<AtenOp>(op)) {
    cost = atenCost(aten);
    if (measured)
      if (std::optional<double> seconds = measured->lookup(op)) {
        cost.seconds = *seconds;
        cost.measured = true;
      }
    return cost;
  }
  if (auto region = dyn_cast<RecomputeOp>(op)) {
    // The body's kernels run one after another on the compute stream; the
    // region reports the precision and bound of its longest op.
    double longest = -1;
    for (Operation &inner : region.getBodyBlock().without_terminator()) {
      OpCost c = opCost(&inner);
      cost.seconds += c.seconds;
      cost.flops += c.flops;
      cost.bytes += c.bytes;
      if (c.seconds > longest) {
        longest = c.seconds;
        cost.precision = c.precision;
        cost.computeBound = c.computeBound;
      }
    }
    return cost;
  }
  if (auto update = dyn_cast<OptimizerUpdateOp>(op)) {
    auto [traffic, kernels] = optimizerTraffic(update.getOptimizer());
    cost.bytes = traffic * valueBytes(update.getParam().getType());
    cost.precision = precisionOf(
        cast<RankedTensorType>(update.getParam().getType()).getElementType(),
        false, false);
    cost.seconds = cost.bytes / (spec.memoryBandwidth * spec.memoryEfficiency) +
                   kernels * spec.opOverhead;
    if (measured)
      if (std::optional<double> seconds = measured->lookup(op)) {
        cost.seconds = *seconds;
        cost.measured = true;
      }
    return cost;
  }
  return cost;
}

CollectiveCost CostModel::collectiveCost(CollectiveKind kind, double bytes,
                                         const GroupPlacement &group) const {
  CollectiveCost cost;
  cost.kind = kind;
  cost.bytes = bytes;
  cost.placement = group;
  // A transfer crosses one link, between two ranks of the group: a node
  // boundary at worst, however many nodes the group spans.
  if (kind == CollectiveKind::sendRecv)
    cost.placement = {std::min<int64_t>(group.size, 2),
                      std::min<int64_t>(group.nodesSpanned, 2)};
  cost.interNode = cost.placement.nodesSpanned > 1;
  const LinkSpec &link = cost.interNode ? spec.interNode : spec.intraNode;
  double beta = link.bandwidth * spec.linkEfficiency;
  CollectiveAlgorithm algorithm = options.algorithm;
  bool hasTree =
      kind == CollectiveKind::allReduce || kind == CollectiveKind::broadcast;
  if (!hasTree)
    algorithm = CollectiveAlgorithm::ring;
  if (algorithm == CollectiveAlgorithm::autoSelect) {
    double ring = alphaBetaTime(kind, CollectiveAlgorithm::ring,
                                cost.placement.size, bytes, link.latency, beta);
    double tree = alphaBetaTime(kind, CollectiveAlgorithm::tree,
                                cost.placement.size, bytes, link.latency, beta);
    algorithm =
        tree < ring ? CollectiveAlgorithm::tree : CollectiveAlgorithm::ring;
  }
  cost.algorithm = algorithm;
  cost.seconds = alphaBetaTime(kind, algorithm, cost.placement.size, bytes,
                               link.latency, beta);
  return cost;
}

FailureOr<CollectiveCost>
CostModel::collectiveCost(Operation *start,
                          SymbolTableCollection &symbols) const {
  std::optional<CollectiveKind> kind = getCollectiveKind(start);
  if (!kind)
    return start->emitOpError("is not a collective start");
  auto meshRef = start->getAttrOfType<FlatSymbolRefAttr>("mesh");
  auto axes = start->getAttrOfType<ArrayAttr>("axes");
  MeshOp mesh = meshRef
                    ? symbols.lookupNearestSymbolFrom<MeshOp>(start, meshRef)
                    : MeshOp();
  if (!mesh || !axes)
    return start->emitOpError("names no mesh that resolves");
  SmallVector<unsigned> axisIndex;
  for (Attribute a : axes) {
    std::optional<unsigned> i =
        mesh.getAxisIndex(cast<StringAttr>(a).getValue());
    if (!i)
      return start->emitOpError("names unknown mesh axis ") << a;
    axisIndex.push_back(*i);
  }
  std::string error;
  std::optional<GroupPlacement> group =
      placeGroup(mesh.getShape(), axisIndex, options.topology, &error);
  if (!group)
    return start->emitOpError("cannot be placed: ")
           << error << " (mesh @" << mesh.getSymName() << ")";
  // The buffer the formulas take: the larger side of the collective (the
  // all-gather's output, the reduce-scatter's input; both sides are equal
  // for the others).
  double bytes = 0;
  for (Value v : start->getOperands())
    bytes = std::max(bytes, valueBytes(v.getType()));
  if (auto future = dyn_cast<FutureType>(start->getResult(0).getType()))
    bytes = std::max(bytes, valueBytes(future.getValueType()));
  return collectiveCost(*kind, bytes, *group);
}

/// Reads `config.opTimes` into `model`; fails (through `fail`) when the
/// file does not load or knows none of `scope`'s ATen ops.
template <typename Fail>
static LogicalResult loadOpTimes(CostModel &model,
                                 const CostModelConfig &config,
                                 Operation *scope, Fail fail) {
  llvm::Expected<std::shared_ptr<const MeasuredOpTimes>> times =
      MeasuredOpTimes::loadShared(config.opTimes);
  if (!times) {
    fail() << "op-times: " << llvm::toString(times.takeError());
    return failure();
  }
  int64_t atenOps = 0, known = 0;
  scope->walk([&](AtenOp aten) {
    ++atenOps;
    known += (*times)->lookup(aten).has_value();
  });
  if (atenOps > 0 && known == 0) {
    fail() << "op-times: none of the " << atenOps
           << " ATen ops here was traced in '" << config.opTimes
           << "' (same kernel signature); trace the step "
              "compiled with the same world size, batch and precision";
    return failure();
  }
  model.setMeasuredOpTimes(std::move(*times));
  return success();
}

FailureOr<CostModel> loom::buildCostModel(const CostModelConfig &config,
                                          Operation *scope,
                                          StringRef passName) {
  auto fail = [&]() {
    InFlightDiagnostic diag = mlir::emitError(scope->getLoc());
    diag << passName << ": ";
    return diag;
  };
  llvm::Expected<DeviceSpec> spec =
      DeviceSpec::load(config.device, config.deviceDir);
  if (!spec) {
    fail() << llvm::toString(spec.takeError());
    return failure();
  }
  CostModelOptions options;
  options.allowTf32 = config.tf32;
  std::optional<CollectiveAlgorithm> algorithm =
      parseCollectiveAlgorithm(config.algorithm);
  if (!algorithm) {
    fail() << "algorithm must be ring, tree or auto, got '" << config.algorithm
           << "'";
    return failure();
  }
  options.algorithm = *algorithm;
  int64_t perNode = config.devicesPerNode == 0 ? spec->devicesPerNode
                                               : config.devicesPerNode;
  if (config.nodes < 1 || perNode < 1) {
    fail() << "nodes and devices-per-node must be positive, got nodes="
           << config.nodes << " devices-per-node=" << perNode;
    return failure();
  }
  if (perNode > spec->devicesPerNode) {
    fail() << "devices-per-node=" << perNode << " but a node of '"
           << spec->name << "' has " << spec->devicesPerNode << " devices";
    return failure();
  }
  options.topology = {config.nodes, perNode};
  CostModel model(std::move(*spec), options);
  if (!config.opTimes.empty() &&
      failed(loadOpTimes(model, config, scope, fail)))
    return failure();
  return model;
}
