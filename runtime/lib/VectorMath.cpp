//===- VectorMath.cpp - oneMKL's vector math resolved up front ------------===//
//
// VmlFunctions.inc is generated at configure time from the ATen header that
// decides which functions go to VML (lib/CMakeLists.txt), so the list
// follows the LibTorch Loom is built against.
//
//===----------------------------------------------------------------------===//

#include "VectorMath.h"

#include <ATen/ATen.h>

#include <mutex>

namespace loomrt {

void resolveVectorMathKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
      // 0.5 is in every function's domain (acos, erfinv, log ...).
      at::Tensor x = at::full({1}, 0.5, at::TensorOptions().dtype(dtype));
#define LOOMRT_VML_FUNCTION(NAME) (void)at::NAME(x);
#include "VmlFunctions.inc"
#undef LOOMRT_VML_FUNCTION
    }
  });
}

} // namespace loomrt
