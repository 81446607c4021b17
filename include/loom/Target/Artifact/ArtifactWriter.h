//===- ArtifactWriter.h - Write loomrt programs as a .loomx artifact ------===//
//
// The format is docs/artifact.md and docs/distributed.md; its keys, magic and
// version are the runtime's runtime/include/loomrt/ArtifactSchema.def, which
// the writer includes: a 32-byte header, the program as JSON, and the initial
// weights as a safetensors file.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TARGET_ARTIFACT_ARTIFACTWRITER_H
#define LOOM_TARGET_ARTIFACT_ARTIFACTWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace loom {

/// The `producer` field.
constexpr const char *kArtifactProducer = "loom-compile 0.1.0";

struct ArtifactOptions {
  /// The `.mlir` file as named on the command line (the `source` field).
  std::string source;
  /// The textual pass pipeline that produced the programs (`pipeline`).
  std::string pipeline;
  /// The folder a relative `loom.weights` path on the module is read from
  /// (the `.mlir` file's folder).
  std::string weightsDir;
};

/// Writes the artifact of `module`, whose `loomrt.program`s (one per rank,
/// or one SPMD program with a mesh; slots assigned) are the compiled step. The weights section is the
/// safetensors file the module's `loom.weights` names, reduced to the
/// step's parameters, buffers and constants, each checked for presence,
/// dtype and shape. Reports what is wrong, where, and writes nothing then.
mlir::LogicalResult writeArtifact(mlir::ModuleOp module,
                                  const ArtifactOptions &options,
                                  llvm::raw_ostream &os);

/// The program JSON alone (the artifact's second section), for tools and
/// tests that look at the program without weights.
mlir::FailureOr<std::string> buildProgramJSON(mlir::ModuleOp module,
                                              const ArtifactOptions &options);

} // namespace loom

#endif // LOOM_TARGET_ARTIFACT_ARTIFACTWRITER_H
