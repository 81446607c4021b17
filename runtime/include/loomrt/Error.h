//===- Error.h - The one exception type libloomrt throws -------*- C++ -*-===//
//
// Every failure the runtime reports (a malformed artifact, a missing weight, a
// kernel that throws) is a loomrt::Error whose message says what was expected,
// what was found and where (file, field path, instruction).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_ERROR_H
#define LOOMRT_ERROR_H

#include <stdexcept>
#include <string>

namespace loomrt {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

/// A collective that failed or timed out (a peer exited or hung): loom-run
/// exits with its own status for it, so a launcher can tell the rank that
/// failed first from the ranks that lost it as a peer.
class CollectiveError : public Error {
public:
  explicit CollectiveError(const std::string &message) : Error(message) {}
};

} // namespace loomrt

#endif // LOOMRT_ERROR_H
