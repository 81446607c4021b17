//===- Dtype.h - Artifact dtype names <-> ATen scalar types ----*- C++ -*-===//
//
// The artifact names dtypes `f32 f64 f16 bf16 i64 i32 i16 i8 u8 bool c64 c128`
// (docs/artifact.md); safetensors names them `F32 F64 ... BOOL C64`. Both map
// onto at::ScalarType here so the rest of the runtime speaks only ATen.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_DTYPE_H
#define LOOMRT_DTYPE_H

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <optional>
#include <string>

namespace loomrt {

/// The artifact's short name (`f32`), or nullopt when it is not one.
std::optional<c10::ScalarType> parseArtifactDtype(const std::string &name);
std::string artifactDtypeName(c10::ScalarType type);

/// The safetensors name (`F32`), or nullopt when it is not one loomrt reads.
std::optional<c10::ScalarType> parseSafetensorsDtype(const std::string &name);
std::string safetensorsDtypeName(c10::ScalarType type);

/// "[4, 16]", for messages.
std::string formatShape(c10::IntArrayRef shape);

} // namespace loomrt

#endif // LOOMRT_DTYPE_H
