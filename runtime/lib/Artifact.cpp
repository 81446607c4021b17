//===- Artifact.cpp - Read and validate a .loomx artifact -----------------===//
//
// Implements docs/artifact.md. Every field is checked where it is read, and
// every message names the field by its JSON path (`inputs[3].dtype`,
// `programs[0].instructions[17].args[1]`), so a compiler bug shows up as a
// precise refusal at load time rather than a wrong number later.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Artifact.h"

#include "FileUtil.h"
#include "Json.h"
#include "loomrt/Dtype.h"
#include "loomrt/Error.h"
#include "loomrt/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <set>

using nlohmann::json;

namespace loomrt {

const char *toString(InputRole role) {
  switch (role) {
  case InputRole::Parameter:
    return schema::kInputRoleParameter;
  case InputRole::Buffer:
    return schema::kInputRoleBuffer;
  case InputRole::Constant:
    return schema::kInputRoleConstant;
  case InputRole::Input:
    return schema::kInputRoleInput;
  }
  return "?";
}

const char *toString(OutputRole role) {
  switch (role) {
  case OutputRole::Loss:
    return schema::kOutputRoleLoss;
  case OutputRole::BufferMutation:
    return schema::kOutputRoleBufferMutation;
  case OutputRole::Grad:
    return schema::kOutputRoleGrad;
  }
  return "?";
}

const char *toString(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::SGD:
    return schema::kOptimizerNameSgd;
  case OptimizerKind::Adam:
    return schema::kOptimizerNameAdam;
  case OptimizerKind::AdamW:
    return schema::kOptimizerNameAdamw;
  case OptimizerKind::RMSprop:
    return schema::kOptimizerNameRmsprop;
  case OptimizerKind::Adagrad:
    return schema::kOptimizerNameAdagrad;
  case OptimizerKind::Adadelta:
    return schema::kOptimizerNameAdadelta;
  case OptimizerKind::Adamax:
    return schema::kOptimizerNameAdamax;
  case OptimizerKind::RAdam:
    return schema::kOptimizerNameRadam;
  case OptimizerKind::NAdam:
    return schema::kOptimizerNameNadam;
  case OptimizerKind::Rprop:
    return schema::kOptimizerNameRprop;
  case OptimizerKind::ASGD:
    return schema::kOptimizerNameAsgd;
  }
  return "?";
}

const char *toString(DeviceKind device) {
  switch (device) {
  case DeviceKind::Cpu:
    return schema::kDeviceCpu;
  case DeviceKind::Cuda:
    return schema::kDeviceCuda;
  }
  return "?";
}

std::optional<DeviceKind> parseDeviceKind(const std::string &name) {
  for (DeviceKind d : {DeviceKind::Cpu, DeviceKind::Cuda})
    if (name == toString(d))
      return d;
  return std::nullopt;
}

/// Every OptimizerKind; the schema's OptimizerName has as many spellings.
constexpr OptimizerKind kAllOptimizerKinds[] = {
    OptimizerKind::SGD,     OptimizerKind::Adam,    OptimizerKind::AdamW,
    OptimizerKind::RMSprop, OptimizerKind::Adagrad, OptimizerKind::Adadelta,
    OptimizerKind::Adamax,  OptimizerKind::RAdam,   OptimizerKind::NAdam,
    OptimizerKind::Rprop,   OptimizerKind::ASGD};
static_assert(std::size(kAllOptimizerKinds) ==
                  schema::enumSize("OptimizerName"),
              "an OptimizerName of ArtifactSchema.def has no OptimizerKind");

std::optional<OptimizerKind> parseOptimizerKind(const std::string &name) {
  for (OptimizerKind k : kAllOptimizerKinds)
    if (name == toString(k))
      return k;
  return std::nullopt;
}

/// Calls `each` with the name of every state tensor `o` keeps, in order.
template <typename Each>
static void forEachState(const OptimizerSpec &o, Each each) {
  auto isSet = [&](const char *key) {
    if (std::strcmp(key, schema::kOptimizerMomentum) == 0)
      return o.momentum != 0;
    if (std::strcmp(key, schema::kOptimizerAmsgrad) == 0)
      return o.amsgrad;
    if (std::strcmp(key, schema::kOptimizerCentered) == 0)
      return o.centered;
    return false;
  };
  schema::forEachOptimizerState(toString(o.kind), isSet, each);
}

std::vector<std::string> OptimizerSpec::stateNames() const {
  std::vector<std::string> names;
  forEachState(*this, [&](const char *s) { names.push_back(s); });
  return names;
}

size_t OptimizerSpec::numStateSlots() const {
  size_t n = 0;
  forEachState(*this, [&](const char *) { ++n; });
  return n;
}

bool OptimizerSpec::hasFusedKernel() const {
  return schema::hasFusedKernel(toString(kind));
}

const char *ArgValue::kindName(Kind kind) {
  switch (kind) {
  case Kind::Tensor:
    return schema::kArgKindTensor;
  case Kind::Tensors:
    return schema::kArgKindTensors;
  case Kind::OptionalTensors:
    return schema::kArgKindOptionalTensors;
  case Kind::None:
    return schema::kArgKindNone;
  case Kind::Int:
    return schema::kArgKindInt;
  case Kind::Ints:
    return schema::kArgKindInts;
  case Kind::Float:
    return schema::kArgKindFloat;
  case Kind::Floats:
    return schema::kArgKindFloats;
  case Kind::Bool:
    return schema::kArgKindBool;
  case Kind::Bools:
    return schema::kArgKindBools;
  case Kind::String:
    return schema::kArgKindString;
  case Kind::Strings:
    return schema::kArgKindStrings;
  case Kind::Dtype:
    return schema::kArgKindDtype;
  case Kind::Device:
    return schema::kArgKindDevice;
  case Kind::Layout:
    return schema::kArgKindLayout;
  case Kind::MemoryFormat:
    return schema::kArgKindMemoryFormat;
  }
  return "?";
}

const char *toString(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return schema::kReduceOpSum;
  case ReduceOp::Avg:
    return schema::kReduceOpAvg;
  case ReduceOp::Max:
    return schema::kReduceOpMax;
  case ReduceOp::Min:
    return schema::kReduceOpMin;
  case ReduceOp::Product:
    return schema::kReduceOpProduct;
  }
  return "?";
}

const char *toString(OpKind op) {
  switch (op) {
  case OpKind::Aten:
    return schema::kOpAten;
  case OpKind::Free:
    return schema::kOpFree;
  case OpKind::Optimizer:
    return schema::kOpOptimizer;
  case OpKind::AllGatherStart:
    return schema::kOpAllGatherStart;
  case OpKind::ReduceScatterStart:
    return schema::kOpReduceScatterStart;
  case OpKind::AllReduceStart:
    return schema::kOpAllReduceStart;
  case OpKind::BroadcastStart:
    return schema::kOpBroadcastStart;
  case OpKind::AllSliceStart:
    return schema::kOpAllSliceStart;
  case OpKind::Wait:
    return schema::kOpWait;
  case OpKind::RecordEvent:
    return schema::kOpRecordEvent;
  case OpKind::WaitEvent:
    return schema::kOpWaitEvent;
  case OpKind::SendStart:
    return schema::kOpSendStart;
  case OpKind::RecvStart:
    return schema::kOpRecvStart;
  }
  return "?";
}

const char *collectiveName(OpKind op) {
  switch (op) {
  case OpKind::AllGatherStart:
    return "all_gather";
  case OpKind::ReduceScatterStart:
    return "reduce_scatter";
  case OpKind::AllReduceStart:
    return "all_reduce";
  case OpKind::BroadcastStart:
    return "broadcast";
  case OpKind::AllSliceStart:
    return "all_slice";
  case OpKind::SendStart:
    return "send";
  case OpKind::RecvStart:
    return "recv";
  default:
    return nullptr;
  }
}

bool isPointToPoint(OpKind op) {
  return op == OpKind::SendStart || op == OpKind::RecvStart;
}

int64_t Mesh::axisIndex(const std::string &axis) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] == axis)
      return int64_t(i);
  return -1;
}

int64_t Mesh::numRanks() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t Mesh::groupSize(const std::vector<std::string> &names) const {
  int64_t n = 1;
  for (const std::string &a : names)
    n *= shape[size_t(axisIndex(a))];
  return n;
}

std::vector<int64_t> Mesh::group(const std::vector<std::string> &names,
                                 int64_t rank) const {
  // Row-major coordinates of `rank`.
  size_t nd = shape.size();
  std::vector<int64_t> coord(nd);
  int64_t r = rank;
  for (size_t i = nd; i-- > 0;) {
    coord[i] = r % shape[i];
    r /= shape[i];
  }
  std::vector<size_t> free;
  for (const std::string &a : names)
    free.push_back(size_t(axisIndex(a)));
  // Enumerate the named axes' coordinates row-major in the order the mesh
  // lists them, so the group order does not depend on how `axes` is spelt.
  std::sort(free.begin(), free.end());
  std::vector<int64_t> out;
  int64_t count = groupSize(names);
  for (int64_t k = 0; k < count; ++k) {
    int64_t rest = k;
    std::vector<int64_t> c = coord;
    for (size_t j = free.size(); j-- > 0;) {
      c[free[j]] = rest % shape[free[j]];
      rest /= shape[free[j]];
    }
    int64_t id = 0;
    for (size_t i = 0; i < nd; ++i)
      id = id * shape[i] + c[i];
    out.push_back(id);
  }
  return out;
}

std::vector<std::vector<int64_t>>
Mesh::groups(const std::vector<std::string> &names) const {
  std::vector<std::vector<int64_t>> out;
  std::vector<char> seen(size_t(numRanks()), 0);
  for (int64_t r = 0; r < numRanks(); ++r) {
    if (seen[size_t(r)])
      continue;
    out.push_back(group(names, r));
    for (int64_t m : out.back())
      seen[size_t(m)] = 1;
  }
  return out;
}

int64_t Artifact::programOf(int64_t rank) const {
  for (size_t i = 0; i < programs.size(); ++i)
    for (int64_t r : programs[i].ranks)
      if (r == rank)
        return int64_t(i);
  return -1;
}

std::vector<std::vector<std::string>> Artifact::groupAxes() const {
  std::vector<std::vector<std::string>> out;
  auto add = [&](const std::vector<std::string> &axes) {
    if (!axes.empty() && std::find(out.begin(), out.end(), axes) == out.end())
      out.push_back(axes);
  };
  for (const Program &p : programs) {
    for (const InputSpec &in : p.inputs) {
      if (in.shard)
        add(in.shard->axes);
      if (in.split)
        add(in.split->axes);
    }
    for (const StateSpec &st : p.state)
      if (st.shard)
        add(st.shard->axes);
    for (const OutputSpec &out : p.outputs)
      if (out.reduce)
        add(out.reduce->axes);
    for (const Instruction &inst : p.instructions)
      if (collectiveName(inst.op))
        add(inst.axes);
  }
  // MPMD steps hand the loss over every rank, and checkpoints gather their
  // files' checksums from every rank: both need the whole mesh's group.
  if (mesh && mesh->numRanks() > 1)
    add(mesh->axes);
  return out;
}

int64_t Program::findInput(const std::string &name) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].name == name)
      return int64_t(i);
  return -1;
}

bool Program::hasLoss() const {
  for (const OutputSpec &out : outputs)
    if (out.role == OutputRole::Loss)
      return true;
  return false;
}

std::string Artifact::tablePath(size_t program,
                                const std::string &table) const {
  return mpmd ? "programs[" + std::to_string(program) + "]." + table : table;
}

size_t Artifact::lossProgram() const {
  for (size_t i = 0; i < programs.size(); ++i)
    if (programs[i].hasLoss())
      return i;
  return 0;
}

std::string Instruction::qualifiedKernel() const {
  return kernel + "." + overload;
}

std::string Artifact::instructionPath(size_t program, size_t index) const {
  std::string path = "programs[" + std::to_string(program) + "].instructions[" +
                     std::to_string(index) + "]";
  if (program < programs.size() &&
      index < programs[program].instructions.size()) {
    const Instruction &inst = programs[program].instructions[index];
    if (!inst.name.empty())
      path += " (in '" + inst.name + "')";
  }
  return path;
}

namespace {

constexpr OpKind kAllOpKinds[] = {OpKind::Aten,
                                  OpKind::Free,
                                  OpKind::Optimizer,
                                  OpKind::AllGatherStart,
                                  OpKind::ReduceScatterStart,
                                  OpKind::AllReduceStart,
                                  OpKind::BroadcastStart,
                                  OpKind::AllSliceStart,
                                  OpKind::Wait,
                                  OpKind::RecordEvent,
                                  OpKind::WaitEvent,
                                  OpKind::SendStart,
                                  OpKind::RecvStart};
static_assert(std::size(kAllOpKinds) == schema::enumSize("Op"),
              "an Op of ArtifactSchema.def has no OpKind");

/// The spellings of enumeration `enumName` in `version`, "a, b, c".
std::string spellings(const char *enumName, uint32_t version) {
  std::string list;
  for (const schema::EnumInfo &e : schema::kEnumValues)
    if (std::strcmp(e.enumName, enumName) == 0 && e.since <= version)
      list += std::string(list.empty() ? "" : ", ") + e.spelling;
  return list;
}

/// "this runtime reads versions 1 to 2", for version errors.
std::string readableVersions() {
  return "this runtime reads versions " +
         std::to_string(kArtifactOldestVersion) + " to " +
         std::to_string(kArtifactVersion);
}

/// Reads the program JSON with a path for every message.
class ProgramReader {
public:
  ProgramReader(Artifact &artifact, std::string what)
      : a(artifact), what(std::move(what)) {}

  void read(const json &root);

private:
  [[noreturn]] void fail(const std::string &path, const std::string &message) {
    throw Error(what + ": " + (path.empty() ? "" : path + node + ": ") +
                message);
  }

  static std::string join(const std::string &path, const std::string &key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string index(const std::string &path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  // Shape checks for JSON values.
  const json &object(const json &v, const std::string &path) {
    if (!v.is_object())
      fail(path, std::string("expected an object, found ") + v.type_name());
    return v;
  }
  const json &array(const json &v, const std::string &path) {
    if (!v.is_array())
      fail(path, std::string("expected a list, found ") + v.type_name());
    return v;
  }
  /// Refuses keys the schema does not give `object` in this version: a
  /// misspelt `kwargs` must not be silently dropped.
  void onlyKeys(const json &obj, const std::string &path,
                schema::Object object) {
    for (const auto &item : obj.items())
      if (!schema::hasField(object, item.key().c_str(), version())) {
        for (const schema::FieldInfo &f : schema::kFields)
          if (f.object == object && item.key() == f.key)
            fail(join(path, item.key()),
                 "'" + item.key() + "' needs format version " +
                     std::to_string(f.since) + " (this program is version " +
                     std::to_string(a.version) + ")");
        std::string list;
        for (const schema::FieldInfo &f : schema::kFields)
          if (f.object == object && f.since <= version())
            list += std::string(list.empty() ? "" : ", ") + f.key;
        fail(join(path, item.key()),
             "unknown field (expected one of: " + list + ")");
      }
  }
  /// The same for an instruction whose `op` is `op`.
  void onlyInstructionKeys(const json &obj, const std::string &path,
                           const std::string &op) {
    for (const auto &item : obj.items())
      if (!schema::instructionHasField(op.c_str(), item.key().c_str(),
                                       version())) {
        std::string list;
        for (const schema::InstFieldInfo &f : schema::kInstFields)
          if (f.since <= version() && schema::listsOp(f.ops, op.c_str()))
            list += std::string(list.empty() ? "" : ", ") + f.key;
        fail(join(path, item.key()),
             "unknown field (expected one of: " + list + ")");
      }
  }
  uint32_t version() const { return uint32_t(a.version); }
  const json &field(const json &obj, const std::string &path, const char *key) {
    auto it = obj.find(key);
    if (it == obj.end())
      fail(join(path, key), "missing");
    return *it;
  }
  int64_t integer(const json &v, const std::string &path) {
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(path, "integer " + v.dump() + " is out of range");
      return int64_t(v.get<uint64_t>());
    }
    if (v.is_number_integer())
      return v.get<int64_t>();
    fail(path, "expected an integer, found " + v.dump());
  }
  double number(const json &v, const std::string &path) {
    if (!v.is_number())
      fail(path, "expected a number, found " + v.dump());
    return v.get<double>();
  }
  double finiteNumber(const json &v, const std::string &path) {
    double d = number(v, path);
    if (!std::isfinite(d))
      fail(path, "must be finite");
    return d;
  }
  /// A float ARG: a number, or "inf", "-inf", "nan" (JSON has no literals).
  double floatValue(const json &v, const std::string &path) {
    if (v.is_number())
      return v.get<double>();
    if (v.is_string()) {
      const std::string &s = v.get_ref<const std::string &>();
      if (s == "inf")
        return std::numeric_limits<double>::infinity();
      if (s == "-inf")
        return -std::numeric_limits<double>::infinity();
      if (s == "nan")
        return std::numeric_limits<double>::quiet_NaN();
    }
    fail(path,
         "expected a number or \"inf\", \"-inf\", \"nan\", found " + v.dump());
  }
  bool boolean(const json &v, const std::string &path) {
    if (!v.is_boolean())
      fail(path, "expected true or false, found " + v.dump());
    return v.get<bool>();
  }
  std::string string(const json &v, const std::string &path) {
    if (!v.is_string())
      fail(path, "expected a string, found " + v.dump());
    return v.get<std::string>();
  }
  std::string nonEmptyString(const json &v, const std::string &path) {
    std::string s = string(v, path);
    if (s.empty())
      fail(path, "must not be empty");
    return s;
  }
  int64_t slot(const json &v, const std::string &path) {
    int64_t s = integer(v, path);
    if (s < 0 || s >= t->numSlots)
      fail(path, "slot " + std::to_string(s) + " out of range (" +
                     std::to_string(t->numSlots) + " slots)");
    return s;
  }
  c10::ScalarType dtype(const json &v, const std::string &path) {
    std::string name = string(v, path);
    std::optional<c10::ScalarType> t = parseArtifactDtype(name);
    if (!t)
      fail(path, "unknown dtype '" + name +
                     "' (expected one of: f32 f64 f16 bf16 i64 i32 i16 i8 "
                     "u8 bool c64 c128)");
    return *t;
  }
  std::vector<int64_t> shape(const json &v, const std::string &path) {
    std::vector<int64_t> dims;
    size_t i = 0;
    for (const json &d : array(v, path)) {
      int64_t n = integer(d, index(path, i++));
      if (n < 0)
        fail(index(path, i - 1),
             "dimension " + std::to_string(n) + " is negative");
      dims.push_back(n);
    }
    return dims;
  }

  /// A list of mesh axis names: non-empty, each an axis of the mesh, none
  /// twice.
  std::vector<std::string> axesList(const json &v, const std::string &path) {
    std::vector<std::string> out;
    size_t i = 0;
    for (const json &e : array(v, path)) {
      std::string ep = index(path, i++);
      std::string name = nonEmptyString(e, ep);
      if (!a.mesh)
        fail(ep, "axis '" + name + "' but the artifact has no mesh");
      if (a.mesh->axisIndex(name) < 0) {
        std::string list;
        for (const std::string &x : a.mesh->axes)
          list += (list.empty() ? "" : ", ") + x;
        fail(ep,
             "'" + name + "' is not an axis of the mesh (axes: " + list + ")");
      }
      if (std::find(out.begin(), out.end(), name) != out.end())
        fail(ep, "axis '" + name + "' is listed twice");
      out.push_back(name);
    }
    if (out.empty())
      fail(path, "must name at least one mesh axis");
    return out;
  }
  ReduceOp reduceOp(const json &v, const std::string &path) {
    std::string r = string(v, path);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max,
                        ReduceOp::Min, ReduceOp::Product})
      if (r == toString(op))
        return op;
    fail(path, "unknown reduction '" + r +
                   "' (expected sum, avg, max, min or product)");
  }
  /// `shard` of an input or state entry whose local shape is `local`.
  ShardSpec shardSpec(const json &v, const std::string &path,
                      const std::vector<int64_t> &local) {
    object(v, path);
    onlyKeys(v, path, schema::Object::Shard);
    ShardSpec sh;
    sh.axes = axesList(field(v, path, schema::kShardAxes),
                       join(path, schema::kShardAxes));
    sh.globalShape = shape(field(v, path, schema::kShardGlobalShape),
                           join(path, schema::kShardGlobalShape));
    sh.dim = integer(field(v, path, schema::kShardDim),
                     join(path, schema::kShardDim));
    if (sh.dim < 0 || sh.dim >= int64_t(sh.globalShape.size()))
      fail(join(path, "dim"), "dim " + std::to_string(sh.dim) +
                                  " out of range for global_shape " +
                                  formatShape(sh.globalShape));
    int64_t g = a.mesh->groupSize(sh.axes);
    std::vector<int64_t> want = sh.globalShape;
    want[size_t(sh.dim)] = (want[size_t(sh.dim)] + g - 1) / g;
    if (local != want)
      fail(path, "the local shape is " + formatShape(local) +
                     ", but chunk of global_shape " +
                     formatShape(sh.globalShape) + " padded over " +
                     std::to_string(g) + " ranks on dim " +
                     std::to_string(sh.dim) + " is " + formatShape(want));
    return sh;
  }

  /// `format`, `version` (the keys it knows), producer, device and the
  /// optional counts.
  void readHeader(const json &root);
  /// `world_size` and the `mesh` it must match.
  void readWorld(const json &root);
  /// `programs`, with their tables at the top level (SPMD) or in each
  /// program (MPMD, from version 3).
  void readPrograms(const json &root);
  /// Every rank runs exactly one program.
  void checkEveryRankRuns();
  void readMesh(const json &v);
  void readOptimizer(const json &v, const std::string &path);
  void readLrSchedule(const json &v, const std::string &path);
  /// Reads `num_slots`, `inputs`, `state` and `outputs` of `obj` (the top
  /// level, or an MPMD program at `path`) into `tables`.
  void readTables(const json &obj, const std::string &path, Program &tables);
  void readInputs(const json &v, const std::string &path);
  void readState(const json &v, const std::string &path);
  void readOutputs(const json &v, const std::string &path);
  void readProgram(const json &v, size_t programIndex, const Program *shared);
  /// MPMD: one loss among the programs, and a runtime-owned input bound by
  /// several programs bound alike.
  void checkAcrossPrograms();
  Instruction readInstruction(const json &v, const std::string &path,
                              const Program &program);
  ArgValue readArg(const json &v, const std::string &path);
  ResultSpec readResult(const json &v, const std::string &path);
  void checkDataflow(size_t programIndex);

  /// What checkDataflow tracks while it walks a program.
  struct Dataflow {
    static constexpr char kValue = 1, kFuture = 2;
    /// Per slot: 0 nothing, kValue a value, kFuture the future of a
    /// collective in flight.
    std::vector<char> live;
    /// future slot -> (input slot, start instruction index)
    std::map<int64_t, std::pair<int64_t, size_t>> inFlight;
    /// future slot -> the op that started it (the last one, once waited).
    std::map<int64_t, OpKind> startedBy;
    std::set<int64_t> recordedEvents;
    /// The parameters an optimizer instruction has updated.
    std::set<std::string> optimized;
  };
  /// Fails unless slot `s` (none if negative) holds a value.
  void flowRead(const Dataflow &flow, int64_t s, const std::string &path);
  /// Fails if writing slot `s` would drop a future or the input of a
  /// collective in flight.
  void flowWritable(const Dataflow &flow, int64_t s, const std::string &path);
  /// Fails if slot `s` is the input of a collective in flight, which must not
  /// be `what` ("written", "freed") before its wait.
  void flowKeepsInput(const Dataflow &flow, int64_t s, const std::string &path,
                      const char *what);
  void flowAten(Dataflow &flow, const Instruction &inst, const std::string &p);
  void flowFree(Dataflow &flow, const Instruction &inst, const std::string &p);
  void flowOptimizer(Dataflow &flow, const Program &program,
                     const Instruction &inst, const std::string &p);
  /// State entry `k` of an optimizer instruction: bound, the parameter's,
  /// shaped like it, listed once.
  void checkOptimizerState(const Program &program, const Instruction &inst,
                           const InputSpec &param, size_t k,
                           const std::string &sp);
  /// A collective start, a send or a recv at instructions[i].
  void flowStart(Dataflow &flow, const Instruction &inst, const std::string &p,
                 size_t i);
  void flowWait(Dataflow &flow, const Instruction &inst, const std::string &p);

  Artifact &a;
  std::string what;
  /// The tables being read or checked: the top level's, or a program's.
  Program *t = nullptr;
  /// " (in 'addmm')" while reading or checking a named instruction, so every
  /// message about it names the graph node as well as the JSON path.
  std::string node;
};

void ProgramReader::read(const json &root) {
  readHeader(root);
  readWorld(root);
  const json &opt = field(root, "", schema::kProgramOptimizer);
  if (!opt.is_null())
    readOptimizer(opt, "optimizer");
  if (root.contains(schema::kProgramLrSchedule)) {
    if (!a.optimizer)
      fail(schema::kProgramLrSchedule, "needs an optimizer to schedule");
    readLrSchedule(root[schema::kProgramLrSchedule],
                   schema::kProgramLrSchedule);
  }
  readPrograms(root);
  checkEveryRankRuns();
  if (a.mpmd)
    checkAcrossPrograms();
  for (size_t i = 0; i < a.programs.size(); ++i)
    checkDataflow(i);
}

void ProgramReader::readHeader(const json &root) {
  object(root, "");
  std::string format =
      string(field(root, "", schema::kProgramFormat), schema::kProgramFormat);
  if (format != schema::kFormatLoomx)
    fail(schema::kProgramFormat, std::string("expected \"") +
                                     schema::kFormatLoomx + "\", found \"" +
                                     format + "\"");
  int64_t version = integer(field(root, "", schema::kProgramVersion),
                            schema::kProgramVersion);
  if (version < int64_t(kArtifactOldestVersion) ||
      version > int64_t(kArtifactVersion))
    fail(schema::kProgramVersion,
         "program version " + std::to_string(version) + "; " +
             readableVersions() +
             " — recompile with the matching loom-compile");
  a.version = version;
  // Which keys are known depends on the version.
  onlyKeys(root, "", schema::Object::Program);
  for (auto [key, out] : {std::pair{schema::kProgramProducer, &a.producer},
                          std::pair{schema::kProgramSource, &a.source},
                          std::pair{schema::kProgramPipeline, &a.pipeline}})
    if (root.contains(key))
      *out = string(root[key], key);

  if (root.contains(schema::kProgramDevice)) {
    std::string device =
        string(root[schema::kProgramDevice], schema::kProgramDevice);
    std::optional<DeviceKind> kind = parseDeviceKind(device);
    if (!kind)
      fail(schema::kProgramDevice,
           "unknown device '" + device + "' (expected cpu or cuda)");
    a.device = *kind;
  }

  // Optional positive counts.
  for (auto [key, out] :
       {std::pair{schema::kProgramKernelWorkspaceThreads,
                  &a.kernelWorkspaceThreads},
        std::pair{schema::kProgramMemoryBudget, &a.memoryBudget}}) {
    if (!root.contains(key))
      continue;
    int64_t n = integer(root[key], key);
    if (n < 1)
      fail(key, "must be at least 1, found " + std::to_string(n));
    *out = n;
  }
}

void ProgramReader::readWorld(const json &root) {
  a.worldSize =
      integer(field(root, "", schema::kProgramWorldSize), "world_size");
  if (a.worldSize < 1)
    fail("world_size",
         "must be at least 1, found " + std::to_string(a.worldSize));
  if (root.contains(schema::kProgramMesh)) {
    readMesh(root[schema::kProgramMesh]);
    if (a.mesh->numRanks() != a.worldSize)
      fail("world_size", std::to_string(a.worldSize) +
                             " is not the product of mesh.shape " +
                             formatShape(a.mesh->shape) + " (" +
                             std::to_string(a.mesh->numRanks()) + ")");
  } else if (a.worldSize > 1 && a.version >= 2) {
    fail("mesh", "missing (required when world_size > 1)");
  }
}

void ProgramReader::readPrograms(const json &root) {
  const json &programs =
      array(field(root, "", schema::kProgramPrograms), "programs");
  if (a.version < 2 && int64_t(programs.size()) != a.worldSize)
    fail("programs", "has " + std::to_string(programs.size()) +
                         " programs for world_size " +
                         std::to_string(a.worldSize) +
                         " (one per rank expected)");
  // SPMD (the top level holds the tables, every program shares them) or,
  // from version 3, MPMD (every program holds its own and the top level
  // none). One path reads both: SPMD hands the top level's tables to each
  // program. Version 1 and 2 programs cannot hold tables (onlyKeys refuses
  // the keys), so they are SPMD.
  const char *tableKeys[] = {schema::kProgramNumSlots, schema::kProgramInputs,
                             schema::kProgramState, schema::kProgramOutputs};
  const char *topKey = nullptr;
  for (const char *key : tableKeys)
    if (!topKey && root.contains(key))
      topKey = key;
  a.mpmd = !topKey && a.version >= 3;
  for (size_t i = 0; a.mpmd && i < programs.size(); ++i)
    if (!programs[i].is_object() ||
        !programs[i].contains(schema::kRankProgramNumSlots))
      a.mpmd = false;
  Program shared;
  if (!a.mpmd) {
    // Before version 3 a program holds no tables: say so rather than that
    // the top level misses them.
    for (size_t i = 0; a.version < 3 && i < programs.size(); ++i)
      if (programs[i].is_object())
        onlyKeys(programs[i], index("programs", i),
                 schema::Object::RankProgram);
    if (a.version >= 3)
      for (size_t i = 0; i < programs.size(); ++i)
        for (const char *key : tableKeys)
          if (programs[i].is_object() && programs[i].contains(key))
            fail(join(index("programs", i), key),
                 topKey ? std::string("the top level has `") + topKey +
                              "` (one SPMD program); give the tables either "
                              "at the top level or in every program, not "
                              "both"
                        : std::string("programs[") + std::to_string(i) +
                              "] has its own tables but another program has "
                              "none; in an MPMD artifact every program has "
                              "`num_slots`, `inputs`, `state` and `outputs`");
    readTables(root, "", shared);
  }
  for (size_t i = 0; i < programs.size(); ++i)
    readProgram(programs[i], i, a.mpmd ? nullptr : &shared);
}

void ProgramReader::checkEveryRankRuns() {
  // Version 2: every rank runs exactly one program.
  std::vector<int64_t> runBy(size_t(a.worldSize), -1);
  for (size_t i = 0; i < a.programs.size(); ++i)
    for (size_t k = 0; k < a.programs[i].ranks.size(); ++k) {
      int64_t r = a.programs[i].ranks[k];
      std::string rp = index(join(index("programs", i), "ranks"), k);
      if (r < 0 || r >= a.worldSize)
        fail(rp, "rank " + std::to_string(r) + " out of range (world_size " +
                     std::to_string(a.worldSize) + ")");
      if (runBy[size_t(r)] >= 0)
        fail(rp, "rank " + std::to_string(r) + " also runs programs[" +
                     std::to_string(runBy[size_t(r)]) + "]");
      runBy[size_t(r)] = int64_t(i);
    }
  for (int64_t r = 0; r < a.worldSize; ++r)
    if (runBy[size_t(r)] < 0)
      fail("programs", "no program runs rank " + std::to_string(r) +
                           " (world_size " + std::to_string(a.worldSize) + ")");
}

void ProgramReader::readTables(const json &obj, const std::string &path,
                               Program &tables) {
  t = &tables;
  std::string slotsPath = join(path, schema::kProgramNumSlots);
  tables.numSlots =
      integer(field(obj, path, schema::kProgramNumSlots), slotsPath);
  if (tables.numSlots < 0 || tables.numSlots > kMaxSlots)
    fail(slotsPath, std::to_string(tables.numSlots) +
                        " is out of range (0 to " + std::to_string(kMaxSlots) +
                        ")");
  readInputs(field(obj, path, schema::kProgramInputs),
             join(path, schema::kProgramInputs));
  readState(field(obj, path, schema::kProgramState),
            join(path, schema::kProgramState));
  readOutputs(field(obj, path, schema::kProgramOutputs),
              join(path, schema::kProgramOutputs));
}

void ProgramReader::checkAcrossPrograms() {
  std::vector<size_t> withLoss;
  for (size_t i = 0; i < a.programs.size(); ++i)
    if (a.programs[i].hasLoss())
      withLoss.push_back(i);
  if (withLoss.empty())
    fail("programs", "no program has an output with role 'loss' (the "
                     "program of the last pipeline stage has exactly one)");
  if (withLoss.size() > 1)
    fail(index("programs", withLoss[1]) + ".outputs",
         "a second program with a 'loss' output (programs[" +
             std::to_string(withLoss[0]) +
             "] has one already; the step reports one loss)");
  // A runtime-owned tensor has one entry in the weights section, so every
  // program that binds it (a tied weight held by two stages) binds it alike.
  std::map<std::string, std::pair<size_t, size_t>> first;
  for (size_t i = 0; i < a.programs.size(); ++i)
    for (size_t k = 0; k < a.programs[i].inputs.size(); ++k) {
      const InputSpec &in = a.programs[i].inputs[k];
      if (in.role == InputRole::Input)
        continue;
      auto [it, fresh] = first.emplace(in.name, std::pair{i, k});
      if (fresh)
        continue;
      const InputSpec &other =
          a.programs[it->second.first].inputs[it->second.second];
      auto full = [](const InputSpec &s) {
        return s.shard ? s.shard->globalShape : s.shape;
      };
      if (other.role != in.role || other.dtype != in.dtype ||
          full(other) != full(in))
        fail(index(index("programs", i) + ".inputs", k),
             "'" + in.name + "' is a " + toString(in.role) + " " +
                 artifactDtypeName(in.dtype) + " " + formatShape(full(in)) +
                 " here, but programs[" + std::to_string(it->second.first) +
                 "].inputs[" + std::to_string(it->second.second) +
                 "] binds it as a " + toString(other.role) + " " +
                 artifactDtypeName(other.dtype) + " " +
                 formatShape(full(other)) +
                 " (programs that share a tensor bind it alike)");
    }
}

void ProgramReader::readMesh(const json &v) {
  object(v, "mesh");
  onlyKeys(v, "mesh", schema::Object::Mesh);
  Mesh m;
  m.shape = shape(field(v, "mesh", schema::kMeshShape), "mesh.shape");
  if (m.shape.empty())
    fail("mesh.shape", "must have at least one axis");
  for (size_t i = 0; i < m.shape.size(); ++i)
    if (m.shape[i] < 1)
      fail(index("mesh.shape", i), "an axis has at least one rank, found " +
                                       std::to_string(m.shape[i]));
  const json &axes = array(field(v, "mesh", schema::kMeshAxes), "mesh.axes");
  for (size_t i = 0; i < axes.size(); ++i) {
    std::string name = nonEmptyString(axes[i], index("mesh.axes", i));
    if (std::find(m.axes.begin(), m.axes.end(), name) != m.axes.end())
      fail(index("mesh.axes", i), "axis '" + name + "' is listed twice");
    m.axes.push_back(name);
  }
  if (m.axes.size() != m.shape.size())
    fail("mesh.axes", "names " + std::to_string(m.axes.size()) +
                          " axes, mesh.shape has " +
                          std::to_string(m.shape.size()));
  a.mesh = m;
}

void ProgramReader::readLrSchedule(const json &v, const std::string &path) {
  object(v, path);
  onlyKeys(v, path, schema::Object::LrSchedule);
  LrScheduleSpec s;
  auto count = [&](const char *key, int64_t min) {
    int64_t n = integer(field(v, path, key), join(path, key));
    if (n < min)
      fail(join(path, key), "must be at least " + std::to_string(min) +
                                ", found " + std::to_string(n));
    return n;
  };
  auto number = [&](const char *key, double lo, double hi) {
    double d = finiteNumber(field(v, path, key), join(path, key));
    if (d < lo || d > hi)
      fail(join(path, key), "must be in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "], found " +
                                std::to_string(d));
    return d;
  };
  // The ranges lr_scheduler's constructors accept.
  s.warmupSteps = count(schema::kLrScheduleWarmupSteps, 0);
  s.warmupStartFactor = number(schema::kLrScheduleWarmupStartFactor, 0, 1);
  if (s.warmupStartFactor <= 0)
    fail(join(path, schema::kLrScheduleWarmupStartFactor),
         "must be greater than 0");
  std::string decay = string(field(v, path, schema::kLrScheduleDecay),
                             join(path, schema::kLrScheduleDecay));
  static constexpr std::pair<const char *, LrDecay> kDecays[] = {
      {schema::kLrDecayConstant, LrDecay::Constant},
      {schema::kLrDecayCosine, LrDecay::Cosine},
      {schema::kLrDecayLinear, LrDecay::Linear},
      {schema::kLrDecayStep, LrDecay::Step},
      {schema::kLrDecayExponential, LrDecay::Exponential},
      {schema::kLrDecayMultiStep, LrDecay::MultiStep},
      {schema::kLrDecayPolynomial, LrDecay::Polynomial},
      {schema::kLrDecayCosineRestarts, LrDecay::CosineRestarts}};
  static_assert(std::size(kDecays) == schema::enumSize("LrDecay"),
                "an LrDecay of ArtifactSchema.def has no LrDecay");
  const auto *known =
      std::find_if(std::begin(kDecays), std::end(kDecays),
                   [&](const auto &d) { return decay == d.first; });
  if (known == std::end(kDecays))
    fail(join(path, schema::kLrScheduleDecay),
         "unknown decay '" + decay + "' (version " + std::to_string(a.version) +
             " has " + spellings("LrDecay", version()) + ")");
  if (!schema::isEnumValue("LrDecay", decay.c_str(), version()))
    fail(join(path, schema::kLrScheduleDecay),
         "'" + decay + "' needs format version " +
             std::to_string(schema::enumValueSince("LrDecay", decay.c_str())) +
             " (this program is version " + std::to_string(a.version) + ")");
  s.decay = known->second;
  bool factored = s.decay == LrDecay::Step || s.decay == LrDecay::Exponential ||
                  s.decay == LrDecay::MultiStep;
  bool stepped = s.decay == LrDecay::Cosine || s.decay == LrDecay::Linear ||
                 s.decay == LrDecay::Step || s.decay == LrDecay::Polynomial ||
                 s.decay == LrDecay::CosineRestarts;
  s.decaySteps = count(schema::kLrScheduleDecaySteps, stepped ? 1 : 0);
  if (!stepped && s.decaySteps != 0)
    fail(join(path, schema::kLrScheduleDecaySteps),
         "must be 0 for the " + decay + " decay, found " +
             std::to_string(s.decaySteps));
  s.etaMin = number(schema::kLrScheduleEtaMin, 0, HUGE_VAL);
  s.endFactor = number(schema::kLrScheduleEndFactor, 0, 1);
  // Each decay's own key is required with it and refused without it.
  auto own = [&](const char *key, bool takes, const char *refusal) {
    if (takes != v.contains(key))
      fail(join(path, key),
           takes ? "missing: the " + decay + " decay needs its " + key
                 : std::string(refusal));
    return takes;
  };
  if (own(schema::kLrScheduleGamma, factored,
          "only the step, exponential and multistep decays take a gamma")) {
    s.gamma = number(schema::kLrScheduleGamma, 0, HUGE_VAL);
    if (s.gamma <= 0)
      fail(join(path, schema::kLrScheduleGamma), "must be greater than 0");
  }
  if (own(schema::kLrScheduleMilestones, s.decay == LrDecay::MultiStep,
          "only the multistep decay takes milestones")) {
    std::string at = join(path, schema::kLrScheduleMilestones);
    const json &list = array(v[schema::kLrScheduleMilestones], at);
    if (list.empty())
      fail(at, "must list at least one step");
    for (size_t i = 0; i < list.size(); ++i) {
      int64_t m = integer(list[i], index(at, i));
      int64_t least = i ? s.milestones.back() + 1 : 1;
      if (m < least)
        fail(index(at, i), "must be at least " + std::to_string(least) +
                               " (milestones increase from 1), found " +
                               std::to_string(m));
      s.milestones.push_back(m);
    }
  }
  if (own(schema::kLrSchedulePower, s.decay == LrDecay::Polynomial,
          "only the polynomial decay takes a power"))
    s.power = number(schema::kLrSchedulePower, 0, HUGE_VAL);
  if (own(schema::kLrScheduleTMult, s.decay == LrDecay::CosineRestarts,
          "only the cosine-restarts decay takes a t_mult"))
    s.tMult = count(schema::kLrScheduleTMult, 1);
  a.lrSchedule = s;
}

void ProgramReader::readOptimizer(const json &v, const std::string &path) {
  object(v, path);
  onlyKeys(v, path, schema::Object::Optimizer);
  OptimizerSpec o;
  std::string name = string(field(v, path, schema::kOptimizerName),
                            join(path, schema::kOptimizerName));
  std::optional<OptimizerKind> kind = parseOptimizerKind(name);
  if (!kind)
    fail(join(path, schema::kOptimizerName),
         "unknown optimizer '" + name + "' (version " +
             std::to_string(a.version) + " has " +
             spellings("OptimizerName", version()) + ")");
  o.kind = *kind;
  if (!schema::isEnumValue("OptimizerName", name.c_str(), version()))
    fail(join(path, schema::kOptimizerName),
         "'" + name + "' needs format version " +
             std::to_string(
                 schema::enumValueSince("OptimizerName", name.c_str())) +
             " (this program is version " + std::to_string(a.version) + ")");
  auto nonNegative = [&](const char *key) {
    double d = finiteNumber(field(v, path, key), join(path, key));
    if (d < 0)
      fail(join(path, key), "must not be negative, found " + std::to_string(d));
    return d;
  };
  // The same range checks torch.optim's constructors make.
  o.lr = nonNegative(schema::kOptimizerLr);
  o.eps = nonNegative(schema::kOptimizerEps);
  o.weightDecay = nonNegative(schema::kOptimizerWeightDecay);
  o.momentum = nonNegative(schema::kOptimizerMomentum);
  o.dampening = finiteNumber(field(v, path, schema::kOptimizerDampening),
                             join(path, schema::kOptimizerDampening));
  o.nesterov = boolean(field(v, path, schema::kOptimizerNesterov),
                       join(path, schema::kOptimizerNesterov));
  o.maximize = boolean(field(v, path, schema::kOptimizerMaximize),
                       join(path, schema::kOptimizerMaximize));
  // A list of two finite numbers (`betas`, Rprop's `etas` and
  // `step_sizes`), `expected` naming them in the error.
  auto twoNumbers = [&](const json &value, const std::string &p,
                        const char *expected, double &first, double &second) {
    const json &a = array(value, p);
    if (a.size() != 2)
      fail(p, std::string("expected ") + expected + ", found " + a.dump());
    first = finiteNumber(a[0], index(p, 0));
    second = finiteNumber(a[1], index(p, 1));
  };
  std::string betasPath = join(path, schema::kOptimizerBetas);
  twoNumbers(field(v, path, schema::kOptimizerBetas), betasPath,
             "[beta1, beta2]", o.beta1, o.beta2);
  for (int i = 0; i < 2; ++i) {
    double b = i == 0 ? o.beta1 : o.beta2;
    if (b < 0 || b >= 1)
      fail(index(betasPath, i),
           "must be in [0, 1), found " + std::to_string(b));
  }
  if (o.kind == OptimizerKind::SGD && o.nesterov &&
      (o.momentum <= 0 || o.dampening != 0))
    fail(join(path, schema::kOptimizerNesterov),
         "Nesterov momentum requires a momentum and zero dampening");
  // Version 4's keys, each optional, and each only with the algorithms
  // that take it (LOOMX_OPTIMIZER_KEY): another algorithm's would be
  // silently ignored.
  for (const auto &item : v.items())
    if (schema::isOptimizerOwnKey(item.key().c_str()) &&
        !schema::optimizerTakesKey(name.c_str(), item.key().c_str()))
      fail(join(path, item.key()), "'" + item.key() +
                                       "' is not a hyperparameter of " + name +
                                       " (torch.optim does not take it)");
  auto optionalFlag = [&](const char *key, bool &flag) {
    if (v.contains(key))
      flag = boolean(v[key], join(path, key));
  };
  optionalFlag(schema::kOptimizerAmsgrad, o.amsgrad);
  optionalFlag(schema::kOptimizerCentered, o.centered);
  optionalFlag(schema::kOptimizerDecoupledWeightDecay, o.decoupledWeightDecay);
  if (o.kind == OptimizerKind::ASGD) {
    // torch.optim.ASGD checks none of these; any finite number trains.
    o.alpha = 0.75;
    for (auto [key, value] : {std::pair{schema::kOptimizerLambd, &o.lambd},
                              {schema::kOptimizerAlpha, &o.alpha},
                              {schema::kOptimizerT0, &o.t0}})
      if (v.contains(key))
        *value = finiteNumber(v[key], join(path, key));
  } else if (v.contains(schema::kOptimizerAlpha)) {
    o.alpha = nonNegative(schema::kOptimizerAlpha);
  }
  if (v.contains(schema::kOptimizerRho)) {
    o.rho = finiteNumber(v[schema::kOptimizerRho],
                         join(path, schema::kOptimizerRho));
    if (o.rho < 0 || o.rho > 1)
      fail(join(path, schema::kOptimizerRho),
           "must be in [0, 1], found " + std::to_string(o.rho));
  }
  if (v.contains(schema::kOptimizerMomentumDecay))
    o.momentumDecay = nonNegative(schema::kOptimizerMomentumDecay);
  // Rprop's pairs, checked as torch.optim.Rprop's constructor checks etas.
  auto optionalPair = [&](const char *key, double &first, double &second) {
    if (v.contains(key))
      twoNumbers(v[key], join(path, key), "two numbers", first, second);
  };
  optionalPair(schema::kOptimizerEtas, o.etaminus, o.etaplus);
  if (!(0 < o.etaminus && o.etaminus < 1 && 1 < o.etaplus))
    fail(join(path, schema::kOptimizerEtas),
         "must satisfy 0 < etaminus < 1 < etaplus, found [" +
             std::to_string(o.etaminus) + ", " + std::to_string(o.etaplus) +
             "]");
  optionalPair(schema::kOptimizerStepSizes, o.stepSizeMin, o.stepSizeMax);
  if (!(0 <= o.stepSizeMin && o.stepSizeMin <= o.stepSizeMax))
    fail(join(path, schema::kOptimizerStepSizes),
         "must satisfy 0 <= min <= max, found [" +
             std::to_string(o.stepSizeMin) + ", " +
             std::to_string(o.stepSizeMax) + "]");
  if (v.contains(schema::kOptimizerLrDecay))
    o.lrDecay = nonNegative(schema::kOptimizerLrDecay);
  if (v.contains(schema::kOptimizerInitialAccumulatorValue))
    o.initialAccumulatorValue =
        nonNegative(schema::kOptimizerInitialAccumulatorValue);
  if (v.contains(schema::kOptimizerImpl)) {
    std::string implPath = join(path, schema::kOptimizerImpl);
    std::string impl = string(v[schema::kOptimizerImpl], implPath);
    if (impl == schema::kOptimizerImplForloop)
      o.impl = OptimizerImpl::Forloop;
    else if (impl == schema::kOptimizerImplFused)
      o.impl = OptimizerImpl::Fused;
    else
      fail(implPath,
           "unknown implementation '" + impl + "' (expected forloop or fused)");
    if (o.impl == OptimizerImpl::Fused && !o.hasFusedKernel())
      fail(implPath, std::string(toString(o.kind)) +
                         " has no fused implementation (torch.optim has no "
                         "fused=True for it)");
  }
  a.optimizer = o;
}

void ProgramReader::readInputs(const json &v, const std::string &table) {
  std::set<std::string> names;
  std::set<int64_t> batchIndices;
  size_t i = 0;
  for (const json &e : array(v, table)) {
    std::string path = index(table, i++);
    object(e, path);
    onlyKeys(e, path, schema::Object::Input);
    InputSpec in;
    in.name = nonEmptyString(field(e, path, schema::kInputName),
                             join(path, schema::kInputName));
    if (!names.insert(in.name).second)
      fail(join(path, schema::kInputName), "'" + in.name + "' is listed twice");
    // The weights section is safetensors, where this key holds the
    // metadata: a tensor of that name could never be stored there.
    if (in.name == "__metadata__")
      fail(join(path, schema::kInputName),
           "'__metadata__' is reserved by safetensors (the weights section)");
    std::string role = string(field(e, path, schema::kInputRole),
                              join(path, schema::kInputRole));
    if (role == schema::kInputRoleParameter)
      in.role = InputRole::Parameter;
    else if (role == schema::kInputRoleBuffer)
      in.role = InputRole::Buffer;
    else if (role == schema::kInputRoleConstant)
      in.role = InputRole::Constant;
    else if (role == schema::kInputRoleInput)
      in.role = InputRole::Input;
    else
      fail(join(path, schema::kInputRole),
           "unknown role '" + role +
               "' (expected parameter, buffer, constant "
               "or input)");
    in.slot = slot(field(e, path, schema::kInputSlot),
                   join(path, schema::kInputSlot));
    if (in.role == InputRole::Input) {
      in.batchIndex = integer(field(e, path, schema::kInputBatchIndex),
                              join(path, schema::kInputBatchIndex));
      if (in.batchIndex < 0)
        fail(join(path, schema::kInputBatchIndex), "must not be negative");
      if (!batchIndices.insert(in.batchIndex).second)
        fail(join(path, schema::kInputBatchIndex),
             std::to_string(in.batchIndex) + " is bound by another input");
    } else if (e.contains(schema::kInputBatchIndex)) {
      fail(join(path, schema::kInputBatchIndex),
           "only inputs with role 'input' take "
           "an element of the batch");
    }
    in.dtype = dtype(field(e, path, schema::kInputDtype),
                     join(path, schema::kInputDtype));
    in.shape = shape(field(e, path, schema::kInputShape),
                     join(path, schema::kInputShape));
    if (e.contains(schema::kInputShard)) {
      if (in.role != InputRole::Parameter)
        fail(join(path, schema::kInputShard),
             std::string("only parameters are sharded; "
                         "this input is a ") +
                 toString(in.role));
      in.shard = shardSpec(e[schema::kInputShard],
                           join(path, schema::kInputShard), in.shape);
    }
    if (e.contains(schema::kInputSplit)) {
      std::string sp = join(path, schema::kInputSplit);
      if (in.role != InputRole::Input)
        fail(sp, "only inputs with role 'input' (batch data) are split");
      object(e[schema::kInputSplit], sp);
      onlyKeys(e[schema::kInputSplit], sp, schema::Object::Split);
      SplitSpec split;
      split.axes =
          axesList(field(e[schema::kInputSplit], sp, schema::kSplitAxes),
                   join(sp, schema::kSplitAxes));
      split.dim = integer(field(e[schema::kInputSplit], sp, schema::kSplitDim),
                          join(sp, schema::kSplitDim));
      if (split.dim < 0 || split.dim >= int64_t(in.shape.size()))
        fail(join(sp, schema::kSplitDim), "dim " + std::to_string(split.dim) +
                                              " out of range for shape " +
                                              formatShape(in.shape));
      in.split = split;
    }
    t->inputs.push_back(std::move(in));
  }
}

void ProgramReader::readState(const json &v, const std::string &table) {
  std::set<std::string> names;
  size_t i = 0;
  for (const json &e : array(v, table)) {
    std::string path = index(table, i++);
    object(e, path);
    onlyKeys(e, path, schema::Object::State);
    StateSpec s;
    s.name = nonEmptyString(field(e, path, schema::kStateName),
                            join(path, schema::kStateName));
    if (!names.insert(s.name).second)
      fail(join(path, schema::kStateName), "'" + s.name + "' is listed twice");
    s.param = string(field(e, path, schema::kStateParam),
                     join(path, schema::kStateParam));
    int64_t p = t->findInput(s.param);
    if (p < 0 || t->inputs[size_t(p)].role != InputRole::Parameter)
      fail(join(path, schema::kStateParam),
           "'" + s.param + "' is not a parameter input");
    s.slot = slot(field(e, path, schema::kStateSlot),
                  join(path, schema::kStateSlot));
    s.dtype = dtype(field(e, path, schema::kStateDtype),
                    join(path, schema::kStateDtype));
    s.shape = shape(field(e, path, schema::kStateShape),
                    join(path, schema::kStateShape));
    std::string init = string(field(e, path, schema::kStateInit),
                              join(path, schema::kStateInit));
    if (init == schema::kStateInitInitialAccumulatorValue && a.optimizer &&
        a.optimizer->kind == OptimizerKind::Adagrad)
      s.init = StateInit::InitialAccumulatorValue;
    else if (init != schema::kStateInitZeros)
      fail(join(path, schema::kStateInit),
           "unknown init '" + init +
               "' (expected \"zeros\", or \"initial_accumulator_value\" "
               "with adagrad)");
    if (e.contains(schema::kStateShard))
      s.shard = shardSpec(e[schema::kStateShard],
                          join(path, schema::kStateShard), s.shape);
    t->state.push_back(std::move(s));
  }

  // Inputs and state are bound to their slots together before the first
  // instruction, so no two may share one.
  std::string prefix = table.substr(0, table.size() - std::strlen("state"));
  std::map<int64_t, std::string> owner;
  for (size_t j = 0; j < t->inputs.size(); ++j) {
    std::string ip = index(prefix + "inputs", j);
    auto [it, fresh] = owner.emplace(t->inputs[j].slot, ip);
    if (!fresh)
      fail(join(ip, "slot"), "slot " + std::to_string(t->inputs[j].slot) +
                                 " is also bound by " + it->second);
  }
  for (size_t j = 0; j < t->state.size(); ++j) {
    std::string sp = index(table, j);
    auto [it, fresh] = owner.emplace(t->state[j].slot, sp);
    if (!fresh)
      fail(join(sp, "slot"), "slot " + std::to_string(t->state[j].slot) +
                                 " is also bound by " + it->second);
  }
}

void ProgramReader::readOutputs(const json &v, const std::string &table) {
  size_t numLoss = 0;
  std::set<std::pair<int, std::string>> targets;
  size_t i = 0;
  for (const json &e : array(v, table)) {
    std::string path = index(table, i++);
    object(e, path);
    onlyKeys(e, path, schema::Object::Output);
    OutputSpec out;
    std::string role = string(field(e, path, schema::kOutputRole),
                              join(path, schema::kOutputRole));
    InputRole targetRole = InputRole::Input;
    if (role == schema::kOutputRoleLoss) {
      out.role = OutputRole::Loss;
      ++numLoss;
    } else if (role == schema::kOutputRoleBufferMutation) {
      out.role = OutputRole::BufferMutation;
      targetRole = InputRole::Buffer;
    } else if (role == schema::kOutputRoleGrad) {
      out.role = OutputRole::Grad;
      targetRole = InputRole::Parameter;
    } else {
      fail(join(path, schema::kOutputRole),
           "unknown role '" + role +
               "' (expected loss, buffer_mutation or "
               "grad)");
    }
    if (out.role == OutputRole::Loss) {
      if (e.contains(schema::kOutputTarget))
        fail(join(path, schema::kOutputTarget), "a loss output has no target");
    } else {
      out.target = string(field(e, path, schema::kOutputTarget),
                          join(path, schema::kOutputTarget));
      int64_t ti = t->findInput(out.target);
      if (ti < 0 || t->inputs[size_t(ti)].role != targetRole)
        fail(join(path, schema::kOutputTarget),
             "'" + out.target + "' is not a " + toString(targetRole) +
                 " input");
      if (!targets.emplace(int(out.role), out.target).second)
        fail(join(path, schema::kOutputTarget),
             "a second " + role + " output for '" + out.target + "'");
    }
    out.slot = slot(field(e, path, schema::kOutputSlot),
                    join(path, schema::kOutputSlot));
    if (e.contains(schema::kOutputReduce)) {
      std::string rp = join(path, schema::kOutputReduce);
      if (out.role != OutputRole::Loss)
        fail(rp, "only the loss output is reduced");
      object(e[schema::kOutputReduce], rp);
      onlyKeys(e[schema::kOutputReduce], rp, schema::Object::Reduce);
      ReduceSpec r;
      r.axes =
          axesList(field(e[schema::kOutputReduce], rp, schema::kReduceAxes),
                   join(rp, schema::kReduceAxes));
      r.op = reduceOp(field(e[schema::kOutputReduce], rp, schema::kReduceOp),
                      join(rp, schema::kReduceOp));
      out.reduce = r;
    }
    t->outputs.push_back(std::move(out));
  }
  // SPMD: the one program has the loss. MPMD: only the last stage's program
  // has it (checkAcrossPrograms counts them).
  if (a.mpmd ? numLoss > 1 : numLoss != 1)
    fail(table, std::string("expected ") +
                    (a.mpmd ? "at most one output" : "exactly one output") +
                    " with role 'loss', found " + std::to_string(numLoss));
}

void ProgramReader::readProgram(const json &v, size_t programIndex,
                                const Program *shared) {
  std::string path = index("programs", programIndex);
  object(v, path);
  Program p;
  if (a.version >= 2) {
    onlyKeys(v, path, schema::Object::RankProgram);
    if (v.contains(schema::kRankProgramRank) ==
        v.contains(schema::kRankProgramRanks))
      fail(path, "give exactly one of `ranks` (the ranks running this "
                 "program) or `rank` (a single-rank program)");
    if (v.contains(schema::kRankProgramRank)) {
      p.ranks.push_back(integer(v[schema::kRankProgramRank],
                                join(path, schema::kRankProgramRank)));
    } else {
      std::string rp = join(path, schema::kRankProgramRanks);
      size_t i = 0;
      for (const json &r : array(v[schema::kRankProgramRanks], rp))
        p.ranks.push_back(integer(r, index(rp, i++)));
      if (p.ranks.empty())
        fail(rp, "lists no rank");
    }
  } else {
    onlyKeys(v, path, schema::Object::RankProgram);
    int64_t rank = integer(field(v, path, schema::kRankProgramRank),
                           join(path, schema::kRankProgramRank));
    if (rank != int64_t(programIndex))
      fail(join(path, schema::kRankProgramRank),
           "expected rank " + std::to_string(programIndex) +
               " (programs are listed by rank), found " + std::to_string(rank));
    p.ranks.push_back(rank);
  }
  std::string streamsPath = join(path, schema::kRankProgramStreams);
  size_t i = 0;
  for (const json &s :
       array(field(v, path, schema::kRankProgramStreams), streamsPath))
    p.streams.push_back(nonEmptyString(s, index(streamsPath, i++)));
  // Version 1 has no cross-stream events, so nothing could order work on a
  // second stream: a v1 program runs on exactly one.
  if (a.version >= 2 && p.streams.empty())
    fail(streamsPath, "lists no stream");
  if (a.version < 2 && p.streams.size() != 1)
    fail(streamsPath, "has " + std::to_string(p.streams.size()) +
                          " streams; a version 1 program has exactly one "
                          "(cross-stream events need a later version)");
  std::string instPath = join(path, schema::kRankProgramInstructions);
  const json &insts =
      array(field(v, path, schema::kRankProgramInstructions), instPath);
  a.programs.push_back(std::move(p));
  Program &stored = a.programs.back();
  if (shared) {
    stored.numSlots = shared->numSlots;
    stored.inputs = shared->inputs;
    stored.state = shared->state;
    stored.outputs = shared->outputs;
    t = &stored;
  } else {
    readTables(v, path, stored);
  }
  for (size_t j = 0; j < insts.size(); ++j) {
    std::string ip = index(instPath, j);
    stored.instructions.push_back(readInstruction(insts[j], ip, stored));
  }
}

Instruction ProgramReader::readInstruction(const json &v, const std::string &p,
                                           const Program &program) {
  object(v, p);
  Instruction inst;
  std::string op =
      string(field(v, p, schema::kInstOp), join(p, schema::kInstOp));
  std::optional<OpKind> kind;
  for (OpKind k : kAllOpKinds)
    if (op == toString(k))
      kind = k;
  if (!kind || !schema::isEnumValue("Op", op.c_str(), version())) {
    fail(join(p, schema::kInstOp), "unknown instruction '" + op +
                                       "' (version " +
                                       std::to_string(a.version) + " has " +
                                       spellings("Op", version()) + ")");
  }
  inst.op = *kind;
  onlyInstructionKeys(v, p, op);

  if (v.contains(schema::kInstName))
    inst.name = string(v[schema::kInstName], join(p, schema::kInstName));
  // With the name known, later messages can say which node they are about.
  node = inst.name.empty() ? "" : " (in '" + inst.name + "')";
  if (v.contains(schema::kInstModule))
    inst.module = string(v[schema::kInstModule], join(p, schema::kInstModule));
  if (v.contains(schema::kInstPhase)) {
    inst.phase = string(v[schema::kInstPhase], join(p, schema::kInstPhase));
    if (!schema::isEnumValue("Phase", inst.phase.c_str(), version()))
      fail(join(p, schema::kInstPhase), "unknown phase '" + inst.phase +
                                            "' (expected forward, backward or "
                                            "optimizer)");
  }
  if (v.contains(schema::kInstStream)) {
    inst.stream = integer(v[schema::kInstStream], join(p, schema::kInstStream));
    if (inst.stream < 0 || inst.stream >= int64_t(program.streams.size()))
      fail(join(p, schema::kInstStream),
           "stream " + std::to_string(inst.stream) + " out of range (" +
               std::to_string(program.streams.size()) + " streams)");
  }

  switch (inst.op) {
  case OpKind::Aten: {
    inst.kernel = nonEmptyString(field(v, p, schema::kInstKernel),
                                 join(p, schema::kInstKernel));
    if (inst.kernel.find("::") == std::string::npos)
      fail(join(p, schema::kInstKernel),
           "'" + inst.kernel +
               "' is not a qualified operator name "
               "(namespace::name, e.g. aten::addmm)");
    inst.overload = nonEmptyString(field(v, p, schema::kInstOverload),
                                   join(p, schema::kInstOverload));
    std::string argsPath = join(p, schema::kInstArgs);
    const json &args = array(field(v, p, schema::kInstArgs), argsPath);
    for (size_t i = 0; i < args.size(); ++i)
      inst.args.push_back(readArg(args[i], index(argsPath, i)));
    if (v.contains(schema::kInstKwargs)) {
      std::string kwPath = join(p, schema::kInstKwargs);
      for (const auto &item : object(v[schema::kInstKwargs], kwPath).items())
        inst.kwargs.emplace_back(
            item.key(), readArg(item.value(), join(kwPath, item.key())));
    }
    std::string resPath = join(p, schema::kInstResults);
    const json &results = array(field(v, p, schema::kInstResults), resPath);
    for (size_t i = 0; i < results.size(); ++i)
      inst.results.push_back(readResult(results[i], index(resPath, i)));
    if (v.contains(schema::kInstSignature))
      inst.signature =
          string(v[schema::kInstSignature], join(p, schema::kInstSignature));
    break;
  }
  case OpKind::Free: {
    std::string slotsPath = join(p, schema::kInstSlots);
    const json &slots = array(field(v, p, schema::kInstSlots), slotsPath);
    for (size_t i = 0; i < slots.size(); ++i)
      inst.slots.push_back(slot(slots[i], index(slotsPath, i)));
    break;
  }
  case OpKind::Optimizer: {
    inst.param =
        string(field(v, p, schema::kInstParam), join(p, schema::kInstParam));
    inst.paramSlot = slot(field(v, p, schema::kInstParamSlot),
                          join(p, schema::kInstParamSlot));
    inst.grad =
        slot(field(v, p, schema::kInstGrad), join(p, schema::kInstGrad));
    std::string statePath = join(p, schema::kInstState);
    const json &state = array(field(v, p, schema::kInstState), statePath);
    for (size_t i = 0; i < state.size(); ++i)
      inst.state.push_back(slot(state[i], index(statePath, i)));
    auto rate = [&](const char *key) -> std::optional<double> {
      if (!v.contains(key))
        return std::nullopt;
      double d = finiteNumber(v[key], join(p, key));
      if (d < 0)
        fail(join(p, key), "must not be negative, found " + std::to_string(d));
      return d;
    };
    inst.lr = rate(schema::kInstLr);
    inst.weightDecay = rate(schema::kInstWeightDecay);
    break;
  }
  case OpKind::AllGatherStart:
  case OpKind::ReduceScatterStart:
  case OpKind::AllReduceStart:
  case OpKind::BroadcastStart:
  case OpKind::AllSliceStart: {
    inst.input =
        slot(field(v, p, schema::kInstInput), join(p, schema::kInstInput));
    inst.future =
        slot(field(v, p, schema::kInstFuture), join(p, schema::kInstFuture));
    inst.axes =
        axesList(field(v, p, schema::kInstAxes), join(p, schema::kInstAxes));
    if (inst.op == OpKind::AllGatherStart ||
        inst.op == OpKind::ReduceScatterStart ||
        inst.op == OpKind::AllSliceStart) {
      inst.dim =
          integer(field(v, p, schema::kInstDim), join(p, schema::kInstDim));
      if (inst.dim < 0)
        fail(join(p, schema::kInstDim), "dim " + std::to_string(inst.dim) +
                                            " is negative (dims count from 0)");
    }
    if (inst.op == OpKind::ReduceScatterStart ||
        inst.op == OpKind::AllReduceStart)
      inst.reduce = reduceOp(field(v, p, schema::kInstReduce),
                             join(p, schema::kInstReduce));
    if (inst.op == OpKind::BroadcastStart) {
      inst.root =
          integer(field(v, p, schema::kInstRoot), join(p, schema::kInstRoot));
      int64_t g = a.mesh->groupSize(inst.axes);
      if (inst.root < 0 || inst.root >= g)
        fail(join(p, schema::kInstRoot), "root " + std::to_string(inst.root) +
                                             " is not an index in a group of " +
                                             std::to_string(g) + " ranks");
    }
    break;
  }
  case OpKind::SendStart:
  case OpKind::RecvStart: {
    if (inst.op == OpKind::SendStart)
      inst.input =
          slot(field(v, p, schema::kInstInput), join(p, schema::kInstInput));
    inst.future =
        slot(field(v, p, schema::kInstFuture), join(p, schema::kInstFuture));
    inst.axes =
        axesList(field(v, p, schema::kInstAxes), join(p, schema::kInstAxes));
    inst.peer =
        integer(field(v, p, schema::kInstPeer), join(p, schema::kInstPeer));
    inst.tag =
        integer(field(v, p, schema::kInstTag), join(p, schema::kInstTag));
    // c10d tags are C ints.
    if (inst.tag < 0 || inst.tag > std::numeric_limits<int32_t>::max())
      fail(join(p, schema::kInstTag),
           "tag " + std::to_string(inst.tag) + " out of range (0 to 2^31-1)");
    if (inst.op == OpKind::RecvStart) {
      inst.recvDtype =
          dtype(field(v, p, schema::kInstDtype), join(p, schema::kInstDtype));
      inst.recvShape =
          shape(field(v, p, schema::kInstShape), join(p, schema::kInstShape));
    }
    // Every rank running the program has a group over `axes` of the same
    // size; `peer` must be another member of it.
    for (int64_t rank : program.ranks) {
      if (rank < 0 || rank >= a.mesh->numRanks())
        continue; // read() reports the rank itself
      std::vector<int64_t> g = a.mesh->group(inst.axes, rank);
      int64_t own = std::find(g.begin(), g.end(), rank) - g.begin();
      std::string members = formatShape(g);
      if (inst.peer < 0 || inst.peer >= int64_t(g.size()))
        fail(join(p, schema::kInstPeer),
             "peer " + std::to_string(inst.peer) + " is not an index in rank " +
                 std::to_string(rank) + "'s group over the axes (" +
                 std::to_string(g.size()) + " ranks: " + members + ")");
      if (inst.peer == own)
        fail(join(p, schema::kInstPeer),
             "peer " + std::to_string(inst.peer) + " is rank " +
                 std::to_string(rank) + "'s own index in its group " + members +
                 "; a rank does not send to itself");
    }
    break;
  }
  case OpKind::Wait:
    inst.future =
        slot(field(v, p, schema::kInstFuture), join(p, schema::kInstFuture));
    // The wait of a send has no result; checkDataflow knows which it is.
    if (v.contains(schema::kInstResult))
      inst.result = slot(v[schema::kInstResult], join(p, schema::kInstResult));
    break;
  case OpKind::RecordEvent:
  case OpKind::WaitEvent:
    inst.event =
        integer(field(v, p, schema::kInstEvent), join(p, schema::kInstEvent));
    if (inst.event < 0)
      fail(join(p, schema::kInstEvent),
           "event " + std::to_string(inst.event) + " is negative");
    break;
  }
  node.clear();
  return inst;
}

ArgValue ProgramReader::readArg(const json &v, const std::string &path) {
  if (!v.is_object() || v.size() != 1)
    fail(path, "an ARG is an object with exactly one key ({\"tensor\": 3}, "
               "{\"int\": 1}, ...), found " +
                   v.dump());
  const std::string &kind = v.begin().key();
  const json &x = v.begin().value();
  std::string xp = join(path, kind);
  ArgValue arg;
  using K = ArgValue::Kind;
  auto eachOf = [&](auto &&readOne) {
    size_t i = 0;
    for (const json &e : array(x, xp))
      readOne(e, index(xp, i++));
  };
  if (kind == schema::kArgKindTensor) {
    arg.kind = K::Tensor;
    arg.slots.push_back(slot(x, path));
  } else if (kind == schema::kArgKindTensors) {
    arg.kind = K::Tensors;
    eachOf([&](const json &e, const std::string &ep) {
      arg.slots.push_back(slot(e, ep));
    });
  } else if (kind == schema::kArgKindOptionalTensors) {
    arg.kind = K::OptionalTensors;
    eachOf([&](const json &e, const std::string &ep) {
      arg.slots.push_back(e.is_null() ? -1 : slot(e, ep));
    });
  } else if (kind == schema::kArgKindNone) {
    arg.kind = K::None;
    if (!x.is_boolean() || !x.get<bool>())
      fail(xp, "must be true, found " + x.dump());
  } else if (kind == schema::kArgKindInt) {
    arg.kind = K::Int;
    arg.ints.push_back(integer(x, xp));
  } else if (kind == schema::kArgKindInts) {
    arg.kind = K::Ints;
    eachOf([&](const json &e, const std::string &ep) {
      arg.ints.push_back(integer(e, ep));
    });
  } else if (kind == schema::kArgKindFloat) {
    arg.kind = K::Float;
    arg.floats.push_back(floatValue(x, xp));
  } else if (kind == schema::kArgKindFloats) {
    arg.kind = K::Floats;
    eachOf([&](const json &e, const std::string &ep) {
      arg.floats.push_back(floatValue(e, ep));
    });
  } else if (kind == schema::kArgKindBool) {
    arg.kind = K::Bool;
    arg.ints.push_back(boolean(x, xp));
  } else if (kind == schema::kArgKindBools) {
    arg.kind = K::Bools;
    eachOf([&](const json &e, const std::string &ep) {
      arg.ints.push_back(boolean(e, ep));
    });
  } else if (kind == schema::kArgKindString) {
    arg.kind = K::String;
    arg.strings.push_back(string(x, xp));
  } else if (kind == schema::kArgKindStrings) {
    arg.kind = K::Strings;
    eachOf([&](const json &e, const std::string &ep) {
      arg.strings.push_back(string(e, ep));
    });
  } else if (kind == schema::kArgKindDtype) {
    arg.kind = K::Dtype;
    arg.dtype = dtype(x, xp);
  } else if (kind == schema::kArgKindDevice) {
    arg.kind = K::Device;
    std::string d = string(x, xp);
    // The compiler records the device the graph was captured on; the
    // runtime substitutes its own, so any real device name is accepted,
    // but not `meta` (shape-only tensors would be a different program).
    bool ok = d == "cpu" || d == "cuda" ||
              (d.rfind("cuda:", 0) == 0 && d.size() > 5 &&
               d.find_first_not_of("0123456789", 5) == std::string::npos);
    if (!ok)
      fail(xp, "unknown device '" + d + "' (expected cpu, cuda or cuda:N)");
    arg.strings.push_back(d);
  } else if (kind == schema::kArgKindLayout) {
    arg.kind = K::Layout;
    std::string l = string(x, xp);
    static const std::pair<const char *, c10::Layout> kLayouts[] = {
        {schema::kLayoutStrided, c10::Layout::Strided},
        {schema::kLayoutSparseCoo, c10::Layout::Sparse},
        {schema::kLayoutSparseCsr, c10::Layout::SparseCsr},
        {schema::kLayoutSparseCsc, c10::Layout::SparseCsc},
        {schema::kLayoutSparseBsr, c10::Layout::SparseBsr},
        {schema::kLayoutSparseBsc, c10::Layout::SparseBsc},
        {schema::kLayoutMkldnn, c10::Layout::Mkldnn},
    };
    bool found = false;
    for (const auto &[name, layout] : kLayouts)
      if (l == name) {
        arg.layout = layout;
        found = true;
      }
    if (!found)
      fail(xp, "unknown layout '" + l +
                   "' (expected strided, sparse_coo, sparse_csr, sparse_csc, "
                   "sparse_bsr, sparse_bsc or mkldnn)");
  } else if (kind == schema::kArgKindMemoryFormat) {
    arg.kind = K::MemoryFormat;
    std::string m = string(x, xp);
    if (m == schema::kMemoryFormatContiguous)
      arg.memoryFormat = c10::MemoryFormat::Contiguous;
    else if (m == schema::kMemoryFormatChannelsLast)
      arg.memoryFormat = c10::MemoryFormat::ChannelsLast;
    else if (m == schema::kMemoryFormatChannelsLast3d)
      arg.memoryFormat = c10::MemoryFormat::ChannelsLast3d;
    else if (m == schema::kMemoryFormatPreserve)
      arg.memoryFormat = c10::MemoryFormat::Preserve;
    else
      fail(xp, "unknown memory format '" + m +
                   "' (expected contiguous_format, channels_last, "
                   "channels_last_3d or preserve_format)");
  } else {
    fail(path, "unknown ARG kind '" + kind +
                   "' (expected tensor, tensors, optional_tensors, none, int, "
                   "ints, float, floats, bool, bools, string, strings, dtype, "
                   "device, layout or memory_format)");
  }
  return arg;
}

ResultSpec ProgramReader::readResult(const json &v, const std::string &path) {
  ResultSpec r;
  if (v.is_null())
    return r;
  if (v.is_array()) {
    r.kind = ResultSpec::Kind::List;
    for (size_t i = 0; i < v.size(); ++i)
      r.slots.push_back(v[i].is_null() ? -1 : slot(v[i], index(path, i)));
    return r;
  }
  if (!v.is_number())
    fail(path, "expected a slot, null or a list of slots, found " + v.dump());
  r.kind = ResultSpec::Kind::Slot;
  r.slot = slot(v, path);
  return r;
}

/// Walks the program in order and checks that every slot is written before
/// it is read and not read after it is freed, and that the optimizer
/// instructions match the declared parameters and state.
void ProgramReader::checkDataflow(size_t programIndex) {
  const Program &program = a.programs[programIndex];
  t = &a.programs[programIndex];
  Dataflow flow;
  flow.live.assign(size_t(program.numSlots), 0);
  for (const InputSpec &in : program.inputs)
    flow.live[in.slot] = Dataflow::kValue;
  for (const StateSpec &s : program.state)
    flow.live[s.slot] = Dataflow::kValue;
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction &inst = program.instructions[i];
    std::string p = "programs[" + std::to_string(programIndex) +
                    "].instructions[" + std::to_string(i) + "]";
    node = inst.name.empty() ? "" : " (in '" + inst.name + "')";
    switch (inst.op) {
    case OpKind::Aten:
      flowAten(flow, inst, p);
      break;
    case OpKind::Free:
      flowFree(flow, inst, p);
      break;
    case OpKind::Optimizer:
      flowOptimizer(flow, program, inst, p);
      break;
    case OpKind::AllGatherStart:
    case OpKind::ReduceScatterStart:
    case OpKind::AllReduceStart:
    case OpKind::BroadcastStart:
    case OpKind::AllSliceStart:
    case OpKind::SendStart:
    case OpKind::RecvStart:
      flowStart(flow, inst, p, i);
      break;
    case OpKind::Wait:
      flowWait(flow, inst, p);
      break;
    case OpKind::RecordEvent:
      flow.recordedEvents.insert(inst.event);
      break;
    case OpKind::WaitEvent:
      if (!flow.recordedEvents.count(inst.event))
        fail(p + ".event", "event " + std::to_string(inst.event) +
                               " is waited before any record_event records "
                               "it");
      break;
    }
  }
  node.clear();
  for (const auto &[fut, started] : flow.inFlight)
    fail("programs[" + std::to_string(programIndex) + "].instructions[" +
             std::to_string(started.second) + "].future",
         "the collective started into slot " + std::to_string(fut) +
             " is never waited");
  for (size_t k = 0; k < program.outputs.size(); ++k)
    if (!flow.live[program.outputs[k].slot])
      fail(join(index(a.tablePath(programIndex, "outputs"), k), "slot"),
           "slot " + std::to_string(program.outputs[k].slot) +
               " holds no value " + "after the last instruction of programs[" +
               std::to_string(programIndex) + "]");
}

void ProgramReader::flowRead(const Dataflow &flow, int64_t s,
                             const std::string &path) {
  if (s >= 0 && !flow.live[s])
    fail(path, "slot " + std::to_string(s) +
                   " is read before it is written (or after it is freed)");
  if (s >= 0 && flow.live[s] == Dataflow::kFuture)
    fail(path, "slot " + std::to_string(s) +
                   " holds the future of a collective in flight; read "
                   "the result of its wait instead");
}

void ProgramReader::flowWritable(const Dataflow &flow, int64_t s,
                                 const std::string &path) {
  if (flow.live[s] == Dataflow::kFuture)
    fail(path, "slot " + std::to_string(s) +
                   " holds the future of a collective that was never "
                   "waited");
  flowKeepsInput(flow, s, path, "written");
}

void ProgramReader::flowKeepsInput(const Dataflow &flow, int64_t s,
                                   const std::string &path, const char *what) {
  for (const auto &[fut, started] : flow.inFlight)
    if (started.first == s)
      fail(path, "slot " + std::to_string(s) +
                     " is the input of the collective started at "
                     "instructions[" +
                     std::to_string(started.second) + "] and must not be " +
                     what + " before its wait");
}

void ProgramReader::flowAten(Dataflow &flow, const Instruction &inst,
                             const std::string &p) {
  auto readArg = [&](const ArgValue &arg, const std::string &argPath) {
    for (size_t k = 0; k < arg.slots.size(); ++k)
      flowRead(flow, arg.slots[k],
               arg.kind == ArgValue::Kind::Tensor ? argPath
                                                  : index(argPath, k));
  };
  for (size_t k = 0; k < inst.args.size(); ++k)
    readArg(inst.args[k], index(p + ".args", k));
  for (const auto &[name, arg] : inst.kwargs)
    readArg(arg, p + ".kwargs." + name);
  std::set<int64_t> written;
  auto write = [&](int64_t s, const std::string &path) {
    if (s < 0)
      return;
    if (!written.insert(s).second)
      fail(path, "slot " + std::to_string(s) +
                     " receives two results of one instruction");
    flowWritable(flow, s, path);
    flow.live[s] = Dataflow::kValue;
  };
  for (size_t k = 0; k < inst.results.size(); ++k) {
    const ResultSpec &r = inst.results[k];
    if (r.kind == ResultSpec::Kind::Slot)
      write(r.slot, index(p + ".results", k));
    for (size_t m = 0; m < r.slots.size(); ++m)
      write(r.slots[m], index(index(p + ".results", k), m));
  }
}

void ProgramReader::flowFree(Dataflow &flow, const Instruction &inst,
                             const std::string &p) {
  for (size_t k = 0; k < inst.slots.size(); ++k) {
    std::string path = index(p + ".slots", k);
    int64_t s = inst.slots[k];
    if (!flow.live[s])
      fail(path, "slot " + std::to_string(s) +
                     " holds no value to free (never written, or freed "
                     "already)");
    if (flow.live[s] == Dataflow::kFuture)
      fail(path, "slot " + std::to_string(s) +
                     " holds the future of a collective in flight; "
                     "wait for it before freeing");
    flowKeepsInput(flow, s, path, "freed");
    flow.live[s] = 0;
  }
}

void ProgramReader::flowOptimizer(Dataflow &flow, const Program &program,
                                  const Instruction &inst,
                                  const std::string &p) {
  if (!a.optimizer)
    fail(p, "an optimizer instruction, but the artifact's optimizer is "
            "null");
  int64_t pi = program.findInput(inst.param);
  if (pi < 0 || program.inputs[size_t(pi)].role != InputRole::Parameter)
    fail(p + ".param", "'" + inst.param + "' is not a parameter input");
  const InputSpec &param = program.inputs[size_t(pi)];
  if (!flow.optimized.insert(inst.param).second)
    fail(p + ".param", "'" + inst.param +
                           "' is updated by a second optimizer "
                           "instruction");
  if (inst.paramSlot != param.slot)
    fail(p + ".param_slot", "slot " + std::to_string(inst.paramSlot) +
                                " is not the slot of '" + inst.param +
                                "' (inputs bind it to slot " +
                                std::to_string(param.slot) + ")");
  flowRead(flow, inst.grad, p + ".grad");
  std::vector<std::string> want = a.optimizer->stateNames();
  if (inst.state.size() != want.size()) {
    std::string names;
    for (const std::string &n : want)
      names += (names.empty() ? "" : ", ") + n;
    fail(p + ".state", std::string(toString(a.optimizer->kind)) +
                           " with these hyperparameters takes [" + names +
                           "], found " + std::to_string(inst.state.size()) +
                           " slots");
  }
  for (size_t k = 0; k < inst.state.size(); ++k)
    checkOptimizerState(program, inst, param, k, index(p + ".state", k));
}

void ProgramReader::checkOptimizerState(const Program &program,
                                        const Instruction &inst,
                                        const InputSpec &param, size_t k,
                                        const std::string &sp) {
  const StateSpec *s = nullptr;
  for (const StateSpec &candidate : program.state)
    if (candidate.slot == inst.state[k])
      s = &candidate;
  if (!s)
    fail(sp, "slot " + std::to_string(inst.state[k]) +
                 " is not bound by any `state` entry");
  if (s->param != inst.param)
    fail(sp, "state '" + s->name + "' belongs to '" + s->param + "', not '" +
                 inst.param + "'");
  if (s->dtype != param.dtype || s->shape != param.shape)
    fail(sp, "state '" + s->name + "' is " + artifactDtypeName(s->dtype) + " " +
                 formatShape(s->shape) + " but parameter '" + param.name +
                 "' is " + artifactDtypeName(param.dtype) + " " +
                 formatShape(param.shape));
  for (size_t m = 0; m < k; ++m)
    if (inst.state[m] == inst.state[k])
      fail(sp, "slot " + std::to_string(inst.state[k]) + " is listed twice");
}

void ProgramReader::flowStart(Dataflow &flow, const Instruction &inst,
                              const std::string &p, size_t i) {
  // A collective or a send reads its input until its wait (the transfer is
  // asynchronous); a recv has no input and delivers at its wait.
  if (inst.op != OpKind::RecvStart) {
    flowRead(flow, inst.input, p + ".input");
    // A collective's future is checked writable before it is compared with
    // the input, a send's after: the messages name the first problem.
    if (inst.op != OpKind::SendStart)
      flowWritable(flow, inst.future, p + ".future");
    if (inst.future == inst.input)
      fail(p + ".future", "the future cannot take the input's slot " +
                              std::to_string(inst.input));
  }
  if (inst.op == OpKind::SendStart || inst.op == OpKind::RecvStart)
    flowWritable(flow, inst.future, p + ".future");
  flow.live[inst.future] = Dataflow::kFuture;
  flow.inFlight[inst.future] = {inst.input, i};
  flow.startedBy[inst.future] = inst.op;
}

void ProgramReader::flowWait(Dataflow &flow, const Instruction &inst,
                             const std::string &p) {
  if (flow.live[inst.future] != Dataflow::kFuture)
    fail(p + ".future", "slot " + std::to_string(inst.future) +
                            " holds no future: no collective was "
                            "started into it (or it was waited already)");
  bool send = flow.startedBy[inst.future] == OpKind::SendStart;
  auto started = flow.inFlight.find(inst.future);
  size_t startIndex =
      started == flow.inFlight.end() ? size_t(0) : started->second.second;
  flow.live[inst.future] = 0;
  flow.inFlight.erase(inst.future);
  if (send && inst.result >= 0)
    fail(p + ".result", "the wait of a send has no result (slot " +
                            std::to_string(inst.future) +
                            " holds the future of the send "
                            "started at instructions[" +
                            std::to_string(startIndex) + "])");
  if (!send && inst.result < 0)
    fail(p + ".result",
         "missing (the wait of a collective or recv delivers its result "
         "into a slot)");
  if (!send) {
    flowWritable(flow, inst.result, p + ".result");
    flow.live[inst.result] = Dataflow::kValue;
  }
}

} // namespace

Artifact Artifact::parseProgram(const std::string &jsonText,
                                const std::string &what) {
  json root =
      parseUntrustedJson(jsonText, what + ": the program is not valid JSON: ");
  Artifact a;
  a.what_ = what;
  ProgramReader(a, what).read(root);
  return a;
}

Artifact Artifact::load(const std::string &path) {
  File f = File::openRead(path);
  uint64_t size = f.size();
  char header[kArtifactHeaderBytes] = {};
  f.readAt(0, header, std::min<uint64_t>(size, kArtifactHeaderBytes));
  if (size < schema::kMagicBytes ||
      std::memcmp(header, kArtifactMagic, schema::kMagicBytes) != 0)
    throw Error(path + ": not a Loom artifact (the file does not start with "
                       "the magic \"LOOMX\\r\\n\\x1a\")");
  if (size < kArtifactHeaderBytes)
    throw Error(path + ": truncated: " + std::to_string(size) +
                " bytes, shorter than the " +
                std::to_string(kArtifactHeaderBytes) + "-byte header");
  uint32_t version, flags;
  uint64_t programLen, weightsLen;
  std::memcpy(&version, header + 8, 4);
  std::memcpy(&flags, header + 12, 4);
  std::memcpy(&programLen, header + 16, 8);
  std::memcpy(&weightsLen, header + 24, 8);
  if (version < kArtifactOldestVersion || version > kArtifactVersion)
    throw Error(path + ": artifact format version " + std::to_string(version) +
                "; " + readableVersions() +
                " — recompile with the matching loom-compile");
  if (flags != 0)
    throw Error(path + ": header flags are " + std::to_string(flags) +
                "; format version " + std::to_string(version) +
                " defines none (expected 0)");
  uint64_t body = size - kArtifactHeaderBytes;
  if (programLen > body || weightsLen > body - programLen)
    throw Error(path + ": truncated: the header declares a " +
                std::to_string(programLen) + "-byte program and " +
                std::to_string(weightsLen) + " bytes of weights, but only " +
                std::to_string(body) + " bytes follow the header");
  if (programLen + weightsLen != body)
    throw Error(path + ": " + std::to_string(body - programLen - weightsLen) +
                " bytes of trailing data after the weights (the file must "
                "end at 32+N+M = " +
                std::to_string(kArtifactHeaderBytes + programLen + weightsLen) +
                ")");

  std::string text(programLen, '\0');
  f.readAt(kArtifactHeaderBytes, text.data(), programLen);
  Artifact a = parseProgram(text, path);
  if (a.version != int64_t(version))
    throw Error(path + ": version: the program says version " +
                std::to_string(a.version) + " but the container header says " +
                std::to_string(version));
  a.weightsPath = path;
  a.weightsOffset = kArtifactHeaderBytes + programLen;
  a.weightsLength = weightsLen;

  // The weights section must hold exactly the runtime-owned inputs, each
  // with its declared dtype and shape.
  SafetensorsFile weights = SafetensorsFile::open(
      path, a.weightsOffset, a.weightsLength, path + ": weights section");
  // A tensor several MPMD programs bind is stored once (the reader checked
  // they bind it alike).
  std::set<std::string> owned;
  for (size_t pi = 0; pi < a.programs.size(); ++pi)
    for (size_t i = 0; i < a.programs[pi].inputs.size(); ++i) {
      const InputSpec &in = a.programs[pi].inputs[i];
      if (in.role == InputRole::Input || !owned.insert(in.name).second)
        continue;
      const SafetensorsEntry *e = weights.find(in.name);
      std::string ip =
          a.tablePath(pi, "inputs") + "[" + std::to_string(i) + "]";
      if (!e)
        throw Error(path + ": weights section has no tensor '" + in.name +
                    "' (" + ip + ", a " + toString(in.role) + ")");
      // A sharded parameter's weights are the full tensor; each rank keeps
      // its chunk.
      const std::vector<int64_t> &want =
          in.shard ? in.shard->globalShape : in.shape;
      if (e->dtype != in.dtype || e->shape != want)
        throw Error(path + ": weights section has '" + in.name + "' as " +
                    artifactDtypeName(e->dtype) + " " + formatShape(e->shape) +
                    " but " + ip + " declares " + artifactDtypeName(in.dtype) +
                    " " + formatShape(want) +
                    (in.shard ? " (its shard's global_shape)" : ""));
    }
  for (const SafetensorsEntry &e : weights.entries())
    if (!owned.count(e.name))
      throw Error(path + ": weights section has tensor '" + e.name +
                  "', which no parameter, buffer or constant input names");
  return a;
}

} // namespace loomrt
