//===- VectorMath.h - oneMKL's vector math resolved up front ----*- C++ -*-===//
//
// ATen computes some elementwise functions of contiguous float and double
// tensors with oneMKL's vector math library (VML): `sqrt`, `exp`, `log`,
// `tanh` ... (ATen/cpu/vml.h, IMPLEMENT_VML_MKL), in chunks of 2048 elements
// spread over the intra-op threads. oneMKL picks each function's kernel on
// that function's first call, and first calls made by two threads at once
// can run the low-accuracy kernel on one thread's chunk although the
// high-accuracy one is asked for (pytorch/pytorch#188792; oneMKL before
// 2025.0, and the PyPI wheel of PyTorch 2.9 ships 2024.0). Measured here: a
// one-layer NAdam step whose update takes the `sqrt` of 4,096 elements, with
// loom-run on two ATen threads and eight processes at once on two cores,
// computed elements 2048-4095 of that `sqrt` with a relative error up to
// 3.2e-4 in 10 of 800 runs (the rest within 6.2e-8), always on the process's
// first step.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LIB_VECTORMATH_H
#define LOOMRT_LIB_VECTORMATH_H

namespace loomrt {

/// Calls every function ATen sends to VML (the generated VmlFunctions.inc:
/// ATen's IMPLEMENT_VML_MKL list in the LibTorch headers built against) once on
/// a one-element float and double tensor, on this thread (one element is below
/// ATen's parallel grain), so that oneMKL has picked its kernels before any
/// step calls them from several threads. Once per process; later calls return
/// at once.
void resolveVectorMathKernels();

} // namespace loomrt

#endif // LOOMRT_LIB_VECTORMATH_H
