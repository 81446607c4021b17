//===- OptionEnums.h - Enumerated pass and pipeline options -----*- C++ -*-===//
//
// The enumerated options of Loom's passes, declared once: the enum, its
// spellings on the command line and in pass pipelines (one `cl::values` list
// each, used by Passes.td and by the compile options alike), and the defaults
// that depend on them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_OPTIONENUMS_H
#define LOOM_TRANSFORMS_OPTIONENUMS_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"

#include "loomrt/ArtifactSchema.h"

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <utility>

namespace loom {

/// The parser of an enumerated option: `llvm::cl::parser`'s, except that a
/// value it does not know is an error that lists the ones it does. It is
/// what `llvm::cl::parser<E>` is for each enum below, so loom-compile's
/// `cl::opt`s and the passes' options (Passes.td) both use it.
template <typename E>
class EnumOptionParser : public llvm::cl::generic_parser_base {
protected:
  class OptionInfo : public generic_parser_base::GenericOptionInfo {
  public:
    OptionInfo(llvm::StringRef name, E v, llvm::StringRef help)
        : GenericOptionInfo(name, help), V(v) {}
    llvm::cl::OptionValue<E> V;
  };
  llvm::SmallVector<OptionInfo, 4> Values;

public:
  using parser_data_type = E;
  EnumOptionParser(llvm::cl::Option &owner) : generic_parser_base(owner) {}

  unsigned getNumOptions() const override { return Values.size(); }
  llvm::StringRef getOption(unsigned n) const override {
    return Values[n].Name;
  }
  llvm::StringRef getDescription(unsigned n) const override {
    return Values[n].HelpStr;
  }
  const llvm::cl::GenericOptionValue &
  getOptionValue(unsigned n) const override {
    return Values[n].V;
  }

  /// Returns true on error, as llvm::cl parsers do.
  bool parse(llvm::cl::Option &option, llvm::StringRef argName,
             llvm::StringRef arg, E &value) {
    llvm::StringRef given = Owner.hasArgStr() ? arg : argName;
    std::string known;
    for (const OptionInfo &info : Values) {
      if (info.Name == given) {
        value = info.V.getValue();
        return false;
      }
      known += (known.empty() ? "" : ", ") + info.Name.str();
    }
    return option.error("'" + given + "' is not one of " + known);
  }

  template <typename T>
  void addLiteralOption(llvm::StringRef name, const T &v,
                        llvm::StringRef help) {
    Values.push_back(OptionInfo(name, static_cast<E>(v), help));
    llvm::cl::AddLiteralOption(Owner, name);
  }
  void removeLiteralOption(llvm::StringRef name) {
    Values.erase(Values.begin() + findOption(name));
  }
};

/// The algorithms loom-attach-optimizer applies, declared once, as one
/// `X(KIND, SCHEMA_ID, TORCH_CLASS)` each: OptimizerKind::KIND is
/// torch.optim.TORCH_CLASS, spelled in flags, run configurations,
/// attributes and artifacts as the artifact's optimizer name
/// loomrt::schema::kOptimizerName<SCHEMA_ID> (ArtifactSchema.def declares
/// the spellings; the runtime reads them). The enum, its command-line values
/// and kOptimizers (stringifyOptimizerKind, parseOptimizerKind,
/// getOptimizerClassName) are generated from it.
#define LOOM_OPTIMIZER_LIST(X)                                                 \
  X(SGD, Sgd, "SGD")                                                           \
  X(Adam, Adam, "Adam")                                                        \
  X(AdamW, Adamw, "AdamW")                                                     \
  X(RMSprop, Rmsprop, "RMSprop")                                               \
  X(Adagrad, Adagrad, "Adagrad")                                               \
  X(Adadelta, Adadelta, "Adadelta")                                            \
  X(Adamax, Adamax, "Adamax")                                                  \
  X(RAdam, Radam, "RAdam")                                                     \
  X(NAdam, Nadam, "NAdam")                                                     \
  X(Rprop, Rprop, "Rprop")                                                     \
  X(ASGD, Asgd, "ASGD")

/// The optimizer a step applies (`loom-attach-optimizer`); `none` leaves the
/// step returning its gradients.
enum class OptimizerKind {
  None,
#define LOOM_OPTIMIZER_ENUMERATOR(KIND, SCHEMA_ID, TORCH_CLASS) KIND,
  LOOM_OPTIMIZER_LIST(LOOM_OPTIMIZER_ENUMERATOR)
#undef LOOM_OPTIMIZER_ENUMERATOR
};

#define LOOM_OPTIMIZER_CL_VALUE(KIND, SCHEMA_ID, TORCH_CLASS)                  \
  , clEnumValN(::loom::OptimizerKind::KIND,                                    \
               ::loomrt::schema::kOptimizerName##SCHEMA_ID,                    \
               "torch.optim." TORCH_CLASS)
#define LOOM_OPTIMIZER_KIND_VALUES                                             \
  ::llvm::cl::values(                                                          \
      clEnumValN(::loom::OptimizerKind::None, "none",                          \
                 "no optimizer: the step returns its gradients")               \
          LOOM_OPTIMIZER_LIST(LOOM_OPTIMIZER_CL_VALUE))

/// How the runtime computes an optimizer's update (`loom-attach-optimizer`):
/// torch.optim's single-tensor loop op for op (its default on CPU), or the
/// fused kernel a user selects with `fused=True`. Their results differ in
/// rounding, so each is bitwise equal only to its own PyTorch counterpart.
enum class OptimizerImpl { Forloop, Fused };

#define LOOM_OPTIMIZER_IMPL_VALUES                                             \
  ::llvm::cl::values(                                                          \
      clEnumValN(::loom::OptimizerImpl::Forloop, "forloop",                    \
                 "torch.optim's single-tensor algorithm (foreach=False)"),     \
      clEnumValN(::loom::OptimizerImpl::Fused, "fused",                        \
                 "ATen's fused kernel, as torch.optim's fused=True"))

/// The device a compiled step runs on (`loom-lower-to-rt`): the artifact
/// records it and `loom-run --device` may override it. It also picks the
/// cost model's default device spec (cpu, or h100 for cuda).
enum class TargetDevice { Cpu, Cuda };

#define LOOM_TARGET_DEVICE_VALUES                                              \
  ::llvm::cl::values(                                                          \
      clEnumValN(::loom::TargetDevice::Cpu, "cpu",                             \
                 "ATen on the CPU with Gloo collectives"),                     \
      clEnumValN(::loom::TargetDevice::Cuda, "cuda",                           \
                 "ATen on CUDA devices with NCCL collectives"))

/// What follows the warm-up of a learning-rate schedule
/// (`loom-attach-optimizer`): each is the torch.optim.lr_scheduler class a
/// user chains after LinearLR with SequentialLR.
enum class LrDecay {
  Constant,
  Cosine,
  Linear,
  Step,
  Exponential,
  MultiStep,
  Polynomial,
  CosineRestarts
};

#define LOOM_LR_DECAY_VALUES                                                   \
  ::llvm::cl::values(                                                          \
      clEnumValN(::loom::LrDecay::Constant, "constant",                        \
                 "keep the learning rate (no scheduler after the warm-up)"),   \
      clEnumValN(::loom::LrDecay::Cosine, "cosine",                            \
                 "CosineAnnealingLR(T_max=lr-decay-steps, "                    \
                 "eta_min=lr-eta-min)"),                                       \
      clEnumValN(::loom::LrDecay::Linear, "linear",                            \
                 "LinearLR(1, lr-end-factor, total_iters=lr-decay-steps)"),    \
      clEnumValN(::loom::LrDecay::Step, "step",                                \
                 "StepLR(step_size=lr-decay-steps, gamma=lr-gamma)"),          \
      clEnumValN(::loom::LrDecay::Exponential, "exponential",                  \
                 "ExponentialLR(gamma=lr-gamma)"),                             \
      clEnumValN(::loom::LrDecay::MultiStep, "multistep",                      \
                 "MultiStepLR(milestones=lr-milestones, gamma=lr-gamma)"),     \
      clEnumValN(::loom::LrDecay::Polynomial, "polynomial",                    \
                 "PolynomialLR(total_iters=lr-decay-steps, power=lr-power)"),  \
      clEnumValN(::loom::LrDecay::CosineRestarts, "cosine-restarts",           \
                 "CosineAnnealingWarmRestarts(T_0=lr-decay-steps, "            \
                 "T_mult=lr-t-mult, eta_min=lr-eta-min)"))

/// How backward prefetches FSDP all-gathers (`loom-prefetch`).
enum class BackwardPrefetch { Bounded, Pre, Post, None };

#define LOOM_BACKWARD_PREFETCH_VALUES                                          \
  ::llvm::cl::values(                                                          \
      clEnumValN(::loom::BackwardPrefetch::Bounded, "bounded",                 \
                 "pre's order, each all-gather issued as early as it can "     \
                 "be without raising the step's predicted peak (default)"),    \
      clEnumValN(::loom::BackwardPrefetch::Pre, "pre",                         \
                 "before the current unit's gradients (FSDP2's default, "      \
                 "FSDP1 BACKWARD_PRE)"),                                       \
      clEnumValN(::loom::BackwardPrefetch::Post, "post",                       \
                 "after the current unit's gradients (FSDP1 BACKWARD_POST)"),  \
      clEnumValN(::loom::BackwardPrefetch::None, "none", "no prefetch"))

/// The data parallelism a compiled step uses (loom-compile --dp).
enum class DataParallel { None, Replicate, Fsdp };

#define LOOM_DATA_PARALLEL_VALUES                                              \
  ::llvm::cl::values(                                                          \
      clEnumValN(::loom::DataParallel::None, "none", "a single-rank step"),    \
      clEnumValN(::loom::DataParallel::Replicate, "replicate",                 \
                 "DDP: all-reduce the gradients in buckets"),                  \
      clEnumValN(::loom::DataParallel::Fsdp, "fsdp",                           \
                 "FSDP2: shard parameters, all-gather per unit, "              \
                 "reduce-scatter gradients (HSDP with replicate-size)"))

/// How `loom-replicate` groups gradients into all-reduces: DDP's
/// size-capped buckets, or FSDP2-based `replicate`'s one all-reduce per
/// parameter group (a unit, as loom-fsdp forms them).
enum class ReplicateGrouping { Buckets, Units };

#define LOOM_REPLICATE_GROUPING_VALUES                                         \
  ::llvm::cl::values(                                                          \
      clEnumValN(::loom::ReplicateGrouping::Buckets, "buckets",                \
                 "DDP: gradients in size-capped buckets (bucket-cap-mb)"),     \
      clEnumValN(::loom::ReplicateGrouping::Units, "units",                    \
                 "FSDP2's replicate: one all-reduce per unit (units, or the "  \
                 "model's repeated blocks, plus the root)"))

/// The DDP communication hook `loom-replicate` reduces each bucket with:
/// DDP's own all-reduce (average), or PyTorch's `fp16_compress_hook` /
/// `bf16_compress_hook` (cast the bucket to 16 bits, divide by the world
/// size, sum, cast back).
enum class CommHook { Allreduce, Fp16Compress, Bf16Compress };

#define LOOM_COMM_HOOK_VALUES                                                  \
  ::llvm::cl::values(                                                          \
      clEnumValN(::loom::CommHook::Allreduce, "allreduce",                     \
                 "DDP's default: average the bucket in its own dtype"),        \
      clEnumValN(::loom::CommHook::Fp16Compress, "fp16-compress",              \
                 "fp16_compress_hook: the bucket crosses in float16"),         \
      clEnumValN(::loom::CommHook::Bf16Compress, "bf16-compress",              \
                 "bf16_compress_hook: the bucket crosses in bfloat16"))

/// What `loom-remat` recomputes in backward instead of saving.
enum class RematMode { None, Full, Selective, Captured };

#define LOOM_REMAT_MODE_VALUES                                                 \
  ::llvm::cl::values(                                                          \
      clEnumValN(::loom::RematMode::None, "none", "no recompute"),             \
      clEnumValN(::loom::RematMode::Full, "full",                              \
                 "full activation checkpointing of every block "               \
                 "(checkpoint_wrapper)"),                                      \
      clEnumValN(::loom::RematMode::Selective, "selective",                    \
                 "save matmul, attention and convolution outputs, "            \
                 "recompute the rest of every block (torchtitan's op SAC)"),   \
      clEnumValN(::loom::RematMode::Captured, "captured",                      \
                 "the torch.utils.checkpoint regions and policies capture "    \
                 "recorded"))

/// One algorithm of LOOM_OPTIMIZER_LIST: its spelling and torch.optim class.
struct OptimizerSpelling {
  OptimizerKind kind;
  const char *name;
  const char *torchClass;
};

/// Every algorithm (not None), in OptimizerKind's order.
inline constexpr OptimizerSpelling kOptimizers[] = {
#define LOOM_OPTIMIZER_SPELLING(KIND, SCHEMA_ID, TORCH_CLASS)                  \
  {OptimizerKind::KIND, ::loomrt::schema::kOptimizerName##SCHEMA_ID,           \
   TORCH_CLASS},
    LOOM_OPTIMIZER_LIST(LOOM_OPTIMIZER_SPELLING)
#undef LOOM_OPTIMIZER_SPELLING
};

/// kOptimizers[i] is OptimizerKind(i + 1): both are LOOM_OPTIMIZER_LIST's
/// order.
constexpr bool isOptimizerTableInKindOrder() {
  for (size_t i = 0; i < std::size(kOptimizers); ++i)
    if (kOptimizers[i].kind != static_cast<OptimizerKind>(i + 1))
      return false;
  return true;
}
static_assert(isOptimizerTableInKindOrder());

/// The spelling of `kind` in options and diagnostics ("adamw").
inline llvm::StringRef stringifyOptimizerKind(OptimizerKind kind) {
  return kind == OptimizerKind::None
             ? "none"
             : kOptimizers[static_cast<size_t>(kind) - 1].name;
}

/// The torch.optim class of `kind` ("AdamW"); "" for None.
inline llvm::StringRef getOptimizerClassName(OptimizerKind kind) {
  return kind == OptimizerKind::None
             ? ""
             : kOptimizers[static_cast<size_t>(kind) - 1].torchClass;
}

/// The algorithm (not None) `name` spells, as stringifyOptimizerKind.
inline std::optional<OptimizerKind> parseOptimizerKind(llvm::StringRef name) {
  for (const OptimizerSpelling &optimizer : kOptimizers)
    if (name == optimizer.name)
      return optimizer.kind;
  return std::nullopt;
}

/// The spelling `nameOf` gives each of `table`'s entries, quoted, for a
/// message: `"a", "b" or "c"`.
template <typename Entry, size_t N, typename NameOf>
std::string listSpellings(const Entry (&table)[N], NameOf nameOf) {
  std::string text;
  for (size_t i = 0; i < N; ++i) {
    if (i)
      text += i + 1 == N ? " or " : ", ";
    text += std::string("\"") + nameOf(table[i]) + "\"";
  }
  return text;
}

/// Every algorithm's spelling, quoted, for a message: `"sgd", "adam", ...
/// or "nadam"`.
inline std::string listOptimizerNames() {
  return listSpellings(kOptimizers,
                       [](const OptimizerSpelling &o) { return o.name; });
}

/// Whether algorithm `kind` takes the loom-attach-optimizer option `option`
/// ("momentum", "amsgrad", "adagrad-lr-decay", ...), as its torch.optim
/// class takes the hyperparameter; lr and maximize every one, weight-decay
/// all but Rprop.
bool optimizerTakes(OptimizerKind kind, llvm::StringRef option);

/// The spelling of `impl` in options and attributes ("fused").
llvm::StringRef stringifyOptimizerImpl(OptimizerImpl impl);

/// Every decay with its spelling in options, run configurations, attributes
/// and artifacts (ArtifactSchema.def's LrDecay names; the runtime reads them).
inline constexpr std::pair<LrDecay, const char *> kLrDecays[] = {
    {LrDecay::Constant, ::loomrt::schema::kLrDecayConstant},
    {LrDecay::Cosine, ::loomrt::schema::kLrDecayCosine},
    {LrDecay::Linear, ::loomrt::schema::kLrDecayLinear},
    {LrDecay::Step, ::loomrt::schema::kLrDecayStep},
    {LrDecay::Exponential, ::loomrt::schema::kLrDecayExponential},
    {LrDecay::MultiStep, ::loomrt::schema::kLrDecayMultiStep},
    {LrDecay::Polynomial, ::loomrt::schema::kLrDecayPolynomial},
    {LrDecay::CosineRestarts, ::loomrt::schema::kLrDecayCosineRestarts},
};

/// The spelling of `decay` ("cosine").
inline llvm::StringRef stringifyLrDecay(LrDecay decay) {
  for (auto [kind, name] : kLrDecays)
    if (kind == decay)
      return name;
  llvm_unreachable("unknown lr decay");
}

/// Every decay's spelling, quoted, for a message: `"constant", ... or
/// "exponential"`.
inline std::string listLrDecays() {
  return listSpellings(kLrDecays, [](const auto &d) { return d.second; });
}

/// The decay `name` spells, as stringifyLrDecay.
inline std::optional<LrDecay> parseLrDecay(llvm::StringRef name) {
  for (auto [kind, spelling] : kLrDecays)
    if (name == spelling)
      return kind;
  return std::nullopt;
}

} // namespace loom

namespace llvm::cl {
template <>
class parser<loom::OptimizerKind>
    : public loom::EnumOptionParser<loom::OptimizerKind> {
public:
  using EnumOptionParser::EnumOptionParser;
};
template <>
class parser<loom::OptimizerImpl>
    : public loom::EnumOptionParser<loom::OptimizerImpl> {
public:
  using EnumOptionParser::EnumOptionParser;
};
template <>
class parser<loom::LrDecay> : public loom::EnumOptionParser<loom::LrDecay> {
public:
  using EnumOptionParser::EnumOptionParser;
};
template <>
class parser<loom::BackwardPrefetch>
    : public loom::EnumOptionParser<loom::BackwardPrefetch> {
public:
  using EnumOptionParser::EnumOptionParser;
};
template <>
class parser<loom::DataParallel>
    : public loom::EnumOptionParser<loom::DataParallel> {
public:
  using EnumOptionParser::EnumOptionParser;
};
template <>
class parser<loom::ReplicateGrouping>
    : public loom::EnumOptionParser<loom::ReplicateGrouping> {
public:
  using EnumOptionParser::EnumOptionParser;
};
template <>
class parser<loom::CommHook> : public loom::EnumOptionParser<loom::CommHook> {
public:
  using EnumOptionParser::EnumOptionParser;
};
template <>
class parser<loom::RematMode> : public loom::EnumOptionParser<loom::RematMode> {
public:
  using EnumOptionParser::EnumOptionParser;
};
} // namespace llvm::cl

#endif // LOOM_TRANSFORMS_OPTIONENUMS_H
