//===- OpClassification.cpp - What kind of operation a loom op is ---------===//

#include "loom/Dialect/Loom/IR/OpClassification.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace loom;

StringRef loom::stripAtenOverload(StringRef schemaName) {
  return schemaName.split('.').first;
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
};
} // namespace

static AtenCall getAtenCall(Operation *op) {
  if (!op)
    return {};
  if (auto aten = dyn_cast<AtenOp>(op))
    return {aten.getKernel(), aten.getArgs()};
  if (op->getName().getStringRef() != "loomrt.aten")
    return {};
  std::optional<Attribute> kernel = op->getInherentAttr("kernel");
  std::optional<Attribute> args = op->getInherentAttr("args");
  auto kernelAttr = kernel ? dyn_cast_or_null<StringAttr>(*kernel) : nullptr;
  if (!kernelAttr)
    return {};
  auto argsAttr = args ? dyn_cast_or_null<ArrayAttr>(*args) : nullptr;
  return {kernelAttr.getValue(),
          argsAttr ? argsAttr : ArrayAttr::get(op->getContext(), {})};
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

/// Whether the runtime holds `v` as a contiguous tensor. ATen's results are;
/// a view is when its base is and it keeps the layout (a piece along `dim`
/// of a base whose dims before `dim` are all 1, e.g. FSDP's [1, shard] on one
/// rank); transposes, expands and strided pieces are not.
static bool isContiguous(Value v) {
  Operation *def = v.getDefiningOp();
  auto [kernel, args] = getAtenCall(def);
  if (!def || kernel.empty())
    return true;
  StringRef name = stripAtenOverload(kernel);
  if (name == "aten::reshape" || !aliasesFirstArg(kernel))
    return true;
  Value base = getFirstTensorArg(def, args);
  auto baseType = base ? dyn_cast<RankedTensorType>(base.getType()) : nullptr;
  if (!baseType)
    return false;
  if (llvm::is_contained({"aten::view", "aten::_unsafe_view", "aten::alias",
                          "aten::detach", "aten::unsqueeze", "aten::squeeze"},
                         name))
    return isContiguous(base);
  // Which argument gives the dim the piece is cut along (0 if omitted).
  std::optional<size_t> dimArg =
      StringSwitch<std::optional<size_t>>(name)
          .Cases({"aten::split", "aten::split_with_sizes", "aten::chunk"}, 2)
          .Cases(
              {"aten::narrow", "aten::select", "aten::slice", "aten::unbind"},
              1)
          .Default(std::nullopt);
  if (!dimArg)
    return false;
  if (name == "aten::slice" && args.size() > 4) {
    auto step = dyn_cast<IntegerAttr>(args[4]);
    if (!step || step.getInt() != 1)
      return false;
  }
  int64_t dim = 0;
  if (args.size() > *dimArg) {
    auto attr = dyn_cast<IntegerAttr>(args[*dimArg]);
    if (!attr)
      return false;
    dim = attr.getInt();
  } else if (name == "aten::narrow" || name == "aten::select") {
    return false;
  }
  int64_t rank = baseType.getRank();
  if (dim < 0)
    dim += rank;
  if (dim < 0 || dim >= rank)
    return false;
  for (int64_t d = 0; d < dim; ++d)
    if (baseType.getDimSize(d) != 1)
      return false;
  return isContiguous(base);
}

Value loom::getAliasedOperand(Operation *op) {
  auto [kernel, args] = getAtenCall(op);
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
