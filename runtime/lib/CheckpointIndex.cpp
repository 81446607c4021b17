//===- CheckpointIndex.cpp - index.json of a checkpoint: parse, dump -----===//
//
// Apart from the rest of Checkpoint.cpp (which needs a Session and ATen's
// kernels) so that the reader of this untrusted input builds alone into the
// fuzzer (runtime/fuzz/loomrt-checkpoint-index-fuzzer.cpp).
//
//===----------------------------------------------------------------------===//

#include "loomrt/Checkpoint.h"

#include "Json.h"

#include "loomrt/Dtype.h"
#include "loomrt/Error.h"
#include "loomrt/Optimizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

using nlohmann::json;

namespace loomrt {
namespace {

constexpr const char *kFormat = "loom-checkpoint";

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

/// Version 1's layout: one program on every rank.
CheckpointLayout defaultLayout(int64_t worldSize) {
  CheckpointLayout l;
  l.programs.emplace_back();
  for (int64_t r = 0; r < worldSize; ++r)
    l.programs[0].push_back(r);
  return l;
}

CheckpointLayout parseLayout(const json &j, int64_t worldSize,
                             const std::string &what) {
  const std::string path = "index.layout";
  CheckpointLayout l;
  const json &mesh = field(j, "mesh", what, path);
  if (!mesh.is_null()) {
    const json &shape = field(mesh, "shape", what, path + ".mesh");
    const json &axes = field(mesh, "axes", what, path + ".mesh");
    if (!shape.is_array() || !axes.is_array() || shape.empty() ||
        shape.size() != axes.size())
      fail(what, path + ".mesh",
           "must have as many 'axes' as 'shape' sizes, at least one");
    int64_t ranks = 1;
    std::set<std::string> names;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (!shape[i].is_number_integer() || shape[i].get<int64_t>() < 1 ||
          shape[i].get<int64_t>() > worldSize || !axes[i].is_string() ||
          !names.insert(axes[i].get<std::string>()).second)
        fail(what, path + ".mesh",
             "needs sizes in [1, world_size] and distinct axis names, found " +
                 mesh.dump());
      ranks *= shape[i].get<int64_t>();
      if (ranks > worldSize)
        break;
      l.meshShape.push_back(shape[i].get<int64_t>());
      l.meshAxes.push_back(axes[i].get<std::string>());
    }
    if (ranks != worldSize)
      fail(what, path + ".mesh",
           "has " + std::to_string(ranks) + " ranks, world_size is " +
               std::to_string(worldSize));
  }
  const json &progs = field(j, "programs", what, path);
  if (!progs.is_array() || progs.empty() || progs.size() > size_t(worldSize))
    fail(what, path + ".programs",
         "must list between 1 and world_size programs");
  std::vector<char> seen(size_t(worldSize), 0);
  for (size_t k = 0; k < progs.size(); ++k) {
    std::string p = path + ".programs[" + std::to_string(k) + "]";
    if (!progs[k].is_array() || progs[k].empty())
      fail(what, p, "must be a non-empty list of ranks");
    l.programs.emplace_back();
    for (const json &r : progs[k]) {
      if (!r.is_number_integer() || r.get<int64_t>() < 0 ||
          r.get<int64_t>() >= worldSize || seen[r.get<size_t>()])
        fail(what, p,
             "must hold ranks in [0, world_size) that no other program "
             "holds, found " +
                 r.dump());
      seen[r.get<size_t>()] = 1;
      l.programs.back().push_back(r.get<int64_t>());
    }
  }
  if (std::count(seen.begin(), seen.end(), 0))
    fail(what, path + ".programs", "must give every rank a program");
  const json &mpmd = field(j, "mpmd", what, path);
  if (!mpmd.is_boolean())
    fail(what, path + ".mpmd", "must be true or false");
  l.mpmd = mpmd.get<bool>();
  return l;
}

} // namespace

std::string CheckpointLayout::describe() const {
  if (meshShape.empty())
    return "1 rank";
  std::string mesh = "mesh [";
  std::string axes;
  for (size_t i = 0; i < meshShape.size(); ++i) {
    mesh += (i ? ", " : "") + std::to_string(meshShape[i]);
    axes += (i ? ", " : "") + meshAxes[i];
  }
  mesh += "] (" + axes + ")";
  if (!mpmd)
    return "one program on " + mesh;
  return "pipeline of " + std::to_string(programs.size()) + " programs on " +
         mesh;
}

std::string formatCrc32(uint32_t crc) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", crc);
  return buf;
}

CheckpointIndex CheckpointIndex::parse(const std::string &text,
                                       const std::string &what) {
  json j = parseUntrustedJson(text, what + ": not valid JSON: ");
  if (!j.is_object())
    throw Error(what + ": must be a JSON object");
  if (stringField(j, "format", what, "index") != kFormat)
    fail(what, "index.format", std::string("must be '") + kFormat + "'");
  int64_t version = intField(j, "version", what, "index");
  if (version < kCheckpointOldestVersion || version > kCheckpointVersion)
    fail(what, "index.version",
         "is " + std::to_string(version) + ", this loomrt reads versions " +
             std::to_string(kCheckpointOldestVersion) + " to " +
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
    // strtoul alone would take a sign or leading blanks.
    if (crc.size() != 8 || !std::all_of(crc.begin(), crc.end(), [](char c) {
          return std::isxdigit((unsigned char)c);
        }))
      fail(what, p + ".crc32", "must be 8 hex digits, found '" + crc + "'");
    f.crc32 = uint32_t(std::strtoul(crc.c_str(), nullptr, 16));
    x.files.push_back(std::move(f));
  }

  x.layout = version >= 2 ? parseLayout(field(j, "layout", what, "index"),
                                        x.worldSize, what)
                          : defaultLayout(x.worldSize);

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
        t.kind != "optimizer_state" && !isOptimizerScalar(t.kind))
      fail(what, p + ".kind",
           "must be parameter, buffer, optimizer_state, step, mu_product, "
           "eta or mu, found '" +
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
    if (version >= 2) {
      const json &progs = field(tj, "programs", what, p);
      std::set<size_t> held;
      if (!progs.is_array() || progs.empty())
        fail(what, p + ".programs", "must be a non-empty list");
      for (const json &k : progs) {
        if (!k.is_number_integer() || k.get<int64_t>() < 0 ||
            k.get<int64_t>() >= int64_t(x.layout.programs.size()) ||
            !held.insert(k.get<size_t>()).second)
          fail(what, p + ".programs",
               "must hold distinct indices into index.layout.programs (" +
                   std::to_string(x.layout.programs.size()) + "), found " +
                   k.dump());
        t.programs.push_back(k.get<size_t>());
      }
    } else {
      t.programs = {0};
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
  j["layout"] = {{"mesh", layout.meshShape.empty()
                              ? json()
                              : json({{"shape", layout.meshShape},
                                      {"axes", layout.meshAxes}})},
                 {"programs", layout.programs},
                 {"mpmd", layout.mpmd}};
  json files = json::array();
  for (const CheckpointFile &f : this->files)
    files.push_back({{"path", f.path},
                     {"rank", f.rank},
                     {"bytes", f.bytes},
                     {"crc32", formatCrc32(f.crc32)}});
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
    tj["programs"] = t.programs;
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

} // namespace loomrt
