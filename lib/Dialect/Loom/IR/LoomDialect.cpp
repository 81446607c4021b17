//===- LoomDialect.cpp - loom dialect registration and attribute checks ---===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Dialect/Loom/IR/OpClassification.h"
#include "loomrt/ArtifactSchema.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdlib>

using namespace mlir;
using namespace loom;

#include "loom/Dialect/Loom/IR/LoomOpsDialect.cpp.inc"
#include "loom/Dialect/Loom/IR/LoomEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/Loom/IR/LoomAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "loom/Dialect/Loom/IR/LoomOpsTypes.cpp.inc"

void LoomDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "loom/Dialect/Loom/IR/LoomOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "loom/Dialect/Loom/IR/LoomAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "loom/Dialect/Loom/IR/LoomOpsTypes.cpp.inc"
      >();
  phaseAttrName = StringAttr::get(getContext(), kPhaseAttrName);
  moduleAttrName = StringAttr::get(getContext(), kModuleAttrName);
  microbatchAttrName = StringAttr::get(getContext(), kMicrobatchAttrName);
}

//===----------------------------------------------------------------------===//
// Optimizer attributes
//===----------------------------------------------------------------------===//

FailureOr<APFloat> loom::detail::parseF64Parameter(AsmParser &parser) {
  bool negative = succeeded(parser.parseOptionalMinus());
  // Integers are accepted where people write them (`momentum = 0`).
  uint64_t integer;
  OptionalParseResult isInteger = parser.parseOptionalInteger(integer);
  double value;
  if (isInteger.has_value()) {
    if (failed(*isInteger))
      return failure();
    value = static_cast<double>(integer);
  } else if (parser.parseFloat(value)) {
    return failure();
  }
  return APFloat(negative ? -value : value);
}

std::string loom::detail::formatF64Parameter(double value) {
  // The shortest %g form that reads back as the same double keeps
  // hyperparameters legible (0.001, not 1.000000e-03) and exact.
  std::string text;
  for (int precision = 1; precision <= 17; ++precision) {
    text = llvm::formatv("{0}", llvm::format("%.*g", precision, value)).str();
    if (std::strtod(text.c_str(), nullptr) == value)
      break;
  }
  // MLIR's float literal needs a '.' in the mantissa ("1e-08" would lex as
  // an integer and an identifier).
  if (std::isfinite(value)) {
    size_t exponent = text.find_first_of("eE");
    StringRef mantissa = StringRef(text).substr(0, exponent);
    if (!mantissa.contains('.'))
      text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
  }
  return text;
}

void loom::detail::printF64Parameter(AsmPrinter &printer, double value) {
  printer << formatF64Parameter(value);
}

FailureOr<bool> loom::detail::parseBoolParameter(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(parser.getCurrentLocation(),
                          "expected 'true' or 'false'");
}

/// PyTorch's constructor checks (`Invalid learning rate: ...`), so a step
/// Loom accepts is one torch.optim would accept.
static LogicalResult
verifyHyperparameter(function_ref<InFlightDiagnostic()> emitError,
                     StringRef name, double value, double lowest,
                     std::optional<double> belowThis = std::nullopt) {
  if (!std::isfinite(value) || value < lowest ||
      (belowThis && value >= *belowThis)) {
    InFlightDiagnostic diag = emitError()
                              << "'" << name << "' is "
                              << loom::detail::formatF64Parameter(value)
                              << ", expected a finite value >= "
                              << loom::detail::formatF64Parameter(lowest);
    if (belowThis)
      diag << " and < " << loom::detail::formatF64Parameter(*belowThis);
    return diag;
  }
  return success();
}

LogicalResult
RunConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      int64_t worldSize, int64_t microbatches, int64_t seed,
                      Attribute optimizer, StringAttr paramGroups,
                      DictionaryAttr lrSchedule, StringAttr optimizerImpl,
                      DictionaryAttr clipGradNorm) {
  if (worldSize < 1)
    return emitError() << "world_size must be at least 1, got " << worldSize;
  if (microbatches < 1)
    return emitError() << "microbatches must be at least 1, got "
                       << microbatches;
  if (optimizer && !isOptimizerAttr(optimizer))
    return emitError() << "optimizer must be #loom.sgd, #loom.adam, "
                          "#loom.adamw, #loom.rmsprop, #loom.adagrad, "
                          "#loom.adadelta, #loom.adamax, #loom.radam, "
                          "#loom.nadam, #loom.rprop or #loom.asgd, got "
                       << optimizer;
  if ((paramGroups || lrSchedule || optimizerImpl || clipGradNorm) &&
      !optimizer)
    return emitError() << "param_groups, lr_schedule, optimizer_impl and "
                          "clip_grad_norm need an optimizer";
  if (clipGradNorm) {
    auto maxNorm = clipGradNorm.getAs<FloatAttr>("max_norm");
    auto normType = clipGradNorm.getAs<StringAttr>("norm_type");
    if (!maxNorm || !(maxNorm.getValueAsDouble() > 0) ||
        !std::isfinite(maxNorm.getValueAsDouble()))
      return emitError() << "clip_grad_norm.max_norm must be a finite number "
                            "> 0, got "
                         << clipGradNorm.get("max_norm");
    if (!normType || !llvm::is_contained({"2", "inf"}, normType.getValue()))
      return emitError() << "clip_grad_norm.norm_type must be \"2\" or "
                            "\"inf\", got "
                         << clipGradNorm.get("norm_type");
  }
  if (optimizerImpl && optimizerImpl.getValue() != "fused")
    return emitError() << "optimizer_impl must be \"fused\" (the "
                          "single-tensor loop is the default), got "
                       << optimizerImpl;
  return success();
}

LogicalResult SGDAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                              APFloat lrValue, APFloat momentumValue,
                              APFloat dampeningValue, APFloat weightDecayValue,
                              bool nesterov, bool maximize) {
  double lr = lrValue.convertToDouble();
  double momentum = momentumValue.convertToDouble();
  double dampening = dampeningValue.convertToDouble();
  double weightDecay = weightDecayValue.convertToDouble();
  if (failed(verifyHyperparameter(emitError, "lr", lr, 0)) ||
      failed(verifyHyperparameter(emitError, "momentum", momentum, 0)) ||
      failed(verifyHyperparameter(emitError, "weight_decay", weightDecay, 0)))
    return failure();
  // torch.optim.SGD accepts any dampening.
  if (!std::isfinite(dampening))
    return emitError() << "'dampening' is "
                       << loom::detail::formatF64Parameter(dampening)
                       << ", expected a finite value";
  if (nesterov && (momentum <= 0 || dampening != 0))
    return emitError()
           << "Nesterov momentum requires a momentum > 0 and zero dampening";
  return success();
}

static LogicalResult
verifyAdamFamily(function_ref<InFlightDiagnostic()> emitError,
                 const APFloat &lr, const APFloat &beta1, const APFloat &beta2,
                 const APFloat &eps, const APFloat &weightDecay) {
  return success(
      succeeded(
          verifyHyperparameter(emitError, "lr", lr.convertToDouble(), 0)) &&
      succeeded(verifyHyperparameter(emitError, "beta1",
                                     beta1.convertToDouble(), 0, 1.0)) &&
      succeeded(verifyHyperparameter(emitError, "beta2",
                                     beta2.convertToDouble(), 0, 1.0)) &&
      succeeded(
          verifyHyperparameter(emitError, "eps", eps.convertToDouble(), 0)) &&
      succeeded(verifyHyperparameter(emitError, "weight_decay",
                                     weightDecay.convertToDouble(), 0)));
}

LogicalResult AdamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               APFloat lr, APFloat beta1, APFloat beta2,
                               APFloat eps, APFloat weightDecay, bool, bool) {
  return verifyAdamFamily(emitError, lr, beta1, beta2, eps, weightDecay);
}

LogicalResult AdamWAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                APFloat lr, APFloat beta1, APFloat beta2,
                                APFloat eps, APFloat weightDecay, bool, bool) {
  return verifyAdamFamily(emitError, lr, beta1, beta2, eps, weightDecay);
}

LogicalResult AdamaxAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 APFloat lr, APFloat beta1, APFloat beta2,
                                 APFloat eps, APFloat weightDecay, bool) {
  return verifyAdamFamily(emitError, lr, beta1, beta2, eps, weightDecay);
}

LogicalResult NAdamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                APFloat lr, APFloat beta1, APFloat beta2,
                                APFloat eps, APFloat weightDecay,
                                APFloat momentumDecay, bool, bool) {
  if (failed(verifyAdamFamily(emitError, lr, beta1, beta2, eps, weightDecay)))
    return failure();
  return verifyHyperparameter(emitError, "momentum_decay",
                              momentumDecay.convertToDouble(), 0);
}

LogicalResult RAdamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                APFloat lr, APFloat beta1, APFloat beta2,
                                APFloat eps, APFloat weightDecay, bool, bool) {
  return verifyAdamFamily(emitError, lr, beta1, beta2, eps, weightDecay);
}

/// Every value >= 0 and finite, as the constructors check them.
static LogicalResult
verifyNonNegative(function_ref<InFlightDiagnostic()> emitError,
                  ArrayRef<std::pair<StringRef, APFloat>> values) {
  for (auto [name, value] : values)
    if (failed(
            verifyHyperparameter(emitError, name, value.convertToDouble(), 0)))
      return failure();
  return success();
}

LogicalResult RMSpropAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  APFloat lr, APFloat alpha, APFloat eps,
                                  APFloat weightDecay, APFloat momentum, bool,
                                  bool) {
  return verifyNonNegative(emitError, {{"lr", lr},
                                       {"alpha", alpha},
                                       {"eps", eps},
                                       {"weight_decay", weightDecay},
                                       {"momentum", momentum}});
}

LogicalResult AdagradAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  APFloat lr, APFloat lrDecay,
                                  APFloat weightDecay,
                                  APFloat initialAccumulatorValue, APFloat eps,
                                  bool) {
  return verifyNonNegative(
      emitError, {{"lr", lr},
                  {"lr_decay", lrDecay},
                  {"weight_decay", weightDecay},
                  {"initial_accumulator_value", initialAccumulatorValue},
                  {"eps", eps}});
}

LogicalResult AdadeltaAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   APFloat lr, APFloat rho, APFloat eps,
                                   APFloat weightDecay, bool) {
  // torch.optim.Adadelta: 0 <= rho <= 1.
  double r = rho.convertToDouble();
  if (!std::isfinite(r) || r < 0 || r > 1)
    return emitError() << "'rho' is " << loom::detail::formatF64Parameter(r)
                       << ", expected a value in [0, 1]";
  return verifyNonNegative(
      emitError, {{"lr", lr}, {"eps", eps}, {"weight_decay", weightDecay}});
}

LogicalResult RpropAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                APFloat lr, APFloat etaminus, APFloat etaplus,
                                APFloat stepSizeMin, APFloat stepSizeMax,
                                bool) {
  // torch.optim.Rprop: 0 <= lr, 0 < etaminus < 1 < etaplus.
  double minus = etaminus.convertToDouble(), plus = etaplus.convertToDouble();
  if (!(0 < minus && minus < 1 && 1 < plus) || !std::isfinite(plus))
    return emitError() << "'etas' are ("
                       << loom::detail::formatF64Parameter(minus) << ", "
                       << loom::detail::formatF64Parameter(plus)
                       << "), expected 0 < etaminus < 1 < etaplus";
  double lo = stepSizeMin.convertToDouble(), hi = stepSizeMax.convertToDouble();
  if (failed(verifyNonNegative(emitError, {{"lr", lr},
                                           {"step_size_min", stepSizeMin},
                                           {"step_size_max", stepSizeMax}})))
    return failure();
  if (lo > hi)
    return emitError() << "'step_size_min' is "
                       << loom::detail::formatF64Parameter(lo)
                       << ", above 'step_size_max' "
                       << loom::detail::formatF64Parameter(hi);
  return success();
}

LogicalResult ASGDAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               APFloat lr, APFloat lambd, APFloat alpha,
                               APFloat t0, APFloat weightDecay, bool) {
  // torch.optim.ASGD checks lr and weight_decay; lambd, alpha and t0 may be
  // any number that keeps the arithmetic finite.
  for (auto [name, value] :
       {std::pair{"lambd", lambd}, {"alpha", alpha}, {"t0", t0}})
    if (!std::isfinite(value.convertToDouble()))
      return emitError() << "'" << name << "' is "
                         << loom::detail::formatF64Parameter(
                                value.convertToDouble())
                         << ", expected a finite value";
  return verifyNonNegative(emitError,
                           {{"lr", lr}, {"weight_decay", weightDecay}});
}

bool loom::isOptimizerAttr(Attribute attr) {
  return isa<SGDAttr, AdamAttr, AdamWAttr, RMSpropAttr, AdagradAttr,
             AdadeltaAttr, AdamaxAttr, RAdamAttr, NAdamAttr, RpropAttr,
             ASGDAttr>(attr);
}

bool loom::isSameAlgorithm(Attribute a, Attribute b) {
  std::optional<OptimizerConfig> x = getOptimizerConfig(a);
  std::optional<OptimizerConfig> y = getOptimizerConfig(b);
  return x && y && x->name == y->name && x->momentum == y->momentum &&
         x->dampening == y->dampening && x->beta1 == y->beta1 &&
         x->beta2 == y->beta2 && x->eps == y->eps &&
         x->nesterov == y->nesterov && x->maximize == y->maximize &&
         x->amsgrad == y->amsgrad && x->alpha == y->alpha &&
         x->centered == y->centered && x->lrDecay == y->lrDecay &&
         x->initialAccumulatorValue == y->initialAccumulatorValue &&
         x->decoupledWeightDecay == y->decoupledWeightDecay &&
         x->rho == y->rho && x->momentumDecay == y->momentumDecay &&
         x->etaminus == y->etaminus && x->etaplus == y->etaplus &&
         x->stepSizeMin == y->stepSizeMin && x->stepSizeMax == y->stepSizeMax &&
         x->lambd == y->lambd && x->t0 == y->t0;
}

/// The state names the artifact schema declares for `c`'s algorithm and
/// settings.
static void fillStateNames(OptimizerConfig &c) {
  auto isSet = [&](StringRef key) {
    if (key == loomrt::schema::kOptimizerMomentum)
      return c.momentum != 0;
    if (key == loomrt::schema::kOptimizerAmsgrad)
      return c.amsgrad;
    if (key == loomrt::schema::kOptimizerCentered)
      return c.centered;
    return false;
  };
  // getOptimizerConfig sets the name from a string literal, so its data
  // is NUL-terminated, as the schema's C strings need.
  loomrt::schema::forEachOptimizerState(
      c.name.data(), isSet, [&](const char *s) { c.stateNames.push_back(s); });
}

std::optional<OptimizerConfig> loom::getOptimizerConfig(Attribute attr) {
  OptimizerConfig c;
  auto number = [](const APFloat &v) { return v.convertToDouble(); };
  auto fillAdam = [&](auto adam, StringRef name) {
    c.name = name;
    c.lr = number(adam.getLr());
    c.beta1 = number(adam.getBeta1());
    c.beta2 = number(adam.getBeta2());
    c.eps = number(adam.getEps());
    c.weightDecay = number(adam.getWeightDecay());
    c.maximize = adam.getMaximize();
  };
  if (auto sgd = dyn_cast<SGDAttr>(attr)) {
    c.name = "sgd";
    c.lr = number(sgd.getLr());
    c.momentum = number(sgd.getMomentum());
    c.dampening = number(sgd.getDampening());
    c.weightDecay = number(sgd.getWeightDecay());
    c.nesterov = sgd.getNesterov();
    c.maximize = sgd.getMaximize();
  } else if (auto adam = dyn_cast<AdamAttr>(attr)) {
    fillAdam(adam, "adam");
    c.amsgrad = adam.getAmsgrad();
  } else if (auto adamw = dyn_cast<AdamWAttr>(attr)) {
    fillAdam(adamw, "adamw");
    c.amsgrad = adamw.getAmsgrad();
  } else if (auto adamax = dyn_cast<AdamaxAttr>(attr)) {
    fillAdam(adamax, "adamax");
  } else if (auto radam = dyn_cast<RAdamAttr>(attr)) {
    fillAdam(radam, "radam");
    c.decoupledWeightDecay = radam.getDecoupledWeightDecay();
  } else if (auto nadam = dyn_cast<NAdamAttr>(attr)) {
    fillAdam(nadam, "nadam");
    c.momentumDecay = number(nadam.getMomentumDecay());
    c.decoupledWeightDecay = nadam.getDecoupledWeightDecay();
  } else if (auto rmsprop = dyn_cast<RMSpropAttr>(attr)) {
    c.name = "rmsprop";
    c.lr = number(rmsprop.getLr());
    c.alpha = number(rmsprop.getAlpha());
    c.eps = number(rmsprop.getEps());
    c.weightDecay = number(rmsprop.getWeightDecay());
    c.momentum = number(rmsprop.getMomentum());
    c.centered = rmsprop.getCentered();
    c.maximize = rmsprop.getMaximize();
  } else if (auto adagrad = dyn_cast<AdagradAttr>(attr)) {
    c.name = "adagrad";
    c.lr = number(adagrad.getLr());
    c.lrDecay = number(adagrad.getLrDecay());
    c.weightDecay = number(adagrad.getWeightDecay());
    c.initialAccumulatorValue = number(adagrad.getInitialAccumulatorValue());
    c.eps = number(adagrad.getEps());
    c.maximize = adagrad.getMaximize();
  } else if (auto adadelta = dyn_cast<AdadeltaAttr>(attr)) {
    c.name = "adadelta";
    c.lr = number(adadelta.getLr());
    c.rho = number(adadelta.getRho());
    c.eps = number(adadelta.getEps());
    c.weightDecay = number(adadelta.getWeightDecay());
    c.maximize = adadelta.getMaximize();
  } else if (auto rprop = dyn_cast<RpropAttr>(attr)) {
    c.name = "rprop";
    c.lr = number(rprop.getLr());
    c.etaminus = number(rprop.getEtaminus());
    c.etaplus = number(rprop.getEtaplus());
    c.stepSizeMin = number(rprop.getStepSizeMin());
    c.stepSizeMax = number(rprop.getStepSizeMax());
    c.maximize = rprop.getMaximize();
  } else if (auto asgd = dyn_cast<ASGDAttr>(attr)) {
    c.name = "asgd";
    c.lr = number(asgd.getLr());
    c.lambd = number(asgd.getLambd());
    c.alpha = number(asgd.getAlpha());
    c.t0 = number(asgd.getT0());
    c.weightDecay = number(asgd.getWeightDecay());
    c.maximize = asgd.getMaximize();
  } else {
    return std::nullopt;
  }
  fillStateNames(c);
  return c;
}

//===----------------------------------------------------------------------===//
// Step signature
//===----------------------------------------------------------------------===//

static bool isInputRole(Role role) {
  return role == Role::parameter || role == Role::buffer ||
         role == Role::constant || role == Role::input ||
         role == Role::optimizer_state;
}

/// The argument role a result of role `r` must target, for the roles that
/// target an argument.
static std::optional<Role> getTargetRole(Role r) {
  switch (r) {
  case Role::grad:
  case Role::param_update:
    return Role::parameter;
  case Role::buffer_mutation:
    return Role::buffer;
  case Role::input_mutation:
    return Role::input;
  case Role::state_update:
    return Role::optimizer_state;
  default:
    return std::nullopt;
  }
}

/// Resolves `mesh` from `op` and returns the group size of `axes`, or fails
/// with a diagnostic naming `what`.
static FailureOr<int64_t> groupSizeOf(Operation *op, const Twine &what,
                                      FlatSymbolRefAttr mesh, ArrayAttr axes) {
  auto meshOp = SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, mesh.getAttr());
  if (!meshOp)
    return op->emitOpError(what) << ": '" << mesh.getValue()
                                 << "' does not name a loom.mesh";
  if (axes.empty())
    return op->emitOpError(what) << ": names no mesh axis";
  llvm::StringSet<> seen;
  int64_t group = 1;
  for (Attribute a : axes) {
    auto axis = dyn_cast<StringAttr>(a);
    std::optional<unsigned> index =
        axis ? meshOp.getAxisIndex(axis.getValue()) : std::nullopt;
    if (!index)
      return op->emitOpError(what)
             << ": mesh @" << mesh.getValue() << " has no axis " << a;
    if (!seen.insert(axis.getValue()).second)
      return op->emitOpError(what) << ": axis " << a << " is named twice";
    group *= meshOp.getShape()[*index];
  }
  return group;
}

/// Checks the distribution attributes of a step's arguments and results
/// against the meshes they name.
static LogicalResult verifyDistribution(func::FuncOp func) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    std::string what = ("argument #" + Twine(i)).str();
    if (auto shard =
            func.getArgAttrOfType<ShardAttr>(i, LoomDialect::kShardAttrName)) {
      FailureOr<int64_t> group =
          groupSizeOf(func, what, shard.getMesh(), shard.getAxes());
      if (failed(group))
        return failure();
      ArrayRef<int64_t> global = shard.getGlobal();
      int64_t dim = shard.getDim();
      if (static_cast<int64_t>(global.size()) != type.getRank() || dim < 0 ||
          dim >= type.getRank())
        return func.emitOpError(what)
               << ": loom.shard does not fit its type " << type;
      for (int64_t d = 0; d < type.getRank(); ++d) {
        int64_t want = d == dim ? (global[d] + *group - 1) / *group : global[d];
        if (type.getDimSize(d) != want)
          return func.emitOpError(what)
                 << ": a shard of " << global.size() << "-d tensor ["
                 << llvm::make_range(global.begin(), global.end())
                 << "] over " << *group << " ranks has size " << want
                 << " in dimension " << d << ", but the argument has "
                 << type.getDimSize(d);
      }
    }
    if (auto split =
            func.getArgAttrOfType<SplitAttr>(i, LoomDialect::kSplitAttrName)) {
      if (failed(groupSizeOf(func, what, split.getMesh(), split.getAxes())))
        return failure();
      if (split.getDim() < 0 || split.getDim() >= type.getRank())
        return func.emitOpError(what) << ": loom.split dim " << split.getDim()
                                      << " is out of range for " << type;
    }
  }
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (auto partial = func.getResultAttrOfType<PartialAttr>(
            i, LoomDialect::kPartialAttrName))
      if (failed(groupSizeOf(func, "result #" + Twine(i), partial.getMesh(),
                             partial.getAxes())))
        return failure();
  return success();
}

/// Whether `attr` is an i64 of at least `least`.
static bool isI64AtLeast(Attribute attr, int64_t least) {
  auto value = dyn_cast_or_null<IntegerAttr>(attr);
  return value && value.getType().isInteger(64) && value.getInt() >= least;
}

/// Checks the graph signature of a step function as a whole: one loss,
/// every gradient, update or mutation result names an argument of the
/// right role and type, and optimizer state belongs to a parameter. Called
/// once per function from the `loom.step` attribute.
static LogicalResult verifyStepSignature(func::FuncOp func) {
  llvm::StringMap<std::pair<Role, Type>> argsByName;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName);
    auto role = func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role)
      return func.emitOpError("step argument #")
             << i << " has no '" << LoomDialect::kRoleAttrName << "'";
    if (role.getValue() != Role::input &&
        func.getArgAttr(i, LoomDialect::kBatchIndexAttrName))
      return func.emitOpError("step argument #")
             << i << " (" << stringifyRole(role.getValue()) << ") has a '"
             << LoomDialect::kBatchIndexAttrName
             << "'; only inputs are elements of the batch";
    if (func.getArgAttr(i, LoomDialect::kUnbatchedAttrName)) {
      if (role.getValue() != Role::input)
        return func.emitOpError("step argument #")
               << i << " (" << stringifyRole(role.getValue()) << ") is '"
               << LoomDialect::kUnbatchedAttrName
               << "'; only inputs are elements of the batch";
      if (func.getArgAttr(i, LoomDialect::kBatchDimAttrName) ||
          func.getArgAttr(i, LoomDialect::kSplitAttrName))
        return func.emitOpError("step argument #")
               << i << " is '" << LoomDialect::kUnbatchedAttrName
               << "' and has a '"
               << (func.getArgAttr(i, LoomDialect::kBatchDimAttrName)
                       ? LoomDialect::kBatchDimAttrName
                       : LoomDialect::kSplitAttrName)
               << "'; an unbatched input is taken whole";
    }
    if (auto dim = func.getArgAttr(i, LoomDialect::kBatchDimAttrName)) {
      auto type = dyn_cast<RankedTensorType>(func.getArgument(i).getType());
      if (role.getValue() != Role::input)
        return func.emitOpError("step argument #")
               << i << " (" << stringifyRole(role.getValue()) << ") has a '"
               << LoomDialect::kBatchDimAttrName
               << "'; only inputs have a batch dim";
      if (!type || !isI64AtLeast(dim, 0) ||
          cast<IntegerAttr>(dim).getInt() >= type.getRank())
        return func.emitOpError("'")
               << LoomDialect::kBatchDimAttrName << "' of step argument #" << i
               << " must be a dim of its tensor (an i64 in [0, "
               << (type ? type.getRank() : 0) << "))";
    }
    if (role.getValue() != Role::input && !name)
      return func.emitOpError("step argument #")
             << i << " (" << stringifyRole(role.getValue()) << ") has no '"
             << LoomDialect::kNameAttrName << "'";
    if (name &&
        !argsByName
             .try_emplace(name.getValue(), role.getValue(),
                          func.getArgument(i).getType())
             .second)
      return func.emitOpError("step argument name '")
             << name.getValue() << "' is used twice";
  }
  // Optimizer state names the parameter it belongs to.
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    Role role = func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName)
                    .getValue();
    auto target =
        func.getArgAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName);
    if (role != Role::optimizer_state) {
      if (target)
        return func.emitOpError("step argument #")
               << i << " (" << stringifyRole(role) << ") has a '"
               << LoomDialect::kTargetAttrName
               << "'; only optimizer_state arguments name a parameter";
      continue;
    }
    if (!target)
      return func.emitOpError("step argument #")
             << i << " (optimizer_state) has no '"
             << LoomDialect::kTargetAttrName << "' naming its parameter";
    auto it = argsByName.find(target.getValue());
    if (it == argsByName.end() || it->second.first != Role::parameter)
      return func.emitOpError("step argument #")
             << i << " (optimizer_state) targets '" << target.getValue()
             << "', which is not a parameter argument";
    if (it->second.second != func.getArgument(i).getType())
      return func.emitOpError("step argument #")
             << i << " has type " << func.getArgument(i).getType()
             << " but its parameter '" << target.getValue() << "' has type "
             << it->second.second;
  }

  unsigned numLosses = 0;
  // A parameter has one gradient or one update, a buffer or state one
  // mutation: the runtime writes each back once.
  llvm::StringMap<unsigned> targetedBy;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto role =
        func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role)
      return func.emitOpError("step result #")
             << i << " has no '" << LoomDialect::kRoleAttrName << "'";
    Role r = role.getValue();
    numLosses += r == Role::loss;
    std::optional<Role> expected = getTargetRole(r);
    if (!expected)
      continue;
    auto target =
        func.getResultAttrOfType<StringAttr>(i, LoomDialect::kTargetAttrName);
    if (!target)
      return func.emitOpError("step result #")
             << i << " (" << stringifyRole(r) << ") has no '"
             << LoomDialect::kTargetAttrName << "'";
    auto it = argsByName.find(target.getValue());
    if (it == argsByName.end())
      return func.emitOpError("step result #")
             << i << " targets '" << target.getValue()
             << "', which is not a step argument";
    if (it->second.first != *expected)
      return func.emitOpError("step result #")
             << i << " (" << stringifyRole(r) << ") targets '"
             << target.getValue() << "', a " << stringifyRole(it->second.first)
             << ", expected a " << stringifyRole(*expected);
    if (it->second.second != func.getResultTypes()[i])
      return func.emitOpError("step result #")
             << i << " has type " << func.getResultTypes()[i] << " but '"
             << target.getValue() << "' has type " << it->second.second;
    auto [prev, inserted] = targetedBy.try_emplace(target.getValue(), i);
    if (!inserted)
      return func.emitOpError("step results #")
             << prev->second << " and #" << i << " both target '"
             << target.getValue() << "'";
  }
  if (numLosses > 1)
    return func.emitOpError("a step has at most one loss result, found ")
           << numLosses;
  return verifyDistribution(func);
}

/// `loom.program_ranks` on a step: the ranks of the module's mesh that run
/// it, non-empty and strictly increasing. That the steps of a module cover
/// the mesh with disjoint lists is checked by loom-lower-to-rt, which sees
/// them all.
static LogicalResult verifyProgramRanks(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto ranks = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
  if (!isa<func::FuncOp>(op) || !ranks)
    return op->emitOpError("'")
           << name << "' must be an array<i64: ...> of ranks on a func.func";
  if (!op->hasAttr(LoomDialect::kStepAttrName))
    return op->emitOpError("'")
           << name << "' marks an MPMD step; the "
           << "function has no '" << LoomDialect::kStepAttrName << "'";
  if (ranks.empty())
    return op->emitOpError("'") << name << "' lists no rank";
  // A step's ranks are global ranks of the module's mesh; with several
  // meshes, of the largest.
  int64_t worldSize = 0;
  if (auto module = op->getParentOfType<ModuleOp>())
    for (auto mesh : module.getOps<MeshOp>())
      worldSize = std::max(worldSize, mesh.getNumRanks());
  if (worldSize == 0)
    return op->emitOpError("'")
           << name << "' names ranks of a mesh, but the module declares no "
           << "loom.mesh";
  ArrayRef<int64_t> values = ranks.asArrayRef();
  for (auto [i, r] : llvm::enumerate(values)) {
    if (r < 0 || r >= worldSize)
      return op->emitOpError("'")
             << name << "' lists rank " << r << ", outside the mesh's "
             << worldSize << " ranks";
    if (i > 0 && r <= values[i - 1])
      return op->emitOpError("'")
             << name << "' must be strictly increasing, got " << values[i - 1]
             << " before " << r;
  }
  return success();
}

LogicalResult LoomDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kModuleAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' must be a string module path";
    return success();
  }
  if (name == kPhaseAttrName) {
    if (!isa<PhaseAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' must be a #loom.phase";
    return success();
  }
  if (name == kAcRegionAttrName) {
    if (!isI64AtLeast(attr.getValue(), 0))
      return op->emitOpError("'")
             << name << "' must be a non-negative i64 checkpoint region id";
    return success();
  }
  if (name == kCastAttrName) {
    // (Lowered ops keep it: the runtime's copy of the cast.)
    if (auto aten = dyn_cast<AtenOp>(op);
        aten && aten.getOpName() != "aten::_to_copy")
      return op->emitOpError("'") << name << "' is only on an aten::_to_copy";
    if (!isI64AtLeast(attr.getValue(), 0))
      return op->emitOpError("'")
             << name << "' must be a non-negative i64 cast id";
    return success();
  }
  if (name == kPolicyCastAttrName) {
    auto aten = dyn_cast<AtenOp>(op);
    if (!aten || aten.getOpName() != "aten::_to_copy" ||
        aten->getNumOperands() != 1 || aten->getNumResults() != 1)
      return op->emitOpError("'")
             << name << "' is only on an aten::_to_copy of one tensor";
    if (!isa<BoolAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' must be a bool";
    if (aten->getOperand(0).getType() != aten->getResult(0).getType())
      return op->emitOpError("'")
             << name << "' is on a cast to the dtype it was traced in, but "
             << aten->getOperand(0).getType() << " becomes "
             << aten->getResult(0).getType();
    return success();
  }
  if (name == kSyncBatchNormAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' must be a unit attribute";
    // (Only the forward ops capture marks; loom-sync-batch-norm replaces
    // them.)
    if (!getBatchNormForm(getAtenKernel(op)))
      return op->emitOpError("'")
             << name
             << "' is only on a training-mode batch norm forward "
                "(aten::_native_batch_norm_legit_functional.default or "
                "aten::_native_batch_norm_legit.no_stats)";
    return success();
  }
  if (name == kAcPolicyAttrName) {
    if (!isa<AcPolicyAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' must be a #loom.ac_policy";
    return success();
  }
  if (name == kCallsAttrName) {
    auto calls = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!calls || calls.empty())
      return op->emitOpError("'")
             << name << "' must be a non-empty dictionary from module path "
             << "to call index";
    StringRef path = getModulePath(op);
    for (NamedAttribute call : calls) {
      if (!isI64AtLeast(call.getValue(), 1))
        return op->emitOpError("'")
               << name << "' gives module '" << call.getName().getValue()
               << "' call " << call.getValue()
               << "; expected a positive i64 (call 0 is left out)";
      // Only a module the op ran in has a call of it.
      if (!isInModule(path, call.getName().getValue()))
        return op->emitOpError("'")
               << name << "' names module '" << call.getName().getValue()
               << "', which does not enclose the op's module '" << path << "'";
    }
    return success();
  }
  if (name == kMicrobatchAttrName) {
    if (!isI64AtLeast(attr.getValue(), 0))
      return op->emitOpError("'")
             << name << "' must be a non-negative i64 microbatch index";
    return success();
  }
  if (name == kPipelineStageAttrName) {
    if (!isa<func::FuncOp>(op) || !isI64AtLeast(attr.getValue(), 0))
      return op->emitOpError("'")
             << name << "' must be a non-negative i64 on a func.func";
    return success();
  }
  if (name == kPipelineBoundariesAttrName) {
    auto names = dyn_cast<ArrayAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !names ||
        !llvm::all_of(names, [](Attribute a) { return isa<StringAttr>(a); }))
      return op->emitOpError("'")
             << name << "' must be an array of module paths on a module";
    return success();
  }
  if (name == kPipelinePartAttrName) {
    auto part = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<func::FuncOp>(op) || !part ||
        (part.getValue() != "input" && part.getValue() != "weight"))
      return op->emitOpError("'")
             << name << "' must be \"input\" or \"weight\" on a func.func";
    return success();
  }
  if (name == kPipelineActionsAttrName) {
    auto actions = dyn_cast<ArrayAttr>(attr.getValue());
    if (!isa<func::FuncOp>(op) || !actions ||
        !llvm::all_of(actions, [](Attribute a) { return isa<StringAttr>(a); }))
      return op->emitOpError("'")
             << name << "' must be an array of strings on a func.func";
    return success();
  }
  if (name == kWeightsAttrName || name == kSourceAttrName) {
    if (!isa<ModuleOp>(op) || !isa<StringAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' must be a string on a module";
    return success();
  }
  if (name == kKernelWorkspaceAttrName) {
    auto table = dyn_cast<DictionaryAttr>(attr.getValue());
    auto isBytes = [](NamedAttribute entry) {
      return isI64AtLeast(entry.getValue(), 0);
    };
    if (!isa<ModuleOp>(op) || !table || !llvm::all_of(table, isBytes))
      return op->emitOpError("'")
             << name << "' must be a dictionary from kernel signature to "
             << "non-negative i64 bytes, on a module";
    return success();
  }
  if (name == kMemoryBudgetAttrName) {
    if (!isa<ModuleOp>(op) || !isI64AtLeast(attr.getValue(), 1))
      return op->emitOpError("'")
             << name << "' must be positive i64 bytes on a module";
    return success();
  }
  if (name == kKernelWorkspaceThreadsAttrName) {
    if (!isa<ModuleOp>(op) || !isI64AtLeast(attr.getValue(), 1))
      return op->emitOpError("'")
             << name << "' must be a positive i64 thread count on a module";
    return success();
  }
  if (name == kRunConfigAttrName) {
    if (!isa<ModuleOp>(op) || !isa<RunConfigAttr>(attr.getValue()))
      return op->emitOpError("'")
             << name << "' must be a #loom.run_config on a module";
    return success();
  }
  if (name == kOptimizerAttrName) {
    if (!isa<func::FuncOp>(op) || !isOptimizerAttr(attr.getValue()))
      return op->emitOpError("'")
             << name << "' must be an optimizer attribute (#loom.sgd, "
             << "#loom.adam or #loom.adamw) on a func.func";
    return success();
  }
  if (name == kDeviceAttrName) {
    auto device = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !device ||
        (device.getValue() != "cpu" && device.getValue() != "cuda"))
      return op->emitOpError("'")
             << name << "' must be \"cpu\" or \"cuda\" on a module";
    return success();
  }
  if (name == kOptimizerImplAttrName) {
    auto impl = dyn_cast<StringAttr>(attr.getValue());
    if (!impl || impl.getValue() != "fused")
      return op->emitOpError("'")
             << name << "' must be \"fused\" (the single-tensor loop is "
             << "the default and has no attribute)";
    return success();
  }
  if (name == kLrScheduleAttrName) {
    // Its values are checked where it is made (loom-attach-optimizer) and
    // read (the runtime, by field path); the writer relies on its shape.
    auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
    auto has = [&](StringRef key, auto kind) {
      return dict && isa_and_nonnull<decltype(kind)>(dict.get(key));
    };
    if (!has("warmup_steps", IntegerAttr()) ||
        !has("warmup_start_factor", FloatAttr()) ||
        !has("decay", StringAttr()) || !has("decay_steps", IntegerAttr()) ||
        !has("eta_min", FloatAttr()) || !has("end_factor", FloatAttr()) ||
        (dict.get("gamma") && !has("gamma", FloatAttr())) ||
        (dict.get("power") && !has("power", FloatAttr())) ||
        (dict.get("t_mult") && !has("t_mult", IntegerAttr())) ||
        (dict.get("milestones") &&
         !(has("milestones", ArrayAttr()) &&
           llvm::all_of(cast<ArrayAttr>(dict.get("milestones")),
                        llvm::IsaPred<IntegerAttr>))))
      return op->emitOpError("'")
             << name
             << "' must be a dictionary of warmup_steps, decay_steps "
                "(integers), warmup_start_factor, eta_min, end_factor, "
                "optionally gamma and power (floats), optionally t_mult (an "
                "integer) and milestones (a list of integers), and decay (a "
                "string)";
    return success();
  }
  if (name == kProgramRanksAttrName)
    return verifyProgramRanks(op, attr);
  if (name == kStepAttrName) {
    auto func = dyn_cast<func::FuncOp>(op);
    if (!func || !isa<UnitAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' must be a unit attribute on a "
                                  << "func.func";
    return verifyStepSignature(func);
  }
  return op->emitOpError("unknown loom attribute '") << name << "'";
}

LogicalResult LoomDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kNameAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' of argument #" << argIndex
                                  << " must be a string";
    return success();
  }
  if (name == kBatchIndexAttrName || name == kBatchDimAttrName) {
    if (!isI64AtLeast(attr.getValue(), 0))
      return op->emitOpError("'")
             << name << "' of argument #" << argIndex
             << (name == kBatchDimAttrName
                     ? " must be a non-negative i64 dim"
                     : " must be a non-negative i64 batch element index");
    return success();
  }
  if (name == kUnbatchedAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' of argument #" << argIndex
                                  << " must be a unit attribute";
    return success();
  }
  if (name == kShardAttrName || name == kSplitAttrName) {
    if (name == kShardAttrName ? !isa<ShardAttr>(attr.getValue())
                               : !isa<SplitAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' of argument #" << argIndex
                                  << " must be a #" << name;
    return success();
  }
  if (name == kRoleAttrName) {
    auto role = dyn_cast<RoleAttr>(attr.getValue());
    if (!role || !isInputRole(role.getValue()))
      return op->emitOpError("argument #")
             << argIndex
             << " role must be one of parameter, buffer, constant, input, "
                "optimizer_state";
    return success();
  }
  if (name == kTargetAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError("'")
             << name << "' of argument #" << argIndex << " must be a string";
    return success();
  }
  if (name == kPipelineValueAttrName) {
    auto key = dyn_cast<StringAttr>(attr.getValue());
    if (!key || key.getValue().empty())
      return op->emitOpError("'") << name << "' of argument #" << argIndex
                                  << " must be a non-empty string";
    return success();
  }
  return op->emitOpError("unknown loom argument attribute '") << name << "'";
}

LogicalResult LoomDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kTargetAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' of result #" << resultIndex
                                  << " must be a string";
    return success();
  }
  if (name == kRoleAttrName) {
    auto role = dyn_cast<RoleAttr>(attr.getValue());
    if (!role || isInputRole(role.getValue()))
      return op->emitOpError("result #")
             << resultIndex
             << " role must be one of loss, grad, buffer_mutation, output, "
                "input_mutation, param_update, state_update";
    return success();
  }
  if (name == kPartialAttrName) {
    if (!isa<PartialAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' of result #" << resultIndex
                                  << " must be a #loom.partial";
    return success();
  }
  if (name == kPipelineValueAttrName) {
    auto key = dyn_cast<StringAttr>(attr.getValue());
    if (!key || key.getValue().empty())
      return op->emitOpError("'") << name << "' of result #" << resultIndex
                                  << " must be a non-empty string";
    return success();
  }
  if (name == kPipelineGradFromAttrName) {
    if (!isI64AtLeast(attr.getValue(), 0))
      return op->emitOpError("'") << name << "' of result #" << resultIndex
                                  << " must be a non-negative i64 rank";
    return success();
  }
  return op->emitOpError("unknown loom result attribute '") << name << "'";
}

AtenOp loom::buildSplitWithSizes(OpBuilder &b, Location loc, Value v,
                                 ArrayRef<int64_t> sizes, int64_t dim) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<Type> results;
  SmallVector<Attribute> indices;
  for (auto [i, size] : llvm::enumerate(sizes)) {
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] = size;
    results.push_back(type.clone(shape));
    indices.push_back(b.getI64IntegerAttr(i));
  }
  return AtenOp::create(
      b, loc, results, "aten::split_with_sizes.default", v,
      b.getArrayAttr({OperandRefAttr::get(b.getContext(), 0),
                      b.getI64ArrayAttr(sizes), b.getI64IntegerAttr(dim)}),
      b.getDictionaryAttr({}), b.getArrayAttr({b.getArrayAttr(indices)}));
}

AtenOp loom::buildContiguousClone(OpBuilder &b, Location loc, Value v) {
  return AtenOp::create(
      b, loc, TypeRange{v.getType()}, "aten::clone.default", v,
      b.getArrayAttr({OperandRefAttr::get(b.getContext(), 0)}),
      b.getDictionaryAttr(b.getNamedAttr(
          "memory_format", b.getStringAttr("torch.contiguous_format"))),
      ArrayAttr());
}

Value loom::buildMicrobatchSlice(OpBuilder &b, Location loc, Value v,
                                 int64_t dim, int64_t index) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<RankedTensorType>(v.getType());
  int64_t rows = type.getDimSize(dim);
  SmallVector<NamedAttribute> tags = {
      b.getNamedAttr(LoomDialect::kModuleAttrName, b.getStringAttr("")),
      b.getNamedAttr(LoomDialect::kPhaseAttrName,
                     PhaseAttr::get(ctx, Phase::forward)),
      b.getNamedAttr(LoomDialect::kMicrobatchAttrName,
                     b.getI64IntegerAttr(index))};
  auto slice = AtenOp::create(
      b, loc, TypeRange{type}, "aten::slice.Tensor", v,
      b.getArrayAttr({OperandRefAttr::get(ctx, 0), b.getI64IntegerAttr(dim),
                      b.getI64IntegerAttr(index * rows),
                      b.getI64IntegerAttr((index + 1) * rows),
                      b.getI64IntegerAttr(1)}),
      b.getDictionaryAttr({}), ArrayAttr());
  slice->setDiscardableAttrs(tags);
  if (dim == 0)
    return slice.getResult(0);
  AtenOp copy = buildContiguousClone(b, loc, slice.getResult(0));
  copy->setDiscardableAttrs(tags);
  return copy.getResult(0);
}

SmallVector<int64_t> loom::getContiguousStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    strides[size_t(d)] = strides[size_t(d) + 1] * shape[size_t(d) + 1];
  return strides;
}

SmallVector<func::FuncOp> loom::getStepFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> steps;
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr(LoomDialect::kStepAttrName))
      steps.push_back(func);
  return steps;
}

/// `op`'s discardable attribute `name`; on a Loom op by the dialect's
/// `cached` copy of the name (a pointer compare per attribute).
template <typename T>
static T getLoomAttr(Operation *op, StringAttr LoomDialect::*cached,
                     StringRef name) {
  if (auto *dialect = dyn_cast_if_present<LoomDialect>(op->getDialect()))
    return dyn_cast_if_present<T>(op->getDiscardableAttr(dialect->*cached));
  return op->getAttrOfType<T>(name);
}

std::optional<Phase> loom::getPhase(Operation *op) {
  if (auto attr = getLoomAttr<PhaseAttr>(op, &LoomDialect::phaseAttrName,
                                         LoomDialect::kPhaseAttrName))
    return attr.getValue();
  return std::nullopt;
}

StringRef loom::getModulePath(Operation *op) {
  if (auto attr = getLoomAttr<StringAttr>(op, &LoomDialect::moduleAttrName,
                                          LoomDialect::kModuleAttrName))
    return attr.getValue();
  return {};
}

std::optional<int64_t> loom::getMicrobatch(Operation *op) {
  if (auto attr = getLoomAttr<IntegerAttr>(op, &LoomDialect::microbatchAttrName,
                                           LoomDialect::kMicrobatchAttrName))
    return attr.getInt();
  return std::nullopt;
}

std::optional<int64_t> loom::getBatchDim(func::FuncOp func, unsigned argIndex) {
  return getBatchDim(func.getArgAttrDict(argIndex));
}

std::optional<int64_t> loom::getBatchDim(DictionaryAttr argAttrs) {
  if (argAttrs && argAttrs.get(LoomDialect::kUnbatchedAttrName))
    return std::nullopt;
  auto dim = argAttrs
                 ? argAttrs.getAs<IntegerAttr>(LoomDialect::kBatchDimAttrName)
                 : IntegerAttr();
  return dim ? dim.getInt() : 0;
}

int64_t loom::getCallIndex(Operation *op, StringRef modulePath) {
  auto calls = op->getAttrOfType<DictionaryAttr>(LoomDialect::kCallsAttrName);
  if (!calls || modulePath.empty())
    return 0;
  auto index = calls.getAs<IntegerAttr>(modulePath);
  return index ? index.getInt() : 0;
}

int64_t loom::getElementBytes(Type type) {
  if (auto complex = dyn_cast<ComplexType>(type))
    return 2 * getElementBytes(complex.getElementType());
  unsigned bits = type.getIntOrFloatBitWidth();
  return std::max<int64_t>(1, (bits + 7) / 8);
}

int64_t loom::getTensorBytes(RankedTensorType type) {
  return type.getNumElements() * getElementBytes(type.getElementType());
}
