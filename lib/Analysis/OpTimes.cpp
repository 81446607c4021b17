//===- OpTimes.cpp - Measured op times from a loom-run trace --------------===//

#include "loom/Analysis/OpTimes.h"

#include "loom/Analysis/CostModel.h"
#include "loom/Analysis/PeakMemory.h"
#include "loomrt/KernelSignature.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

using namespace mlir;
using namespace loom;

static llvm::Error traceError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

namespace {
/// One ATen instruction's duration, in microseconds, in step `step`.
struct Sample {
  std::string signature;
  int64_t step;
  double us;
};
} // namespace

/// The ATen instruction of event `e` (`where` names it), or nullopt for
/// every other event. An event that says it is an ATen instruction with a
/// `signature` must have a step and a duration.
static llvm::Expected<std::optional<Sample>>
readSample(const llvm::json::Value &e, const llvm::Twine &where) {
  const llvm::json::Object *event = e.getAsObject();
  if (!event || event->getString("ph") != "X")
    return std::nullopt;
  const llvm::json::Object *args = event->getObject("args");
  if (!args || !args->get("signature"))
    return std::nullopt;
  std::optional<StringRef> op = args->getString("op");
  if (op != "aten" && op != "optimizer")
    return std::nullopt;
  std::optional<StringRef> signature = args->getString("signature");
  std::optional<int64_t> step = args->getInteger("step");
  std::optional<double> dur = event->getNumber("dur");
  if (!signature)
    return traceError(where + ".args.signature: expected a string");
  if (!step)
    return traceError(where + ".args.step: expected an integer");
  if (!dur || !std::isfinite(*dur) || *dur < 0)
    return traceError(where + ".dur: expected a non-negative number");
  return Sample{signature->str(), *step, *dur};
}

static double median(std::vector<double> &values) {
  size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double upper = values[mid];
  if (values.size() % 2)
    return upper;
  double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

llvm::Expected<MeasuredOpTimes> MeasuredOpTimes::parse(StringRef json,
                                                       StringRef fileName) {
  llvm::Expected<llvm::json::Value> parsed = parseJsonText(json, fileName);
  if (!parsed)
    return parsed.takeError();
  // Chrome's two forms: {"traceEvents": [...]} or a bare array.
  const llvm::json::Array *events = parsed->getAsArray();
  std::string prefix = (fileName + ": ").str();
  if (const llvm::json::Object *root = parsed->getAsObject()) {
    events = root->getArray("traceEvents");
    prefix += "traceEvents";
  }
  if (!events)
    return traceError(fileName + ": expected a Chrome trace (an object with a "
                                 "'traceEvents' array, or an array of events)");

  std::vector<Sample> samples;
  int64_t firstStep = std::numeric_limits<int64_t>::max();
  int64_t lastStep = std::numeric_limits<int64_t>::min();
  for (auto [i, e] : llvm::enumerate(*events)) {
    auto sample = readSample(e, llvm::formatv("{0}[{1}]", prefix, i).str());
    if (!sample)
      return sample.takeError();
    if (!*sample)
      continue;
    firstStep = std::min(firstStep, (*sample)->step);
    lastStep = std::max(lastStep, (*sample)->step);
    samples.push_back(std::move(**sample));
  }
  if (samples.empty())
    return traceError(fileName +
                      ": no ATen instruction in the trace records its "
                      "'signature'; write it with `loom-run --trace` from an "
                      "artifact this Loom compiled");

  // The first step allocates and warms the caches; later steps are the
  // steady state the plan runs in.
  llvm::StringMap<std::vector<double>> bySignature;
  for (Sample &s : samples)
    if (s.step != firstStep || firstStep == lastStep)
      bySignature[s.signature].push_back(s.us);
  MeasuredOpTimes times;
  times.path = fileName.str();
  for (auto &entry : bySignature)
    times.seconds[entry.getKey()] = median(entry.getValue()) * 1e-6;
  return times;
}

llvm::Expected<MeasuredOpTimes> MeasuredOpTimes::load(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return traceError("cannot read op times '" + path +
                      "': " + buffer.getError().message());
  return parse((*buffer)->getBuffer(), path);
}

llvm::Expected<std::shared_ptr<const MeasuredOpTimes>>
MeasuredOpTimes::loadShared(StringRef path) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return traceError("cannot read op times '" + path + "': " + ec.message());
  using Key = std::pair<uint64_t, int64_t>;
  Key key{status.getSize(),
          status.getLastModificationTime().time_since_epoch().count()};
  static std::mutex mutex;
  static llvm::StringMap<std::pair<Key, std::shared_ptr<const MeasuredOpTimes>>>
      cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(path);
  if (it != cache.end() && it->second.first == key)
    return it->second.second;
  llvm::Expected<MeasuredOpTimes> times = load(path);
  if (!times)
    return times.takeError();
  auto shared = std::make_shared<const MeasuredOpTimes>(std::move(*times));
  cache[path] = {key, shared};
  return shared;
}

/// The signature loom-run's trace gives an optimizer update
/// (loomrt/KernelSignature.h, optimizerSignature), or "".
static std::string getOptimizerSignature(const OptimizerUpdate &update) {
  auto param = dyn_cast<RankedTensorType>(update.param.getType());
  StringRef dtype = param ? rt::getDtypeName(param.getElementType()) : "";
  if (dtype.empty())
    return "";
  const OptimizerConfig &config = update.config;
  return loomrt::optimizerSignature(
      config.name.str(), update.fused, config.maximize, config.weightDecay != 0,
      config.momentum != 0, config.nesterov, config.amsgrad, config.centered,
      config.decoupledWeightDecay,
      loomrt::spellSignatureTensor(dtype.str(), param.getShape()));
}

std::optional<double> MeasuredOpTimes::lookup(Operation *op) const {
  std::optional<OptimizerUpdate> update = getOptimizerUpdate(op);
  std::string signature =
      update ? getOptimizerSignature(*update) : getKernelSignature(op);
  if (signature.empty())
    return std::nullopt;
  auto it = seconds.find(signature);
  if (it == seconds.end())
    return std::nullopt;
  return it->second;
}
