//===- KernelSignature.h - How a kernel call is named in a profile -*- C++ -*-===//
//
// The kernel workspace profile (docs/artifact.md) keys its entries by kernel
// signature: the qualified kernel, then its tensor inputs and its tensor
// results, each spelled as the artifact's dtype and the sizes and each list
// sorted, None left out:
//
//   aten::addmm.default(f32[3],f32[5,6],f32[6,3])->(f32[5,3])
//
// The runtime spells the calls it measures with it and the compiler the ops
// it predicts, so the spelling is written once, here. Dependency-free on
// purpose (the C++ standard library only), like ArtifactSchema.h, which the
// compiler includes the same way.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_KERNELSIGNATURE_H
#define LOOMRT_KERNELSIGNATURE_H

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace loomrt {

/// "f32[8,16]"; "f32[]" for a 0-d tensor.
template <typename Sizes>
std::string spellSignatureTensor(const std::string &dtype, const Sizes &sizes) {
  std::string s = dtype + "[";
  bool first = true;
  for (int64_t d : sizes) {
    s += (first ? "" : ",") + std::to_string(d);
    first = false;
  }
  return s + "]";
}

/// The signature of a call of `qualifiedKernel` ("aten::mm.default") with
/// these spelled tensor inputs and results, in any order.
inline std::string kernelSignature(const std::string &qualifiedKernel,
                                   std::vector<std::string> inputs,
                                   std::vector<std::string> results) {
  auto join = [](std::vector<std::string> &parts) {
    std::sort(parts.begin(), parts.end());
    std::string s;
    for (const std::string &p : parts)
      s += (s.empty() ? "" : ",") + p;
    return s;
  };
  return qualifiedKernel + "(" + join(inputs) + ")->(" + join(results) + ")";
}

/// The signature of one parameter's optimizer update as the runtime runs it
/// (runtime/lib/Optimizer.cpp), for the measured op times of a trace: the
/// algorithm ("sgd", "adam", "adamw", "rmsprop", "adagrad", ...), its
/// implementation and each setting that changes which kernels run as the
/// overload, and the parameter
/// (`spellSignatureTensor`):
///
///   optimizer::adamw.forloop_decay(f32[16,8])->()
inline std::string optimizerSignature(const std::string &algorithm, bool fused,
                                      bool maximize, bool decay, bool momentum,
                                      bool nesterov, bool amsgrad,
                                      bool centered, bool decoupled,
                                      const std::string &param) {
  std::string overload = fused ? "fused" : "forloop";
  if (maximize)
    overload += "_maximize";
  if (decay)
    overload += "_decay";
  if (momentum)
    overload += "_momentum";
  if (nesterov)
    overload += "_nesterov";
  if (amsgrad)
    overload += "_amsgrad";
  if (centered)
    overload += "_centered";
  if (decoupled)
    overload += "_decoupled";
  return kernelSignature("optimizer::" + algorithm + "." + overload, {param},
                         {});
}

} // namespace loomrt

#endif // LOOMRT_KERNELSIGNATURE_H
