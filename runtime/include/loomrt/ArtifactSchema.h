//===- ArtifactSchema.h - Constants of ArtifactSchema.def -------*- C++ -*-===//
//
// The artifact's keys, versions and spellings as constants, generated from
// ArtifactSchema.def, plus tables to ask which keys an object or an
// instruction may carry in a given version. Dependency-free on purpose (only
// the C++ standard library): the compiler's writer, built without LibTorch
// and without exceptions, includes it as well as the runtime's reader.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_ARTIFACTSCHEMA_H
#define LOOMRT_ARTIFACTSCHEMA_H

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace loomrt {
namespace schema {

#define LOOMX_MAGIC(STRING) inline constexpr char kMagic[] = STRING;
#define LOOMX_VERSION(ID, N) inline constexpr uint32_t k##ID##Version = N;
#define LOOMX_HEADER_BYTES(N) inline constexpr uint64_t kHeaderBytes = N;
#define LOOMX_FIELD(OBJ, ID, KEY, SINCE)                                       \
  inline constexpr const char k##OBJ##ID[] = KEY;
#define LOOMX_INST_FIELD(ID, KEY, SINCE, OPS)                                  \
  inline constexpr const char kInst##ID[] = KEY;
#define LOOMX_ENUM(ENUM, ID, SPELLING, SINCE)                                  \
  inline constexpr const char k##ENUM##ID[] = SPELLING;
#define LOOMX_DTYPE(ID, SPELLING, BYTES)                                       \
  inline constexpr const char kDtype##ID[] = SPELLING;
#include "loomrt/ArtifactSchema.def"

/// The magic is 8 bytes; kMagic has a terminating NUL after them.
inline constexpr size_t kMagicBytes = sizeof(kMagic) - 1;
static_assert(kMagicBytes == 8, "the container's magic is 8 bytes");
static_assert(kOldestVersion <= kCurrentVersion, "versions out of order");

/// The JSON objects of the program, for fieldsOf().
enum class Object {
  Program,
  Mesh,
  Optimizer,
  LrSchedule,
  Input,
  State,
  Output,
  Shard,
  Split,
  Reduce,
  RankProgram,
  /// Not in an artifact: the kernel workspace profile.
  KernelWorkspace,
};

struct FieldInfo {
  Object object;
  const char *key;
  uint32_t since;
};

inline constexpr FieldInfo kFields[] = {
#define LOOMX_FIELD(OBJ, ID, KEY, SINCE) {Object::OBJ, KEY, SINCE},
#include "loomrt/ArtifactSchema.def"
};

struct InstFieldInfo {
  const char *key;
  uint32_t since;
  /// The ops that take it, space-separated; "*" for every op.
  const char *ops;
};

inline constexpr InstFieldInfo kInstFields[] = {
#define LOOMX_INST_FIELD(ID, KEY, SINCE, OPS) {KEY, SINCE, OPS},
#include "loomrt/ArtifactSchema.def"
};

struct EnumInfo {
  const char *enumName;
  const char *spelling;
  uint32_t since;
};

inline constexpr EnumInfo kEnumValues[] = {
#define LOOMX_ENUM(ENUM, ID, SPELLING, SINCE) {#ENUM, SPELLING, SINCE},
#include "loomrt/ArtifactSchema.def"
};

struct DtypeInfo {
  const char *spelling;
  uint32_t bytes;
};

inline constexpr DtypeInfo kDtypes[] = {
#define LOOMX_DTYPE(ID, SPELLING, BYTES) {SPELLING, BYTES},
#include "loomrt/ArtifactSchema.def"
};

struct OptimizerStateInfo {
  const char *optimizer;
  const char *state;
  /// The optimizer key that must be non-zero or true; "" for always.
  const char *when;
};

inline constexpr OptimizerStateInfo kOptimizerStates[] = {
#define LOOMX_OPTIMIZER_STATE(NAME, STATE, WHEN) {NAME, STATE, WHEN},
#include "loomrt/ArtifactSchema.def"
};

/// Calls `each(state)` for every per-parameter state tensor optimizer
/// `name` keeps, in order; `isSet(key)` says whether the optimizer's key
/// (a hyperparameter such as "momentum" or "amsgrad") is non-zero or true.
template <typename IsSet, typename Each>
void forEachOptimizerState(const char *name, IsSet isSet, Each each) {
  for (const OptimizerStateInfo &s : kOptimizerStates)
    if (std::strcmp(s.optimizer, name) == 0 && (!*s.when || isSet(s.when)))
      each(s.state);
}

struct OptimizerKeyInfo {
  const char *optimizer;
  const char *key;
};

inline constexpr OptimizerKeyInfo kOptimizerKeys[] = {
#define LOOMX_OPTIMIZER_KEY(NAME, KEY) {NAME, KEY},
#include "loomrt/ArtifactSchema.def"
};

/// Whether `key` is an optional key of some optimizer (LOOMX_OPTIMIZER_KEY).
inline bool isOptimizerOwnKey(const char *key) {
  for (const OptimizerKeyInfo &k : kOptimizerKeys)
    if (std::strcmp(k.key, key) == 0)
      return true;
  return false;
}

/// Calls `each(key)` for every optional key optimizer `name` takes, in the
/// schema's order.
template <typename Each>
void forEachOptimizerKey(const char *name, Each each) {
  for (const OptimizerKeyInfo &k : kOptimizerKeys)
    if (std::strcmp(k.optimizer, name) == 0)
      each(k.key);
}

/// Whether optimizer `name` takes the optional key `key`.
inline bool optimizerTakesKey(const char *name, const char *key) {
  for (const OptimizerKeyInfo &k : kOptimizerKeys)
    if (std::strcmp(k.optimizer, name) == 0 && std::strcmp(k.key, key) == 0)
      return true;
  return false;
}

inline constexpr const char *kFusedOptimizers[] = {
#define LOOMX_OPTIMIZER_FUSED(NAME) NAME,
#include "loomrt/ArtifactSchema.def"
};

/// Whether torch.optim has a fused=True kernel for optimizer `name`
/// (LOOMX_OPTIMIZER_FUSED).
inline bool hasFusedKernel(const char *name) {
  for (const char *fused : kFusedOptimizers)
    if (std::strcmp(fused, name) == 0)
      return true;
  return false;
}

/// Whether `object` may carry `key` in format `version`.
inline bool hasField(Object object, const char *key, uint32_t version) {
  for (const FieldInfo &f : kFields)
    if (f.object == object && f.since <= version &&
        std::strcmp(f.key, key) == 0)
      return true;
  return false;
}

/// Whether the space-separated `ops` names `op` ("*" names every op).
inline bool listsOp(const char *ops, const char *op) {
  if (std::strcmp(ops, "*") == 0)
    return true;
  size_t n = std::strlen(op);
  for (const char *p = ops; *p;) {
    const char *end = std::strchr(p, ' ');
    size_t len = end ? size_t(end - p) : std::strlen(p);
    if (len == n && std::strncmp(p, op, n) == 0)
      return true;
    if (!end)
      break;
    p = end + 1;
  }
  return false;
}

/// Whether an instruction with this `op` may carry `key` in `version`.
inline bool instructionHasField(const char *op, const char *key,
                                uint32_t version) {
  for (const InstFieldInfo &f : kInstFields)
    if (f.since <= version && std::strcmp(f.key, key) == 0 &&
        listsOp(f.ops, op))
      return true;
  return false;
}

/// Whether `spelling` is a value of enumeration `enumName` ("Op",
/// "ReduceOp", ...) in `version`.
inline bool isEnumValue(const char *enumName, const char *spelling,
                        uint32_t version) {
  for (const EnumInfo &e : kEnumValues)
    if (e.since <= version && std::strcmp(e.enumName, enumName) == 0 &&
        std::strcmp(e.spelling, spelling) == 0)
      return true;
  return false;
}

/// Whether two C strings are equal, usable in a constant expression.
constexpr bool sameString(const char *a, const char *b) {
  while (*a && *a == *b)
    ++a, ++b;
  return *a == *b;
}

/// How many values enumeration `enumName` has in the newest version: lets
/// a reader's table of its own enum be checked against the schema at
/// compile time.
constexpr size_t enumSize(const char *enumName) {
  size_t n = 0;
  for (const EnumInfo &e : kEnumValues)
    n += sameString(e.enumName, enumName);
  return n;
}

/// The version that added `spelling` to enumeration `enumName` (0: none).
inline uint32_t enumValueSince(const char *enumName, const char *spelling) {
  for (const EnumInfo &e : kEnumValues)
    if (std::strcmp(e.enumName, enumName) == 0 &&
        std::strcmp(e.spelling, spelling) == 0)
      return e.since;
  return 0;
}

} // namespace schema
} // namespace loomrt

#endif // LOOMRT_ARTIFACTSCHEMA_H
