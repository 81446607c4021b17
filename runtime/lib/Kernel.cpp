//===- Kernel.cpp - Bind and call ATen operators by schema ----------------===//

#include "Kernel.h"

#include "MemoryTracker.h"
#include "loomrt/Dtype.h"
#include "loomrt/KernelSignature.h"

#include "loomrt/Error.h"

#include <ATen/ScalarOps.h>
#include <ATen/core/jit_type.h>
#include <ATen/core/stack.h>
#include <torch/version.h>

#include <sstream>

namespace loomrt {
namespace {

using K = ArgValue::Kind;

std::string schemaString(const c10::FunctionSchema &schema) {
  std::ostringstream os;
  os << schema;
  return os.str();
}

[[noreturn]] void mismatch(const ArgValue &arg, const c10::Argument &schemaArg,
                           const std::string &path) {
  throw Error(path + ": a '" + ArgValue::kindName(arg.kind) +
              "' ARG cannot fill argument '" + schemaArg.name() + "' of type " +
              schemaArg.real_type()->str());
}

/// Converts a non-optional ARG to a value of schema type `type`.
BoundArg convert(const ArgValue &arg, const c10::TypePtr &type,
                 const c10::Argument &schemaArg, bool optional,
                 c10::Device device, const std::string &path) {
  BoundArg out;
  auto constant = [&](c10::IValue v) {
    out.constant = std::move(v);
    return out;
  };
  switch (type->kind()) {
  case c10::TypeKind::TensorType:
    if (arg.kind == K::Int || arg.kind == K::Float || arg.kind == K::Bool) {
      // A Python number where the schema wants a Tensor (`x / 2.0` is
      // div.Tensor in an exported graph): PyTorch's argument parser
      // (python_arg_parser.cpp) passes it as a 0-d int64/double/bool CPU
      // tensor marked as a wrapped number, which type promotion treats
      // like a Scalar. Do the same, so dtypes and values match eager.
      c10::Scalar s = arg.kind == K::Float  ? c10::Scalar(arg.floats[0])
                      : arg.kind == K::Bool ? c10::Scalar(arg.ints[0] != 0)
                                            : c10::Scalar(arg.ints[0]);
      return constant(at::native::wrapped_scalar_tensor(s));
    }
    if (arg.kind != K::Tensor)
      mismatch(arg, schemaArg, path);
    out.kind =
        optional ? BoundArg::Kind::OptionalTensor : BoundArg::Kind::Tensor;
    out.slots = arg.slots;
    return out;
  case c10::TypeKind::IntType:
  case c10::TypeKind::SymIntType:
    if (arg.kind != K::Int)
      mismatch(arg, schemaArg, path);
    return constant(arg.ints[0]);
  case c10::TypeKind::FloatType:
  case c10::TypeKind::SymFloatType:
    // An integral value is a valid float (Python writes `1` for `1.0`).
    if (arg.kind == K::Int)
      return constant(double(arg.ints[0]));
    if (arg.kind != K::Float)
      mismatch(arg, schemaArg, path);
    return constant(arg.floats[0]);
  case c10::TypeKind::NumberType: // Scalar
    if (arg.kind == K::Int)
      return constant(arg.ints[0]);
    if (arg.kind == K::Float)
      return constant(arg.floats[0]);
    if (arg.kind == K::Bool)
      return constant(arg.ints[0] != 0);
    mismatch(arg, schemaArg, path);
  case c10::TypeKind::BoolType:
  case c10::TypeKind::SymBoolType:
    if (arg.kind != K::Bool)
      mismatch(arg, schemaArg, path);
    return constant(arg.ints[0] != 0);
  case c10::TypeKind::StringType:
    if (arg.kind != K::String)
      mismatch(arg, schemaArg, path);
    return constant(arg.strings[0]);
  case c10::TypeKind::ScalarTypeType:
    if (arg.kind != K::Dtype)
      mismatch(arg, schemaArg, path);
    return constant(arg.dtype);
  case c10::TypeKind::LayoutType:
    if (arg.kind != K::Layout)
      mismatch(arg, schemaArg, path);
    return constant(arg.layout);
  case c10::TypeKind::MemoryFormatType:
    if (arg.kind != K::MemoryFormat)
      mismatch(arg, schemaArg, path);
    return constant(arg.memoryFormat);
  case c10::TypeKind::DeviceObjType:
    if (arg.kind != K::Device)
      mismatch(arg, schemaArg, path);
    // The artifact records the capture's device; run where this runtime is.
    return constant(device);
  case c10::TypeKind::ListType: {
    const c10::TypePtr &elem = type->castRaw<c10::ListType>()->getElementType();
    // The compiler writes every empty list as {"ints": []} (the imported
    // graph does not record an empty list's element type); it fills a list
    // of any element type.
    bool emptyList = arg.kind == K::Ints && arg.ints.empty();
    switch (elem->kind()) {
    case c10::TypeKind::TensorType:
      if (arg.kind != K::Tensors && !emptyList)
        mismatch(arg, schemaArg, path);
      out.kind = BoundArg::Kind::TensorList;
      out.slots = arg.slots;
      return out;
    case c10::TypeKind::OptionalType:
      if (elem->castRaw<c10::OptionalType>()->getElementType()->kind() !=
          c10::TypeKind::TensorType)
        break;
      // `tensors` fills Tensor?[] too: without a None element the graph
      // cannot tell the two list types apart.
      if (arg.kind != K::OptionalTensors && arg.kind != K::Tensors &&
          !emptyList)
        mismatch(arg, schemaArg, path);
      out.kind = BoundArg::Kind::OptionalTensorList;
      out.slots = arg.slots;
      return out;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      if (arg.kind != K::Ints)
        mismatch(arg, schemaArg, path);
      return constant(c10::List<int64_t>(arg.ints));
    case c10::TypeKind::FloatType:
      if (arg.kind != K::Floats && !emptyList)
        mismatch(arg, schemaArg, path);
      return constant(c10::List<double>(arg.floats));
    case c10::TypeKind::BoolType: {
      if (arg.kind != K::Bools && !emptyList)
        mismatch(arg, schemaArg, path);
      c10::List<bool> bools;
      if (!emptyList)
        for (int64_t b : arg.ints)
          bools.push_back(b != 0);
      return constant(std::move(bools));
    }
    case c10::TypeKind::StringType:
      if (arg.kind != K::Strings && !emptyList)
        mismatch(arg, schemaArg, path);
      return constant(c10::List<std::string>(arg.strings));
    default:
      break;
    }
    break;
  }
  default:
    break;
  }
  throw Error(path + ": argument '" + schemaArg.name() + "' has schema type " +
              schemaArg.real_type()->str() +
              ", which loomrt cannot fill from an artifact (only None)");
}

} // namespace

BoundArg bindArgument(const ArgValue &arg, const c10::Argument &schemaArg,
                      c10::Device device, const std::string &path) {
  c10::TypePtr type = schemaArg.real_type();
  bool optional = false;
  if (type->kind() == c10::TypeKind::OptionalType) {
    optional = true;
    type = type->castRaw<c10::OptionalType>()->getElementType();
  }
  if (arg.kind == K::None) {
    if (!optional)
      throw Error(path + ": None cannot fill argument '" + schemaArg.name() +
                  "' of type " + schemaArg.real_type()->str() +
                  ", which is not optional");
    return BoundArg{};
  }
  return convert(arg, type, schemaArg, optional, device, path);
}

c10::IValue defaultArgument(const c10::Argument &schemaArg,
                            const std::string &path) {
  if (!schemaArg.default_value())
    throw Error(path + ": argument '" + schemaArg.name() + "' (" +
                schemaArg.real_type()->str() +
                ") is missing and has no default");
  return *schemaArg.default_value();
}

std::optional<c10::OperatorHandle> findOperator(const std::string &kernel,
                                                const std::string &overload) {
  // The dispatcher names the default overload "", Python and the artifact
  // "default".
  return c10::Dispatcher::singleton().findSchema(
      c10::OperatorName(kernel, overload == "default" ? "" : overload));
}

BoundKernel BoundKernel::bind(const Instruction &inst, c10::Device device,
                              const std::string &path) {
  BoundKernel k;
  k.qualifiedKernel_ = inst.qualifiedKernel();
  k.op_ = findOperator(inst.kernel, inst.overload);
  if (!k.op_)
    throw Error(path + ": unknown kernel " + inst.qualifiedKernel() +
                ": this LibTorch (" TORCH_VERSION
                ") registers no operator with that name and overload");
  const c10::FunctionSchema &schema = k.op_->schema();
  const std::vector<c10::Argument> &params = schema.arguments();
  std::string where = path + " " + inst.qualifiedKernel();

  size_t numPositional = 0;
  while (numPositional < params.size() && !params[numPositional].kwarg_only())
    ++numPositional;
  if (inst.args.size() > numPositional)
    throw Error(where + ": " + std::to_string(inst.args.size()) +
                " positional args, but the schema takes at most " +
                std::to_string(numPositional) + ": " + schemaString(schema));

  std::vector<std::optional<BoundArg>> bound(params.size());
  for (size_t i = 0; i < inst.args.size(); ++i)
    bound[i] = bindArgument(inst.args[i], params[i], device,
                            where + " args[" + std::to_string(i) + "]");
  for (const auto &[name, value] : inst.kwargs) {
    std::string kwPath = where + " kwargs." + name;
    size_t i = 0;
    while (i < params.size() && params[i].name() != name)
      ++i;
    if (i == params.size())
      throw Error(kwPath + ": the schema has no argument '" + name +
                  "': " + schemaString(schema));
    if (bound[i])
      throw Error(kwPath + ": argument '" + name +
                  "' is already given positionally (args[" + std::to_string(i) +
                  "])");
    bound[i] = bindArgument(value, params[i], device, kwPath);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (bound[i])
      continue;
    BoundArg d;
    d.constant = defaultArgument(params[i], where);
    bound[i] = std::move(d);
  }
  for (std::optional<BoundArg> &b : bound)
    k.args_.push_back(std::move(*b));

  const std::vector<c10::Argument> &returns = schema.returns();
  if (inst.results.size() != returns.size())
    throw Error(where + ": results has " + std::to_string(inst.results.size()) +
                " entries, but the operator returns " +
                std::to_string(returns.size()) + ": " + schemaString(schema));
  for (size_t i = 0; i < returns.size(); ++i) {
    const ResultSpec &r = inst.results[i];
    c10::TypePtr type = returns[i].real_type();
    if (type->kind() == c10::TypeKind::OptionalType)
      type = type->castRaw<c10::OptionalType>()->getElementType();
    std::string rp = where + " results[" + std::to_string(i) + "]";
    if (r.kind == ResultSpec::Kind::Slot &&
        type->kind() != c10::TypeKind::TensorType)
      throw Error(rp + ": return " + std::to_string(i) + " is " +
                  returns[i].real_type()->str() +
                  ", not a Tensor; its entry must be null" +
                  (type->kind() == c10::TypeKind::ListType
                       ? " or a list of slots"
                       : ""));
    if (r.kind == ResultSpec::Kind::List &&
        !(type->kind() == c10::TypeKind::ListType &&
          type->castRaw<c10::ListType>()->getElementType()->kind() ==
              c10::TypeKind::TensorType))
      throw Error(rp + ": return " + std::to_string(i) + " is " +
                  returns[i].real_type()->str() +
                  ", not a Tensor[]; its entry must be " +
                  (type->kind() == c10::TypeKind::TensorType ? "a slot or null"
                                                             : "null"));
  }
  k.results_ = inst.results;
  return k;
}

namespace {
/// "f32[8,16]" for a tensor, nothing for None; every tensor of a list.
void describeTensors(const c10::IValue &v, std::vector<std::string> &out) {
  auto one = [&](const at::Tensor &t) {
    if (t.defined())
      out.push_back(
          spellSignatureTensor(artifactDtypeName(t.scalar_type()), t.sizes()));
  };
  if (v.isTensor())
    one(v.toTensor());
  else if (v.isTensorList())
    for (const at::Tensor &t : v.toTensorVector())
      one(t);
  else if (v.isList())
    for (const c10::IValue &e : v.toListRef())
      if (e.isTensor())
        one(e.toTensor());
}
} // namespace

void BoundKernel::run(SlotTable &slots, KernelMeasurement *measured) const {
  torch::jit::Stack stack;
  stack.reserve(args_.size());
  for (const BoundArg &a : args_) {
    switch (a.kind) {
    case BoundArg::Kind::Constant:
      stack.push_back(a.constant);
      break;
    case BoundArg::Kind::Tensor:
      stack.emplace_back(slots.get(a.slots[0]));
      break;
    case BoundArg::Kind::OptionalTensor: {
      const at::Tensor &t = slots.get(a.slots[0]);
      if (t.defined())
        stack.emplace_back(t);
      else
        stack.emplace_back();
      break;
    }
    case BoundArg::Kind::TensorList: {
      c10::List<at::Tensor> list;
      list.reserve(a.slots.size());
      for (int64_t s : a.slots)
        list.push_back(slots.get(s));
      stack.emplace_back(std::move(list));
      break;
    }
    case BoundArg::Kind::OptionalTensorList: {
      c10::List<std::optional<at::Tensor>> list;
      list.reserve(a.slots.size());
      for (int64_t s : a.slots) {
        if (s < 0 || !slots.get(s).defined())
          list.push_back(std::nullopt);
        else
          list.push_back(slots.get(s));
      }
      stack.emplace_back(std::move(list));
      break;
    }
    }
  }

  MemoryTracker *tracker = measured ? MemoryTracker::installed() : nullptr;
  std::vector<std::string> inputs;
  if (tracker) {
    for (const c10::IValue &v : stack)
      describeTensors(v, inputs);
    tracker->beginWindow();
  }
  op_->callBoxed(stack);
  if (tracker) {
    measured->workspaceBytes = tracker->windowPeak() - tracker->current();
    std::vector<std::string> results;
    for (const c10::IValue &v : stack)
      describeTensors(v, results);
    measured->signature =
        kernelSignature(qualifiedKernel_, std::move(inputs), std::move(results));
  }

  if (stack.size() != results_.size())
    throw Error("the kernel left " + std::to_string(stack.size()) +
                " values on the stack, its schema returns " +
                std::to_string(results_.size()));
  for (size_t i = 0; i < results_.size(); ++i) {
    const ResultSpec &r = results_[i];
    c10::IValue &v = stack[i];
    std::string rp = "results[" + std::to_string(i) + "]";
    if (r.kind == ResultSpec::Kind::Slot) {
      if (v.isTensor())
        slots.set(r.slot, std::move(v).toTensor());
      else if (v.isNone())
        slots.set(r.slot, at::Tensor());
      else
        throw Error(rp + ": the kernel returned a " + v.tagKind() +
                    ", not a Tensor");
    } else if (r.kind == ResultSpec::Kind::List) {
      if (!v.isTensorList())
        throw Error(rp + ": the kernel returned a " + v.tagKind() +
                    ", not a Tensor[]");
      c10::List<at::Tensor> list = std::move(v).toTensorList();
      if (list.size() != r.slots.size())
        throw Error(rp + ": the kernel returned " +
                    std::to_string(list.size()) + " tensors, the entry lists " +
                    std::to_string(r.slots.size()) + " slots");
      for (size_t j = 0; j < list.size(); ++j)
        if (r.slots[j] >= 0)
          slots.set(r.slots[j], list.get(j));
    }
  }
}

} // namespace loomrt
