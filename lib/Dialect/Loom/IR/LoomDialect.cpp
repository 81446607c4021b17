//===- LoomDialect.cpp - loom dialect registration and attribute checks ---===//

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

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
}

static bool isInputRole(Role role) {
  return role == Role::parameter || role == Role::buffer ||
         role == Role::constant || role == Role::input;
}

/// Checks the graph signature of a step function as a whole: one loss, and
/// every gradient or mutation result names an argument of the right role
/// and type. Called once per function from the `loom.step` attribute.
static LogicalResult verifyStepSignature(func::FuncOp func) {
  llvm::StringMap<std::pair<Role, Type>> argsByName;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName);
    auto role = func.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role)
      return func.emitOpError("step argument #")
             << i << " has no '" << LoomDialect::kRoleAttrName << "'";
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
  unsigned numLosses = 0;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto role =
        func.getResultAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    if (!role)
      return func.emitOpError("step result #")
             << i << " has no '" << LoomDialect::kRoleAttrName << "'";
    Role r = role.getValue();
    numLosses += r == Role::loss;
    if (r != Role::grad && r != Role::buffer_mutation &&
        r != Role::input_mutation)
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
    Role expected = r == Role::grad ? Role::parameter
                    : r == Role::buffer_mutation ? Role::buffer
                                                 : Role::input;
    if (it->second.first != expected)
      return func.emitOpError("step result #")
             << i << " (" << stringifyRole(r) << ") targets '"
             << target.getValue() << "', a "
             << stringifyRole(it->second.first) << ", expected a "
             << stringifyRole(expected);
    if (it->second.second != func.getResultTypes()[i])
      return func.emitOpError("step result #")
             << i << " has type " << func.getResultTypes()[i] << " but '"
             << target.getValue() << "' has type " << it->second.second;
  }
  if (numLosses > 1)
    return func.emitOpError("a step has at most one loss result, found ")
           << numLosses;
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
  if (name == kWeightsAttrName || name == kSourceAttrName) {
    if (!isa<ModuleOp>(op) || !isa<StringAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' must be a string on a module";
    return success();
  }
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
  if (name == kRoleAttrName) {
    auto role = dyn_cast<RoleAttr>(attr.getValue());
    if (!role || !isInputRole(role.getValue()))
      return op->emitOpError("argument #")
             << argIndex
             << " role must be one of parameter, buffer, constant, input";
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
                "input_mutation";
    return success();
  }
  return op->emitOpError("unknown loom result attribute '") << name << "'";
}

std::optional<Phase> loom::getPhase(Operation *op) {
  if (auto attr = op->getAttrOfType<PhaseAttr>(LoomDialect::kPhaseAttrName))
    return attr.getValue();
  return std::nullopt;
}

StringRef loom::getModulePath(Operation *op) {
  if (auto attr = op->getAttrOfType<StringAttr>(LoomDialect::kModuleAttrName))
    return attr.getValue();
  return {};
}
