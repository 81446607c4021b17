//===- ArgConversionTest.cpp - ARGs become the IValues schemas expect -----===//
//
// One test per schema argument type of the ARG table in docs/artifact.md,
// against a schema parsed with LibTorch's own parser, then calls through
// real operators for the list, optional and multi-return cases.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "Kernel.h"

#include <ATen/Context.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/split.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

using namespace loomrt;
using namespace loomrt::test;
using K = ArgValue::Kind;

namespace {

const c10::FunctionSchema &testSchema() {
  static const c10::FunctionSchema schema = torch::jit::parseSchema(
      "loomtest::f(Tensor a, Tensor? b, Tensor[] c, Tensor?[] d, int e, "
      "SymInt f, int[] g, SymInt[2] h, float i, Scalar j, bool k, "
      "bool[] l, str m, ScalarType n, Layout o, Device p, "
      "MemoryFormat q, int? r, float[] s, str[] t, ScalarType? u, "
      "Generator? v) -> Tensor");
  return schema;
}

const c10::Argument &param(const char *name) {
  for (const c10::Argument &a : testSchema().arguments())
    if (a.name() == name)
      return a;
  throw std::runtime_error(std::string("no argument ") + name);
}

ArgValue arg(K kind) {
  ArgValue a;
  a.kind = kind;
  return a;
}
ArgValue slotsArg(K kind, std::vector<int64_t> slots) {
  ArgValue a = arg(kind);
  a.slots = std::move(slots);
  return a;
}
ArgValue intsArg(K kind, std::vector<int64_t> ints) {
  ArgValue a = arg(kind);
  a.ints = std::move(ints);
  return a;
}
ArgValue floatsArg(K kind, std::vector<double> floats) {
  ArgValue a = arg(kind);
  a.floats = std::move(floats);
  return a;
}
ArgValue stringsArg(K kind, std::vector<std::string> strings) {
  ArgValue a = arg(kind);
  a.strings = std::move(strings);
  return a;
}

BoundArg bind(const ArgValue &a, const char *name) {
  return bindArgument(a, param(name), c10::Device(c10::DeviceType::CPU),
                      std::string("args.") + name);
}

TEST(ArgConversion, Tensor) {
  BoundArg b = bind(slotsArg(K::Tensor, {4}), "a");
  EXPECT_EQ(b.kind, BoundArg::Kind::Tensor);
  EXPECT_EQ(b.slots, std::vector<int64_t>{4});
}

TEST(ArgConversion, OptionalTensor) {
  BoundArg b = bind(slotsArg(K::Tensor, {2}), "b");
  EXPECT_EQ(b.kind, BoundArg::Kind::OptionalTensor);
  BoundArg none = bind(arg(K::None), "b");
  EXPECT_EQ(none.kind, BoundArg::Kind::Constant);
  EXPECT_TRUE(none.constant.isNone());
}

TEST(ArgConversion, TensorList) {
  BoundArg b = bind(slotsArg(K::Tensors, {1, 2, 3}), "c");
  EXPECT_EQ(b.kind, BoundArg::Kind::TensorList);
  EXPECT_EQ(b.slots, (std::vector<int64_t>{1, 2, 3}));
}

TEST(ArgConversion, OptionalTensorList) {
  BoundArg b = bind(slotsArg(K::OptionalTensors, {-1, 2}), "d");
  EXPECT_EQ(b.kind, BoundArg::Kind::OptionalTensorList);
  EXPECT_EQ(b.slots, (std::vector<int64_t>{-1, 2}));
  // Without a None element the compiler writes `tensors` (the graph cannot
  // tell Tensor[] from Tensor?[]); it fills Tensor?[] too.
  BoundArg t = bind(slotsArg(K::Tensors, {2, 3}), "d");
  EXPECT_EQ(t.kind, BoundArg::Kind::OptionalTensorList);
  EXPECT_EQ(t.slots, (std::vector<int64_t>{2, 3}));
  // But a list with None is not a Tensor[].
  EXPECT_CONTAINS(
      errorOf([] { bind(slotsArg(K::OptionalTensors, {-1}), "c"); }),
      "a 'optional_tensors' ARG cannot fill argument 'c' of type Tensor[]");
}

TEST(ArgConversion, EmptyIntsFillsAnyList) {
  EXPECT_EQ(bind(intsArg(K::Ints, {}), "c").kind, BoundArg::Kind::TensorList);
  EXPECT_EQ(bind(intsArg(K::Ints, {}), "d").kind,
            BoundArg::Kind::OptionalTensorList);
  EXPECT_TRUE(bind(intsArg(K::Ints, {}), "l").constant.toBoolList().empty());
  EXPECT_TRUE(
      bind(intsArg(K::Ints, {}), "s").constant.toDoubleVector().empty());
  EXPECT_EQ(bind(intsArg(K::Ints, {}), "t").constant.toList().size(), 0u);
  // A non-empty int list is only for int lists.
  EXPECT_CONTAINS(errorOf([] { bind(intsArg(K::Ints, {1}), "s"); }),
                  "a 'ints' ARG cannot fill argument 's' of type float[]");
}

TEST(ArgConversion, NumberForTensorIsAWrappedNumber) {
  // `x / 2.0` in an exported graph is div.Tensor(x, 2.0): PyTorch passes the
  // number as a 0-d wrapped-number tensor, and so does the runtime.
  c10::IValue f = bind(floatsArg(K::Float, {2.5}), "a").constant;
  ASSERT_TRUE(f.isTensor());
  EXPECT_TRUE(f.toTensor().unsafeGetTensorImpl()->is_wrapped_number());
  EXPECT_EQ(f.toTensor().scalar_type(), at::kDouble);
  EXPECT_EQ(f.toTensor().dim(), 0);
  EXPECT_EQ(bind(intsArg(K::Int, {3}), "b").constant.toTensor().scalar_type(),
            at::kLong);
  EXPECT_EQ(bind(intsArg(K::Bool, {1}), "a").constant.toTensor().scalar_type(),
            at::kBool);
}

TEST(ArgConversion, IntAndSymInt) {
  EXPECT_EQ(bind(intsArg(K::Int, {-7}), "e").constant.toInt(), -7);
  c10::IValue sym = bind(intsArg(K::Int, {9}), "f").constant;
  EXPECT_EQ(sym.toInt(), 9);
  EXPECT_CONTAINS(errorOf([] { bind(floatsArg(K::Float, {1.0}), "e"); }),
                  "args.e: a 'float' ARG cannot fill argument 'e' of type "
                  "int");
}

TEST(ArgConversion, IntListAndSymIntList) {
  c10::IValue g = bind(intsArg(K::Ints, {1, -1, 3}), "g").constant;
  ASSERT_TRUE(g.isIntList());
  EXPECT_EQ(g.toIntVector(), (std::vector<int64_t>{1, -1, 3}));
  c10::IValue h = bind(intsArg(K::Ints, {2, 2}), "h").constant;
  EXPECT_EQ(h.toIntVector(), (std::vector<int64_t>{2, 2}));
  c10::IValue empty = bind(intsArg(K::Ints, {}), "g").constant;
  EXPECT_TRUE(empty.toIntVector().empty());
}

TEST(ArgConversion, Float) {
  EXPECT_DOUBLE_EQ(bind(floatsArg(K::Float, {0.25}), "i").constant.toDouble(),
                   0.25);
  // An int fills a float (converted).
  c10::IValue fromInt = bind(intsArg(K::Int, {3}), "i").constant;
  ASSERT_TRUE(fromInt.isDouble());
  EXPECT_DOUBLE_EQ(fromInt.toDouble(), 3.0);
  c10::IValue inf =
      bind(floatsArg(K::Float, {std::numeric_limits<double>::infinity()}), "i")
          .constant;
  EXPECT_TRUE(std::isinf(inf.toDouble()));
}

TEST(ArgConversion, Scalar) {
  c10::IValue i = bind(intsArg(K::Int, {5}), "j").constant;
  EXPECT_TRUE(i.isInt());
  c10::IValue f = bind(floatsArg(K::Float, {-0.5}), "j").constant;
  EXPECT_TRUE(f.isDouble());
  c10::IValue b = bind(intsArg(K::Bool, {1}), "j").constant;
  ASSERT_TRUE(b.isBool());
  EXPECT_TRUE(b.toBool());
  EXPECT_CONTAINS(errorOf([] { bind(stringsArg(K::String, {"x"}), "j"); }),
                  "a 'string' ARG cannot fill argument 'j' of type Scalar");
}

TEST(ArgConversion, BoolAndBoolList) {
  EXPECT_FALSE(bind(intsArg(K::Bool, {0}), "k").constant.toBool());
  c10::IValue l = bind(intsArg(K::Bools, {1, 0, 1}), "l").constant;
  ASSERT_TRUE(l.isBoolList());
  c10::List<bool> bools = l.toBoolList();
  EXPECT_EQ(bools.size(), 3u);
  EXPECT_TRUE(bools[0]);
  EXPECT_FALSE(bools[1]);
  // An int is not a bool.
  EXPECT_CONTAINS(errorOf([] { bind(intsArg(K::Int, {1}), "k"); }),
                  "cannot fill argument 'k' of type bool");
}

TEST(ArgConversion, StringAndStringList) {
  EXPECT_EQ(bind(stringsArg(K::String, {"tanh"}), "m").constant.toStringRef(),
            "tanh");
  c10::IValue t = bind(stringsArg(K::Strings, {"a", "b"}), "t").constant;
  ASSERT_TRUE(t.isList());
  EXPECT_EQ(t.toList().size(), 2u);
}

TEST(ArgConversion, FloatList) {
  c10::IValue s = bind(floatsArg(K::Floats, {1.5, 2.5}), "s").constant;
  ASSERT_TRUE(s.isDoubleList());
  EXPECT_EQ(s.toDoubleVector(), (std::vector<double>{1.5, 2.5}));
}

TEST(ArgConversion, ScalarType) {
  ArgValue a = arg(K::Dtype);
  a.dtype = c10::ScalarType::BFloat16;
  EXPECT_EQ(bind(a, "n").constant.toScalarType(), c10::ScalarType::BFloat16);
  EXPECT_EQ(bind(a, "u").constant.toScalarType(), c10::ScalarType::BFloat16);
  EXPECT_TRUE(bind(arg(K::None), "u").constant.isNone());
  EXPECT_CONTAINS(errorOf([] { bind(intsArg(K::Int, {6}), "n"); }),
                  "cannot fill argument 'n' of type ScalarType");
}

TEST(ArgConversion, Layout) {
  ArgValue a = arg(K::Layout);
  a.layout = c10::Layout::Strided;
  EXPECT_EQ(bind(a, "o").constant.toLayout(), c10::Layout::Strided);
}

TEST(ArgConversion, DeviceIsTheRuntimes) {
  ArgValue a = stringsArg(K::Device, {"cuda:1"});
  a.kind = K::Device;
  c10::IValue d = bind(a, "p").constant;
  ASSERT_TRUE(d.isDevice());
  EXPECT_EQ(d.toDevice(), c10::Device(c10::DeviceType::CPU));
}

TEST(ArgConversion, MemoryFormat) {
  ArgValue a = arg(K::MemoryFormat);
  a.memoryFormat = c10::MemoryFormat::ChannelsLast;
  EXPECT_EQ(bind(a, "q").constant.toMemoryFormat(),
            c10::MemoryFormat::ChannelsLast);
}

TEST(ArgConversion, OptionalInt) {
  EXPECT_EQ(bind(intsArg(K::Int, {3}), "r").constant.toInt(), 3);
  EXPECT_TRUE(bind(arg(K::None), "r").constant.isNone());
}

TEST(ArgConversion, NoneForNonOptional) {
  EXPECT_CONTAINS(errorOf([] { bind(arg(K::None), "e"); }),
                  "args.e: None cannot fill argument 'e' of type int, which "
                  "is not optional");
}

TEST(ArgConversion, GeneratorOnlyNone) {
  EXPECT_TRUE(bind(arg(K::None), "v").constant.isNone());
  EXPECT_CONTAINS(errorOf([] { bind(intsArg(K::Int, {0}), "v"); }),
                  "has schema type Generator?, which loomrt cannot fill");
}

// --- Through real operators -------------------------------------------------

Instruction aten(const char *kernel, const char *overload,
                 std::vector<ArgValue> args, std::vector<ResultSpec> results) {
  Instruction inst;
  inst.op = OpKind::Aten;
  inst.kernel = kernel;
  inst.overload = overload;
  inst.args = std::move(args);
  inst.results = std::move(results);
  return inst;
}

ResultSpec slot(int64_t s) {
  ResultSpec r;
  r.kind = ResultSpec::Kind::Slot;
  r.slot = s;
  return r;
}
ResultSpec none() { return ResultSpec(); }
ResultSpec list(std::vector<int64_t> slots) {
  ResultSpec r;
  r.kind = ResultSpec::Kind::List;
  r.slots = std::move(slots);
  return r;
}

BoundKernel bindKernel(const Instruction &inst) {
  return BoundKernel::bind(inst, c10::Device(c10::DeviceType::CPU), "test");
}

TEST(ArgConversion, TensorListArgumentCallsCat) {
  SlotTable slots;
  slots.resize(4);
  slots.set(0, at::ones({2, 3}));
  slots.set(1, at::arange(6, at::kFloat).reshape({2, 3}));
  BoundKernel k = bindKernel(
      aten("aten::cat", "default",
           {slotsArg(K::Tensors, {0, 1}), intsArg(K::Int, {1})}, {slot(2)}));
  k.run(slots);
  EXPECT_TRUE(
      at::equal(slots.get(2), at::cat({slots.get(0), slots.get(1)}, 1)));
}

TEST(ArgConversion, OptionalTensorListCallsIndex) {
  SlotTable slots;
  slots.resize(3);
  at::Tensor x = at::arange(12, at::kFloat).reshape({3, 4});
  slots.set(0, x);
  slots.set(1, at::arange(2, at::kLong));
  // x[:, [0, 1]]: the first index is None.
  BoundKernel k = bindKernel(
      aten("aten::index", "Tensor",
           {slotsArg(K::Tensor, {0}), slotsArg(K::OptionalTensors, {-1, 1})},
           {slot(2)}));
  k.run(slots);
  EXPECT_TRUE(at::equal(slots.get(2), x.narrow(1, 0, 2)));
}

TEST(ArgConversion, TensorListReturnFillsListOfSlots) {
  SlotTable slots;
  slots.resize(4);
  at::Tensor x = at::arange(6, at::kFloat);
  slots.set(0, x);
  // split(x, 2) returns Tensor[]; the middle part is not needed.
  BoundKernel k = bindKernel(aten(
      "aten::split", "Tensor", {slotsArg(K::Tensor, {0}), intsArg(K::Int, {2})},
      {list({1, -1, 3})}));
  k.run(slots);
  EXPECT_TRUE(at::equal(slots.get(1), x.narrow(0, 0, 2)));
  EXPECT_FALSE(slots.live(2));
  EXPECT_TRUE(at::equal(slots.get(3), x.narrow(0, 4, 2)));
}

TEST(ArgConversion, TensorListReturnWithWrongLength) {
  SlotTable slots;
  slots.resize(4);
  slots.set(0, at::arange(6, at::kFloat));
  BoundKernel k = bindKernel(
      aten("aten::split", "Tensor",
           {slotsArg(K::Tensor, {0}), intsArg(K::Int, {2})}, {list({1, 2})}));
  EXPECT_CONTAINS(errorOf([&] { k.run(slots); }),
                  "results[0]: the kernel returned 3 tensors, the entry lists "
                  "2 slots");
}

TEST(ArgConversion, NoneReturnsAndMultipleReturns) {
  // native_layer_norm_backward returns (grad_input, grad_weight, grad_bias);
  // with output_mask [true, false, false] the last two are None.
  at::manual_seed(0);
  SlotTable slots;
  slots.resize(8);
  at::Tensor x = at::randn({4, 5});
  at::Tensor w = at::randn({5});
  at::Tensor b = at::randn({5});
  auto [out, mean, rstd] = at::native_layer_norm(x, {5}, w, b, 1e-5);
  slots.set(0, at::ones({4, 5}));
  slots.set(1, x);
  slots.set(2, mean);
  slots.set(3, rstd);
  slots.set(4, w);
  ArgValue mask = intsArg(K::Bools, {1, 0, 0});
  BoundKernel k = bindKernel(aten(
      "aten::native_layer_norm_backward", "default",
      {slotsArg(K::Tensor, {0}), slotsArg(K::Tensor, {1}),
       intsArg(K::Ints, {5}), slotsArg(K::Tensor, {2}),
       slotsArg(K::Tensor, {3}), slotsArg(K::Tensor, {4}), arg(K::None), mask},
      {slot(5), slot(6), none()}));
  k.run(slots);
  EXPECT_EQ(slots.get(5).sizes(), x.sizes());
  // A None result given a slot leaves the slot live but undefined.
  EXPECT_TRUE(slots.live(6));
  EXPECT_FALSE(slots.get(6).defined());
}

TEST(ArgConversion, WrappedNumberKeepsTheTensorsDtype) {
  // A wrapped number does not promote: f32 / 2.0 stays f32, as in eager.
  SlotTable slots;
  slots.resize(2);
  slots.set(0, at::arange(4, at::kFloat));
  BoundKernel k = bindKernel(
      aten("aten::div", "Tensor",
           {slotsArg(K::Tensor, {0}), floatsArg(K::Float, {2.0})}, {slot(1)}));
  k.run(slots);
  EXPECT_EQ(slots.get(1).scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(slots.get(1), at::arange(4, at::kFloat).div(2.0)));
}

TEST(ArgConversion, DefaultsFillOmittedArguments) {
  // sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *,
  // ScalarType? dtype=None): keepdim and dtype take their defaults.
  BoundKernel k = bindKernel(
      aten("aten::sum", "dim_IntList",
           {slotsArg(K::Tensor, {0}), intsArg(K::Ints, {0})}, {slot(1)}));
  ASSERT_EQ(k.args().size(), 4u);
  EXPECT_FALSE(k.args()[2].constant.toBool());
  EXPECT_TRUE(k.args()[3].constant.isNone());
  SlotTable slots;
  slots.resize(2);
  slots.set(0, at::ones({3, 2}));
  k.run(slots);
  EXPECT_TRUE(at::equal(slots.get(1), at::full({2}, 3.0)));
}

TEST(ArgConversion, KeywordArguments) {
  Instruction inst =
      aten("aten::sum", "dim_IntList",
           {slotsArg(K::Tensor, {0}), intsArg(K::Ints, {1})}, {slot(1)});
  ArgValue dtype = arg(K::Dtype);
  dtype.dtype = c10::ScalarType::Double;
  inst.kwargs = {{"dtype", dtype}, {"keepdim", intsArg(K::Bool, {1})}};
  BoundKernel k = bindKernel(inst);
  SlotTable slots;
  slots.resize(2);
  slots.set(0, at::ones({3, 2}));
  k.run(slots);
  EXPECT_EQ(slots.get(1).scalar_type(), at::kDouble);
  EXPECT_EQ(slots.get(1).sizes(), (c10::IntArrayRef{3, 1}));
}

TEST(ArgConversion, KeywordErrors) {
  Instruction unknown =
      aten("aten::sum", "dim_IntList",
           {slotsArg(K::Tensor, {0}), intsArg(K::Ints, {1})}, {slot(1)});
  unknown.kwargs = {{"keep_dim", intsArg(K::Bool, {1})}};
  EXPECT_CONTAINS(errorOf([&] { bindKernel(unknown); }),
                  "test aten::sum.dim_IntList kwargs.keep_dim: the schema has "
                  "no argument 'keep_dim'");
  Instruction twice = unknown;
  twice.kwargs = {{"dim", intsArg(K::Ints, {0})}};
  EXPECT_CONTAINS(errorOf([&] { bindKernel(twice); }),
                  "argument 'dim' is already given positionally (args[1])");
}

TEST(ArgConversion, TooManyPositionalArguments) {
  // dtype is keyword-only in sum.dim_IntList.
  ArgValue dtype = arg(K::Dtype);
  dtype.dtype = c10::ScalarType::Double;
  Instruction inst = aten("aten::sum", "dim_IntList",
                          {slotsArg(K::Tensor, {0}), intsArg(K::Ints, {1}),
                           intsArg(K::Bool, {0}), dtype},
                          {slot(1)});
  EXPECT_CONTAINS(errorOf([&] { bindKernel(inst); }),
                  "4 positional args, but the schema takes at most 3");
}

TEST(ArgConversion, MissingRequiredArgument) {
  Instruction inst =
      aten("aten::mm", "default", {slotsArg(K::Tensor, {0})}, {slot(1)});
  EXPECT_CONTAINS(errorOf([&] { bindKernel(inst); }),
                  "argument 'mat2' (Tensor) is missing and has no default");
}

TEST(ArgConversion, ResultShapeAgainstSchema) {
  Instruction scalarReturn = aten("aten::_local_scalar_dense", "default",
                                  {slotsArg(K::Tensor, {0})}, {slot(1)});
  EXPECT_CONTAINS(errorOf([&] { bindKernel(scalarReturn); }),
                  "results[0]: return 0 is Scalar, not a Tensor; its entry "
                  "must be null");
  Instruction listForTensor =
      aten("aten::mm", "default",
           {slotsArg(K::Tensor, {0}), slotsArg(K::Tensor, {1})}, {list({2})});
  EXPECT_CONTAINS(errorOf([&] { bindKernel(listForTensor); }),
                  "return 0 is Tensor, not a Tensor[]; its entry must be a "
                  "slot or null");
}

TEST(ArgConversion, KernelErrorsAreC10Errors) {
  // The session adds the instruction's location; here the c10::Error must
  // come through unchanged.
  SlotTable slots;
  slots.resize(3);
  slots.set(0, at::ones({2, 3}));
  slots.set(1, at::ones({2, 3}));
  BoundKernel k = bindKernel(
      aten("aten::mm", "default",
           {slotsArg(K::Tensor, {0}), slotsArg(K::Tensor, {1})}, {slot(2)}));
  EXPECT_THROW(k.run(slots), c10::Error);
}

} // namespace
