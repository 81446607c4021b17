//===- Checkpoint.cpp - Sharded checkpoints: save, index, verify, reshard -===//

#include "loomrt/Checkpoint.h"

#include "FileUtil.h"
#include "loomrt/Dtype.h"
#include "loomrt/Error.h"
#include "loomrt/Optimizer.h"
#include "loomrt/Safetensors.h"
#include "loomrt/Session.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

namespace fs = std::filesystem;

namespace loomrt {
namespace {

constexpr const char *kIndexName = "index.json";
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

/// One tensor of the training state as the artifact declares it: its
/// global dtype and shape, how the program that writes it shards it, and
/// which programs hold it.
struct ModelTensor {
  std::string name;
  std::string kind;
  std::string param;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> globalShape;
  std::optional<ShardSpec> shard;
  /// The programs holding it (a tied weight: several), in artifact order;
  /// the first one's ranks write it. Always {0} for an SPMD artifact,
  /// whose programs share one set of tables.
  std::vector<size_t> programs;
};

/// Every tensor of the training state over every program, each once, in an
/// order every rank computes alike: the parameters and buffers, the
/// optimizer state, then the step counts, each program's in turn.
std::vector<ModelTensor> modelTensors(const Artifact &a) {
  const size_t numPrograms = a.mpmd ? a.programs.size() : 1;
  std::vector<ModelTensor> out;
  std::map<std::string, size_t> byName;
  auto add = [&](ModelTensor t, size_t program) {
    auto [it, fresh] = byName.emplace(t.name, out.size());
    if (fresh) {
      t.programs = {program};
      out.push_back(std::move(t));
      return;
    }
    ModelTensor &seen = out[it->second];
    // A tied weight: every program holding it must agree on what it is, or
    // one index entry could not describe it.
    if (seen.kind != t.kind || seen.dtype != t.dtype ||
        seen.globalShape != t.globalShape)
      throw Error(a.what() + ": programs " + std::to_string(seen.programs[0]) +
                  " and " + std::to_string(program) + " both hold '" + t.name +
                  "', as the " + seen.kind + " " +
                  artifactDtypeName(seen.dtype) + " " +
                  formatShape(seen.globalShape) + " and the " + t.kind + " " +
                  artifactDtypeName(t.dtype) + " " +
                  formatShape(t.globalShape) + "; a checkpoint needs one");
    if (seen.programs.back() != program)
      seen.programs.push_back(program);
  };
  for (size_t k = 0; k < numPrograms; ++k)
    for (const InputSpec &in : a.programs[k].inputs)
      if (in.role == InputRole::Parameter || in.role == InputRole::Buffer)
        add({in.name,
             in.role == InputRole::Parameter ? "parameter" : "buffer",
             "",
             in.dtype,
             in.shard ? in.shard->globalShape : in.shape,
             in.shard,
             {}},
            k);
  for (size_t k = 0; k < numPrograms; ++k)
    for (const StateSpec &st : a.programs[k].state)
      add({st.name,
           "optimizer_state",
           st.param,
           st.dtype,
           st.shard ? st.shard->globalShape : st.shape,
           st.shard,
           {}},
          k);
  // The 0-d float32 scalars torch.optim keeps per parameter: every
  // algorithm's step count, NAdam's mu_product, ASGD's eta and mu.
  std::vector<const char *> scalars;
  if (a.optimizer)
    scalars = optimizerScalarNames(a.optimizer->kind);
  for (const char *kind : scalars)
    for (size_t k = 0; k < numPrograms; ++k)
      for (const InputSpec &in : a.programs[k].inputs)
        if (in.role == InputRole::Parameter)
          add({in.name + "." + kind,
               kind,
               in.name,
               at::kFloat,
               {},
               std::nullopt,
               {}},
              k);
  return out;
}

/// The index of the program this session's rank runs, as modelTensors
/// numbers them.
size_t localProgram(const Session &session) {
  const Artifact &a = session.artifact();
  return a.mpmd ? size_t(a.programOf(session.rank())) : 0;
}

bool holdsLocally(const Session &session, const ModelTensor &t) {
  return std::find(t.programs.begin(), t.programs.end(),
                   localProgram(session)) != t.programs.end();
}

/// This rank's value of `t` (its padded chunk when sharded; a 0-d f32 for
/// a step count). `t` must be held by this rank's program; `state` is the
/// session's optimizerState() by name.
at::Tensor localValue(const Session &session,
                      const std::map<std::string, at::Tensor> &state,
                      const ModelTensor &t) {
  if (isOptimizerScalar(t.kind))
    return at::full({}, session.optimizerScalar(t.param, t.kind),
                    at::TensorOptions().dtype(at::kFloat));
  if (t.kind == "parameter")
    return session.parameter(t.name);
  if (t.kind == "buffer")
    return session.buffer(t.name);
  auto it = state.find(t.name);
  if (it == state.end())
    throw Error(session.artifact().what() + ": rank " +
                std::to_string(session.rank()) + " has no optimizer state '" +
                t.name + "'");
  return it->second;
}

/// The ranks that hold `t` in the run: every rank for SPMD, the ranks of
/// its first program for MPMD (they write it).
std::vector<int64_t> writerRanks(const Artifact &a, const ModelTensor &t) {
  if (a.mpmd) {
    std::vector<int64_t> r = a.programs[t.programs[0]].ranks;
    std::sort(r.begin(), r.end());
    return r;
  }
  std::vector<int64_t> r;
  for (int64_t k = 0; k < a.worldSize; ++k)
    r.push_back(k);
  return r;
}

/// Rank `rank`'s index in its group over `axes`.
int64_t groupIndexOf(const Artifact &a, const std::vector<std::string> &axes,
                     int64_t rank) {
  std::vector<int64_t> g = a.mesh->group(axes, rank);
  auto it = std::find(g.begin(), g.end(), rank);
  return int64_t(it - g.begin());
}

/// The rows of `t` rank `rank` writes: among the ranks of the program that
/// writes it, the first rank holding each chunk writes it (replicas once).
/// nullopt when the rank writes none.
std::optional<std::pair<int64_t, int64_t>>
rowsWrittenBy(const Artifact &a, const ModelTensor &t, int64_t rank) {
  if (!a.mesh)
    return std::pair<int64_t, int64_t>(0, 0);
  std::vector<int64_t> writers = writerRanks(a, t);
  if (std::find(writers.begin(), writers.end(), rank) == writers.end())
    return std::nullopt;
  if (!t.shard)
    return rank == writers.front()
               ? std::optional(std::pair<int64_t, int64_t>(0, 0))
               : std::nullopt;
  int64_t k = groupIndexOf(a, t.shard->axes, rank);
  for (int64_t r : writers)
    if (r < rank && groupIndexOf(a, t.shard->axes, r) == k)
      return std::nullopt;
  int64_t n = t.globalShape[size_t(t.shard->dim)];
  int64_t g = a.mesh->groupSize(t.shard->axes);
  int64_t chunk = (n + g - 1) / g;
  int64_t begin = std::min(k * chunk, n), end = std::min((k + 1) * chunk, n);
  if (end <= begin)
    return std::nullopt;
  return std::pair(begin, end);
}

/// The saving run's layout, as the index records it.
CheckpointLayout layoutOf(const Artifact &a) {
  CheckpointLayout l;
  if (a.mesh) {
    l.meshShape = a.mesh->shape;
    l.meshAxes = a.mesh->axes;
  }
  l.mpmd = a.mpmd;
  if (a.mpmd) {
    for (const Program &p : a.programs)
      l.programs.push_back(p.ranks);
  } else {
    l.programs.emplace_back();
    for (int64_t r = 0; r < a.worldSize; ++r)
      l.programs[0].push_back(r);
  }
  return l;
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

} // namespace

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
  // Every rank walks every program's tensors: rank 0 indexes them all, and
  // each rank writes those its program holds and no lower rank writes.
  std::vector<ModelTensor> tensors = modelTensors(a);
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

  NamedTensors stateList = session.optimizerState();
  const std::map<std::string, at::Tensor> state(stateList.begin(),
                                                stateList.end());
  std::vector<std::pair<std::string, at::Tensor>> mine;
  for (const ModelTensor &t : tensors) {
    std::optional<std::pair<int64_t, int64_t>> rows = rowsWrittenBy(a, t, rank);
    if (!rows)
      continue;
    // A chunk's padding (past the global size) is not saved: it is zero and
    // a load on another layout pads again.
    at::Tensor local = localValue(session, state, t);
    // Written from host memory (on the CPU, the tensor itself).
    mine.emplace_back(
        t.name,
        (t.shard ? local.narrow(t.shard->dim, 0, rows->second - rows->first)
                 : local)
            .cpu());
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
  index.layout = layoutOf(a);
  for (const ModelTensor &t : tensors) {
    CheckpointTensor ct{t.name,        t.kind,       t.param, t.dtype,
                        t.globalShape, std::nullopt, {},      t.programs};
    if (t.shard)
      ct.shardDim = t.shard->dim;
    for (int64_t r = 0; r < world; ++r) {
      std::optional<std::pair<int64_t, int64_t>> rows = rowsWrittenBy(a, t, r);
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
      throw Error(p + ": checksum mismatch: CRC-32 " + formatCrc32(crc) + ", " +
                  indexPath + " records " + formatCrc32(f.crc32) +
                  " (the file was changed or corrupted)");
    files.push_back(SafetensorsFile::open(p));
  }

  // Then the model: the checkpoint must hold exactly the artifact's state,
  // over every program (whatever programs, if any, the saving run had).
  std::vector<ModelTensor> want = modelTensors(session.artifact());
  std::map<std::string, const CheckpointTensor *> byName;
  for (const CheckpointTensor &t : index.tensors)
    byName[t.name] = &t;
  const std::string artifact = session.artifact().what();
  std::set<std::string> used;
  for (const ModelTensor &w : want) {
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

  // Rebuild every global tensor this rank's program holds, checking each
  // piece against its file, before changing the session.
  std::vector<std::pair<const ModelTensor *, at::Tensor>> full;
  for (const ModelTensor &w : want) {
    if (!holdsLocally(session, w))
      continue;
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
      index.rng[size_t(session.rank() < index.worldSize ? session.rank() : 0)];
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
    if (isOptimizerScalar(w->kind))
      session.setOptimizerScalar(w->param, w->kind, g.item<float>());
    else
      session.assignFromFull(w->name, g);
  }
  setRngState(rng);
  session.setStepsRun(index.step);
  return {ckpt, index.step, index.dataPosition};
}

} // namespace loomrt
