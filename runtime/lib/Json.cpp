//===- Json.cpp - Parse untrusted JSON text into a loomrt::Error ----------===//

#include "Json.h"

#include "loomrt/Error.h"

namespace loomrt {

nlohmann::json parseUntrustedJson(const std::string &text,
                                  const std::string &messagePrefix) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception &e) {
    throw Error(messagePrefix + e.what());
  }
}

} // namespace loomrt
