//===- LoomDialect.h - The loom dialect, its attributes and types ---------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H
#define LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "loom/Dialect/Loom/IR/LoomOpsDialect.h.inc"

namespace loom::detail {
/// Custom parameter parsers and printers of the optimizer attributes.
mlir::FailureOr<llvm::APFloat> parseF64Parameter(mlir::AsmParser &parser);
void printF64Parameter(mlir::AsmPrinter &printer, double value);
/// The shortest decimal form of `value` that reads back exactly, with a '.'
/// (`0.001`, `1.0e-08`).
std::string formatF64Parameter(double value);
mlir::FailureOr<bool> parseBoolParameter(mlir::AsmParser &parser);
} // namespace loom::detail

#include "loom/Dialect/Loom/IR/LoomEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/Loom/IR/LoomAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "loom/Dialect/Loom/IR/LoomOpsTypes.h.inc"

namespace loom {

/// One optimizer attribute (`#loom.sgd`, `#loom.adam`, `#loom.adamw`,
/// `#loom.rmsprop`, `#loom.adagrad`, `#loom.adadelta`, `#loom.adamax`,
/// `#loom.radam`, `#loom.nadam`, `#loom.rprop`, `#loom.asgd`) seen
/// through one struct: every hyperparameter the artifact records, with the ones
/// an algorithm lacks at PyTorch's neutral values.
struct OptimizerConfig {
  /// "sgd", "adam", "adamw", "rmsprop", "adagrad", "adadelta", "adamax",
  /// "radam", "nadam", "rprop" or "asgd" (the
  /// mnemonic and the artifact's name).
  llvm::StringRef name;
  double lr = 0, momentum = 0, dampening = 0, weightDecay = 0;
  double beta1 = 0, beta2 = 0, eps = 0;
  double alpha = 0, lrDecay = 0, initialAccumulatorValue = 0, rho = 0;
  double momentumDecay = 0;
  /// Rprop's etas and step_sizes.
  double etaminus = 0, etaplus = 0, stepSizeMin = 0, stepSizeMax = 0;
  /// ASGD's decay term and averaging start (its power is `alpha`).
  double lambd = 0, t0 = 0;
  bool nesterov = false, maximize = false, amsgrad = false, centered = false;
  bool decoupledWeightDecay = false;
  /// Names of the per-parameter state tensors in PyTorch's state_dict
  /// order, as the artifact schema declares them (LOOMX_OPTIMIZER_STATE).
  llvm::SmallVector<llvm::StringRef, 3> stateNames;
};

/// Whether `attr` is one of the optimizer attributes.
bool isOptimizerAttr(mlir::Attribute attr);
/// The hyperparameters of an optimizer attribute; std::nullopt for any
/// other attribute.
std::optional<OptimizerConfig> getOptimizerConfig(mlir::Attribute attr);
/// Whether two optimizer attributes are the same algorithm with the same
/// hyperparameters except lr and weight_decay, the two a parameter group
/// sets (so their updates share one artifact optimizer).
bool isSameAlgorithm(mlir::Attribute a, mlir::Attribute b);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H
