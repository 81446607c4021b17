//===- Checkpoint.cpp - Sharded checkpoints: save, index, verify, reshard -===//

#include "loomrt/Checkpoint.h"

#include "FileUtil.h"
#include "loomrt/Dtype.h"
#include "loomrt/Error.h"
#include "loomrt/Safetensors.h"
#include "loomrt/Session.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

namespace fs = std::filesystem;
using nlohmann::json;

namespace loomrt {
namespace {

constexpr const char *kIndexName = "index.json";
constexpr const char *kFormat = "loom-checkpoint";
constexpr const char *kRngKey = "rng/cpu";

std::string stepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", (long long)step);
  return buf;
}

std::string rankFileName(int64_t rank) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "rank-%05lld.safetensors", (long long)rank);
  return buf;
}

/// The step of a directory named step-NNNNNNNN, or -1.
int64_t stepOfDirName(const std::string &name) {
  if (name.size() != 13 || name.compare(0, 5, "step-") != 0)
    return -1;
  int64_t v = 0;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9')
      return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

/// What the session holds of one tensor: its global dtype and shape and,
/// when sharded, the axes and dimension.
struct LocalTensor {
  std::string name;
  std::string kind;
  std::string param;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> globalShape;
  std::optional<ShardSpec> shard;
  at::Tensor local; // this rank's (padded) chunk; a 0-d f32 for steps
};

/// The training state of this rank's program, in a fixed order every rank
/// shares.
std::vector<LocalTensor> localTensors(const Session &session) {
  const Artifact &a = session.artifact();
  if (a.mpmd)
    throw Error(a.what() + ": checkpoints of pipeline (MPMD) artifacts are "
                           "not supported yet");
  const Program &p = a.programs[0];
  std::vector<LocalTensor> out;
  NamedTensors params = session.parameters(), buffers = session.buffers();
  std::map<std::string, at::Tensor> owned(params.begin(), params.end());
  owned.insert(buffers.begin(), buffers.end());
  for (const InputSpec &in : p.inputs) {
    if (in.role != InputRole::Parameter && in.role != InputRole::Buffer)
      continue;
    out.push_back({in.name,
                   in.role == InputRole::Parameter ? "parameter" : "buffer", "",
                   in.dtype, in.shard ? in.shard->globalShape : in.shape,
                   in.shard, owned.at(in.name)});
  }
  NamedTensors state = session.optimizerState();
  for (size_t k = 0; k < p.state.size(); ++k) {
    const StateSpec &st = p.state[k];
    out.push_back({st.name, "optimizer_state", st.param, st.dtype,
                   st.shard ? st.shard->globalShape : st.shape, st.shard,
                   state[k].second});
  }
  if (a.optimizer)
    for (const InputSpec &in : p.inputs)
      if (in.role == InputRole::Parameter)
        out.push_back({in.name + ".step",
                       "step",
                       in.name,
                       at::kFloat,
                       {},
                       std::nullopt,
                       at::full({}, session.stepCount(in.name),
                                at::TensorOptions().dtype(at::kFloat))});
  return out;
}

/// Rank `rank`'s index in its group over `axes` (0 without a mesh).
int64_t groupIndexOf(const Artifact &a, const std::vector<std::string> &axes,
                     int64_t rank) {
  std::vector<int64_t> g = a.mesh->group(axes, rank);
  auto it = std::find(g.begin(), g.end(), rank);
  return int64_t(it - g.begin());
}

/// The rows of `t` rank `rank` writes: the first rank holding each chunk
/// writes it (replicas once). nullopt when the rank writes none.
std::optional<std::pair<int64_t, int64_t>>
rowsWrittenBy(const Artifact &a, const LocalTensor &t, int64_t rank) {
  if (!t.shard)
    return rank == 0 ? std::optional(std::pair<int64_t, int64_t>(0, 0))
                     : std::nullopt;
  int64_t k = groupIndexOf(a, t.shard->axes, rank);
  for (int64_t r = 0; r < rank; ++r)
    if (groupIndexOf(a, t.shard->axes, r) == k)
      return std::nullopt;
  int64_t n = t.globalShape[size_t(t.shard->dim)];
  int64_t g = a.mesh->groupSize(t.shard->axes);
  int64_t chunk = (n + g - 1) / g;
  int64_t begin = std::min(k * chunk, n), end = std::min((k + 1) * chunk, n);
  if (end <= begin)
    return std::nullopt;
  return std::pair(begin, end);
}

at::Tensor rngState() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void setRngState(const at::Tensor &state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

/// Removes complete checkpoints beyond the newest `keep`, and leftovers of
/// saves that died (no index) older than `current`.
void rotate(const std::string &dir, int64_t current, int64_t keep) {
  std::vector<std::pair<int64_t, fs::path>> complete;
  std::vector<fs::path> stale;
  for (const fs::directory_entry &e : fs::directory_iterator(dir)) {
    int64_t step = stepOfDirName(e.path().filename().string());
    if (step < 0 || !e.is_directory())
      continue;
    if (fs::exists(e.path() / kIndexName))
      complete.emplace_back(step, e.path());
    else if (step < current)
      stale.push_back(e.path());
  }
  std::sort(complete.begin(), complete.end());
  if (keep > 0 && int64_t(complete.size()) > keep)
    for (size_t i = 0; i < complete.size() - size_t(keep); ++i) {
      // The index goes first: a rotation that dies half-way leaves an
      // incomplete checkpoint, never one whose files are missing.
      fs::remove(complete[i].second / kIndexName);
      stale.push_back(complete[i].second);
    }
  for (const fs::path &p : stale)
    fs::remove_all(p);
}

//===----------------------------------------------------------------------===//
// index.json
//===----------------------------------------------------------------------===//

[[noreturn]] void fail(const std::string &what, const std::string &path,
                       const std::string &message) {
  throw Error(what + ": " + path + ": " + message);
}

const json &field(const json &obj, const char *key, const std::string &what,
                  const std::string &path) {
  if (!obj.is_object())
    fail(what, path, "must be an object, found " + obj.dump());
  auto it = obj.find(key);
  if (it == obj.end())
    fail(what, path, std::string("has no '") + key + "'");
  return *it;
}

int64_t intField(const json &obj, const char *key, const std::string &what,
                 const std::string &path, int64_t min = 0) {
  const json &v = field(obj, key, what, path);
  if (!v.is_number_integer() || v.get<int64_t>() < min)
    fail(what, path + "." + key,
         "must be an integer >= " + std::to_string(min) + ", found " +
             v.dump());
  return v.get<int64_t>();
}

std::string stringField(const json &obj, const char *key,
                        const std::string &what, const std::string &path) {
  const json &v = field(obj, key, what, path);
  if (!v.is_string())
    fail(what, path + "." + key, "must be a string, found " + v.dump());
  return v.get<std::string>();
}

CheckpointPiece parsePiece(const json &j, const std::string &what,
                           const std::string &path, size_t numFiles) {
  CheckpointPiece p;
  int64_t file = intField(j, "file", what, path);
  if (size_t(file) >= numFiles)
    fail(what, path + ".file",
         "is " + std::to_string(file) + ", but there are " +
             std::to_string(numFiles) + " files");
  p.file = size_t(file);
  p.key = stringField(j, "key", what, path);
  if (j.contains("rows")) {
    const json &r = j["rows"];
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() ||
        !r[1].is_number_integer() || r[0].get<int64_t>() < 0 ||
        r[1].get<int64_t>() <= r[0].get<int64_t>())
      fail(what, path + ".rows",
           "must be [begin, end] with 0 <= begin < end, found " + r.dump());
    p.begin = r[0].get<int64_t>();
    p.end = r[1].get<int64_t>();
  }
  return p;
}

} // namespace

CheckpointIndex CheckpointIndex::parse(const std::string &text,
                                       const std::string &what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error &e) {
    throw Error(what + ": not valid JSON: " + e.what());
  }
  if (!j.is_object())
    throw Error(what + ": must be a JSON object");
  if (stringField(j, "format", what, "index") != kFormat)
    fail(what, "index.format", std::string("must be '") + kFormat + "'");
  int64_t version = intField(j, "version", what, "index");
  if (version != kCheckpointVersion)
    fail(what, "index.version",
         "is " + std::to_string(version) + ", this loomrt reads version " +
             std::to_string(kCheckpointVersion));
  CheckpointIndex x;
  x.artifact = stringField(j, "artifact", what, "index");
  x.step = intField(j, "step", what, "index");
  x.dataPosition = intField(j, "data_position", what, "index");
  x.worldSize = intField(j, "world_size", what, "index", 1);
  const json &opt = field(j, "optimizer", what, "index");
  if (!opt.is_null() && !opt.is_string())
    fail(what, "index.optimizer", "must be a string or null");
  x.optimizer = opt.is_string() ? opt.get<std::string>() : "";

  const json &files = field(j, "files", what, "index");
  if (!files.is_array() || files.size() != size_t(x.worldSize))
    fail(what, "index.files",
         "must list one file per rank (" + std::to_string(x.worldSize) + ")");
  for (size_t i = 0; i < files.size(); ++i) {
    std::string p = "index.files[" + std::to_string(i) + "]";
    CheckpointFile f;
    f.path = stringField(files[i], "path", what, p);
    if (f.path.empty() || f.path.find('/') != std::string::npos ||
        f.path[0] == '.')
      fail(what, p + ".path",
           "must be a file name inside the checkpoint, found '" + f.path + "'");
    f.rank = intField(files[i], "rank", what, p);
    if (f.rank != int64_t(i))
      fail(what, p + ".rank", "must be " + std::to_string(i));
    f.bytes = uint64_t(intField(files[i], "bytes", what, p));
    std::string crc = stringField(files[i], "crc32", what, p);
    char *end = nullptr;
    unsigned long v = std::strtoul(crc.c_str(), &end, 16);
    if (crc.size() != 8 || *end)
      fail(what, p + ".crc32", "must be 8 hex digits, found '" + crc + "'");
    f.crc32 = uint32_t(v);
    x.files.push_back(std::move(f));
  }

  const json &tensors = field(j, "tensors", what, "index");
  if (!tensors.is_array())
    fail(what, "index.tensors", "must be a list");
  std::set<std::string> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string p = "index.tensors[" + std::to_string(i) + "]";
    const json &tj = tensors[i];
    CheckpointTensor t;
    t.name = stringField(tj, "name", what, p);
    if (!seen.insert(t.name).second)
      fail(what, p + ".name", "'" + t.name + "' is listed twice");
    p = "index.tensors['" + t.name + "']";
    t.kind = stringField(tj, "kind", what, p);
    if (t.kind != "parameter" && t.kind != "buffer" &&
        t.kind != "optimizer_state" && t.kind != "step")
      fail(what, p + ".kind",
           "must be parameter, buffer, optimizer_state or step, found '" +
               t.kind + "'");
    if (tj.contains("param"))
      t.param = stringField(tj, "param", what, p);
    std::string dtype = stringField(tj, "dtype", what, p);
    std::optional<c10::ScalarType> dt = parseArtifactDtype(dtype);
    if (!dt)
      fail(what, p + ".dtype", "'" + dtype + "' is not a dtype");
    t.dtype = *dt;
    const json &shape = field(tj, "shape", what, p);
    if (!shape.is_array())
      fail(what, p + ".shape", "must be a list");
    for (const json &d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail(what, p + ".shape", "must hold non-negative integers");
      t.shape.push_back(d.get<int64_t>());
    }
    if (tj.contains("shard_dim") && !tj["shard_dim"].is_null()) {
      int64_t dim = intField(tj, "shard_dim", what, p);
      if (dim >= int64_t(t.shape.size()))
        fail(what, p + ".shard_dim",
             "is " + std::to_string(dim) + ", the tensor has " +
                 std::to_string(t.shape.size()) + " dimensions");
      t.shardDim = dim;
    }
    const json &pieces = field(tj, "pieces", what, p);
    if (!pieces.is_array())
      fail(what, p + ".pieces", "must be a list");
    for (size_t k = 0; k < pieces.size(); ++k)
      t.pieces.push_back(parsePiece(pieces[k], what,
                                    p + ".pieces[" + std::to_string(k) + "]",
                                    x.files.size()));
    // The pieces must tile the tensor: one whole piece, or row ranges that
    // cover the sharded dimension without holes or overlaps.
    if (!t.shardDim) {
      if (t.pieces.size() != 1)
        fail(what, p + ".pieces", "an unsharded tensor needs exactly one");
    } else {
      std::vector<CheckpointPiece> sorted = t.pieces;
      std::sort(sorted.begin(), sorted.end(),
                [](const auto &a, const auto &b) { return a.begin < b.begin; });
      int64_t cursor = 0;
      for (const CheckpointPiece &pc : sorted) {
        if (pc.begin != cursor)
          fail(what, p + ".pieces",
               "rows " + std::to_string(cursor) + ".." +
                   std::to_string(pc.begin) + " are " +
                   (pc.begin > cursor ? "in no piece" : "in two pieces"));
        cursor = pc.end;
      }
      int64_t n = t.shape[size_t(*t.shardDim)];
      if (cursor != n)
        fail(what, p + ".pieces",
             "cover rows 0.." + std::to_string(cursor) + " of " +
                 std::to_string(n));
    }
    x.tensors.push_back(std::move(t));
  }

  const json &rng = field(j, "rng", what, "index");
  if (!rng.is_array() || rng.size() != size_t(x.worldSize))
    fail(what, "index.rng", "must hold one entry per rank");
  for (size_t k = 0; k < rng.size(); ++k)
    x.rng.push_back(parsePiece(
        rng[k], what, "index.rng[" + std::to_string(k) + "]", x.files.size()));
  return x;
}

std::string CheckpointIndex::dump() const {
  json j = {{"format", kFormat},
            {"version", kCheckpointVersion},
            {"artifact", artifact},
            {"step", step},
            {"data_position", dataPosition},
            {"world_size", worldSize},
            {"optimizer", optimizer.empty() ? json() : json(optimizer)}};
  json files = json::array();
  for (const CheckpointFile &f : this->files)
    files.push_back({{"path", f.path},
                     {"rank", f.rank},
                     {"bytes", f.bytes},
                     {"crc32", hex32(f.crc32)}});
  j["files"] = files;
  auto piece = [](const CheckpointPiece &p, bool rows) {
    json pj = {{"file", p.file}, {"key", p.key}};
    if (rows)
      pj["rows"] = {p.begin, p.end};
    return pj;
  };
  json tensors = json::array();
  for (const CheckpointTensor &t : this->tensors) {
    json tj = {{"name", t.name},
               {"kind", t.kind},
               {"dtype", artifactDtypeName(t.dtype)},
               {"shape", t.shape},
               {"shard_dim", t.shardDim ? json(*t.shardDim) : json()}};
    if (!t.param.empty())
      tj["param"] = t.param;
    json pieces = json::array();
    for (const CheckpointPiece &p : t.pieces)
      pieces.push_back(piece(p, t.shardDim.has_value()));
    tj["pieces"] = pieces;
    tensors.push_back(tj);
  }
  j["tensors"] = tensors;
  json rngs = json::array();
  for (const CheckpointPiece &p : rng)
    rngs.push_back(piece(p, false));
  j["rng"] = rngs;
  return j.dump(1) + "\n";
}

uint32_t fileCrc32(const std::string &path) {
  File f = File::openRead(path);
  uint64_t size = f.size();
  std::vector<unsigned char> buf(size_t(1) << 20);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (uint64_t at = 0; at < size;) {
    uint64_t n = std::min<uint64_t>(buf.size(), size - at);
    f.readAt(at, buf.data(), n);
    crc = crc32(crc, buf.data(), uInt(n));
    at += n;
  }
  return uint32_t(crc);
}

//===----------------------------------------------------------------------===//
// Save
//===----------------------------------------------------------------------===//

std::string saveCheckpoint(Session &session, const std::string &dir,
                           int64_t dataPosition,
                           const CheckpointSaveOptions &options) {
  c10::AutoGradMode noGrad(false);
  const Artifact &a = session.artifact();
  const int64_t rank = session.rank(), world = session.worldSize();
  std::vector<LocalTensor> tensors = localTensors(session);
  const std::string ckpt = (fs::path(dir) / stepDirName(session.stepsRun()));
  // Every rank checks before any rank writes (the index, the only thing
  // that makes a checkpoint complete, comes after the exchange below).
  if (fs::exists(fs::path(ckpt) / kIndexName))
    throw Error(ckpt + ": a complete checkpoint is already there; not "
                       "overwriting it");
  std::error_code ec;
  fs::create_directories(ckpt, ec);
  if (ec)
    throw Error(ckpt +
                ": cannot create the checkpoint directory: " + ec.message());

  std::vector<std::pair<std::string, at::Tensor>> mine;
  for (const LocalTensor &t : tensors) {
    std::optional<std::pair<int64_t, int64_t>> rows =
        a.mesh ? rowsWrittenBy(a, t, rank)
               : std::optional(std::pair<int64_t, int64_t>(0, 0));
    if (!rows)
      continue;
    // A chunk's padding (past the global size) is not saved: it is zero and
    // a load on another layout pads again.
    mine.emplace_back(t.name, t.shard
                                  ? t.local.narrow(t.shard->dim, 0,
                                                   rows->second - rows->first)
                                  : t.local);
  }
  mine.emplace_back(kRngKey, rngState());
  const std::string file = rankFileName(rank);
  const std::string filePath = (fs::path(ckpt) / file).string();
  writeSafetensors(filePath, mine,
                   {{"producer", "loomrt checkpoint"},
                    {"step", std::to_string(session.stepsRun())},
                    {"rank", std::to_string(rank)}});
  if (options.afterRankFile)
    options.afterRankFile(rank);

  // Every rank's file is on disk once this returns; rank 0 then publishes.
  at::Tensor sizes;
  try {
    sizes = session.gatherFromAllRanks(
        at::tensor({int64_t(File::openRead(filePath).size()),
                    int64_t(fileCrc32(filePath))},
                   at::TensorOptions().dtype(at::kLong)),
        "the checkpoint save's gather of the ranks' file checksums for " +
            ckpt);
  } catch (const CollectiveError &e) {
    // A peer died or hung mid-save: say so, and that the index was not
    // published (the previous checkpoint is the one to resume from).
    throw CollectiveError("rank " + std::to_string(rank) + ": saving " + ckpt +
                          ": gathering the ranks' file checksums failed, "
                          "the checkpoint is incomplete: " +
                          e.what());
  }
  if (rank != 0)
    return ckpt;

  CheckpointIndex index;
  index.artifact = a.what();
  index.step = session.stepsRun();
  index.dataPosition = dataPosition;
  index.worldSize = world;
  index.optimizer = a.optimizer ? toString(a.optimizer->kind) : "";
  for (int64_t r = 0; r < world; ++r)
    index.files.push_back({rankFileName(r), r,
                           uint64_t(sizes[2 * r].item<int64_t>()),
                           uint32_t(sizes[2 * r + 1].item<int64_t>())});
  for (const LocalTensor &t : tensors) {
    CheckpointTensor ct{t.name,        t.kind,       t.param, t.dtype,
                        t.globalShape, std::nullopt, {}};
    if (t.shard)
      ct.shardDim = t.shard->dim;
    for (int64_t r = 0; r < world; ++r) {
      std::optional<std::pair<int64_t, int64_t>> rows =
          a.mesh ? rowsWrittenBy(a, t, r)
                 : std::optional(std::pair<int64_t, int64_t>(0, 0));
      if (rows)
        ct.pieces.push_back({size_t(r), t.name, rows->first, rows->second});
    }
    index.tensors.push_back(std::move(ct));
  }
  for (int64_t r = 0; r < world; ++r)
    index.rng.push_back({size_t(r), kRngKey, 0, 0});

  AtomicFileWriter out((fs::path(ckpt) / kIndexName).string());
  std::string text = index.dump();
  out.write(text.data(), text.size());
  out.commit();
  syncDirectory(ckpt);
  syncDirectory(dir);
  rotate(dir, session.stepsRun(), options.keep);
  return ckpt;
}

//===----------------------------------------------------------------------===//
// Load
//===----------------------------------------------------------------------===//

std::string findCheckpoint(const std::string &path) {
  if (fs::exists(fs::path(path) / kIndexName))
    return path;
  if (!fs::is_directory(path))
    throw Error(path + ": no checkpoint: not a directory");
  int64_t best = -1;
  std::string found;
  for (const fs::directory_entry &e : fs::directory_iterator(path)) {
    int64_t step = stepOfDirName(e.path().filename().string());
    if (step > best && fs::exists(e.path() / kIndexName)) {
      best = step;
      found = e.path().string();
    }
  }
  if (found.empty())
    throw Error(path + ": no checkpoint: no index.json there and no complete "
                       "step-NNNNNNNN checkpoint in it");
  return found;
}

CheckpointInfo loadCheckpoint(Session &session, const std::string &path) {
  c10::AutoGradMode noGrad(false);
  const std::string ckpt = findCheckpoint(path);
  const std::string indexPath = (fs::path(ckpt) / kIndexName).string();
  CheckpointIndex index =
      CheckpointIndex::parse(readFile(indexPath), indexPath);

  // The files first: present, as long as the index says, the same bytes.
  std::vector<SafetensorsFile> files;
  for (const CheckpointFile &f : index.files) {
    std::string p = (fs::path(ckpt) / f.path).string();
    if (!fs::exists(p))
      throw Error(p + ": missing: " + indexPath + " lists it as rank " +
                  std::to_string(f.rank) + "'s file");
    uint64_t size = File::openRead(p).size();
    if (size != f.bytes)
      throw Error(p + ": " + (size < f.bytes ? "truncated" : "too long") +
                  ": " + std::to_string(size) + " bytes, " + indexPath +
                  " records " + std::to_string(f.bytes));
    uint32_t crc = fileCrc32(p);
    if (crc != f.crc32)
      throw Error(p + ": checksum mismatch: CRC-32 " + hex32(crc) + ", " +
                  indexPath + " records " + hex32(f.crc32) +
                  " (the file was changed or corrupted)");
    files.push_back(SafetensorsFile::open(p));
  }

  // Then the model: the checkpoint must hold exactly this session's state.
  std::vector<LocalTensor> want = localTensors(session);
  std::map<std::string, const CheckpointTensor *> byName;
  for (const CheckpointTensor &t : index.tensors)
    byName[t.name] = &t;
  const std::string artifact = session.artifact().what();
  std::set<std::string> used;
  for (const LocalTensor &w : want) {
    auto it = byName.find(w.name);
    if (it == byName.end())
      throw Error(indexPath + ": has no " + w.kind + " '" + w.name +
                  "', which " + artifact +
                  " needs (a checkpoint of another model" +
                  (w.kind == "parameter" || w.kind == "buffer"
                       ? ""
                       : " or optimizer: it was saved with " +
                             (index.optimizer.empty() ? std::string("none")
                                                      : index.optimizer)) +
                  "?)");
    const CheckpointTensor &t = *it->second;
    if (t.kind != w.kind || t.dtype != w.dtype || t.shape != w.globalShape)
      throw Error(indexPath + ": '" + w.name + "' is the " + t.kind + " " +
                  artifactDtypeName(t.dtype) + " " + formatShape(t.shape) +
                  ", " + artifact + " declares the " + w.kind + " " +
                  artifactDtypeName(w.dtype) + " " +
                  formatShape(w.globalShape) +
                  " (a checkpoint of another model?)");
    used.insert(w.name);
  }
  for (const CheckpointTensor &t : index.tensors)
    if (!used.count(t.name))
      throw Error(indexPath + ": holds the " + t.kind + " '" + t.name +
                  "', which " + artifact +
                  " does not have (a checkpoint of another model?)");

  // Rebuild every global tensor, checking each piece against its file,
  // before changing the session.
  std::vector<std::pair<const LocalTensor *, at::Tensor>> full;
  for (const LocalTensor &w : want) {
    const CheckpointTensor &t = *byName.at(w.name);
    at::Tensor g = at::zeros(t.shape, at::TensorOptions().dtype(t.dtype));
    for (const CheckpointPiece &pc : t.pieces) {
      const SafetensorsFile &f = files[pc.file];
      std::vector<int64_t> shape = t.shape;
      if (t.shardDim)
        shape[size_t(*t.shardDim)] = pc.end - pc.begin;
      const SafetensorsEntry *e = f.find(pc.key);
      if (!e)
        throw Error(f.what() + ": has no tensor '" + pc.key + "', which " +
                    indexPath + " places there");
      if (e->dtype != t.dtype || e->shape != shape)
        throw Error(f.what() + ": '" + pc.key + "' is " +
                    artifactDtypeName(e->dtype) + " " + formatShape(e->shape) +
                    ", " + indexPath + " says " + artifactDtypeName(t.dtype) +
                    " " + formatShape(shape));
      at::Tensor piece = f.read(*e);
      if (t.shardDim)
        g.narrow(*t.shardDim, pc.begin, pc.end - pc.begin).copy_(piece);
      else
        g.copy_(piece);
    }
    full.emplace_back(&w, g);
  }
  // A rank of the saving run's mesh takes its own generator state; ranks
  // beyond it take rank 0's (draws differ on another layout anyway).
  const CheckpointPiece &rngPiece =
      index.rng[size_t(std::min(session.rank(), index.worldSize - 1))];
  const SafetensorsFile &rngFile = files[rngPiece.file];
  const SafetensorsEntry *rngEntry = rngFile.find(rngPiece.key);
  if (!rngEntry || rngEntry->dtype != at::kByte || rngEntry->shape.size() != 1)
    throw Error(rngFile.what() + ": has no u8 generator state '" +
                rngPiece.key + "'");
  at::Tensor rng = rngFile.read(*rngEntry);
  try {
    // On a generator of its own first, so a bad state changes nothing.
    at::Generator probe = at::make_generator<at::CPUGeneratorImpl>();
    probe.set_state(rng);
  } catch (const c10::Error &e) {
    throw Error(rngFile.what() + ": generator state '" + rngPiece.key +
                "' is not a CPU generator's: " + e.what_without_backtrace());
  }

  for (const auto &[w, g] : full) {
    if (w->kind == "step")
      session.setStepCount(w->param, g.item<float>());
    else
      session.assignFromFull(w->name, g);
  }
  setRngState(rng);
  session.setStepsRun(index.step);
  return {ckpt, index.step, index.dataPosition};
}

} // namespace loomrt
