//===- OpClassification.cpp - What kind of operation a loom op is ---------===//

#include "loom/Dialect/Loom/IR/OpClassification.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>

using namespace mlir;
using namespace loom;

StringRef loom::stripAtenOverload(StringRef schemaName) {
  return schemaName.split('.').first;
}

std::optional<BatchNormForm> loom::getBatchNormForm(StringRef schemaName) {
  // (input, weight, bias, running_mean, running_var, training, momentum,
  // eps) and (input, weight, bias, training, momentum, eps).
  if (schemaName == "aten::_native_batch_norm_legit_functional.default")
    return BatchNormForm{5, 6, 7, 3u, 4u};
  if (schemaName == "aten::_native_batch_norm_legit.no_stats")
    return BatchNormForm{3, 4, 5, std::nullopt, std::nullopt};
  return std::nullopt;
}

bool loom::isRandomAtenOp(StringRef schemaName) {
  // Exact names, not substrings: `native_dropout_backward` replays a saved
  // mask and draws nothing. Functional variants (`uniform`,
  // `normal_functional`), which functionalized graphs hold, are listed next
  // to their in-place ones.
  return llvm::StringSwitch<bool>(stripAtenOverload(schemaName))
      .Cases({"aten::rand", "aten::rand_like", "aten::randn",
              "aten::randn_like", "aten::randint", "aten::randint_like",
              "aten::randperm", "aten::random", "aten::random_"},
             true)
      .Cases({"aten::bernoulli", "aten::bernoulli_", "aten::multinomial",
              "aten::poisson", "aten::binomial", "aten::_standard_gamma",
              "aten::_sample_dirichlet"},
             true)
      .Cases({"aten::native_dropout", "aten::_fused_dropout", "aten::dropout",
              "aten::dropout_", "aten::feature_dropout",
              "aten::feature_dropout_", "aten::alpha_dropout",
              "aten::alpha_dropout_", "aten::feature_alpha_dropout",
              "aten::feature_alpha_dropout_"},
             true)
      .Cases({"aten::normal", "aten::normal_", "aten::normal_functional",
              "aten::uniform", "aten::uniform_", "aten::exponential",
              "aten::exponential_", "aten::geometric", "aten::geometric_",
              "aten::cauchy", "aten::cauchy_", "aten::log_normal",
              "aten::log_normal_"},
             true)
      .Cases({"aten::rrelu", "aten::rrelu_", "aten::rrelu_with_noise",
              "aten::rrelu_with_noise_", "aten::rrelu_with_noise_functional"},
             true)
      .Default(false);
}

bool loom::isViewAtenOp(StringRef schemaName) {
  return llvm::StringSwitch<bool>(stripAtenOverload(schemaName))
      .Cases({"aten::view", "aten::_unsafe_view", "aten::permute", "aten::t",
              "aten::transpose", "aten::expand", "aten::alias"},
             true)
      .Cases({"aten::slice", "aten::select", "aten::unsqueeze", "aten::squeeze",
              "aten::detach", "aten::as_strided"},
             true)
      .Default(false);
}

/// Every result is a view of the first argument, whatever its layout.
static bool aliasesFirstArg(StringRef kernel) {
  if (isViewAtenOp(kernel))
    return true;
  return StringSwitch<bool>(stripAtenOverload(kernel))
      .Cases({"aten::split", "aten::split_with_sizes", "aten::chunk",
              "aten::unbind", "aten::narrow"},
             true)
      .Default(false);
}

namespace {
/// An ATen call at either level. `loomrt.aten` is found by name: this
/// library lies below the LoomRT dialect, whose op keeps the same `kernel`
/// and `args` attributes.
struct AtenCall {
  StringRef kernel;
  ArrayAttr args;
  DictionaryAttr kwargs;
};
} // namespace

static AtenCall getAtenCall(Operation *op) {
  if (!op)
    return {};
  if (auto aten = dyn_cast<AtenOp>(op))
    return {aten.getKernel(), aten.getArgs(), aten.getKwargs()};
  if (op->getName().getStringRef() != "loomrt.aten")
    return {};
  std::optional<Attribute> kernel = op->getInherentAttr("kernel");
  std::optional<Attribute> args = op->getInherentAttr("args");
  auto kernelAttr = kernel ? dyn_cast_or_null<StringAttr>(*kernel) : nullptr;
  if (!kernelAttr)
    return {};
  std::optional<Attribute> kwargs = op->getInherentAttr("kwargs");
  auto argsAttr = args ? dyn_cast_or_null<ArrayAttr>(*args) : nullptr;
  auto kwargsAttr =
      kwargs ? dyn_cast_or_null<DictionaryAttr>(*kwargs) : nullptr;
  return {kernelAttr.getValue(),
          argsAttr ? argsAttr : ArrayAttr::get(op->getContext(), {}),
          kwargsAttr ? kwargsAttr : DictionaryAttr::get(op->getContext())};
}

StringRef loom::getAtenKernel(Operation *op) {
  return getAtenCall(op).kernel;
}

/// The tensor operand the call's first argument refers to.
static Value getFirstTensorArg(Operation *op, ArrayAttr args) {
  if (!args || args.empty())
    return {};
  if (auto ref = dyn_cast<OperandRefAttr>(args[0]))
    return op->getOperand(ref.getIndex());
  return {};
}

namespace {
using Strides = SmallVector<int64_t>;
} // namespace

/// Row-major strides of `shape`: how ATen lays out a fresh result.
static Strides contiguousStrides(ArrayRef<int64_t> shape) {
  Strides strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * std::max<int64_t>(shape[d + 1], 1);
  return strides;
}

/// ATen's `is_contiguous`: dims of size 1 may have any stride.
static bool isContiguousLayout(ArrayRef<int64_t> shape,
                               ArrayRef<int64_t> strides) {
  if (llvm::is_contained(shape, 0))
    return true;
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1)
      continue;
    if (strides[d] != expected)
      return false;
    expected *= shape[d];
  }
  return true;
}

/// ATen's `is_non_overlapping_and_dense`: some order of the dims (the one
/// of their strides) is row-major.
static bool isDense(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides) {
  SmallVector<size_t> order;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1)
      order.push_back(d);
  llvm::stable_sort(
      order, [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (size_t d : order) {
    if (shape[d] == 0)
      return true;
    if (strides[d] != expected)
      return false;
    expected *= shape[d];
  }
  return true;
}

/// The strides `view(shape)` gives a tensor of `oldShape` laid out with
/// `oldStrides`, or none where view refuses (ATen's `computeStride`: each
/// run of dims contiguous in memory may be split and merged freely).
static std::optional<Strides> viewStrides(ArrayRef<int64_t> oldShape,
                                          ArrayRef<int64_t> oldStrides,
                                          ArrayRef<int64_t> shape) {
  if (oldShape.empty())
    return Strides(shape.size(), 1);
  if (llvm::is_contained(oldShape, 0))
    return contiguousStrides(shape);
  Strides strides(shape.size(), 1);
  int64_t viewDim = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunkBase = oldStrides.back();
  int64_t tensorNumel = 1, viewNumel = 1;
  for (int64_t d = static_cast<int64_t>(oldShape.size()) - 1; d >= 0; --d) {
    tensorNumel *= oldShape[d];
    bool chunkEnds = d == 0 || (oldShape[d - 1] != 1 &&
                                oldStrides[d - 1] != tensorNumel * chunkBase);
    if (!chunkEnds)
      continue;
    while (viewDim >= 0 && (viewNumel < tensorNumel || shape[viewDim] == 1)) {
      strides[viewDim] = viewNumel * chunkBase;
      viewNumel *= shape[viewDim];
      --viewDim;
    }
    if (viewNumel != tensorNumel)
      return std::nullopt;
    if (d > 0) {
      chunkBase = oldStrides[d - 1];
      tensorNumel = viewNumel = 1;
    }
  }
  if (viewDim != -1)
    return std::nullopt;
  return strides;
}

static std::optional<int64_t> intArg(ArrayAttr args, size_t i) {
  if (args.size() <= i)
    return std::nullopt;
  if (auto attr = dyn_cast<IntegerAttr>(args[i]))
    return attr.getInt();
  return std::nullopt;
}

/// `dim` of a tensor of rank `rank` (negative counts from the end), or none.
static std::optional<int64_t> wrapDim(std::optional<int64_t> dim,
                                      int64_t rank) {
  if (!dim)
    return std::nullopt;
  int64_t d = *dim < 0 ? *dim + rank : *dim;
  if (d < 0 || d >= rank)
    return std::nullopt;
  return d;
}

/// The strides of view op `def`'s result `v` of `shape` over `base`, laid out
/// with `baseStrides`: each view op's rule of ATen's, or none for one not
/// modelled (as_strided, diagonal, ...).
static std::optional<Strides> viewOpStrides(StringRef name, ArrayAttr args,
                                            ArrayRef<int64_t> baseShape,
                                            const Strides &baseStrides,
                                            ArrayRef<int64_t> shape) {
  int64_t rank = baseShape.size();
  if (llvm::is_contained({"aten::view", "aten::_unsafe_view", "aten::alias",
                          "aten::detach", "aten::unsqueeze", "aten::squeeze"},
                         name))
    return viewStrides(baseShape, baseStrides, shape);
  if (name == "aten::reshape") {
    if (auto strides = viewStrides(baseShape, baseStrides, shape))
      return strides;
    return contiguousStrides(shape);
  }
  if (name == "aten::t")
    return rank == 2 ? Strides{baseStrides[1], baseStrides[0]} : baseStrides;
  if (name == "aten::transpose") {
    std::optional<int64_t> a = wrapDim(intArg(args, 1), rank);
    std::optional<int64_t> b = wrapDim(intArg(args, 2), rank);
    if (!a || !b)
      return std::nullopt;
    Strides strides = baseStrides;
    std::swap(strides[*a], strides[*b]);
    return strides;
  }
  if (name == "aten::permute") {
    auto dims = args.size() > 1 ? dyn_cast<ArrayAttr>(args[1]) : nullptr;
    if (!dims || static_cast<int64_t>(dims.size()) != rank)
      return std::nullopt;
    Strides strides;
    for (Attribute dim : dims) {
      auto attr = dyn_cast<IntegerAttr>(dim);
      std::optional<int64_t> d =
          wrapDim(attr ? std::optional(attr.getInt()) : std::nullopt, rank);
      if (!d)
        return std::nullopt;
      strides.push_back(baseStrides[*d]);
    }
    return strides;
  }
  if (name == "aten::expand") {
    int64_t lead = static_cast<int64_t>(shape.size()) - rank;
    if (lead < 0)
      return std::nullopt;
    Strides strides(lead, 0);
    for (int64_t d = 0; d < rank; ++d)
      strides.push_back(
          baseShape[d] == 1 && shape[lead + d] != 1 ? 0 : baseStrides[d]);
    return strides;
  }
  if (name == "aten::slice") {
    std::optional<int64_t> d = wrapDim(intArg(args, 1).value_or(0), rank);
    if (!d)
      return std::nullopt;
    Strides strides = baseStrides;
    strides[*d] *= intArg(args, 4).value_or(1);
    return strides;
  }
  if (name == "aten::select" || name == "aten::unbind") {
    std::optional<int64_t> d = wrapDim(intArg(args, 1).value_or(0), rank);
    if (!d)
      return std::nullopt;
    Strides strides = baseStrides;
    strides.erase(strides.begin() + *d);
    return strides;
  }
  // Pieces along one dim keep the base's strides.
  if (llvm::is_contained({"aten::narrow", "aten::split",
                          "aten::split_with_sizes", "aten::chunk"},
                         name))
    return baseStrides;
  return std::nullopt;
}

static std::optional<Strides> stridesOf(Value v);

/// The strides of a copy (`_to_copy`, `clone`) of `base` into `shape`: its
/// memory format's; preserved (the default), a dense base's own strides, as
/// ATen's `empty_like` keeps them (FSDP's cast of a permuted gradient stays
/// permuted), else row-major.
static std::optional<Strides> copyStrides(Value base, DictionaryAttr kwargs,
                                          ArrayRef<int64_t> shape) {
  auto format = kwargs ? kwargs.getAs<StringAttr>("memory_format") : nullptr;
  if (format && format.getValue() == "torch.contiguous_format")
    return contiguousStrides(shape);
  if (format && format.getValue() != "torch.preserve_format")
    return std::nullopt;
  std::optional<Strides> strides = base ? stridesOf(base) : std::nullopt;
  if (strides && strides->size() == shape.size() && isDense(shape, *strides))
    return strides;
  return contiguousStrides(shape);
}

/// The strides the runtime holds `v` with, as far as they follow from the
/// IR: ATen's results are fresh row-major tensors but for copies, which
/// keep their input's layout, and each view op rearranges its base's
/// strides by ATen's rule. None where a view op is not modelled.
static std::optional<Strides> stridesOf(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type)
    return std::nullopt;
  Operation *def = v.getDefiningOp();
  auto [kernel, args, kwargs] = getAtenCall(def);
  StringRef name = stripAtenOverload(kernel);
  if (name == "aten::_to_copy" || name == "aten::clone")
    return copyStrides(getFirstTensorArg(def, args), kwargs, type.getShape());
  if (kernel.empty() || (name != "aten::reshape" && !aliasesFirstArg(kernel)))
    return contiguousStrides(type.getShape());
  Value base = getFirstTensorArg(def, args);
  auto baseType = base ? dyn_cast<RankedTensorType>(base.getType()) : nullptr;
  if (!baseType)
    return std::nullopt;
  std::optional<Strides> baseStrides = stridesOf(base);
  if (!baseStrides)
    return std::nullopt;
  std::optional<Strides> strides = viewOpStrides(
      name, args, baseType.getShape(), *baseStrides, type.getShape());
  if (!strides || strides->size() != static_cast<size_t>(type.getRank()))
    return std::nullopt;
  return strides;
}

/// Whether the runtime holds `v` as a contiguous tensor (a transpose of a
/// transpose is; a permuted einsum gradient is not).
static bool isContiguous(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  std::optional<Strides> strides = stridesOf(v);
  return type && strides && isContiguousLayout(type.getShape(), *strides);
}

Value loom::getAliasedOperand(Operation *op) {
  auto [kernel, args, kwargs] = getAtenCall(op);
  if (kernel.empty())
    return {};
  Value base = getFirstTensorArg(op, args);
  if (aliasesFirstArg(kernel))
    return base;
  if (stripAtenOverload(kernel) == "aten::reshape" && base &&
      isContiguous(base))
    return base;
  return {};
}

bool loom::isFloat32StatisticResult(StringRef schemaName, unsigned index) {
  StringRef name = stripAtenOverload(schemaName);
  return index == 1 &&
         llvm::is_contained({"aten::_scaled_dot_product_flash_attention",
                             "aten::_scaled_dot_product_flash_attention_for_cpu",
                             "aten::_scaled_dot_product_efficient_attention",
                             "aten::_scaled_dot_product_cudnn_attention",
                             "aten::_flash_attention_forward",
                             "aten::_efficient_attention_forward",
                             "aten::_fused_rms_norm"},
                            name);
}

bool loom::isInPlaceAtenOp(StringRef schemaName) {
  StringRef name = stripAtenOverload(schemaName);
  size_t colons = name.find("::");
  if (colons != StringRef::npos)
    name = name.drop_front(colons + 2);
  if (name.starts_with("__") && name.ends_with("__"))
    return name.size() > 5 && name[2] == 'i';
  return name.size() > 1 && name.ends_with("_") && !name.ends_with("__");
}

bool loom::isRandomAtenOp(Operation *op) {
  auto aten = dyn_cast<AtenOp>(op);
  return aten && isRandomAtenOp(aten.getKernel());
}

bool loom::isViewAtenOp(Operation *op) {
  auto aten = dyn_cast<AtenOp>(op);
  return aten && isViewAtenOp(aten.getKernel());
}

bool loom::isInPlaceAtenOp(Operation *op) {
  auto aten = dyn_cast<AtenOp>(op);
  return aten && isInPlaceAtenOp(aten.getKernel());
}

StringRef loom::stringifyCollectiveKind(CollectiveKind k) {
  switch (k) {
  case CollectiveKind::allGather:
    return "all_gather";
  case CollectiveKind::reduceScatter:
    return "reduce_scatter";
  case CollectiveKind::allReduce:
    return "all_reduce";
  case CollectiveKind::broadcast:
    return "broadcast";
  case CollectiveKind::sendRecv:
    return "send_recv";
  }
  llvm_unreachable("unknown collective kind");
}

std::optional<CollectiveKind> loom::getCollectiveKind(Operation *op) {
  if (isa<AllGatherStartOp>(op))
    return CollectiveKind::allGather;
  if (isa<ReduceScatterStartOp>(op))
    return CollectiveKind::reduceScatter;
  if (isa<AllReduceStartOp>(op))
    return CollectiveKind::allReduce;
  if (isa<BroadcastStartOp>(op))
    return CollectiveKind::broadcast;
  if (isa<SendStartOp, RecvStartOp>(op))
    return CollectiveKind::sendRecv;
  return std::nullopt;
}

bool loom::isGroupCollective(CollectiveKind k) {
  return k != CollectiveKind::sendRecv;
}

bool loom::isInModule(StringRef path, StringRef prefix) {
  if (prefix.empty())
    return true;
  return path == prefix ||
         (path.starts_with(prefix) && path[prefix.size()] == '.');
}

StringRef loom::getCommonModule(ArrayRef<StringRef> paths) {
  if (paths.empty())
    return {};
  StringRef common = paths.front();
  for (StringRef path : paths.drop_front()) {
    while (!isInModule(path, common)) {
      size_t dot = common.rfind('.');
      common = dot == StringRef::npos ? StringRef() : common.take_front(dot);
    }
  }
  return common;
}

StringRef loom::getOwnerModule(StringRef qualifiedName) {
  size_t dot = qualifiedName.rfind('.');
  return dot == StringRef::npos ? StringRef() : qualifiedName.take_front(dot);
}

SmallVector<std::string>
loom::getRepeatedBlocks(ArrayRef<StringRef> qualifiedNames,
                        unsigned minBlocks) {
  // (container, its blocks), in order of first appearance.
  SmallVector<std::pair<std::string, SmallVector<std::string>>> containers;
  llvm::StringSet<> seen;
  for (StringRef name : qualifiedNames) {
    SmallVector<StringRef> parts;
    name.split(parts, '.');
    // The outermost numbered component: `layers.0.experts.3.w` is a block
    // of `layers`, not of `layers.0.experts`.
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      unsigned index;
      if (parts[i].getAsInteger(10, index))
        continue;
      std::string block = llvm::join(ArrayRef(parts).take_front(i + 1), ".");
      if (seen.insert(block).second) {
        std::string container = llvm::join(ArrayRef(parts).take_front(i), ".");
        auto *known = llvm::find_if(
            containers, [&](const auto &c) { return c.first == container; });
        if (known == containers.end()) {
          containers.push_back({container, {}});
          known = std::prev(containers.end());
        }
        known->second.push_back(block);
      }
      break;
    }
  }
  size_t most = minBlocks;
  for (auto &[container, itsBlocks] : containers)
    most = std::max(most, itsBlocks.size());
  // Containers tied at the most are all repeated blocks: an encoder's and a
  // decoder's `layers.N` of the same depth are both sharded per block.
  SmallVector<std::string> blocks;
  for (auto &[container, itsBlocks] : containers)
    if (itsBlocks.size() == most)
      llvm::append_range(blocks, itsBlocks);
  return blocks;
}

SmallVector<std::string>
loom::getLayerBlocks(ArrayRef<StringRef> qualifiedNames) {
  return getRepeatedBlocks(qualifiedNames);
}
