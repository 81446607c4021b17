//===- KernelWorkspace.h - The measured kernel workspace profile -*- C++ -*-===//
//
// `loom-run --kernel-workspace FILE` measures, for every ATen instruction it
// runs, the tensor bytes the kernel holds beyond its results while it runs
// (oneDNN's reorders and im2col columns, bf16 packing buffers, f32 working
// copies): what depends on the CPU and the thread count and no formula in
// the compiler predicts. The profile keeps the most per kernel signature
// (loomrt/KernelSignature.h) over every run of every step and rank;
// `loom-compile --kernel-workspace FILE` gives it to the peak-memory
// analysis (docs/recompute.md, "Kernel workspace"). Its keys are declared
// in ArtifactSchema.def (object KernelWorkspace).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LIB_KERNELWORKSPACE_H
#define LOOMRT_LIB_KERNELWORKSPACE_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loomrt {

struct KernelWorkspace {
  /// The device and ATen intra-op threads it was measured with.
  std::string device;
  int64_t threads = 0;
  /// Bytes per kernel signature, 0 included (measured: nothing).
  std::map<std::string, int64_t> bytes;

  /// Keeps the larger of the two per signature.
  void add(const std::string &signature, int64_t workspaceBytes);
  void merge(const KernelWorkspace &other);

  /// Writes the profile atomically; throws loomrt::Error.
  void write(const std::string &path) const;
  /// Reads a profile; a malformed one is a loomrt::Error naming the file
  /// and the key.
  static KernelWorkspace read(const std::string &path);
};

/// Merges the ranks' profiles (`parts`) into `path`.
void mergeKernelWorkspaces(const std::vector<std::string> &parts,
                           const std::string &path);

} // namespace loomrt

#endif // LOOMRT_LIB_KERNELWORKSPACE_H
