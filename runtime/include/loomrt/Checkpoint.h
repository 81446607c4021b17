//===- Checkpoint.h - Save, verify and restore training checkpoints -*- C++
//-*-//
//
// A checkpoint is a directory DIR/step-NNNNNNNN holding one safetensors file
// per rank (rank-NNNNN.safetensors) and index.json. A rank's file holds the
// pieces of the parameters, buffers, optimizer state and step counts that no
// lower rank holds (replicas are written once) and the rank's RNG state.
// index.json, written by rank 0 once every rank's file is on disk, records
// each tensor's global dtype and shape, how it is sharded, which rows of it
// each file holds, the step, the data position, and each file's size and
// CRC-32. A checkpoint is complete exactly when its index.json exists, so a
// save that dies leaves the previous one complete. Loading rebuilds each
// tensor from the index alone and takes this session's part of it, so a
// checkpoint loads under any other sharding of the same model, pipelined
// (MPMD: each rank saves the tensors of the stage programs it runs) or not.
// docs/checkpoints.md describes the format and the commands.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_CHECKPOINT_H
#define LOOMRT_CHECKPOINT_H

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loomrt {

class Session;

/// The index version saves write; loads also read version 1, which had no
/// `layout` (one program on every rank).
inline constexpr int64_t kCheckpointVersion = 2;
inline constexpr int64_t kCheckpointOldestVersion = 1;

/// Rows [begin, end) of a tensor's sharded dimension (the whole tensor when
/// it is not sharded), stored under `key` in files[file].
struct CheckpointPiece {
  size_t file = 0;
  std::string key;
  int64_t begin = 0;
  int64_t end = 0;
};

/// One tensor of the training state, as it is globally.
struct CheckpointTensor {
  std::string name;
  /// "parameter", "buffer", "optimizer_state" or "step".
  std::string kind;
  /// The parameter an optimizer state or step count belongs to.
  std::string param;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> shape;
  /// The dimension the saving run sharded, if it did.
  std::optional<int64_t> shardDim;
  std::vector<CheckpointPiece> pieces;
  /// The saving layout's programs that held it (indices into
  /// CheckpointLayout::programs); the first wrote it.
  std::vector<size_t> programs;
};

/// How the saving run was laid out: its mesh and which ranks ran each of its
/// programs (one program on every rank unless it was pipelined). Loading
/// does not need it (pieces name their files); it says where each tensor
/// lived, for people and for tools that read one stage's tensors.
struct CheckpointLayout {
  /// Empty without a mesh (one rank).
  std::vector<int64_t> meshShape;
  std::vector<std::string> meshAxes;
  /// Per program, its ranks; together a partition of the ranks.
  std::vector<std::vector<int64_t>> programs;
  /// Whether the programs were a pipeline's (MPMD).
  bool mpmd = false;

  /// "1 rank", "FSDP/DDP on mesh [4] (dp)", "pipeline of 2 programs on mesh
  /// [2, 2] (pp, dp)": the layout in messages.
  std::string describe() const;
};

struct CheckpointFile {
  std::string path; // relative to the checkpoint directory
  int64_t rank = 0;
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

/// index.json.
struct CheckpointIndex {
  std::string artifact;
  int64_t step = 0;
  /// The index of the next batch the run reads.
  int64_t dataPosition = 0;
  int64_t worldSize = 1;
  /// The optimizer's name ("adamw"), or empty.
  std::string optimizer;
  std::vector<CheckpointFile> files;
  std::vector<CheckpointTensor> tensors;
  /// Per saving rank: the file and key of its CPU generator's state.
  std::vector<CheckpointPiece> rng;
  CheckpointLayout layout;

  /// Parses and validates index.json's text (any bytes: the loader's input
  /// is untrusted, runtime/fuzz fuzzes it); `what` names it in errors,
  /// which give the field's path. Throws loomrt::Error and nothing else.
  static CheckpointIndex parse(const std::string &text,
                               const std::string &what);
  std::string dump() const;
};

struct CheckpointSaveOptions {
  /// Keep this many complete checkpoints in the directory (0: all).
  int64_t keep = 0;
  /// Test builds only: called on each rank once its file is on disk and
  /// before the index is published (a rank dying in a save).
  std::function<void(int64_t rank)> afterRankFile;
};

/// Saves the session's training state as DIR/step-<steps run> and returns
/// that path. A collective: every rank must call it. `dataPosition` is the
/// next batch's index. Refuses to replace a complete checkpoint.
std::string saveCheckpoint(Session &session, const std::string &dir,
                           int64_t dataPosition,
                           const CheckpointSaveOptions &options = {});

struct CheckpointInfo {
  std::string path;
  int64_t step = 0;
  int64_t dataPosition = 0;
};

/// `path` itself when it holds index.json, else the complete checkpoint of
/// the directory `path` with the most steps. Throws when there is none.
std::string findCheckpoint(const std::string &path);

/// Restores parameters, buffers, optimizer state, step counts, the step
/// and the CPU generator from the checkpoint at `path` (findCheckpoint's
/// rules), resharding to this session's layout. Every file is checked
/// (present, its size, its CRC-32, its tensors) and every tensor matched
/// against the artifact before anything changes. Every rank must call it.
CheckpointInfo loadCheckpoint(Session &session, const std::string &path);

/// zlib's CRC-32 of the file's bytes.
uint32_t fileCrc32(const std::string &path);
/// A CRC-32 as index.json writes it: 8 lowercase hex digits.
std::string formatCrc32(uint32_t crc);

} // namespace loomrt

#endif // LOOMRT_CHECKPOINT_H
