//===- Kernel.h - Bind an aten instruction to its ATen operator -*- C++ -*-===//
//
// Binding resolves the operator in the dispatcher and converts every ARG to
// the IValue its schema argument expects, once, when the artifact is loaded:
// a wrong kind of ARG, a missing argument or an unknown keyword is an error
// then, naming the instruction and the argument, not in the middle of a step.
// Running the bound kernel only reads tensors from the slots, builds the
// stack and calls the boxed kernel.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LIB_KERNEL_H
#define LOOMRT_LIB_KERNEL_H

#include "SlotTable.h"
#include "loomrt/Artifact.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

namespace loomrt {

/// Where one argument's value comes from at call time.
struct BoundArg {
  enum class Kind {
    Constant,           // `constant`, converted at load time
    Tensor,             // Tensor: the tensor in slots[0]
    OptionalTensor,     // Tensor?: slots[0]; an undefined tensor passes None
    TensorList,         // Tensor[]: c10::List<at::Tensor>
    OptionalTensorList, // Tensor?[]: c10::List<std::optional<at::Tensor>>
  };
  Kind kind = Kind::Constant;
  c10::IValue constant;
  std::vector<int64_t> slots; // -1 stands for None in OptionalTensorList
};

/// Converts `arg` for the schema argument `schemaArg` (see the ARG table in
/// docs/artifact.md). `device` replaces any Device ARG. `path` names the
/// argument in errors. Throws loomrt::Error.
BoundArg bindArgument(const ArgValue &arg, const c10::Argument &schemaArg,
                      c10::Device device, const std::string &path);

/// The IValue a schema argument takes when the artifact omits it: its
/// default. Throws when it has none.
c10::IValue defaultArgument(const c10::Argument &schemaArg,
                            const std::string &path);

/// What one run of a kernel allocated beyond its results, for the kernel
/// workspace profile (docs/recompute.md, "Kernel workspace").
struct KernelMeasurement {
  /// kernelSignature() of the call (loomrt/KernelSignature.h).
  std::string signature;
  /// The most tensor bytes the kernel held while it ran beyond what was in
  /// use when it returned (its results included): its own temporaries.
  int64_t workspaceBytes = 0;
};

/// "aten::addmm.default" -> the dispatcher's handle, or nullopt.
std::optional<c10::OperatorHandle> findOperator(const std::string &kernel,
                                                const std::string &overload);

class BoundKernel {
public:
  /// Binds `inst` (an aten instruction). `path` is the instruction's path
  /// for messages, e.g. "programs[0].instructions[3] (in 'addmm')".
  static BoundKernel bind(const Instruction &inst, c10::Device device,
                          const std::string &path);

  /// Calls the operator on the slots' tensors and stores its returns.
  /// Errors are c10::Error from the kernel or loomrt::Error for a result
  /// that does not fit its `results` entry; the caller adds the location.
  /// With `measured` (and a MemoryTracker installed on this thread), also
  /// measures the call's workspace.
  void run(SlotTable &slots, KernelMeasurement *measured = nullptr) const;

  const c10::FunctionSchema &schema() const { return op_->schema(); }
  const std::vector<BoundArg> &args() const { return args_; }

private:
  std::optional<c10::OperatorHandle> op_;
  /// inst.qualifiedKernel(), for kernelSignature.
  std::string qualifiedKernel_;
  std::vector<BoundArg> args_;
  std::vector<ResultSpec> results_;
};

} // namespace loomrt

#endif // LOOMRT_LIB_KERNEL_H
