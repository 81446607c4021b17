//===- Json.h - Parse untrusted JSON text into a loomrt::Error -*- C++ -*-===//
//
// Every JSON document loomrt reads (an artifact's program, a safetensors
// header, a checkpoint index, a reference) may be damaged or hostile. The
// parser reports failures through several exception types, not only
// parse_error (a number too large for a double is out_of_range), and the
// fuzzers found a reader catching too few of them more than once. This is
// the one place that catches them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LIB_JSON_H
#define LOOMRT_LIB_JSON_H

#include <nlohmann/json.hpp>

#include <string>

namespace loomrt {

/// Parses `text`; on any parser failure throws loomrt::Error with
/// `messagePrefix` followed by the parser's own description.
nlohmann::json parseUntrustedJson(const std::string &text,
                                  const std::string &messagePrefix);

} // namespace loomrt

#endif // LOOMRT_LIB_JSON_H
