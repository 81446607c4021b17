//===- Dtype.cpp - Artifact and safetensors dtype names -------------------===//

#include "loomrt/Dtype.h"

#include <sstream>

using c10::ScalarType;

namespace loomrt {
namespace {

struct DtypeName {
  ScalarType type;
  const char *artifact;
  const char *safetensors;
};

// The artifact's names are docs/artifact.md's list; the safetensors names are
// the format's own (which has more types; loomrt reads these).
const DtypeName kDtypes[] = {
    {ScalarType::Float, "f32", "F32"},
    {ScalarType::Double, "f64", "F64"},
    {ScalarType::Half, "f16", "F16"},
    {ScalarType::BFloat16, "bf16", "BF16"},
    {ScalarType::Long, "i64", "I64"},
    {ScalarType::Int, "i32", "I32"},
    {ScalarType::Short, "i16", "I16"},
    {ScalarType::Char, "i8", "I8"},
    {ScalarType::Byte, "u8", "U8"},
    {ScalarType::Bool, "bool", "BOOL"},
    {ScalarType::ComplexFloat, "c64", "C64"},
    {ScalarType::ComplexDouble, "c128", "C128"},
};

} // namespace

std::optional<ScalarType> parseArtifactDtype(const std::string &name) {
  for (const DtypeName &d : kDtypes)
    if (name == d.artifact)
      return d.type;
  return std::nullopt;
}

std::string artifactDtypeName(ScalarType type) {
  for (const DtypeName &d : kDtypes)
    if (type == d.type)
      return d.artifact;
  return std::string("<") + c10::toString(type) + ">";
}

std::optional<ScalarType> parseSafetensorsDtype(const std::string &name) {
  for (const DtypeName &d : kDtypes)
    if (name == d.safetensors)
      return d.type;
  return std::nullopt;
}

std::string safetensorsDtypeName(ScalarType type) {
  for (const DtypeName &d : kDtypes)
    if (type == d.type)
      return d.safetensors;
  return std::string("<") + c10::toString(type) + ">";
}

std::string formatShape(c10::IntArrayRef shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

} // namespace loomrt
