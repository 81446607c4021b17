//===- AtenShapes.cpp - Shape rules of common ATen operators --------------===//
//
// The importer trusts nothing: every imported `loom.aten` whose operator has
// a rule here is checked against the shapes the operator really produces, so
// a graph whose recorded tensor metadata disagrees with its ops is rejected
// at the node that is wrong. Operators without a rule are accepted as they
// are (their shapes come from the exporter's metadata).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace loom;

namespace {
using Shape = SmallVector<int64_t>;
using Results = SmallVector<TensorInfo>;

/// Reads the ATen arguments of one op by schema position.
class ArgReader {
public:
  explicit ArgReader(AtenOp op) : op(op) {}

  Attribute get(unsigned pos, StringRef kwName = {}) const {
    ArrayAttr args = op.getArgs();
    if (pos < args.size())
      return args[pos];
    if (!kwName.empty())
      return op.getKwargs().get(kwName);
    return {};
  }
  RankedTensorType tensor(unsigned pos) const {
    if (auto ref = dyn_cast_or_null<OperandRefAttr>(get(pos)))
      return cast<RankedTensorType>(op->getOperand(ref.getIndex()).getType());
    return {};
  }
  SmallVector<RankedTensorType> tensorList(unsigned pos) const {
    SmallVector<RankedTensorType> out;
    if (auto list = dyn_cast_or_null<ArrayAttr>(get(pos)))
      for (Attribute a : list)
        if (auto ref = dyn_cast<OperandRefAttr>(a))
          out.push_back(
              cast<RankedTensorType>(op->getOperand(ref.getIndex()).getType()));
    return out;
  }
  std::optional<int64_t> integer(unsigned pos, StringRef kw = {}) const {
    if (auto i = dyn_cast_or_null<IntegerAttr>(get(pos, kw)))
      return i.getInt();
    return std::nullopt;
  }
  std::optional<Shape> ints(unsigned pos, StringRef kw = {}) const {
    Attribute a = get(pos, kw);
    if (auto i = dyn_cast_or_null<IntegerAttr>(a))
      return Shape{i.getInt()};
    auto list = dyn_cast_or_null<ArrayAttr>(a);
    if (!list)
      return std::nullopt;
    Shape out;
    for (Attribute e : list) {
      auto i = dyn_cast<IntegerAttr>(e);
      if (!i)
        return std::nullopt;
      out.push_back(i.getInt());
    }
    return out;
  }
  bool boolean(unsigned pos, StringRef kw, bool dflt) const {
    if (auto b = dyn_cast_or_null<BoolAttr>(get(pos, kw)))
      return b.getValue();
    return dflt;
  }
  Type dtype(unsigned pos, StringRef kw) const {
    if (auto t = dyn_cast_or_null<TypeAttr>(get(pos, kw)))
      return t.getValue();
    return {};
  }

  mutable AtenOp op;
};

int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Normalises a possibly negative dimension; fails on out-of-range dims.
FailureOr<int64_t> normDim(AtenOp op, int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    return op.emitOpError("dimension ")
           << dim << " is out of range for a rank-" << rank << " tensor";
  return dim < 0 ? dim + r : dim;
}

FailureOr<Shape> broadcast(AtenOp op, ArrayRef<Shape> shapes) {
  size_t rank = 0;
  for (const Shape &s : shapes)
    rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape &s : shapes) {
    size_t offset = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &o = out[offset + i];
      if (s[i] == o || s[i] == 1)
        continue;
      if (o != 1) {
        auto diag = op.emitOpError("operand shapes are not broadcastable: ");
        llvm::interleave(
            shapes, diag,
            [&](const Shape &sh) {
              diag << "[";
              llvm::interleaveComma(sh, diag);
              diag << "]";
            },
            " vs ");
        return diag;
      }
      o = s[i];
    }
  }
  return out;
}

Results one(Shape shape, Type elementType = {}) {
  return Results{TensorInfo{std::move(shape), elementType}};
}

Shape shapeOf(RankedTensorType t) { return Shape(t.getShape()); }

/// `view`/`reshape` sizes with one -1 resolved against `numel`.
FailureOr<Shape> resolveView(AtenOp op, Shape sizes, int64_t numel) {
  int64_t known = 1;
  int inferred = -1;
  for (auto [i, s] : llvm::enumerate(sizes)) {
    if (s == -1) {
      if (inferred >= 0)
        return op.emitOpError("view sizes have more than one -1");
      inferred = i;
    } else {
      known *= s;
    }
  }
  if (inferred >= 0 && known != 0)
    sizes[inferred] = numel / known;
  if (numElements(sizes) != numel)
    return op.emitOpError("cannot view a tensor of ")
           << numel << " elements with " << numElements(sizes)
           << " elements";
  return sizes;
}

/// What a rule returns: nothing when it cannot tell (an argument it needs is
/// not a constant), a failure it has reported on the op, or the results.
using Inferred = std::optional<FailureOr<Results>>;
using Rule = Inferred (*)(AtenOp, const ArgReader &);

Inferred failedRule() { return FailureOr<Results>(failure()); }

// Every top-level tensor argument takes part in broadcasting.
Inferred elementwise(AtenOp op, Type elementType) {
  SmallVector<Shape> shapes;
  for (Attribute a : op.getArgs())
    if (auto ref = dyn_cast<OperandRefAttr>(a))
      shapes.push_back(shapeOf(
          cast<RankedTensorType>(op->getOperand(ref.getIndex()).getType())));
  if (shapes.empty())
    return std::nullopt;
  FailureOr<Shape> out = broadcast(op, shapes);
  if (failed(out))
    return failedRule();
  return one(*out, elementType);
}

/// The result of `self` (argument 0) as it is: shape and element type.
Inferred sameAsSelf(const ArgReader &args) {
  if (RankedTensorType self = args.tensor(0))
    return one(shapeOf(self), self.getElementType());
  return std::nullopt;
}

bool isComparison(StringRef name) {
  return llvm::StringSwitch<bool>(name)
      .Cases({"aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt",
              "aten::ge"},
             true)
      .Cases({"aten::logical_and", "aten::logical_or", "aten::logical_not",
              "aten::isnan"},
             true)
      .Default(false);
}

bool isPointwise(StringRef name) {
  return llvm::StringSwitch<bool>(name)
      .Cases({"aten::add", "aten::sub", "aten::mul", "aten::div", "aten::pow",
              "aten::maximum", "aten::minimum", "aten::rsub", "aten::where",
              "aten::masked_fill", "aten::atan2"},
             true)
      .Cases({"aten::abs", "aten::neg", "aten::relu", "aten::gelu",
              "aten::silu", "aten::sigmoid", "aten::tanh", "aten::exp",
              "aten::log", "aten::sqrt", "aten::rsqrt", "aten::reciprocal"},
             true)
      .Cases({"aten::sin", "aten::cos", "aten::erf", "aten::clone",
              "aten::alias", "aten::detach", "aten::sign", "aten::clamp",
              "aten::clamp_min", "aten::clamp_max", "aten::hardtanh",
              "aten::leaky_relu"},
             true)
      .Cases({"aten::threshold_backward", "aten::gelu_backward",
              "aten::sigmoid_backward", "aten::tanh_backward",
              "aten::silu_backward", "aten::leaky_relu_backward",
              "aten::hardtanh_backward", "aten::elu", "aten::softplus"},
             true)
      .Cases({"aten::zeros_like", "aten::ones_like", "aten::full_like",
              "aten::empty_like", "aten::rand_like", "aten::randn_like",
              "aten::fill", "aten::lift_fresh_copy"},
             true)
      .Default(false);
}

// Comparisons produce bool tensors; other elementwise ops keep their shape
// and leave dtype promotion unchecked.
Inferred comparisonRule(AtenOp op, const ArgReader &) {
  return elementwise(op, IntegerType::get(op.getContext(), 1));
}

Inferred pointwiseRule(AtenOp op, const ArgReader &args) {
  bool like = op.getOpName().ends_with("_like");
  return elementwise(op, like ? args.dtype(~0u, "dtype") : Type());
}

Inferred toCopyRule(AtenOp op, const ArgReader &args) {
  return elementwise(op, args.dtype(~0u, "dtype"));
}

Inferred copyRule(AtenOp, const ArgReader &args) { return sameAsSelf(args); }

Inferred matmulRule(AtenOp op, const ArgReader &args) {
  StringRef name = op.getOpName();
  bool batched = name == "aten::bmm" || name == "aten::baddbmm";
  unsigned first = name == "aten::mm" || name == "aten::bmm" ? 0 : 1;
  RankedTensorType a = args.tensor(first), b = args.tensor(first + 1);
  if (!a || !b)
    return std::nullopt;
  int64_t rank = batched ? 3 : 2;
  if (a.getRank() != rank || b.getRank() != rank)
    return op.emitOpError("'") << name << "' expects rank-" << rank
                               << " operands, got " << a << " and " << b,
           failedRule();
  if (batched && a.getDimSize(0) != b.getDimSize(0))
    return op.emitOpError("batch sizes differ: ") << a << " vs " << b,
           failedRule();
  if (a.getDimSize(rank - 1) != b.getDimSize(rank - 2))
    return op.emitOpError("contracting dimensions differ: ")
               << a << " vs " << b,
           failedRule();
  if (a.getElementType() != b.getElementType())
    return op.emitOpError("operand element types differ: ")
               << a.getElementType() << " vs " << b.getElementType(),
           failedRule();
  Shape out;
  if (batched)
    out.push_back(a.getDimSize(0));
  out.push_back(a.getDimSize(rank - 2));
  out.push_back(b.getDimSize(rank - 1));
  if (first == 1) {
    RankedTensorType bias = args.tensor(0);
    if (bias && failed(broadcast(op, {shapeOf(bias), out})))
      return failedRule();
  }
  return one(out, a.getElementType());
}

/// `sum.dim_IntList`, `mean.dim`, `amax`, `amin`: the dims reduced away or
/// kept as 1.
Inferred reduceDimsRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  if (!self)
    return std::nullopt;
  std::optional<Shape> dims = args.ints(1, "dim");
  bool keepdim = args.boolean(2, "keepdim", false);
  Type dtype = args.dtype(3, "dtype");
  int64_t rank = self.getRank();
  SmallVector<bool> reduced(rank, !dims || dims->empty());
  if (dims)
    for (int64_t d : *dims) {
      FailureOr<int64_t> nd = normDim(op, d, rank);
      if (failed(nd))
        return failedRule();
      if (rank > 0)
        reduced[*nd] = true;
    }
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d])
      out.push_back(self.getDimSize(d));
    else if (keepdim)
      out.push_back(1);
  }
  return one(out, dtype);
}

/// `sum` and `mean`: over some dims (`dim_IntList`, `dim`) or all of them
/// (`default`, a 0-dim result).
Inferred sumMeanRule(AtenOp op, const ArgReader &args) {
  StringRef overload = op.getOverload();
  if (overload == (op.getOpName() == "aten::sum" ? "dim_IntList" : "dim"))
    return reduceDimsRule(op, args);
  if (overload != "default" || !args.tensor(0))
    return std::nullopt;
  return one({}, args.dtype(1, "dtype"));
}

Inferred softmaxRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  if (!self)
    return std::nullopt;
  if (auto dim = args.integer(1);
      dim && failed(normDim(op, *dim, self.getRank())))
    return failedRule();
  return one(shapeOf(self), self.getElementType());
}

Inferred dropoutRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  if (!self)
    return std::nullopt;
  return Results{{shapeOf(self), self.getElementType()},
                 {shapeOf(self), IntegerType::get(op.getContext(), 1)}};
}

Inferred viewRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  std::optional<Shape> sizes = args.ints(1, "size");
  if (!self || !sizes)
    return std::nullopt;
  FailureOr<Shape> out = resolveView(op, *sizes, numElements(self.getShape()));
  if (failed(out))
    return failedRule();
  return one(*out, self.getElementType());
}

Inferred expandRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  std::optional<Shape> sizes = args.ints(1, "size");
  if (!self || !sizes)
    return std::nullopt;
  if (sizes->size() < static_cast<size_t>(self.getRank()))
    return op.emitOpError("cannot expand a rank-")
               << self.getRank() << " tensor to " << sizes->size()
               << " dimensions",
           failedRule();
  Shape out = *sizes;
  size_t offset = out.size() - self.getRank();
  for (int64_t d = 0; d < self.getRank(); ++d) {
    int64_t in = self.getDimSize(d);
    int64_t &o = out[offset + d];
    if (o == -1)
      o = in;
    else if (in != 1 && in != o)
      return op.emitOpError("cannot expand dimension ")
                 << d << " of size " << in << " to " << o,
             failedRule();
  }
  return one(out, self.getElementType());
}

Inferred permuteRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  std::optional<Shape> dims = args.ints(1, "dims");
  if (!self || !dims)
    return std::nullopt;
  if (dims->size() != static_cast<size_t>(self.getRank()))
    return op.emitOpError("permutation has ")
               << dims->size() << " entries for a rank-" << self.getRank()
               << " tensor",
           failedRule();
  Shape out;
  SmallVector<bool> seen(self.getRank(), false);
  for (int64_t d : *dims) {
    FailureOr<int64_t> nd = normDim(op, d, self.getRank());
    if (failed(nd))
      return failedRule();
    if (seen[*nd])
      return op.emitOpError("permutation repeats dimension ") << *nd,
             failedRule();
    seen[*nd] = true;
    out.push_back(self.getDimSize(*nd));
  }
  return one(out, self.getElementType());
}

Inferred tRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  if (!self)
    return std::nullopt;
  if (self.getRank() > 2)
    return op.emitOpError("aten::t expects a tensor of rank <= 2, got ")
               << self,
           failedRule();
  Shape out = shapeOf(self);
  std::reverse(out.begin(), out.end());
  return one(out, self.getElementType());
}

Inferred transposeRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  std::optional<int64_t> d0 = args.integer(1), d1 = args.integer(2);
  if (!self || !d0 || !d1)
    return std::nullopt;
  FailureOr<int64_t> a = normDim(op, *d0, self.getRank());
  FailureOr<int64_t> b = normDim(op, *d1, self.getRank());
  if (failed(a) || failed(b))
    return failedRule();
  Shape out = shapeOf(self);
  if (self.getRank() > 0)
    std::swap(out[*a], out[*b]);
  return one(out, self.getElementType());
}

Inferred unsqueezeRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  std::optional<int64_t> dim = args.integer(1);
  if (!self || !dim)
    return std::nullopt;
  FailureOr<int64_t> d = normDim(op, *dim, self.getRank() + 1);
  if (failed(d))
    return failedRule();
  Shape out = shapeOf(self);
  out.insert(out.begin() + *d, 1);
  return one(out, self.getElementType());
}

Inferred squeezeRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  if (!self)
    return std::nullopt;
  std::optional<Shape> dims = args.ints(1, "dim");
  SmallVector<bool> drop(self.getRank(), !dims);
  if (dims)
    for (int64_t d : *dims) {
      FailureOr<int64_t> nd = normDim(op, d, self.getRank());
      if (failed(nd))
        return failedRule();
      if (self.getRank() > 0)
        drop[*nd] = true;
    }
  Shape out;
  for (int64_t d = 0; d < self.getRank(); ++d)
    if (!drop[d] || self.getDimSize(d) != 1)
      out.push_back(self.getDimSize(d));
  return one(out, self.getElementType());
}

Inferred embeddingRule(AtenOp op, const ArgReader &args) {
  RankedTensorType weight = args.tensor(0), indices = args.tensor(1);
  if (!weight || !indices)
    return std::nullopt;
  if (weight.getRank() != 2)
    return op.emitOpError("embedding weight must be rank 2, got ") << weight,
           failedRule();
  Shape out = shapeOf(indices);
  out.push_back(weight.getDimSize(1));
  return one(out, weight.getElementType());
}

Inferred embeddingBackwardRule(AtenOp, const ArgReader &args) {
  RankedTensorType grad = args.tensor(0);
  std::optional<int64_t> numWeights = args.integer(2);
  if (!grad || !numWeights || grad.getRank() == 0)
    return std::nullopt;
  return one({*numWeights, grad.getDimSize(grad.getRank() - 1)},
             grad.getElementType());
}

Inferred catRule(AtenOp op, const ArgReader &args) {
  SmallVector<RankedTensorType> inputs = args.tensorList(0);
  // Legacy behaviour: 1-D empty tensors are skipped by cat.
  llvm::erase_if(inputs, [](RankedTensorType t) {
    return t.getRank() == 1 && t.getDimSize(0) == 0;
  });
  if (inputs.empty())
    return std::nullopt;
  int64_t rank = inputs.front().getRank();
  FailureOr<int64_t> dim =
      normDim(op, args.integer(1, "dim").value_or(0), rank);
  if (failed(dim))
    return failedRule();
  Shape out = shapeOf(inputs.front());
  out[*dim] = 0;
  for (RankedTensorType t : inputs) {
    if (t.getRank() != rank)
      return op.emitOpError("cat inputs have different ranks"), failedRule();
    for (int64_t d = 0; d < rank; ++d)
      if (d != *dim && t.getDimSize(d) != out[d])
        return op.emitOpError("cat inputs differ in dimension ") << d,
               failedRule();
    out[*dim] += t.getDimSize(*dim);
  }
  return one(out, inputs.front().getElementType());
}

Inferred sliceRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  if (op.getOverload() != "Tensor" || !self || self.getRank() == 0)
    return std::nullopt;
  FailureOr<int64_t> dim =
      normDim(op, args.integer(1, "dim").value_or(0), self.getRank());
  if (failed(dim))
    return failedRule();
  int64_t size = self.getDimSize(*dim);
  int64_t start = args.integer(2, "start").value_or(0);
  int64_t end = args.integer(3, "end").value_or(INT64_MAX);
  int64_t step = args.integer(4, "step").value_or(1);
  if (step <= 0)
    return op.emitOpError("slice step must be positive"), failedRule();
  auto clampIndex = [&](int64_t i) {
    if (i < 0)
      i += size;
    return std::clamp<int64_t>(i, 0, size);
  };
  start = clampIndex(start);
  end = std::max(clampIndex(end), start);
  Shape out = shapeOf(self);
  out[*dim] = (end - start + step - 1) / step;
  return one(out, self.getElementType());
}

Inferred selectRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  std::optional<int64_t> dim = args.integer(1), index = args.integer(2);
  if (op.getOverload() != "int" || !self || !dim || !index ||
      self.getRank() == 0)
    return std::nullopt;
  FailureOr<int64_t> d = normDim(op, *dim, self.getRank());
  if (failed(d))
    return failedRule();
  int64_t size = self.getDimSize(*d);
  if (*index < -size || *index >= size)
    return op.emitOpError("index ") << *index << " is out of range for "
                                    << "dimension of size " << size,
           failedRule();
  Shape out = shapeOf(self);
  out.erase(out.begin() + *d);
  return one(out, self.getElementType());
}

Inferred gatherRule(AtenOp, const ArgReader &args) {
  RankedTensorType self = args.tensor(0), index = args.tensor(2);
  if (!self || !index)
    return std::nullopt;
  return one(shapeOf(index), self.getElementType());
}

Inferred scatterRule(AtenOp, const ArgReader &args) { return sameAsSelf(args); }

Inferred indexSelectRule(AtenOp op, const ArgReader &args) {
  RankedTensorType self = args.tensor(0), index = args.tensor(2);
  std::optional<int64_t> dim = args.integer(1);
  if (!self || !index || !dim || index.getRank() > 1)
    return std::nullopt;
  FailureOr<int64_t> d = normDim(op, *dim, self.getRank());
  if (failed(d))
    return failedRule();
  Shape out = shapeOf(self);
  if (!out.empty())
    out[*d] = numElements(index.getShape());
  return one(out, self.getElementType());
}

Inferred layerNormRule(AtenOp op, const ArgReader &args) {
  RankedTensorType input = args.tensor(0);
  std::optional<Shape> normalized = args.ints(1);
  if (!input || !normalized)
    return std::nullopt;
  int64_t axis = input.getRank() - normalized->size();
  if (axis < 0 || ArrayRef<int64_t>(input.getShape()).drop_front(axis) !=
                      ArrayRef<int64_t>(*normalized))
    return op.emitOpError("normalized shape does not match the trailing "
                          "dimensions of ")
               << input,
           failedRule();
  Shape stats(input.getShape().take_front(axis));
  stats.append(normalized->size(), 1);
  return Results{
      {shapeOf(input), input.getElementType()}, {stats, {}}, {stats, {}}};
}

Inferred convolutionRule(AtenOp op, const ArgReader &args) {
  RankedTensorType input = args.tensor(0), weight = args.tensor(1);
  std::optional<Shape> stride = args.ints(3), padding = args.ints(4),
                       dilation = args.ints(5);
  std::optional<int64_t> groups = args.integer(8);
  if (!input || !weight || !stride || !padding || !dilation || !groups ||
      args.boolean(6, {}, false))
    return std::nullopt;
  int64_t spatial = input.getRank() - 2;
  if (spatial < 1 || weight.getRank() != input.getRank())
    return op.emitOpError("convolution input ")
               << input << " and weight " << weight
               << " have incompatible ranks",
           failedRule();
  if (input.getDimSize(1) != weight.getDimSize(1) * *groups)
    return op.emitOpError("convolution input has ")
               << input.getDimSize(1) << " channels but weight expects "
               << weight.getDimSize(1) * *groups,
           failedRule();
  auto pick = [](const Shape &s, int64_t i) {
    return s.size() == 1 ? s[0] : s[i];
  };
  Shape out{input.getDimSize(0), weight.getDimSize(0)};
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t in = input.getDimSize(2 + i), k = weight.getDimSize(2 + i);
    int64_t o =
        (in + 2 * pick(*padding, i) - pick(*dilation, i) * (k - 1) - 1) /
            pick(*stride, i) +
        1;
    if (o <= 0)
      return op.emitOpError("convolution output is empty in spatial "
                            "dimension ")
                 << i,
             failedRule();
    out.push_back(o);
  }
  return one(out, input.getElementType());
}

Inferred nllLossRule(AtenOp, const ArgReader &args) {
  RankedTensorType self = args.tensor(0);
  std::optional<int64_t> reduction = args.integer(3);
  if (!self || !reduction)
    return std::nullopt;
  Shape out;
  if (*reduction == 0 && self.getRank() == 2)
    out.push_back(self.getDimSize(0));
  return Results{{out, self.getElementType()},
                 {Shape{}, self.getElementType()}};
}

Inferred scalarTensorRule(AtenOp, const ArgReader &args) {
  return one({}, args.dtype(~0u, "dtype"));
}

/// `full`, `zeros`, `ones`, `empty`: the size argument, the dtype keyword.
Inferred factoryRule(AtenOp, const ArgReader &args) {
  std::optional<Shape> size = args.ints(0, "size");
  if (!size)
    return std::nullopt;
  return one(*size, args.dtype(~0u, "dtype"));
}

/// The rule for an operator name (rules that depend on the overload check
/// it), or null.
Rule findRule(StringRef name) {
  if (isComparison(name))
    return comparisonRule;
  if (isPointwise(name))
    return pointwiseRule;
  return llvm::StringSwitch<Rule>(name)
      .Case("aten::_to_copy", toCopyRule)
      .Case("aten::copy", copyRule)
      .Cases({"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm"},
             matmulRule)
      .Cases({"aten::_softmax", "aten::_log_softmax"}, softmaxRule)
      .Case("aten::native_dropout", dropoutRule)
      .Cases({"aten::view", "aten::_unsafe_view", "aten::reshape"}, viewRule)
      .Case("aten::expand", expandRule)
      .Case("aten::permute", permuteRule)
      .Case("aten::t", tRule)
      .Case("aten::transpose", transposeRule)
      .Case("aten::unsqueeze", unsqueezeRule)
      .Case("aten::squeeze", squeezeRule)
      .Cases({"aten::sum", "aten::mean"}, sumMeanRule)
      .Cases({"aten::amax", "aten::amin"}, reduceDimsRule)
      .Case("aten::embedding", embeddingRule)
      .Case("aten::embedding_dense_backward", embeddingBackwardRule)
      .Case("aten::cat", catRule)
      .Case("aten::slice", sliceRule)
      .Case("aten::select", selectRule)
      .Case("aten::gather", gatherRule)
      .Cases({"aten::scatter", "aten::scatter_add"}, scatterRule)
      .Case("aten::index_select", indexSelectRule)
      .Case("aten::native_layer_norm", layerNormRule)
      .Case("aten::convolution", convolutionRule)
      .Case("aten::nll_loss_forward", nllLossRule)
      .Case("aten::scalar_tensor", scalarTensorRule)
      .Cases({"aten::full", "aten::zeros", "aten::ones", "aten::empty"},
             factoryRule)
      .Default(nullptr);
}
} // namespace

std::optional<FailureOr<SmallVector<TensorInfo>>>
loom::inferAtenResults(AtenOp op) {
  Rule rule = findRule(op.getOpName());
  if (!rule)
    return std::nullopt;
  return rule(op, ArgReader(op));
}
