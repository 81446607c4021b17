//===- LoomRTOps.cpp - Verifiers of loomrt operations ---------------------===//

#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;
using namespace loom::rt;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

int64_t loom::rt::getSlot(Value value) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return -1;
  if (auto input = dyn_cast<InputOp>(def))
    return input.getSlot().value_or(-1);
  if (auto state = dyn_cast<StateOp>(def))
    return state.getSlot().value_or(-1);
  if (auto aten = dyn_cast<rt::AtenOp>(def))
    if (std::optional<ArrayRef<int64_t>> slots = aten.getSlots())
      return (*slots)[cast<OpResult>(value).getResultNumber()];
  if (auto start = dyn_cast<CollectiveStartOp>(def))
    return start.getSlot().value_or(-1);
  if (auto wait = dyn_cast<rt::WaitOp>(def))
    return wait.getSlot().value_or(-1);
  return -1;
}

std::optional<int64_t> loom::rt::getStream(Operation *op) {
  return TypeSwitch<Operation *, std::optional<int64_t>>(op)
      .Case<rt::AtenOp, FreeOp, OptimizerOp, RecordEventOp, WaitEventOp,
            CollectiveStartOp, rt::WaitOp>(
          [](auto instruction) -> std::optional<int64_t> {
            return instruction.getStreamAttr().getInt();
          })
      .Default([](Operation *) { return std::nullopt; });
}

/// Every instruction names one of its program's streams by index.
static LogicalResult verifyStream(Operation *op, int64_t stream) {
  auto program = dyn_cast_or_null<ProgramOp>(op->getParentOp());
  if (!program)
    return success();
  int64_t numStreams = program.getStreams().size();
  if (stream < 0 || stream >= numStreams)
    return op->emitOpError("stream ")
           << stream << " is out of range: the program has " << numStreams
           << " stream(s)";
  return success();
}

/// The first op after `op` in its block that uses `value`, if any.
static Operation *findUseAfter(Value value, Operation *op) {
  Operation *first = nullptr;
  for (Operation *user : value.getUsers()) {
    if (user == op || user->getBlock() != op->getBlock() ||
        !op->isBeforeInBlock(user))
      continue;
    if (!first || user->isBeforeInBlock(first))
      first = user;
  }
  return first;
}

/// A short description of a value for diagnostics: the binding's name
/// where it has one.
static std::string describe(Value value) {
  if (auto input = value.getDefiningOp<InputOp>())
    return ("'" + input.getBindingName() + "' (" +
            stringifyRole(input.getRole()) + ")")
        .str();
  if (auto state = value.getDefiningOp<StateOp>())
    return ("'" + state.getBindingName() + "' (optimizer state)").str();
  if (Operation *def = value.getDefiningOp())
    return ("a result of '" + def->getName().getStringRef() + "'").str();
  return "a block argument";
}

//===----------------------------------------------------------------------===//
// ProgramOp
//===----------------------------------------------------------------------===//

Operation *ProgramOp::lookupBinding(StringRef name) {
  for (Operation &op : getBody().front()) {
    if (auto input = dyn_cast<InputOp>(op);
        input && input.getBindingName() == name)
      return input;
    if (auto state = dyn_cast<StateOp>(op);
        state && state.getBindingName() == name)
      return state;
  }
  return nullptr;
}

LogicalResult ProgramOp::verify() {
  // I64Attr getters are unsigned; the checks are about signed values.
  int64_t worldSize = getWorldSizeAttr().getInt();
  int64_t rank = getRankAttr().getInt();
  if (worldSize < 1)
    return emitOpError("world_size must be at least 1, got ") << worldSize;
  if (rank < 0 || rank >= worldSize)
    return emitOpError("rank ")
           << rank << " is out of range for world_size " << worldSize;
  if (getStreams().empty())
    return emitOpError("must name at least one stream");
  llvm::StringSet<> seen;
  for (Attribute s : getStreams()) {
    StringRef name = cast<StringAttr>(s).getValue();
    if (name.empty())
      return emitOpError("stream names must not be empty");
    if (!seen.insert(name).second)
      return emitOpError("stream '") << name << "' is named twice";
  }
  if (FlatSymbolRefAttr meshRef = getMeshAttr()) {
    auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(
        getOperation(), meshRef.getAttr());
    if (!mesh)
      return emitOpError("mesh ") << meshRef << " does not name a loom.mesh";
    if (mesh.getNumRanks() != worldSize)
      return emitOpError("world_size ")
             << worldSize << " differs from the " << mesh.getNumRanks()
             << " ranks of mesh " << meshRef;
    if (rank != 0)
      return emitOpError("a program with a mesh runs on every rank of it; "
                         "its rank must be 0, got ")
             << rank;
  }
  if (std::optional<ArrayRef<int64_t>> ranks = getRanks()) {
    // An MPMD program runs on some ranks of its mesh (docs/pipeline.md).
    if (!getMeshAttr())
      return emitOpError("lists 'ranks' but has no mesh; an MPMD program "
                         "runs on ranks of a loom.mesh");
    if (ranks->empty())
      return emitOpError("'ranks' must list at least one rank");
    for (auto [i, r] : llvm::enumerate(*ranks)) {
      if (r < 0 || r >= worldSize)
        return emitOpError("rank ")
               << r << " in 'ranks' is out of range for world_size "
               << worldSize;
      if (i > 0 && r <= (*ranks)[i - 1])
        return emitOpError("'ranks' must be strictly increasing, got ")
               << (*ranks)[i - 1] << " before " << r;
    }
  }
  if (IntegerAttr n = getNumSlotsAttr(); n && n.getInt() < 0)
    return emitOpError("slots must not be negative, got ") << n.getInt();
  if (!getBody().front().getArguments().empty())
    return emitOpError("the program's block takes no arguments; values "
                       "enter through loomrt.input and loomrt.state");
  return success();
}

namespace {
/// Checks the program's block as a whole: the order of bindings,
/// instructions and outputs; the binding tables; and, once slots are
/// assigned, that every slot holds one value at a time.
class ProgramVerifier {
public:
  explicit ProgramVerifier(ProgramOp program) : program(program) {}

  LogicalResult verify() {
    if (failed(verifyLayout()) || failed(verifyBindings()) ||
        failed(verifyOutputs()))
      return failure();
    if (std::optional<int64_t> n = program.getNumSlots())
      return verifySlots(*n);
    return verifyNoSlots();
  }

private:
  Block &block() { return program.getBody().front(); }

  LogicalResult verifyLayout() {
    enum Section { Bindings, Instructions, Outputs } section = Bindings;
    for (Operation &op : block()) {
      if (isa<InputOp, StateOp>(op)) {
        if (section != Bindings)
          return op.emitOpError("bindings must come before the program's "
                                "first instruction");
      } else if (isa<rt::AtenOp, FreeOp, OptimizerOp, RecordEventOp,
                     WaitEventOp, CollectiveStartOp, rt::WaitOp>(op)) {
        if (section == Outputs)
          return op.emitOpError(
              "instructions must come before the program's outputs");
        section = Instructions;
      } else if (isa<OutputOp>(op)) {
        section = Outputs;
      } else if (!isa<ReturnOp>(op)) {
        return op.emitOpError("is not a loomrt instruction; a program holds "
                              "only loomrt bindings, instructions and "
                              "outputs");
      }
    }
    return success();
  }

  LogicalResult verifyBindings() {
    llvm::StringMap<Operation *> names;
    llvm::DenseMap<int64_t, InputOp> batchIndices;
    for (Operation &op : block()) {
      StringRef name;
      if (auto input = dyn_cast<InputOp>(op)) {
        name = input.getBindingName();
        if (std::optional<int64_t> b = input.getBatchIndex()) {
          auto [it, inserted] = batchIndices.try_emplace(*b, input);
          if (!inserted)
            return input.emitOpError("batch_index ")
                   << *b << " is bound twice (also by '"
                   << it->second.getBindingName() << "')";
        }
      } else if (auto state = dyn_cast<StateOp>(op)) {
        name = state.getBindingName();
      } else {
        continue;
      }
      if (!names.try_emplace(name, &op).second)
        return op.emitOpError("binding name '") << name << "' is used twice";
    }
    for (auto state : block().getOps<StateOp>()) {
      auto param = dyn_cast_or_null<InputOp>(names.lookup(state.getParam()));
      if (!param || param.getRole() != Role::parameter)
        return state.emitOpError("belongs to '")
               << state.getParam() << "', which is not a parameter binding";
      if (param.getType() != state.getType())
        return state.emitOpError("has type ")
               << state.getType() << " but its parameter '" << state.getParam()
               << "' has type " << param.getType();
    }
    return success();
  }

  LogicalResult verifyOutputs() {
    unsigned numLosses = 0;
    llvm::StringSet<> targets;
    for (auto output : block().getOps<OutputOp>()) {
      if (output.getRole() == Role::loss) {
        if (++numLosses > 1)
          return output.emitOpError("a program has at most one loss output");
        continue;
      }
      StringRef target = *output.getTarget();
      auto input = dyn_cast_or_null<InputOp>(program.lookupBinding(target));
      Role expected =
          output.getRole() == Role::grad ? Role::parameter : Role::buffer;
      if (!input || input.getRole() != expected)
        return output.emitOpError("targets '")
               << target << "', which is not a " << stringifyRole(expected)
               << " binding";
      if (input.getType() != output.getValue().getType())
        return output.emitOpError("has type ")
               << output.getValue().getType() << " but '" << target
               << "' has type " << input.getType();
      if (!targets
               .insert((stringifyRole(output.getRole()) + ":" + target).str())
               .second)
        return output.emitOpError("a second ")
               << stringifyRole(output.getRole()) << " output for '" << target
               << "'";
    }
    return success();
  }

  LogicalResult verifyNoSlots() {
    for (Operation &op : block()) {
      bool hasSlot =
          TypeSwitch<Operation *, bool>(&op)
              .Case([](InputOp o) { return o.getSlot().has_value(); })
              .Case([](StateOp o) { return o.getSlot().has_value(); })
              .Case([](rt::AtenOp o) { return o.getSlots().has_value(); })
              .Case([](CollectiveStartOp o) { return o.getSlot().has_value(); })
              .Case([](rt::WaitOp o) { return o.getSlot().has_value(); })
              .Default([](Operation *) { return false; });
      if (hasSlot)
        return op.emitOpError("has a slot, but the program's slots are not "
                              "assigned (no 'slots' on loomrt.program)");
    }
    return success();
  }

  LogicalResult verifySlots(int64_t numSlots) {
    // The value each slot holds at the current point of the program.
    SmallVector<Value> holds(numSlots);
    auto write = [&](Operation *op, Value value,
                     int64_t slot) -> LogicalResult {
      if (slot < 0 || slot >= numSlots)
        return op->emitOpError("slot ")
               << slot << " is out of range (the program has " << numSlots
               << " slots)";
      if (Value old = holds[slot]) {
        InFlightDiagnostic diag = op->emitOpError("writes slot ")
                                  << slot << ", which still holds "
                                  << describe(old) << "; free it first";
        diag.attachNote(old.getLoc())
            << "the value in the slot is defined here";
        return failure();
      }
      holds[slot] = value;
      return success();
    };
    for (Operation &op : block()) {
      if (isa<InputOp, StateOp>(op)) {
        int64_t slot = getSlot(op.getResult(0));
        if (slot < 0)
          return op.emitOpError("has no slot, but the program's slots are "
                                "assigned");
        if (failed(write(&op, op.getResult(0), slot)))
          return failure();
      } else if (auto aten = dyn_cast<rt::AtenOp>(op)) {
        if (!aten.getSlots())
          return aten.emitOpError("has no 'slots', but the program's slots "
                                  "are assigned");
        for (auto [result, slot] :
             llvm::zip(aten.getResults(), *aten.getSlots())) {
          if (slot < 0) {
            if (!result.use_empty())
              return aten.emitOpError("result #")
                     << result.getResultNumber() << " is read but has no slot";
            continue;
          }
          if (failed(write(aten, result, slot)))
            return failure();
        }
      } else if (isa<CollectiveStartOp, rt::WaitOp>(op)) {
        // The wait of a send yields nothing and so takes no slot.
        Value result = op.getNumResults() ? op.getResult(0) : Value();
        int64_t slot = result ? getSlot(result) : -1;
        if (result && slot < 0)
          return op.emitOpError("has no slot, but the program's slots are "
                                "assigned");
        if (!result && cast<rt::WaitOp>(op).getSlot())
          return op.emitOpError("waits for a send, which yields no value; it "
                                "takes no slot");
        if (auto wait = dyn_cast<rt::WaitOp>(op)) {
          // The collective (or send) reads its input until here.
          Value input = wait.getFuture()
                            .getDefiningOp<CollectiveStartOp>()
                            .getInput();
          int64_t inputSlot = input ? getSlot(input) : -1;
          if (inputSlot >= 0 && holds[inputSlot] != input)
            return wait.emitOpError("waits for a collective whose input "
                                    "(slot ")
                   << inputSlot
                   << ") was freed or overwritten before the wait";
        }
        if (result && failed(write(&op, result, slot)))
          return failure();
        // The wait consumes the future: its slot is free again.
        if (auto wait = dyn_cast<rt::WaitOp>(op)) {
          int64_t futureSlot = getSlot(wait.getFuture());
          if (futureSlot >= 0 && holds[futureSlot] == wait.getFuture())
            holds[futureSlot] = nullptr;
        }
      } else if (auto free = dyn_cast<FreeOp>(op)) {
        // Every freed value was written above (bindings and read results
        // have slots) and is not freed again (the free verifier rules out
        // uses after a free), so its slot still holds it.
        for (Value v : free.getValues())
          if (int64_t slot = getSlot(v); slot >= 0 && holds[slot] == v)
            holds[slot] = nullptr;
      }
    }
    return success();
  }

  ProgramOp program;
};
} // namespace

LogicalResult ProgramOp::verifyRegions() {
  return ProgramVerifier(*this).verify();
}

//===----------------------------------------------------------------------===//
// Bindings and outputs
//===----------------------------------------------------------------------===//

static LogicalResult verifyBindingType(Operation *op, Type type) {
  Type element = cast<RankedTensorType>(type).getElementType();
  if (getDtypeName(element).empty())
    return op->emitOpError("element type ")
           << element << " is not a dtype of artifact format v1";
  return success();
}

static LogicalResult verifyBindingSlot(Operation *op,
                                       std::optional<int64_t> slot) {
  if (slot && *slot < 0)
    return op->emitOpError("slot must not be negative, got ") << *slot;
  return success();
}

bool InputOp::isRuntimeOwned() { return getRole() != Role::input; }

void InputOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), getBindingName());
}

LogicalResult InputOp::verify() {
  Role role = getRole();
  if (role != Role::parameter && role != Role::buffer &&
      role != Role::constant && role != Role::input)
    return emitOpError("role must be parameter, buffer, constant or input, "
                       "got ")
           << stringifyRole(role);
  if (getBindingName().empty())
    return emitOpError("binding name must not be empty");
  if (role == Role::input && !getBatchIndex())
    return emitOpError("an input binding needs the 'batch_index' of its "
                       "batch element");
  if (role != Role::input && getBatchIndex())
    return emitOpError("only bindings of role input take a 'batch_index'");
  if (getSplit() && role != Role::input)
    return emitOpError("only bindings of role input are split over ranks");
  if (getShard() && role != Role::parameter)
    return emitOpError("only parameters are sharded over ranks");
  if (SplitAttr split = getSplitAttr();
      split && (split.getDim() < 0 || split.getDim() >= getType().getRank()))
    return emitOpError("split dim ")
           << split.getDim() << " is out of range for " << getType();
  if (IntegerAttr b = getBatchIndexAttr(); b && b.getInt() < 0)
    return emitOpError("batch_index must not be negative, got ") << b.getInt();
  if (failed(verifyBindingSlot(*this, getSlot())))
    return failure();
  return verifyBindingType(*this, getType());
}

void StateOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), getBindingName());
}

LogicalResult StateOp::verify() {
  if (getBindingName().empty() || getParam().empty())
    return emitOpError("state and parameter names must not be empty");
  if (!isa<FloatType>(getType().getElementType()))
    return emitOpError("optimizer state must be a floating-point tensor, got ")
           << getType();
  if (failed(verifyBindingSlot(*this, getSlot())))
    return failure();
  if (getInit() == StateInit::initial_accumulator_value) {
    auto program = (*this)->getParentOfType<ProgramOp>();
    if (!program || !program.getOptimizer() ||
        !isa<AdagradAttr>(*program.getOptimizer()))
      return emitOpError("init initial_accumulator_value needs the program's "
                         "optimizer to be #loom.adagrad");
  }
  return verifyBindingType(*this, getType());
}

LogicalResult OutputOp::verify() {
  Role role = getRole();
  if (role != Role::loss && role != Role::grad && role != Role::buffer_mutation)
    return emitOpError("role must be loss, grad or buffer_mutation, got ")
           << stringifyRole(role);
  if (getPartial() && role != Role::loss)
    return emitOpError("only the loss is partial over ranks");
  if (role == Role::loss) {
    if (getTarget())
      return emitOpError("a loss output has no target");
    if (getValue().getType().getRank() != 0)
      return emitOpError("the loss must be a 0-d tensor, got ")
             << getValue().getType();
  } else if (!getTarget() || getTarget()->empty()) {
    return emitOpError("a ")
           << stringifyRole(role) << " output needs the 'target' it updates";
  }
  return verifyBindingType(*this, getValue().getType());
}

//===----------------------------------------------------------------------===//
// AtenOp
//===----------------------------------------------------------------------===//

StringRef rt::AtenOp::getOpName() { return getKernel().split('.').first; }
StringRef rt::AtenOp::getOverload() { return getKernel().split('.').second; }

void rt::AtenOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  // Naming results by slot makes slot reuse visible in the printed IR.
  std::optional<ArrayRef<int64_t>> slots = getSlots();
  if (!slots || slots->size() != getNumResults())
    return;
  for (auto [result, slot] : llvm::zip(getResults(), *slots))
    if (slot >= 0)
      setNameFn(result, ("s" + Twine(slot)).str());
}

namespace {
/// What a list argument holds; one kind per list, as each maps to one ARG
/// encoding of the artifact.
enum class ListKind { Empty, Ints, Floats, Bools, Strings, Tensors };
} // namespace

static const char *kArgKinds =
    "expected #loom.arg<N>, unit, i64, f64, bool, string, a dtype, "
    "#loomrt.device, #loomrt.layout, #loomrt.memory_format, or a list of "
    "one kind of these";

/// Checks one ATen argument value and counts its operand references.
static LogicalResult verifyArgValue(rt::AtenOp op, Attribute attr,
                                    SmallVectorImpl<unsigned> &uses,
                                    bool inList, ListKind *listKind) {
  auto setKind = [&](ListKind k) -> LogicalResult {
    if (!inList)
      return success();
    // None elements sit among tensors in a Tensor?[].
    if (*listKind == ListKind::Empty || *listKind == k)
      *listKind = k;
    else
      return op.emitOpError("list argument mixes element kinds; ") << kArgKinds;
    return success();
  };
  if (auto ref = dyn_cast<OperandRefAttr>(attr)) {
    if (ref.getIndex() >= op->getNumOperands())
      return op.emitOpError("argument refers to operand #")
             << ref.getIndex() << " but the op has " << op->getNumOperands()
             << " operands";
    uses[ref.getIndex()]++;
    return setKind(ListKind::Tensors);
  }
  if (isa<UnitAttr>(attr))
    return setKind(ListKind::Tensors);
  if (auto b = dyn_cast<BoolAttr>(attr))
    return setKind(ListKind::Bools);
  if (auto i = dyn_cast<IntegerAttr>(attr)) {
    if (!i.getType().isSignlessInteger(64))
      return op.emitOpError("integer argument ") << attr << " must be an i64";
    return setKind(ListKind::Ints);
  }
  if (auto f = dyn_cast<FloatAttr>(attr)) {
    if (!f.getType().isF64())
      return op.emitOpError("float argument ") << attr << " must be an f64";
    return setKind(ListKind::Floats);
  }
  if (isa<StringAttr>(attr))
    return setKind(ListKind::Strings);
  if (!inList) {
    if (auto t = dyn_cast<TypeAttr>(attr)) {
      if (getDtypeName(t.getValue()).empty())
        return op.emitOpError("dtype argument ")
               << t.getValue() << " is not a dtype of artifact format v1";
      return success();
    }
    if (isa<DeviceAttr, LayoutAttr, MemoryFormatAttr>(attr))
      return success();
    if (auto list = dyn_cast<ArrayAttr>(attr)) {
      ListKind kind = ListKind::Empty;
      for (Attribute element : list)
        if (failed(verifyArgValue(op, element, uses, /*inList=*/true, &kind)))
          return failure();
      return success();
    }
  }
  return op.emitOpError("argument ")
         << attr << " is not an ATen argument loomrt can encode; " << kArgKinds;
}

LogicalResult rt::AtenOp::verify() {
  StringRef kernel = getKernel();
  auto [ns, rest] = kernel.split("::");
  auto [name, overload] = rest.split('.');
  if (ns.empty() || name.empty() || overload.empty())
    return emitOpError("kernel '")
           << kernel << "' is not a schema name with an overload like "
           << "'aten::mm.default'";
  if (failed(verifyStream(*this, getStream())))
    return failure();

  SmallVector<unsigned> uses(getNumOperands(), 0);
  for (Attribute arg : getArgs())
    if (failed(verifyArgValue(*this, arg, uses, false, nullptr)))
      return failure();
  for (NamedAttribute kwarg : getKwargs())
    if (failed(verifyArgValue(*this, kwarg.getValue(), uses, false, nullptr)))
      return failure();
  for (auto [i, n] : llvm::enumerate(uses))
    if (n != 1)
      return emitOpError("operand #")
             << i << " is referenced " << n
             << " times by the argument list, expected exactly once";

  if (std::optional<ArrayAttr> returns = getReturns())
    if (failed(verifyAtenReturns(*this, *returns)))
      return failure();

  for (Type t : getResultTypes())
    if (getDtypeName(cast<RankedTensorType>(t).getElementType()).empty())
      return emitOpError("result type ")
             << t << " has no dtype in artifact format v1";

  if (std::optional<ArrayRef<int64_t>> slots = getSlots()) {
    if (slots->size() != getNumResults())
      return emitOpError("has ")
             << slots->size() << " slots for " << getNumResults() << " results";
    llvm::SmallDenseSet<int64_t> seen;
    for (int64_t slot : *slots) {
      if (slot < -1)
        return emitOpError("slot ")
               << slot << " is invalid (a slot, or -1 for no slot)";
      if (slot >= 0 && !seen.insert(slot).second)
        return emitOpError("slot ") << slot << " receives two results";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// FreeOp
//===----------------------------------------------------------------------===//

LogicalResult FreeOp::verify() {
  if (getValues().empty())
    return emitOpError("frees nothing");
  if (failed(verifyStream(*this, getStream())))
    return failure();
  llvm::SmallDenseSet<Value> seen;
  for (Value v : getValues()) {
    if (!seen.insert(v).second)
      return emitOpError("frees ") << describe(v) << " twice";
    if (auto input = v.getDefiningOp<InputOp>();
        input && input.isRuntimeOwned())
      return emitOpError("frees ")
             << describe(v) << ", which the runtime keeps across steps";
    if (v.getDefiningOp<StateOp>())
      return emitOpError("frees ")
             << describe(v) << ", which the runtime keeps across steps";
    if (Operation *later = findUseAfter(v, *this)) {
      InFlightDiagnostic diag = emitOpError("frees ")
                                << describe(v) << ", which '"
                                << later->getName() << "' uses afterwards";
      diag.attachNote(later->getLoc()) << "the later use";
      return diag;
    }
    // A collective reads its input until its wait.
    for (Operation *user : v.getUsers())
      if (auto start = dyn_cast<CollectiveStartOp>(user))
        if (rt::WaitOp wait = start.getWait();
            wait && wait->getBlock() == (*this)->getBlock() &&
            (*this)->isBeforeInBlock(wait)) {
          InFlightDiagnostic diag =
              emitOpError("frees ")
              << describe(v)
              << " before the wait of the collective that reads it";
          diag.attachNote(wait.getLoc()) << "the wait";
          return diag;
        }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// OptimizerOp
//===----------------------------------------------------------------------===//

// All operands have the parameter's type, printed once:
//   loomrt.optimizer %w grad %g state [%m, %v] stream 0 : tensor<8x4xf32>
ParseResult OptimizerOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::UnresolvedOperand param, grad;
  SmallVector<OpAsmParser::UnresolvedOperand> state;
  int64_t stream;
  Type type;
  if (parser.parseOperand(param) || parser.parseKeyword("grad") ||
      parser.parseOperand(grad))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("state")) &&
      parser.parseOperandList(state, OpAsmParser::Delimiter::Square))
    return failure();
  if (parser.parseKeyword("stream") || parser.parseInteger(stream) ||
      parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(type))
    return failure();
  result.addAttribute(getStreamAttrName(result.name),
                      parser.getBuilder().getI64IntegerAttr(stream));
  if (parser.resolveOperand(param, type, result.operands) ||
      parser.resolveOperand(grad, type, result.operands) ||
      parser.resolveOperands(state, type, result.operands))
    return failure();
  return success();
}

void OptimizerOp::print(OpAsmPrinter &p) {
  p << " " << getParam() << " grad " << getGrad();
  if (!getState().empty()) {
    p << " state [";
    p.printOperands(getState());
    p << "]";
  }
  p << " stream " << getStreamAttr().getInt();
  p.printOptionalAttrDict((*this)->getAttrs(), {getStreamAttrName()});
  p << " : " << getParam().getType();
}

LogicalResult OptimizerOp::verify() {
  if (failed(verifyStream(*this, getStream())))
    return failure();
  auto program = (*this)->getParentOfType<ProgramOp>();
  std::optional<OptimizerConfig> config;
  if (program && program.getOptimizer())
    config = getOptimizerConfig(*program.getOptimizer());
  if (!config)
    return emitOpError("needs the program's 'optimizer' (the algorithm and "
                       "hyperparameters it applies)");
  if (Attribute own = getOptimizerAttr()) {
    // A group changes the rates, not the algorithm or its state.
    if (!isSameAlgorithm(own, *program.getOptimizer()))
      return emitOpError("'optimizer' ")
             << own << " differs from the program's " << *program.getOptimizer()
             << " in more than lr and weight_decay; a parameter group sets "
                "only those";
  }
  Type type = getParam().getType();
  if (getGrad().getType() != type)
    return emitOpError("gradient type ")
           << getGrad().getType() << " differs from parameter type " << type;
  auto param = getParam().getDefiningOp<InputOp>();
  if (!param || param.getRole() != Role::parameter)
    return emitOpError("updates ")
           << describe(getParam())
           << "; it must update a parameter binding (loomrt.input role "
              "<parameter>) in place";
  if (failed(verifyOptimizerStateCount(*this, *config, getState().size())))
    return failure();
  for (auto [i, s] : llvm::enumerate(getState())) {
    auto state = s.getDefiningOp<StateOp>();
    if (!state || state.getParam() != param.getBindingName())
      return emitOpError("state #")
             << i << " (" << config->stateNames[i] << ") must be optimizer "
             << "state of '" << param.getBindingName() << "', got "
             << describe(s);
    if (s.getType() != type)
      return emitOpError("state #") << i << " has type " << s.getType()
                                    << ", expected the parameter type " << type;
  }
  // The update writes the parameter and state in place: a later read would
  // see the new value where the step means the old one.
  SmallVector<Value> updated = {getParam()};
  llvm::append_range(updated, getState());
  for (Value v : updated)
    if (Operation *later = findUseAfter(v, *this)) {
      InFlightDiagnostic diag = emitOpError("updates ")
                                << describe(v) << " in place, but '"
                                << later->getName() << "' reads it afterwards";
      diag.attachNote(later->getLoc()) << "the later use";
      return diag;
    }
  return success();
}

//===----------------------------------------------------------------------===//
// Events
//===----------------------------------------------------------------------===//

LogicalResult RecordEventOp::verify() {
  return verifyStream(*this, getStream());
}

LogicalResult WaitEventOp::verify() {
  if (failed(verifyStream(*this, getStream())))
    return failure();
  auto record = getEvent().getDefiningOp<RecordEventOp>();
  if (record && record.getStream() == getStream())
    return emitOpError("stream ")
           << getStreamAttr().getInt()
           << " waits for an event recorded on the same stream; an event "
              "orders work across streams";
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

rt::WaitOp CollectiveStartOp::getWait() {
  for (Operation *user : getFuture().getUsers())
    if (auto wait = dyn_cast<rt::WaitOp>(user))
      return wait;
  return nullptr;
}

/// `: tensor<..> -> !loomrt.future<..>`, or only the future for a recv,
/// which has no input.
static ParseResult parseCommTypes(OpAsmParser &parser, Type &inputType,
                                  Type &futureType) {
  Type first;
  if (parser.parseType(first))
    return failure();
  if (failed(parser.parseOptionalArrow())) {
    futureType = first;
    return success();
  }
  inputType = first;
  return parser.parseType(futureType);
}

static void printCommTypes(OpAsmPrinter &p, Operation *, Type inputType,
                           Type futureType) {
  if (inputType)
    p << inputType << " -> ";
  p << futureType;
}

LogicalResult CollectiveStartOp::verify() {
  if (failed(verifyStream(*this, getStream())))
    return failure();
  CollectiveKind kind = getKind();
  StringRef name = stringifyCollectiveKind(kind);
  if (getAxes().empty())
    return emitOpError("names no mesh axis");
  llvm::StringSet<> seen;
  for (Attribute a : getAxes())
    if (!seen.insert(cast<StringAttr>(a).getValue()).second)
      return emitOpError("axis ") << a << " is named twice";
  bool isSend = kind == CollectiveKind::send;
  bool isRecv = kind == CollectiveKind::recv;
  bool wantsDim = kind == CollectiveKind::all_gather ||
                  kind == CollectiveKind::reduce_scatter ||
                  kind == CollectiveKind::all_slice;
  bool wantsReduce = kind == CollectiveKind::reduce_scatter ||
                     kind == CollectiveKind::all_reduce;
  bool wantsRoot = kind == CollectiveKind::broadcast;
  bool pointToPoint = isSend || isRecv;
  if (wantsDim != getDim().has_value())
    return emitOpError(name) << (wantsDim ? " needs" : " takes no")
                             << " 'dim'";
  if (wantsReduce != getReduction().has_value())
    return emitOpError(name) << (wantsReduce ? " needs" : " takes no")
                             << " 'reduce'";
  if (wantsRoot != getRoot().has_value())
    return emitOpError(name) << (wantsRoot ? " needs" : " takes no")
                             << " 'root'";
  if (pointToPoint != getPeer().has_value())
    return emitOpError(name)
           << (pointToPoint ? " needs" : " takes no") << " 'peer'";
  if (pointToPoint != getTag().has_value())
    return emitOpError(name)
           << (pointToPoint ? " needs" : " takes no") << " 'tag'";
  if (isRecv == bool(getInput()))
    return emitOpError(name)
           << (isRecv ? " takes no input" : " needs an input");
  if (IntegerAttr root = getRootAttr(); root && root.getInt() < 0)
    return emitOpError("root must not be negative, got ") << root.getInt();
  if (IntegerAttr peer = getPeerAttr(); peer && peer.getInt() < 0)
    return emitOpError("peer must not be negative, got ") << peer.getInt();
  // The runtime's transports take 31-bit tags (docs/artifact.md).
  if (IntegerAttr tag = getTagAttr();
      tag && (tag.getInt() < 0 || tag.getInt() > 0x7fffffff))
    return emitOpError("tag must be in [0, 2^31), got ") << tag.getInt();
  if (IntegerAttr slot = getSlotAttr(); slot && slot.getInt() < 0)
    return emitOpError("slot must not be negative, got ") << slot.getInt();
  RankedTensorType result = getFuture().getType().getTensorType();
  if (isSend != !result)
    return emitOpError(name)
           << (isSend ? " completes as !loomrt.future<none>, got "
                      : " yields a tensor, but its future is ")
           << getFuture().getType();
  RankedTensorType data = isSend ? getInput().getType() : result;
  if (getDtypeName(data.getElementType()).empty())
    return emitOpError("element type ")
           << data.getElementType() << " has no dtype in the artifact";
  if (!pointToPoint) {
    RankedTensorType input = getInput().getType();
    if (input.getElementType() != result.getElementType() ||
        input.getRank() != result.getRank())
      return emitOpError("result ")
             << result << " must have the input's element type and rank ("
             << input << ")";
    int64_t dim = getDimAttr() ? getDimAttr().getInt() : -1;
    if (wantsDim && (dim < 0 || dim >= input.getRank()))
      return emitOpError("dim ") << dim << " is out of range for " << input;
    for (int64_t d = 0; d < input.getRank(); ++d)
      if (d != dim && input.getDimSize(d) != result.getDimSize(d))
        return emitOpError("result ")
               << result << " differs from the input " << input
               << " in dimension " << d << ", which " << name
               << " does not change";
  }
  unsigned numWaits = 0;
  for (Operation *user : getFuture().getUsers()) {
    if (!isa<rt::WaitOp>(user))
      return emitOpError("future must be used only by loomrt.wait, not '")
             << user->getName() << "'";
    ++numWaits;
  }
  if (numWaits > 1)
    return emitOpError("future is waited ") << numWaits
                                            << " times; wait exactly once";
  return success();
}

void rt::WaitOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  if (std::optional<int64_t> slot = getSlot(); slot && getResult())
    setNameFn(getResult(), ("s" + Twine(*slot)).str());
}

LogicalResult rt::WaitOp::verify() {
  if (failed(verifyStream(*this, getStream())))
    return failure();
  RankedTensorType value = getFuture().getType().getTensorType();
  if (!value) {
    if (getResult())
      return emitOpError("waiting on !loomrt.future<none> (a send) yields no "
                         "value");
    if (getSlot())
      return emitOpError("the wait of a send yields nothing and takes no "
                         "slot");
  } else if (!getResult()) {
    return emitOpError("waiting on ")
           << getFuture().getType() << " must yield its value";
  } else if (getResult().getType() != value) {
    return emitOpError("result type ")
           << getResult().getType() << " is not the future's value type "
           << value;
  }
  if (!getFuture().getDefiningOp<CollectiveStartOp>())
    return emitOpError("waits for a future that no loomrt.collective_start "
                       "made");
  if (IntegerAttr slot = getSlotAttr(); slot && slot.getInt() < 0)
    return emitOpError("slot must not be negative, got ") << slot.getInt();
  return success();
}

#define GET_OP_CLASSES
#include "loom/Dialect/LoomRT/IR/LoomRTOps.cpp.inc"
