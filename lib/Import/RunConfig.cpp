//===- RunConfig.cpp - Read the run configuration capture embeds ----------===//

#include "RunConfig.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/OptionEnums.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <cmath>

using namespace mlir;
using namespace loom;
namespace json = llvm::json;

namespace {
/// Reads fields of one JSON object, remembering the first problem with the
/// field's path ("optimizer.lr").
class FieldReader {
public:
  FieldReader(const json::Object &object, std::string path, std::string &error)
      : object(object), path(std::move(path)), error(error) {}

  std::optional<int64_t> integer(StringRef key, int64_t min,
                                 std::optional<int64_t> fallback) {
    const json::Value *v = object.get(key);
    if (!v)
      return fallback ? fallback : missing(key);
    std::optional<int64_t> n = v->getAsInteger();
    if (!n || *n < min)
      return wrong(key, "an integer >= " + std::to_string(min));
    return n;
  }

  std::optional<double> number(StringRef key) {
    const json::Value *v = object.get(key);
    if (!v)
      return missing(key);
    std::optional<double> d = v->getAsNumber();
    if (!d)
      return wrong(key, "a number");
    return d;
  }

  std::optional<bool> boolean(StringRef key) {
    const json::Value *v = object.get(key);
    if (!v)
      return missing(key);
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      return wrong(key, "true or false");
    return b;
  }

  std::nullopt_t wrong(StringRef key, const Twine &expected) {
    if (error.empty())
      error = ("'" + path + key + "' must be " + expected).str();
    return std::nullopt;
  }

  std::nullopt_t missing(StringRef key) {
    if (error.empty())
      error = ("'" + path + key + "' is missing").str();
    return std::nullopt;
  }

  const json::Object &object;
  std::string path;
  std::string &error;
};
} // namespace

/// `#loom.sgd/adam/adamw/rmsprop/adagrad` from the "optimizer" object,
/// checked as loom-attach-optimizer checks its options. Capture writes every
/// hyperparameter of the algorithm resolved, so none may be missing (but
/// Adam's `amsgrad`, which captures before it existed did not write: absent
/// is false): the defaults live in the optimizer attributes and torch.optim,
/// not here.
static Attribute parseOptimizer(const json::Object &o, MLIRContext *ctx,
                                std::string &error) {
  FieldReader r(o, "optimizer.", error);
  std::optional<StringRef> name = o.getString("name");
  if (!name || !parseOptimizerKind(*name))
    return r.wrong("name", listOptimizerNames()), nullptr;
  std::optional<double> lr = r.number("lr");
  std::optional<bool> maximize = r.boolean("maximize");
  if (!lr || !maximize)
    return nullptr;
  auto f = [](double v) { return APFloat(v); };
  // A list of two numbers (`betas`, Rprop's `etas` and `step_sizes`).
  auto pair = [&](StringRef key) -> std::optional<std::pair<double, double>> {
    const json::Value *value = o.get(key);
    if (!value)
      return r.missing(key), std::nullopt;
    const json::Array *a = value->getAsArray();
    std::optional<double> first =
        a && a->size() == 2 ? (*a)[0].getAsNumber() : std::nullopt;
    std::optional<double> second =
        a && a->size() == 2 ? (*a)[1].getAsNumber() : std::nullopt;
    if (!first || !second)
      return r.wrong(key, "a list of two numbers"), std::nullopt;
    return std::make_pair(*first, *second);
  };
  // Hyperparameters PyTorch would reject are refused as loom-attach-optimizer
  // refuses them; the verifier's message becomes the error.
  ScopedDiagnosticHandler capture(ctx, [&](Diagnostic &d) {
    if (error.empty())
      error = "optimizer: " + d.str();
    return success();
  });
  auto emitError = [&] { return mlir::emitError(UnknownLoc::get(ctx)); };
  if (*name == "rprop") {
    std::optional<std::pair<double, double>> etas = pair("etas");
    if (!etas)
      return nullptr;
    std::optional<std::pair<double, double>> stepSizes = pair("step_sizes");
    if (!stepSizes)
      return nullptr;
    return RpropAttr::getChecked(emitError, ctx, f(*lr), f(etas->first),
                                 f(etas->second), f(stepSizes->first),
                                 f(stepSizes->second), *maximize);
  }
  std::optional<double> weightDecay = r.number("weight_decay");
  if (!weightDecay)
    return nullptr;
  if (*name == "sgd") {
    std::optional<double> momentum = r.number("momentum");
    std::optional<double> dampening = r.number("dampening");
    std::optional<bool> nesterov = r.boolean("nesterov");
    if (!momentum || !dampening || !nesterov)
      return nullptr;
    return SGDAttr::getChecked(emitError, ctx, f(*lr), f(*momentum),
                               f(*dampening), f(*weightDecay), *nesterov,
                               *maximize);
  }
  if (*name == "asgd") {
    std::optional<double> lambd = r.number("lambd");
    std::optional<double> alpha = r.number("alpha");
    std::optional<double> t0 = r.number("t0");
    if (!lambd || !alpha || !t0)
      return nullptr;
    return ASGDAttr::getChecked(emitError, ctx, f(*lr), f(*lambd), f(*alpha),
                                f(*t0), f(*weightDecay), *maximize);
  }
  std::optional<double> eps = r.number("eps");
  if (!eps)
    return nullptr;
  if (*name == "rmsprop") {
    std::optional<double> alpha = r.number("alpha");
    std::optional<double> momentum = r.number("momentum");
    std::optional<bool> centered = r.boolean("centered");
    if (!alpha || !momentum || !centered)
      return nullptr;
    return RMSpropAttr::getChecked(emitError, ctx, f(*lr), f(*alpha), f(*eps),
                                   f(*weightDecay), f(*momentum), *centered,
                                   *maximize);
  }
  if (*name == "adagrad") {
    std::optional<double> lrDecay = r.number("lr_decay");
    std::optional<double> initial = r.number("initial_accumulator_value");
    if (!lrDecay || !initial)
      return nullptr;
    return AdagradAttr::getChecked(emitError, ctx, f(*lr), f(*lrDecay),
                                   f(*weightDecay), f(*initial), f(*eps),
                                   *maximize);
  }
  if (*name == "adadelta") {
    std::optional<double> rho = r.number("rho");
    if (!rho)
      return nullptr;
    return AdadeltaAttr::getChecked(emitError, ctx, f(*lr), f(*rho), f(*eps),
                                    f(*weightDecay), *maximize);
  }
  std::optional<std::pair<double, double>> betaPair = pair("betas");
  if (!betaPair)
    return nullptr;
  double betas[2] = {betaPair->first, betaPair->second};
  if (*name == "adamax")
    return AdamaxAttr::getChecked(emitError, ctx, f(*lr), f(betas[0]),
                                  f(betas[1]), f(*eps), f(*weightDecay),
                                  *maximize);
  if (*name == "radam") {
    std::optional<bool> decoupled = r.boolean("decoupled_weight_decay");
    if (!decoupled)
      return nullptr;
    return RAdamAttr::getChecked(emitError, ctx, f(*lr), f(betas[0]),
                                 f(betas[1]), f(*eps), f(*weightDecay),
                                 *decoupled, *maximize);
  }
  if (*name == "nadam") {
    std::optional<double> momentumDecay = r.number("momentum_decay");
    std::optional<bool> decoupled = r.boolean("decoupled_weight_decay");
    if (!momentumDecay || !decoupled)
      return nullptr;
    return NAdamAttr::getChecked(emitError, ctx, f(*lr), f(betas[0]),
                                 f(betas[1]), f(*eps), f(*weightDecay),
                                 f(*momentumDecay), *decoupled, *maximize);
  }
  std::optional<bool> amsgrad =
      o.get("amsgrad") ? r.boolean("amsgrad") : std::optional<bool>(false);
  if (!amsgrad)
    return nullptr;
  if (*name == "adam")
    return AdamAttr::getChecked(emitError, ctx, f(*lr), f(betas[0]),
                                f(betas[1]), f(*eps), f(*weightDecay),
                                *maximize, *amsgrad);
  return AdamWAttr::getChecked(emitError, ctx, f(*lr), f(betas[0]), f(betas[1]),
                               f(*eps), f(*weightDecay), *maximize, *amsgrad);
}

/// The "param_groups" list as loom-attach-optimizer's `param-groups` rules:
/// one rule per group, naming its parameters, with its lr and weight decay.
static StringAttr parseParamGroups(const json::Array &groups, MLIRContext *ctx,
                                   std::string &error) {
  std::string rules;
  for (auto [i, g] : llvm::enumerate(groups)) {
    std::string path = "param_groups[" + std::to_string(i) + "].";
    const json::Object *o = g.getAsObject();
    if (!o) {
      if (error.empty())
        error = "'param_groups[" + std::to_string(i) + "]' must be an object";
      return nullptr;
    }
    FieldReader r(*o, path, error);
    const json::Array *params = o->getArray("params");
    if (!params || params->empty())
      return r.wrong("params", "a non-empty list of parameter names"), nullptr;
    std::optional<double> lr = r.number("lr");
    std::optional<double> weightDecay = r.number("weight_decay");
    if (!lr || !weightDecay)
      return nullptr;
    if (!rules.empty())
      rules += ";";
    for (auto [k, p] : llvm::enumerate(*params)) {
      std::optional<StringRef> name = p.getAsString();
      // The rule syntax's separators cannot be part of a name.
      if (!name || name->empty() ||
          name->find_first_of(":;|*?[]{}") != StringRef::npos)
        return r.wrong("params[" + std::to_string(k) + "]", "a parameter name"),
               nullptr;
      rules += (k ? "|" : "") + name->str();
    }
    // Every digit, so the rule reads back as the same double.
    rules +=
        llvm::formatv(":lr={0}:weight-decay={1}", llvm::format("%.17g", *lr),
                      llvm::format("%.17g", *weightDecay))
            .str();
  }
  return StringAttr::get(ctx, rules);
}

/// The "lr_schedule" object as the dictionary loom-attach-optimizer puts
/// on a step (`loom.lr_schedule`); the pass checks the values.
static DictionaryAttr parseLrSchedule(const json::Object &o, MLIRContext *ctx,
                                      std::string &error) {
  FieldReader r(o, "lr_schedule.", error);
  Builder b(ctx);
  std::optional<int64_t> warmup = r.integer("warmup_steps", 0, std::nullopt);
  std::optional<double> start = r.number("warmup_start_factor");
  std::optional<StringRef> decay = o.getString("decay");
  if (!decay || !parseLrDecay(*decay))
    return r.wrong("decay", listLrDecays()), nullptr;
  std::optional<int64_t> steps = r.integer("decay_steps", 0, std::nullopt);
  std::optional<double> etaMin = r.number("eta_min");
  std::optional<double> endFactor = r.number("end_factor");
  if (!warmup || !start || !steps || !etaMin || !endFactor)
    return nullptr;
  NamedAttrList fields;
  fields.set("warmup_steps", b.getI64IntegerAttr(*warmup));
  fields.set("warmup_start_factor", b.getF64FloatAttr(*start));
  fields.set("decay", b.getStringAttr(*decay));
  fields.set("decay_steps", b.getI64IntegerAttr(*steps));
  fields.set("eta_min", b.getF64FloatAttr(*etaMin));
  fields.set("end_factor", b.getF64FloatAttr(*endFactor));
  if (o.get("gamma")) {
    std::optional<double> gamma = r.number("gamma");
    if (!gamma)
      return nullptr;
    fields.set("gamma", b.getF64FloatAttr(*gamma));
  }
  if (o.get("milestones")) {
    const json::Array *list = o.getArray("milestones");
    SmallVector<int64_t> steps;
    for (const json::Value &step : list ? *list : json::Array()) {
      std::optional<int64_t> n = step.getAsInteger();
      if (!n)
        break;
      steps.push_back(*n);
    }
    if (!list || steps.size() != list->size())
      return r.wrong("milestones", "a list of integers"), nullptr;
    fields.set("milestones", b.getI64ArrayAttr(steps));
  }
  if (o.get("power")) {
    std::optional<double> power = r.number("power");
    if (!power)
      return nullptr;
    fields.set("power", b.getF64FloatAttr(*power));
  }
  if (o.get("t_mult")) {
    std::optional<int64_t> tMult = r.integer("t_mult", 1, std::nullopt);
    if (!tMult)
      return nullptr;
    fields.set("t_mult", b.getI64IntegerAttr(*tMult));
  }
  return fields.getDictionary(ctx);
}

/// The "clip_grad_norm" object (`clip_grad_norm_(params, max_norm,
/// norm_type)` before each update) as `{max_norm, norm_type}`.
static DictionaryAttr parseClipGradNorm(const json::Object &o, MLIRContext *ctx,
                                        std::string &error) {
  FieldReader r(o, "clip_grad_norm.", error);
  Builder b(ctx);
  std::optional<double> maxNorm = r.number("max_norm");
  if (!maxNorm)
    return nullptr;
  if (!(*maxNorm > 0) || !std::isfinite(*maxNorm))
    return r.wrong("max_norm", "a finite number > 0"), nullptr;
  std::optional<StringRef> normType = o.getString("norm_type");
  if (!normType || !llvm::is_contained({"2", "inf"}, *normType))
    return r.wrong("norm_type", "\"2\" or \"inf\""), nullptr;
  NamedAttrList fields;
  fields.set("max_norm", b.getF64FloatAttr(*maxNorm));
  fields.set("norm_type", b.getStringAttr(*normType));
  return fields.getDictionary(ctx);
}

/// An error about the run configuration, naming its entry.
static llvm::Error fail(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "run configuration '" + kRunConfigEntry +
                                     "': " + message);
}

/// The run configuration's JSON value.
static llvm::Expected<json::Value> parseJson(StringRef text) {
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return fail("not valid JSON: " + llvm::toString(parsed.takeError()));
  return parsed;
}

llvm::Expected<RunConfigAttr> loom::parseRunConfig(StringRef text,
                                                   MLIRContext *ctx) {
  llvm::Expected<json::Value> parsed = parseJson(text);
  if (!parsed)
    return parsed.takeError();
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return fail("not a JSON object");
  if (root->getString("format") != "loom-run-config")
    return fail("'format' must be \"loom-run-config\"");
  if (root->getInteger("version") != 1)
    return fail("'version' must be 1 (this Loom reads version 1)");
  std::string error;
  FieldReader r(*root, "", error);
  std::optional<int64_t> worldSize = r.integer("world_size", 1, std::nullopt);
  std::optional<int64_t> microbatches = r.integer("microbatches", 1, 1);
  std::optional<int64_t> seed = r.integer("seed", INT64_MIN, 0);
  // An optional object entry, read by `parse` (null when absent or not an
  // object, which is an error).
  auto object = [&](StringRef key, auto parse) {
    using Result = decltype(parse(std::declval<const json::Object &>()));
    const json::Value *v = root->get(key);
    if (!v)
      return Result();
    if (const json::Object *o = v->getAsObject())
      return parse(*o);
    r.wrong(key, "an object");
    return Result();
  };
  Attribute optimizer = object("optimizer", [&](const json::Object &o) {
    return parseOptimizer(o, ctx, error);
  });
  StringAttr paramGroups;
  if (const json::Value *v = root->get("param_groups")) {
    if (const json::Array *a = v->getAsArray())
      paramGroups = parseParamGroups(*a, ctx, error);
    else
      r.wrong("param_groups", "a list");
  }
  DictionaryAttr lrSchedule = object("lr_schedule", [&](const json::Object &o) {
    return parseLrSchedule(o, ctx, error);
  });
  DictionaryAttr clipGradNorm =
      object("clip_grad_norm", [&](const json::Object &o) {
        return parseClipGradNorm(o, ctx, error);
      });
  if (error.empty() && (paramGroups || lrSchedule || clipGradNorm) &&
      !optimizer)
    error = "'param_groups', 'lr_schedule' and 'clip_grad_norm' need an "
            "'optimizer'";
  // "impl" is written only for fused=True; the loop is the default.
  StringAttr optimizerImpl;
  if (const json::Object *o = root->getObject("optimizer")) {
    if (const json::Value *v = o->get("impl")) {
      std::optional<StringRef> impl = v->getAsString();
      if (impl == "fused")
        optimizerImpl = StringAttr::get(ctx, *impl);
      else if (impl != "forloop")
        FieldReader(*o, "optimizer.", error)
            .wrong("impl", "\"forloop\" or \"fused\"");
    }
  }
  if (!error.empty())
    return fail(error);
  return RunConfigAttr::get(ctx, *worldSize, *microbatches, *seed, optimizer,
                            paramGroups, lrSchedule, optimizerImpl,
                            clipGradNorm);
}

llvm::Expected<SmallVector<std::optional<int64_t>>>
loom::parseBatchDims(StringRef text, ArrayRef<int64_t> inputRanks) {
  llvm::Expected<json::Value> parsed = parseJson(text);
  if (!parsed)
    return parsed.takeError();
  SmallVector<std::optional<int64_t>> dims;
  const json::Object *root = parsed->getAsObject();
  const json::Value *v = root ? root->get("batch_dims") : nullptr;
  if (!v)
    return dims;
  const json::Array *a = v->getAsArray();
  if (!a)
    return fail("'batch_dims' must be a list of non-negative integers or "
                "nulls");
  for (const json::Value &d : *a) {
    std::optional<int64_t> n = d.getAsInteger();
    if (d.kind() != json::Value::Null && (!n || *n < 0))
      return fail("'batch_dims' must be a list of non-negative integers or "
                  "nulls");
    dims.push_back(n);
  }
  if (dims.size() != inputRanks.size())
    return fail("'batch_dims' lists " + Twine(dims.size()) +
                " dims but the step has " + Twine(inputRanks.size()) +
                " batch inputs");
  for (auto [k, dim] : llvm::enumerate(dims))
    if (dim && *dim >= inputRanks[k])
      return fail("'batch_dims' gives batch input #" + Twine(k) + " dim " +
                  Twine(*dim) + ", but it has " + Twine(inputRanks[k]) +
                  " dims");
  return dims;
}
